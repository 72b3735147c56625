//! Several keys at once (`--key A --key B …`): all the keys or none, any one of them busy
//! while the set is held, runs asking in opposite orders with `--wait` that neither deadlock
//! nor overlap, a lost key among several, a frozen waiter, a quorum, a cluster (one hash tag,
//! or 64 across slots), and bad input.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::process::send_signal;
use crate::support::sections::{expect_exclusive_sections, section_on};
use crate::support::{
    RedisCluster, RedisQuorum, RedisServer, Redlock, TempDir, child, companion_key, says,
    wait_until, wait_until_gone,
};

/// Prints every key and fence, then `ready`, and holds until stdin closes.
const HOLD_PRINTING_FENCES: &str = r#"printf 'keys=%s\n' $REDLOCK_KEYS; printf 'fences=%s\n' $REDLOCK_FENCES; echo "key=$REDLOCK_KEY fence=$REDLOCK_FENCE"; echo "child $$"; echo ready; read _ || true"#;

fn no_key_taken(server: &RedisServer, keys: &[&str]) {
    for key in keys {
        assert!(!server.exists(key), "{key} was left taken");
        assert!(
            !server.exists(&companion_key(key, "holder")),
            "{key}'s holder record was left behind"
        );
    }
}

#[test]
fn one_key_held_makes_the_whole_set_busy_and_takes_none() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "b", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let token_b = server.get("b").expect("b is held");
    let out = Redlock::new(&server)
        .args([
            "run", "--key", "a", "--key", "b", "--key", "c", "--ttl", "5s",
        ])
        .args(["--", "echo", "ran"])
        .exits_with(75);
    out.error_mentions(says::BUSY).error_mentions(&["b"]);
    assert!(!out.stdout.contains("ran"), "the command ran");
    no_key_taken(&server, &["a", "c"]);
    assert_eq!(server.get("b"), Some(token_b), "b's holder lost it");
    // The refusal is counted on the key that refused, not on the free ones.
    let busy = |key: &str| {
        server
            .query::<Option<i64>>(&["HGET", &companion_key(key, "stats"), "busy"])
            .unwrap_or(0)
    };
    assert_eq!((busy("a"), busy("b"), busy("c")), (0, 1, 0));
    holder.close_stdin();
    holder.exits_with(0);
    // Once b is free the set is taken whole, and given back whole.
    let out = Redlock::new(&server)
        .args([
            "run", "--key", "a", "--key", "b", "--key", "c", "--ttl", "5s",
        ])
        .args(["-c", r#"printf '%s\n' $REDLOCK_FENCES"#])
        .exits_with(0);
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.stdout);
    no_key_taken(&server, &["a", "b", "c"]);
}

#[test]
fn while_the_set_is_held_each_key_alone_is_busy_and_status_shows_the_holder_on_each() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "a", "--key", "b", "--ttl", "10s"])
        .args(["-c", HOLD_PRINTING_FENCES])
        .spawn();
    assert_eq!(holder.expect_line_starting("keys="), "a");
    assert_eq!(holder.expect_line_starting("keys="), "b");
    let fence_a = holder.expect_line_starting("fences=");
    let fence_b = holder.expect_line_starting("fences=");
    let first = holder.expect_line_starting("key=");
    // REDLOCK_KEY and REDLOCK_FENCE are the first key's.
    assert_eq!(first, format!("a fence={fence_a}"));
    holder.expect_line("ready");
    for key in ["a", "b"] {
        Redlock::new(&server)
            .args(["run", "--key", key, "--ttl", "5s", "--", "true"])
            .exits_with(75)
            .error_mentions(says::BUSY);
        let status = Redlock::new(&server).args(["status", key]).exits_with(0);
        assert!(status.stdout.contains("held by"), "{}", status.stdout);
    }
    // Each key's fence is its own counter's.
    for (key, fence) in [("a", &fence_a), ("b", &fence_b)] {
        let counter = server.get(&companion_key(key, "fence")).expect("fence");
        assert_eq!(counter, *fence);
    }
    // A replacer of one key does not ask a run over several to stop: it is a plain busy run,
    // and the set's command goes on.
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "b",
            "--ttl",
            "5s",
            "--replace",
            "--wait",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(75);
    holder.close_stdin();
    holder.exits_with(0);
    no_key_taken(&server, &["a", "b"]);
    // Each key's audit log shows the run, and its record the run's own fence there.
    for (key, fence) in [("a", &fence_a), ("b", &fence_b)] {
        let log = Redlock::new(&server).args(["log", key]).exits_with(0);
        assert!(log.stdout.contains("acquired"), "{}", log.stdout);
        assert!(log.stdout.contains("released"), "{}", log.stdout);
        let recorded = server.lock_record(key).remove("fence");
        assert_eq!(recorded.as_ref(), Some(fence));
    }
}

/// `count` runs of `keys` in a row, each waiting, each a stamped section on key `a`.
fn loop_of_runs(url: &str, keys: [&str; 2], log: &Path, count: usize) -> thread::JoinHandle<()> {
    let (url, log) = (url.to_owned(), log.to_owned());
    let keys = keys.map(str::to_owned);
    thread::spawn(move || {
        for _ in 0..count {
            Redlock::without_url()
                .args(["--url", &url])
                .env("STRESS_LOG", &log)
                .env("TICKS", "2")
                .env("TICK", "0.002")
                .args(["run", "--key", &keys[0], "--key", &keys[1]])
                .args(["--ttl", "5s", "--wait", "60s", "--"])
                .args(section_on("a"))
                .exits_with(0);
        }
    })
}

#[test]
fn two_loops_asking_in_opposite_orders_neither_deadlock_nor_overlap() {
    let server = RedisServer::start();
    let scratch = TempDir::new("several-stress");
    let log = scratch.join("sections.log");
    let started = Instant::now();
    let one = loop_of_runs(&server.url(), ["a", "b"], &log, 50);
    let other = loop_of_runs(&server.url(), ["b", "a"], &log, 50);
    one.join().expect("the a-b loop");
    other.join().expect("the b-a loop");
    // Every run waited at most its --wait; a deadlock would have ended runs busy (75) after
    // it, which `exits_with(0)` refuses. The bound is far above the work (100 short runs).
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "100 short runs took {:?}",
        started.elapsed()
    );
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 100, "every run ran its section");
    assert!(sections.iter().all(|s| s.ended), "a section was cut short");
    no_key_taken(&server, &["a", "b"]);
    for key in ["a", "b"] {
        assert_eq!(
            server.query::<usize>(&["EXISTS", &companion_key(key, "queue")]),
            0,
            "{key}'s queue was left behind"
        );
    }
}

#[test]
fn a_key_lost_among_several_ends_the_run_with_76_and_stops_the_command() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "a", "--key", "b", "--ttl", "1s"])
        .args(["-c", child::HOLD_PRINTING_PID])
        .spawn();
    let pid = holder.expect_pid("child");
    holder.expect_line("ready");
    let _: i64 = server.query(&["DEL", "b"]);
    let outcome = holder.exits_with(76);
    outcome.error_mentions(says::LEASE_LOST);
    wait_until_gone(pid, "the command", Duration::from_secs(2));
    // Given back whole: a is not left held for nobody.
    no_key_taken(&server, &["a"]);
}

#[test]
fn a_frozen_waiter_for_several_keys_holds_the_next_one_up_by_at_most_the_bound() {
    let server = RedisServer::start();
    let scratch = TempDir::new("several-frozen");
    let log = scratch.join("sections.log");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "a", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = |keys: [&str; 2]| {
        Redlock::new(&server)
            .env("STRESS_LOG", &log)
            .args(["run", "--key", keys[0], "--key", keys[1]])
            .args(["--ttl", "10s", "--wait", "60s", "--"])
            .args(section_on("a"))
            .spawn()
    };
    let queued = |n: usize| {
        wait_until("the waiters to queue", Duration::from_secs(10), || {
            (server.query::<usize>(&["ZCARD", &companion_key("a", "queue")]) >= n).then_some(())
        });
    };
    let frozen = waiter(["a", "b"]);
    queued(1);
    let next = waiter(["b", "a"]);
    queued(2);
    // b is free meanwhile, and nobody takes it: both waiters stand in its queue too, in the
    // same order as in a's.
    assert!(!server.exists("b"));
    assert_eq!(
        server.query::<Vec<String>>(&["ZRANGE", &companion_key("a", "queue"), "0", "-1"]),
        server.query::<Vec<String>>(&["ZRANGE", &companion_key("b", "queue"), "0", "-1"]),
    );
    send_signal(frozen.pid(), libc::SIGSTOP);
    let released = Instant::now();
    holder.close_stdin();
    holder.exits_with(0);
    next.exits_with(0);
    let waited = released.elapsed();
    assert!(
        waited < Duration::from_secs(2) + Duration::from_secs(2),
        "a frozen head held the next waiter up for {waited:?}"
    );
    send_signal(frozen.pid(), libc::SIGCONT);
    frozen.exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2);
}

#[test]
fn a_quorum_takes_every_key_on_a_majority_or_none() {
    let quorum = RedisQuorum::start(3);
    let redlock = || Redlock::without_url().env("REDLOCK_URL", quorum.url_list());
    let mut holder = redlock()
        .args(["run", "--key", "a", "--key", "b", "--ttl", "3s"])
        .args(["-c", HOLD_PRINTING_FENCES])
        .spawn();
    holder.expect_line_starting("keys=");
    holder.expect_line_starting("keys=");
    let fences: Vec<String> = (0..2)
        .map(|_| holder.expect_line_starting("fences="))
        .collect();
    holder.expect_line("ready");
    // Renewed across the quorum (a 3s TTL renews every second) while the others are busy.
    thread::sleep(Duration::from_millis(100));
    redlock()
        .args([
            "run", "--key", "b", "--key", "c", "--ttl", "3s", "--", "true",
        ])
        .exits_with(75);
    for node in quorum.nodes() {
        assert!(!node.exists("c"), "c was left taken on a node");
        for (key, fence) in ["a", "b"].iter().zip(&fences) {
            let counter = node.get(&companion_key(key, "fence")).expect("fence");
            let (counter, fence): (i64, i64) = (counter.parse().unwrap(), fence.parse().unwrap());
            assert!(counter >= fence, "{key}'s fence was not raised");
        }
    }
    let deadline = Instant::now() + Duration::from_millis(2500);
    wait_until("a renewal", Duration::from_secs(5), || {
        (Instant::now() >= deadline).then_some(())
    });
    holder.close_stdin();
    holder.exits_with(0);
    for node in quorum.nodes() {
        no_key_taken(node, &["a", "b"]);
    }
}

#[test]
fn a_cluster_takes_keys_sharing_a_hash_tag_and_refuses_keys_across_slots() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let redlock = || Redlock::without_url().args(["--url", &url]);
    let out = redlock()
        .args(["run", "--key", "{job}:a", "--key", "{job}:b", "--ttl", "5s"])
        .args(["-c", r#"printf '%s\n' $REDLOCK_KEYS"#])
        .exits_with(0);
    assert_eq!(out.stdout, "{job}:a\n{job}:b\n");
    let owner = cluster.owner_node("{job}:a");
    assert!(!owner.exists("{job}:a") && !owner.exists("{job}:b"));
    let written: Vec<usize> = cluster
        .nodes()
        .iter()
        .map(|n| n.query::<usize>(&["DBSIZE"]))
        .collect();
    // Different slots: refused before anything is written, with a way out.
    let (a, b) = ("report", "invoice");
    assert_ne!(cluster.slot(a), cluster.slot(b));
    let out = redlock()
        .args(["run", "--key", a, "--key", b, "--ttl", "5s", "--", "true"])
        .exits_with(64);
    out.error_mentions(&["hash slot"]).error_mentions(&["{"]);
    let now: Vec<usize> = cluster
        .nodes()
        .iter()
        .map(|n| n.query::<usize>(&["DBSIZE"]))
        .collect();
    assert_eq!(now, written, "something was written");
}

#[test]
fn bad_several_key_lines_are_refused_with_64_and_write_nothing() {
    let server = RedisServer::start();
    let cases: &[(&[&str], &str)] = &[
        (&["--key", "a", "--key", "a"], "--key"),
        (&["--key", "a", "--key", "{a}"], "--key"),
        (&["--key", "a", "--key", "b", "--shared"], "--shared"),
        (&["--key", "a", "--key", "b", "--slots", "3"], "--slots"),
        (
            &["--key", "a", "--key", "b", "--once-per", "1h"],
            "--once-per",
        ),
        (
            &["--key", "a", "--key", "b", "--metrics-file", "/tmp/m"],
            "--metrics-file",
        ),
        (&["--key", "a", "--key", "{a}:redlock:fence"], "fence"),
        (
            &[
                "--key",
                "a",
                "--key",
                "b",
                "--wait",
                "1m",
                "--max-waiters",
                "1",
            ],
            "--max-waiters",
        ),
        (&["--key", "a", "--key", "b", "--replace"], "--replace"),
    ];
    for (flags, named) in cases {
        let out = Redlock::new(&server)
            .arg("run")
            .args(*flags)
            .args(["--ttl", "5s", "--", "true"])
            .exits_with(64);
        out.error_mentions(&[named]);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    Redlock::new(&server)
        .args([
            "acquire", "--key", "a", "--key", "b", "--shared", "--ttl", "5s",
        ])
        .exits_with(64)
        .error_mentions(&["--shared"]);
    Redlock::new(&server)
        .args(["release", "a", "b", "--force"])
        .exits_with(64)
        .error_mentions(&["--force"]);
    assert_eq!(
        server.query::<usize>(&["DBSIZE"]),
        0,
        "something was written"
    );
}

#[test]
fn acquire_extend_and_release_take_the_same_keys() {
    let server = RedisServer::start();
    let out = Redlock::new(&server)
        .args(["acquire", "--key", "a", "--key", "b", "--ttl", "5s"])
        .exits_with(0);
    let mut lines = out.stdout.lines();
    let token = lines.next().expect("token").to_owned();
    let fences: Vec<&str> = lines.next().expect("fences").split(' ').collect();
    assert_eq!(fences.len(), 2);
    assert_eq!(server.get("a").as_deref(), Some(token.as_str()));
    assert_eq!(server.get("b").as_deref(), Some(token.as_str()));
    Redlock::new(&server)
        .args(["acquire", "--key", "b", "--ttl", "5s"])
        .exits_with(75);
    Redlock::new(&server)
        .args(["extend", "--key", "a", "--key", "b", "--token", &token])
        .args(["--ttl", "20s"])
        .exits_with(0);
    assert!(server.pttl("b").expect("b expires") > Duration::from_secs(10));
    Redlock::new(&server)
        .args(["release", "a", "b", "--token", &token])
        .exits_with(0);
    no_key_taken(&server, &["a", "b"]);
    // A set one of whose keys is gone is not the token's: 1, and the rest is given back.
    let token = Redlock::new(&server)
        .args(["acquire", "--key", "a", "--key", "b", "--ttl", "5s"])
        .exits_with(0)
        .stdout
        .lines()
        .next()
        .expect("token")
        .to_owned();
    let _: i64 = server.query(&["DEL", "a"]);
    Redlock::new(&server)
        .args(["extend", "--key", "a", "--key", "b", "--token", &token])
        .args(["--ttl", "5s"])
        .exits_with(1);
    Redlock::new(&server)
        .args(["release", "a", "b", "--token", &token])
        .exits_with(1)
        .error_mentions(&["not every one of", "those that were are released"]);
    assert!(
        !server.exists("a") && !server.exists("b"),
        "a key was left taken"
    );
}

/// A holder record that outlived its lock (a foreign client deleted the key while a replacer's
/// stop request stood in it) lends a run over several keys none of its fields either: it
/// renews and ends 0.
#[test]
fn a_stale_holder_record_lends_a_run_over_several_keys_nothing() {
    let server = RedisServer::start();
    let holder = companion_key("a", "holder");
    let record = [
        "v=1",
        "started=1",
        "renewed=1",
        "ttl=60000",
        "fence=1",
        "finished=0",
        "host=gone",
        "stop=someone else",
    ]
    .join("\x1f");
    let _: () = server.query(&["SET", &holder, &record, "PX", "60000"]);
    // Renewed every 300 ms: the renewals meet the record.
    Redlock::new(&server)
        .args([
            "run", "--key", "a", "--key", "b", "--ttl", "900ms", "--", "sleep", "1.5",
        ])
        .exits_with(0);
    no_key_taken(&server, &["a", "b"]);
}
