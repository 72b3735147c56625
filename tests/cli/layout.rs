//! The data layout is a promise (docs/design.md, "Data in Redis"): layout 1's keys, their types
//! and the hashes' (and the holder record's) fields, as real runs of every kind leave them, are held to a list written
//! here, so that a change to the layout is a decision, not an accident; every key has a TTL.
//! And a key written in a layout this redlock does not read is refused with 78 by every command
//! that meets it, never read as if it were its own.

use std::collections::BTreeSet;

use crate::support::monitor::{Monitor, Monitored};
use crate::support::{RedisQuorum, RedisServer, Redlock, TempDir, companion_key};

/// What layout 1 leaves after the runs of [`runs_of_every_kind`]: each key (the lock's name in
/// place of `L`), its type, and for a hash or the holder record (name=value pairs) its fields. A change here changes the layout: it
/// needs a new layout version (record::LAYOUT) when a 1.x could not read the other side.
const LAYOUT_1: &[&str] = &[
    // A plain run, with a busy refusal counted.
    "plain string",
    "{plain}:redlock:audit list",
    "{plain}:redlock:fence string",
    "{plain}:redlock:stats hash busy,cmd,host,last,runs,v",
    // A lock held by `acquire` (which may not be replaced).
    "held string",
    "{held}:redlock:audit list",
    "{held}:redlock:fence string",
    "{held}:redlock:holder string cmd,fence,host,pid,renew,replace,started,ttl,user,v",
    // A waiter behind a holder: both ran.
    "{queued}:redlock:audit list",
    "{queued}:redlock:fence string",
    "{queued}:redlock:stats hash cmd,host,last,runs,v",
    // A shared run and a slotted one.
    "{shared}:redlock:audit list",
    "{shared}:redlock:fence string",
    "{shared}:redlock:stats hash cmd,host,last,runs,v",
    "{slots}:redlock:audit list",
    "{slots}:redlock:fence string",
    "{slots}:redlock:stats hash cmd,host,last,runs,v",
    // A run once per window, and a skipped one.
    "{once}:redlock:audit list",
    "{once}:redlock:fence string",
    "{once}:redlock:once hash cmd,ended,every,exit,fence,host,outcome,pid,started,token,user,window",
    "{once}:redlock:stats hash cmd,host,last,runs,skipped,v",
    // A run that writes its metrics file.
    "{metered}:redlock:audit list",
    "{metered}:redlock:fence string",
    "{metered}:redlock:stats hash cmd,host,last,runs,v",
    // A paused lock (for a minute).
    "{paused}:redlock:audit list",
    "{paused}:redlock:paused hash host,reason,since,until,user",
];

/// Plain, busy, held, queued, shared, slotted, once per window (and skipped), with a metrics
/// file, paused: one of each on `server`.
fn runs_of_every_kind(server: &RedisServer) {
    let run = |args: &[&str], code: i32| {
        Redlock::new(server).args(args).exits_with(code);
    };
    run(&["run", "--key", "plain", "--ttl", "5s", "--", "true"], 0);
    run(&["acquire", "--key", "held", "--ttl", "60s"], 0);
    // A busy refusal of `plain`, counted: hold it with a foreign client's SET.
    let _: () = server.query(&["SET", "plain", "foreign", "PX", "60000"]);
    run(&["run", "--key", "plain", "--ttl", "5s", "--", "true"], 75);
    let mut holder = Redlock::new(server)
        .args([
            "run",
            "--key",
            "queued",
            "--ttl",
            "5s",
            "--",
            "sh",
            "-c",
            "echo held; sleep 3",
        ])
        .spawn();
    holder.expect_line("held");
    let waiter = Redlock::new(server)
        .args([
            "run", "--key", "queued", "--ttl", "5s", "--wait", "20s", "--",
        ])
        .args(["true"])
        .spawn();
    crate::support::wait_until(
        "the waiter queues",
        std::time::Duration::from_secs(10),
        || {
            let queued: i64 = server.query(&["ZCARD", &companion_key("queued", "queue")]);
            (queued > 0).then_some(())
        },
    );
    holder.exits_with(0);
    waiter.exits_with(0);
    run(
        &[
            "run", "--key", "shared", "--ttl", "5s", "--shared", "--", "true",
        ],
        0,
    );
    run(
        &[
            "run", "--key", "slots", "--ttl", "5s", "--slots", "2", "--", "true",
        ],
        0,
    );
    let once = [
        "run",
        "--key",
        "once",
        "--ttl",
        "5s",
        "--once-per",
        "1h",
        "--",
        "true",
    ];
    run(&once, 0);
    run(&once, 75);
    let scratch = TempDir::new("layout");
    let metrics = scratch.join("metrics.prom");
    let metrics = metrics.to_str().expect("a UTF-8 path");
    run(
        &[
            "run",
            "--key",
            "metered",
            "--ttl",
            "5s",
            "--metrics-file",
            metrics,
            "--",
            "true",
        ],
        0,
    );
    run(&["pause", "paused", "--for", "1m", "--reason", "layout"], 0);
}

/// Every key on `server` (transient ones left out: a waiter's grant list, which lives 2 s), its
/// type and a hash's fields, as [`LAYOUT_1`] writes them; and the keys without a TTL.
fn the_layout(server: &RedisServer) -> (Vec<String>, Vec<String>) {
    let keys: Vec<String> = server.query(&["KEYS", "*"]);
    let mut listed = BTreeSet::new();
    let mut untimed = Vec::new();
    for key in keys {
        if key.contains(":redlock:queue:") {
            continue;
        }
        let kind: String = server.query(&["TYPE", &key]);
        let pttl: i64 = server.query(&["PTTL", &key]);
        if pttl < 0 {
            untimed.push(key.clone());
        }
        let mut line = format!("{key} {kind}");
        let mut fields: Vec<String> = if kind == "hash" {
            server.query(&["HKEYS", &key])
        } else if key.ends_with(":redlock:holder") {
            let record: String = server.query(&["GET", &key]);
            record
                .split('\u{1f}')
                .filter_map(|pair| pair.split_once('='))
                .map(|(name, _)| name.to_string())
                .collect()
        } else {
            Vec::new()
        };
        if !fields.is_empty() {
            fields.sort();
            line.push(' ');
            line.push_str(&fields.join(","));
        }
        listed.insert(line);
    }
    (listed.into_iter().collect(), untimed)
}

#[test]
fn runs_of_every_kind_leave_layout_1_and_nothing_without_a_ttl() {
    let server = RedisServer::start();
    runs_of_every_kind(&server);
    let (layout, untimed) = the_layout(&server);
    let mut expected: Vec<String> = LAYOUT_1.iter().map(|l| (*l).to_string()).collect();
    expected.sort();
    assert_eq!(
        layout, expected,
        "the data layout changed: a decision for docs/design.md and record::LAYOUT"
    );
    assert!(untimed.is_empty(), "keys without a TTL: {untimed:?}");
}

/// A lock whose records say layout 2: its holder record (held by `acquire`), or its record
/// and fence counter (free, last run by a later redlock), or its fence counter alone.
fn of_layout_2(server: &RedisServer, held: bool, fence_only: bool) {
    if fence_only {
        Redlock::new(server)
            .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
            .exits_with(0);
        let _: () = server.query(&["SET", &companion_key("job", "fence"), "2:1", "PX", "60000"]);
    } else if held {
        Redlock::new(server)
            .args(["acquire", "--key", "job", "--ttl", "60s"])
            .exits_with(0);
        let holder = companion_key("job", "holder");
        let record: String = server.query(&["GET", &holder]);
        let later = record.replacen("v=1\u{1f}", "v=2\u{1f}", 1);
        let _: () = server.query(&["SET", &holder, &later, "KEEPTTL"]);
    } else {
        Redlock::new(server)
            .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
            .exits_with(0);
        let _: i64 = server.query(&["HSET", &companion_key("job", "stats"), "v", "2"]);
        let _: () = server.query(&["SET", &companion_key("job", "fence"), "2:1", "PX", "60000"]);
    }
}

/// Every key on `server`, with its type and its value as DUMP serialises it: what a command
/// that changes nothing leaves as it found.
fn every_key(server: &RedisServer) -> Vec<(String, String, Vec<u8>)> {
    let mut keys: Vec<String> = server.query(&["KEYS", "*"]);
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let kind: String = server.query(&["TYPE", &key]);
            let dump: Vec<u8> = server.query(&["DUMP", &key]);
            (key, kind, dump)
        })
        .collect()
}

/// The commands a script ran that write (MONITOR shows them as coming from `lua`).
fn script_writes(commands: &[Monitored]) -> Vec<String> {
    const WRITES: &[&str] = &[
        "SET", "DEL", "UNLINK", "PEXPIRE", "EXPIRE", "PERSIST", "RPUSH", "LPUSH", "LTRIM", "HSET",
        "HSETNX", "HINCRBY", "HDEL", "ZADD", "ZREM", "PUBLISH",
    ];
    commands
        .iter()
        .filter(|c| c.is_from_script())
        .filter(|c| WRITES.iter().any(|w| c.args[0].eq_ignore_ascii_case(w)))
        .map(|c| c.args.join(" "))
        .collect()
}

#[test]
fn a_lock_of_an_unknown_layout_is_refused_with_78_by_every_command() {
    for (held, fence_only) in [(true, false), (false, false), (false, true)] {
        let server = RedisServer::start();
        of_layout_2(&server, held, fence_only);
        let before = every_key(&server);
        let mut monitor = Monitor::start(&server);
        let fence = companion_key("job", "fence");
        let mut commands: Vec<Vec<&str>> = vec![
            vec!["run", "--key", "job", "--ttl", "5s", "--", "true"],
            vec![
                "run", "--key", "job", "--ttl", "5s", "--wait", "1s", "--", "true",
            ],
            vec![
                "run",
                "--key",
                "job",
                "--ttl",
                "5s",
                "--replace",
                "--",
                "true",
            ],
            vec!["acquire", "--key", "job", "--ttl", "5s"],
            vec!["acquire", "--key", "job", "--ttl", "5s", "--wait", "1s"],
            // Several keys: the lock of layout 2 after a free one (which the take must not
            // take first), and before one.
            vec![
                "run", "--key", "free", "--key", "job", "--ttl", "5s", "--", "true",
            ],
            vec![
                "run", "--key", "job", "--key", "free", "--ttl", "5s", "--", "true",
            ],
            vec![
                "run", "--key", "free", "--key", "job", "--ttl", "5s", "--wait", "1s", "--", "true",
            ],
            vec!["acquire", "--key", "free", "--key", "job", "--ttl", "5s"],
            vec![
                "acquire", "--key", "free", "--key", "job", "--ttl", "5s", "--wait", "1s",
            ],
            vec!["status", "job"],
            vec!["status", "--json", "job"],
            vec!["metrics", "job"],
            vec!["log", "job"],
        ];
        if held {
            commands.push(vec!["release", "job", "--force"]);
        }
        for args in commands {
            let outcome = Redlock::new(&server).args(&args).exits_with(78);
            outcome.error_mentions(&["layout"]);
            // What a script wrote: nothing, but for a take of the lock alone, whose fence is
            // drawn in one command that reads the counter (SET … GET), and which puts the
            // counter's value back when it is another layout's.
            let one_take = args.iter().filter(|a| **a == "--key").count() == 1;
            let writes: Vec<String> = script_writes(&monitor.commands_so_far(&server))
                .into_iter()
                .filter(|w| !(one_take && w.starts_with(&format!("SET {fence} "))))
                .collect();
            assert!(
                writes.is_empty(),
                "{args:?} refused for the layout, but its scripts wrote: {writes:?}"
            );
        }
        // `check` says so in its own terms: UNKNOWN.
        let check = Redlock::new(&server).args(["check", "job"]).exits_with(3);
        assert!(check.stdout.contains("layout"), "{check}");
        // Every key as it was: none added (a lock taken and given back, a waiter's grant list,
        // a busy count), none changed.
        let after = every_key(&server);
        let names = |keys: &[(String, String, Vec<u8>)]| -> Vec<String> {
            keys.iter().map(|(k, t, _)| format!("{k} {t}")).collect()
        };
        assert_eq!(
            names(&after),
            names(&before),
            "a command that refused changed the keys"
        );
        assert_eq!(
            after, before,
            "a command that refused changed a key's value"
        );
        if fence_only {
            let fence: Option<String> = server.query(&["GET", &fence]);
            assert_eq!(
                fence.as_deref(),
                Some("2:1"),
                "the fence counter was rewritten"
            );
            continue;
        }
        let v: Option<String> = if held {
            let record: String = server.query(&["GET", &companion_key("job", "holder")]);
            record.strip_prefix("v=").map(|r| r[..1].to_string())
        } else {
            server.query(&["HGET", &companion_key("job", "stats"), "v"])
        };
        assert_eq!(v.as_deref(), Some("2"), "the record was rewritten");
    }
}

/// In a quorum, a node whose fence counter is of a later layout refuses the run as one server
/// would: 78, and nothing kept on the nodes that would have granted it.
#[test]
fn a_quorum_node_of_another_layout_refuses_the_run() {
    let quorum = RedisQuorum::start(3);
    let _: () =
        quorum
            .node(1)
            .query(&["SET", &companion_key("job", "fence"), "2:1", "PX", "60000"]);
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(78);
    outcome.error_mentions(&["layout"]);
    for node in [0, 2] {
        let held: Option<String> = quorum.node(node).query(&["GET", "job"]);
        assert_eq!(held, None, "node {node} kept the lock");
    }
}
