//! Lock shapes: `--shared` (any number of shared holders, or one exclusive holder) and
//! `--slots N` (up to N holders, each with its own `REDLOCK_SLOT`). Each holder has its own
//! lease; the fair queue applies to every shape; a key held by a foreign plain-string holder
//! is busy for every shape; `status`, `release` and `acquire` know the shapes.
//!
//! Who ran when is read from lines the commands stamp with `$EPOCHREALTIME` (bash), not from
//! sleeps.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::redlock::Running;
use crate::support::{
    RedisCluster, RedisQuorum, RedisSentinel, RedisServer, Redlock, TempDir, companion_key,
    lock_status, says, wait_until,
};

/// A command that stamps `NAME start`, prints its slot and `ready`, holds until stdin closes,
/// and stamps `NAME end`, in `$LOG`.
fn stamped_hold(name: &str) -> String {
    format!(
        r#"echo "$EPOCHREALTIME {name} start ${{REDLOCK_SLOT:--}} $REDLOCK_FENCE" >> "$LOG"
echo "token=$REDLOCK_TOKEN"; echo "slot=${{REDLOCK_SLOT:--}}"; echo ready; read _ || true
echo "$EPOCHREALTIME {name} end ${{REDLOCK_SLOT:--}} $REDLOCK_FENCE" >> "$LOG""#
    )
}

/// A command that stamps `NAME start`, works for `secs`, and stamps `NAME end`, in `$LOG`.
fn stamped_work(name: &str, secs: &str) -> String {
    format!(
        r#"echo "$EPOCHREALTIME {name} start ${{REDLOCK_SLOT:--}} $REDLOCK_FENCE" >> "$LOG"
sleep {secs}
echo "$EPOCHREALTIME {name} end ${{REDLOCK_SLOT:--}} $REDLOCK_FENCE" >> "$LOG""#
    )
}

/// One stamped line: when (µs), who, start or end, slot, fence.
#[derive(Debug, Clone)]
struct Stamp {
    at: u64,
    name: String,
    start: bool,
    slot: Option<u32>,
    fence: u64,
}

fn stamps(log: &Path) -> Vec<Stamp> {
    let mut out: Vec<Stamp> = fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let w: Vec<&str> = line.split(' ').collect();
            let [at, name, what, slot, fence] = w.as_slice() else {
                panic!("malformed line {line:?}");
            };
            let (secs, micros) = at.replace(',', ".").split_once('.').map_or_else(
                || panic!("bad stamp {at:?}"),
                |(s, m)| (s.parse::<u64>().unwrap(), m.parse::<u64>().unwrap()),
            );
            Stamp {
                at: secs * 1_000_000 + micros,
                name: (*name).to_owned(),
                start: *what == "start",
                slot: slot.parse().ok(),
                fence: fence.parse().expect("fence"),
            }
        })
        .collect();
    out.sort_by_key(|s| (s.at, s.start));
    out
}

/// When `name` started and ended.
#[track_caller]
fn span(stamps: &[Stamp], name: &str) -> (u64, u64) {
    let at = |start: bool| {
        stamps
            .iter()
            .find(|s| s.name == name && s.start == start)
            .unwrap_or_else(|| {
                panic!(
                    "{name} did not stamp its {}: {stamps:?}",
                    if start { "start" } else { "end" }
                )
            })
            .at
    };
    (at(true), at(false))
}

fn queue_len(server: &RedisServer, key: &str) -> usize {
    server.query::<usize>(&["ZCARD", &companion_key(key, "queue")])
}

fn redlock_log(server: &RedisServer, log: &Path) -> Redlock {
    Redlock::new(server).env("LOG", log)
}

/// A run on `job` in `shape` (e.g. `["--shared"]`) holding until its stdin closes; returns once
/// its command is running, with its token and slot.
fn hold(server: &RedisServer, log: &Path, name: &str, shape: &[&str]) -> (Running, String, String) {
    let mut run = redlock_log(server, log)
        .args(["run", "--key", "job", "--ttl", "10s"])
        .args(shape)
        .args(["--", "bash", "-c", &stamped_hold(name)])
        .spawn();
    let token = run.expect_line_starting("token=");
    let slot = run.expect_line_starting("slot=");
    run.expect_line("ready");
    (run, token, slot)
}

fn finish(mut run: Running) {
    run.close_stdin();
    run.exits_with(0);
}

#[test]
fn five_shared_runs_overlap_while_an_exclusive_run_waits_and_then_runs_alone() {
    let server = RedisServer::start();
    let scratch = TempDir::new("shared");
    let log = scratch.join("ran.log");
    // Five shared holders at once: each is running before any is let go.
    let shared: Vec<Running> = (0..5)
        .map(|i| hold(&server, &log, &format!("s{i}"), &["--shared"]).0)
        .collect();
    let exclusive = redlock_log(&server, &log)
        .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s"])
        .args(["--", "bash", "-c", &stamped_work("x", "0.2")])
        .spawn();
    wait_until(
        "the exclusive run to queue",
        Duration::from_secs(10),
        || (queue_len(&server, "job") == 1).then_some(()),
    );
    // Once it waits, new shared runs do not overtake it: a non-waiting one is busy, a waiting
    // one queues behind it.
    redlock_log(&server, &log)
        .args(["run", "--key", "job", "--ttl", "10s", "--shared"])
        .args(["--", "bash", "-c", &stamped_work("late", "0")])
        .exits_with(75)
        .error_mentions(&["queued"]);
    let behind = redlock_log(&server, &log)
        .args([
            "run", "--key", "job", "--ttl", "10s", "--shared", "--wait", "60s",
        ])
        .args(["--", "bash", "-c", &stamped_work("after", "0")])
        .spawn();
    wait_until(
        "the shared waiter to queue",
        Duration::from_secs(10),
        || (queue_len(&server, "job") == 2).then_some(()),
    );
    for run in shared {
        finish(run);
    }
    exclusive.exits_with(0);
    behind.exits_with(0);
    let stamps = stamps(&log);
    let (x_start, x_end) = span(&stamps, "x");
    let shared_spans: Vec<(u64, u64)> = (0..5).map(|i| span(&stamps, &format!("s{i}"))).collect();
    let last_shared_start = shared_spans.iter().map(|s| s.0).max().unwrap();
    let first_shared_end = shared_spans.iter().map(|s| s.1).min().unwrap();
    assert!(
        last_shared_start < first_shared_end,
        "the shared runs did not overlap: {stamps:?}"
    );
    for (start, end) in &shared_spans {
        assert!(
            *end < x_start || *start > x_end,
            "a shared run overlapped the exclusive one: {stamps:?}"
        );
    }
    let (after_start, _) = span(&stamps, "after");
    assert!(
        after_start > x_end,
        "the shared waiter overtook the exclusive one: {stamps:?}"
    );
    assert!(stamps.iter().all(|s| s.name != "late"), "{stamps:?}");
    // Fences come from the one counter, growing in the order the holds started.
    let starts: Vec<&Stamp> = stamps.iter().filter(|s| s.start).collect();
    for pair in starts.windows(2) {
        assert!(pair[0].fence < pair[1].fence, "{starts:?}");
    }
}

#[test]
fn an_exclusive_hold_and_shared_or_slotted_holds_exclude_one_another() {
    let server = RedisServer::start();
    let scratch = TempDir::new("exclude");
    let log = scratch.join("ran.log");
    let (exclusive, _, _) = hold(&server, &log, "x", &[]);
    for shape in [&["--shared"][..], &["--slots", "3"]] {
        Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "5s"])
            .args(shape)
            .args(["--", "true"])
            .exits_with(75)
            .error_mentions(says::BUSY);
    }
    finish(exclusive);
    let (shared, _, _) = hold(&server, &log, "s", &["--shared"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(75)
        .error_mentions(&["held shared by 1 holder"]);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--slots", "1", "--", "true",
        ])
        .exits_with(75);
    finish(shared);
    assert!(!server.exists(&companion_key("job", "leases")));
    assert!(!server.exists(&companion_key("job", "holders")));
}

#[test]
fn eight_contenders_for_three_slots_never_run_more_than_three_at_once_with_distinct_slots() {
    let server = RedisServer::start();
    let scratch = TempDir::new("slots");
    let log = scratch.join("ran.log");
    // Three hold at once; a fourth is refused.
    let holders: Vec<(Running, String, String)> = (0..3)
        .map(|i| hold(&server, &log, &format!("h{i}"), &["--slots", "3"]))
        .collect();
    let mut slots: Vec<String> = holders.iter().map(|h| h.2.clone()).collect();
    slots.sort();
    assert_eq!(slots, ["0", "1", "2"]);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--slots", "3", "--", "true",
        ])
        .exits_with(75)
        .error_mentions(&["3 holders of 3 slots"]);
    // Five more wait for a slot, and work a little each.
    let waiters: Vec<Running> = (0..5)
        .map(|i| {
            redlock_log(&server, &log)
                .args([
                    "run", "--key", "job", "--ttl", "10s", "--slots", "3", "--wait", "60s",
                ])
                .args(["--", "bash", "-c", &stamped_work(&format!("w{i}"), "0.3")])
                .spawn()
        })
        .collect();
    wait_until("the five waiters to queue", Duration::from_secs(10), || {
        (queue_len(&server, "job") == 5).then_some(())
    });
    for (run, _, _) in holders {
        finish(run);
    }
    for waiter in waiters {
        waiter.exits_with(0);
    }
    let stamps = stamps(&log);
    assert_eq!(stamps.len(), 16, "{stamps:?}");
    let mut running: Vec<&Stamp> = Vec::new();
    for stamp in &stamps {
        if stamp.start {
            assert!(running.len() < 3, "a fourth holder started: {stamps:?}");
            assert!(
                running.iter().all(|r| r.slot != stamp.slot),
                "slot {:?} held twice at once: {stamps:?}",
                stamp.slot
            );
            assert!(stamp.slot.is_some_and(|s| s < 3), "{stamp:?}");
            running.push(stamp);
        } else {
            running.retain(|r| r.name != stamp.name);
        }
    }
    let mut fences: Vec<u64> = stamps.iter().filter(|s| s.start).map(|s| s.fence).collect();
    fences.dedup();
    assert_eq!(fences.len(), 8, "fences were not distinct: {stamps:?}");
}

#[test]
fn a_run_asking_another_slot_count_exits_78_naming_both_numbers() {
    let server = RedisServer::start();
    let scratch = TempDir::new("mismatch");
    let log = scratch.join("ran.log");
    let (holder, _, _) = hold(&server, &log, "h", &["--slots", "3"]);
    let holders_before = server.hgetall(&companion_key("job", "holders"));
    let outcome = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--slots", "5", "--wait", "5s",
        ])
        .args(["--", "true"])
        .exits_with(78);
    outcome.error_mentions(&["3 slots", "5 slots"]);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--shared", "--", "true",
        ])
        .exits_with(78)
        .error_mentions(&["3 slots", "shared"]);
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "5s", "--slots", "2"])
        .exits_with(78)
        .error_mentions(&["3 slots", "2 slots"]);
    assert_eq!(
        server.hgetall(&companion_key("job", "holders")),
        holders_before
    );
    assert_eq!(queue_len(&server, "job"), 0, "a refused run stayed queued");
    finish(holder);
}

#[test]
fn bad_shapes_are_usage_errors_before_anything_is_contacted() {
    for args in [
        &["--slots", "0"][..],
        &["--slots", "x"],
        &["--slots", "-2"],
        &["--shared", "--slots", "2"],
    ] {
        Redlock::without_url()
            .args(["--url", "redis://127.0.0.1:1"])
            .args(["run", "--key", "job", "--ttl", "5s"])
            .args(args)
            .args(["--", "true"])
            .exits_with(64)
            .error_mentions(&["slots"]);
    }
}

#[test]
fn a_foreign_set_nx_holder_makes_every_shape_busy() {
    let server = RedisServer::start();
    let _: () = server.query(&["SET", "job", "foreign", "NX", "PX", "10000"]);
    for shape in [&["--shared"][..], &["--slots", "3"], &[]] {
        Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "5s"])
            .args(shape)
            .args(["--", "true"])
            .exits_with(75)
            .error_mentions(says::BUSY);
    }
    assert_eq!(server.get("job").as_deref(), Some("foreign"));
}

#[test]
fn a_shared_holder_whose_entry_is_deleted_stops_only_its_own_command() {
    let server = RedisServer::start();
    let scratch = TempDir::new("lost");
    let log = scratch.join("ran.log");
    let mut lost = redlock_log(&server, &log)
        .args(["run", "--key", "job", "--ttl", "2s", "--shared"])
        .args(["--", "bash", "-c", &stamped_hold("lost")])
        .spawn();
    let token = lost.expect_line_starting("token=");
    lost.expect_line("ready");
    let (kept, kept_token, _) = hold(&server, &log, "kept", &["--shared"]);
    let _: () = server.query(&["ZREM", &companion_key("job", "leases"), &token]);
    lost.exits_with(76).error_mentions(says::LEASE_LOST);
    // The other holder renews on, past its TTL.
    let leases = companion_key("job", "leases");
    let deadline = |s: &RedisServer| s.query::<Option<f64>>(&["ZSCORE", &leases, &kept_token]);
    let first = deadline(&server).expect("the other holder's lease");
    wait_until("the other holder to renew", Duration::from_secs(10), || {
        deadline(&server).filter(|d| *d > first).map(|_| ())
    });
    finish(kept);
}

#[test]
fn a_stopped_shared_holder_loses_only_its_own_lease() {
    let server = RedisServer::start();
    let scratch = TempDir::new("stopped");
    let log = scratch.join("ran.log");
    let mut stopped = redlock_log(&server, &log)
        .args(["run", "--key", "job", "--ttl", "2s", "--shared"])
        .args(["--", "bash", "-c", &stamped_hold("stopped")])
        .spawn();
    let token = stopped.expect_line_starting("token=");
    stopped.expect_line("ready");
    let (kept, _, _) = hold(&server, &log, "kept", &["--shared"]);
    stopped.signal(libc::SIGSTOP);
    // Its lease runs out while it is stopped: status no longer lists it.
    wait_until(
        "the stopped holder's lease to end",
        Duration::from_secs(10),
        || (lock_status(&server, "job").items("holders").len() == 1).then_some(()),
    );
    stopped.signal(libc::SIGCONT);
    stopped.exits_with(76);
    let leases = companion_key("job", "leases");
    assert_eq!(
        server.query::<Option<f64>>(&["ZSCORE", &leases, &token]),
        None
    );
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("state"), "held", "{lock}");
    assert_eq!(lock.items("holders").len(), 1, "{lock}");
    finish(kept);
}

#[test]
fn status_names_each_shape_in_text_and_json() {
    let server = RedisServer::start();
    let scratch = TempDir::new("status");
    let log = scratch.join("ran.log");
    // Free.
    let lock = lock_status(&server, "job");
    assert_eq!(lock.expect("shape"), &Json::Null, "{lock}");
    assert_eq!(lock.items("holders").len(), 0, "{lock}");
    // Exclusive.
    let (exclusive, _, _) = hold(&server, &log, "x", &[]);
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("shape"), "exclusive", "{lock}");
    assert_eq!(lock.int("slots"), 1, "{lock}");
    assert_eq!(lock.str("type"), "string", "{lock}");
    assert!(lock.at("holder.host").is_some(), "{lock}");
    finish(exclusive);
    // Shared, every holder listed.
    let shared: Vec<(Running, String, String)> = (0..2)
        .map(|i| hold(&server, &log, &format!("s{i}"), &["--shared"]))
        .collect();
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("state"), "held", "{lock}");
    assert_eq!(lock.str("shape"), "shared", "{lock}");
    assert_eq!(lock.expect("slots"), &Json::Null, "{lock}");
    assert_eq!(lock.expect("holder"), &Json::Null, "{lock}");
    let holders = lock.items("holders");
    assert_eq!(holders.len(), 2, "{lock}");
    for h in holders {
        assert_eq!(h.expect("slot"), &Json::Null, "{lock}");
        assert!(h.int("pid") > 0 && h.int("fence") > 0, "{lock}");
        assert!(
            h.int("ttl_left_ms") > 0 && h.int("ttl_left_ms") <= 10_000,
            "{lock}"
        );
        assert!(
            h.at("token").is_none(),
            "token shown without --show-token: {lock}"
        );
    }
    assert!(lock.int("ttl_left_ms") > 0, "{lock}");
    let text = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    assert!(
        text.stdout.contains("job: held shared by 2 holders"),
        "{text}"
    );
    assert_eq!(text.stdout.matches("  holder    ").count(), 2, "{text}");
    let with_tokens = Redlock::new(&server)
        .args(["status", "--show-token", "job"])
        .exits_with(0);
    for (_, token, _) in &shared {
        assert!(with_tokens.stdout.contains(token.as_str()), "{with_tokens}");
    }
    for (run, _, _) in shared {
        finish(run);
    }
    // Slots, each slot's holder.
    let slotted: Vec<(Running, String, String)> = (0..2)
        .map(|i| hold(&server, &log, &format!("n{i}"), &["--slots", "3"]))
        .collect();
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("shape"), "slots", "{lock}");
    assert_eq!(lock.int("slots"), 3, "{lock}");
    let slots: Vec<i64> = lock
        .items("holders")
        .iter()
        .map(|h| h.int("slot"))
        .collect();
    assert_eq!(slots, [0, 1], "{lock}");
    let text = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    assert!(
        text.stdout.contains("job: held by 2 holders of 3 slots"),
        "{text}"
    );
    assert!(text.stdout.contains("holder    slot 0: "), "{text}");
    assert!(text.stdout.contains("holder    slot 1: "), "{text}");
    for (run, _, _) in slotted {
        finish(run);
    }
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("state"), "free", "{lock}");
    assert_eq!(lock.int("counters.runs"), 5, "{lock}");
}

#[test]
fn release_force_removes_every_shared_holder_and_prints_each() {
    let server = RedisServer::start();
    let scratch = TempDir::new("force");
    let log = scratch.join("ran.log");
    let holders: Vec<(Running, String, String)> = (0..3)
        .map(|i| hold(&server, &log, &format!("n{i}"), &["--slots", "4"]))
        .collect();
    let outcome = Redlock::new(&server)
        .args(["release", "--force", "job"])
        .exits_with(0);
    let removed: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(removed.len(), 3, "{outcome}");
    for slot in 0..3 {
        assert!(
            removed
                .iter()
                .any(|l| l.starts_with(&format!("removed job: slot {slot}: "))),
            "{outcome}"
        );
    }
    for (_, token, _) in &holders {
        assert!(!outcome.stdout.contains(token.as_str()), "{outcome}");
    }
    for (run, _, _) in holders {
        run.exits_with(76);
    }
    Redlock::new(&server)
        .args(["release", "--force", "job"])
        .exits_with(1);
    assert_eq!(lock_status(&server, "job").int("counters.forced"), 1);
}

#[test]
fn acquire_prints_the_slot_and_release_with_a_token_ends_only_that_hold() {
    let server = RedisServer::start();
    let take = || {
        let outcome = Redlock::new(&server)
            .args(["acquire", "--key", "job", "--ttl", "30s", "--slots", "2"])
            .exits_with(0);
        let lines: Vec<String> = outcome.stdout.lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 3, "token, fence, slot: {outcome}");
        lines
    };
    let first = take();
    let second = take();
    assert_eq!((first[2].as_str(), second[2].as_str()), ("0", "1"));
    assert!(first[1].parse::<u64>().unwrap() < second[1].parse::<u64>().unwrap());
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s", "--slots", "2"])
        .exits_with(75);
    Redlock::new(&server)
        .args(["release", "job", "--token", &first[0]])
        .exits_with(0);
    Redlock::new(&server)
        .args(["release", "job", "--token", &first[0]])
        .exits_with(1);
    let lock = lock_status(&server, "job");
    let slots: Vec<i64> = lock
        .items("holders")
        .iter()
        .map(|h| h.int("slot"))
        .collect();
    assert_eq!(slots, [1], "{lock}");
    // The freed slot is taken again; JSON says which.
    let json = Redlock::new(&server)
        .args([
            "acquire", "--key", "job", "--ttl", "30s", "--slots", "2", "--json",
        ])
        .exits_with(0);
    let doc = Json::parse(json.stdout.trim_end()).unwrap();
    assert_eq!(doc.int("slot"), 0, "{json}");
    // extend renews one holder's lease.
    let leases = companion_key("job", "leases");
    let before: f64 = server.query(&["ZSCORE", &leases, &second[0]]);
    Redlock::new(&server)
        .args([
            "extend", "--key", "job", "--token", &second[0], "--ttl", "60s",
        ])
        .exits_with(0);
    let after: f64 = server.query(&["ZSCORE", &leases, &second[0]]);
    assert!(after >= before + 25_000.0, "{before} -> {after}");
    Redlock::new(&server)
        .args([
            "extend", "--key", "job", "--token", &first[0], "--ttl", "60s",
        ])
        .exits_with(1);
}

#[test]
fn a_shared_acquire_prints_no_slot_and_a_nested_run_goes_ahead_under_its_lease() {
    let server = RedisServer::start();
    let bin = env!("CARGO_BIN_EXE_redlock");
    let outcome = Redlock::new(&server)
        .env("REDLOCK_URL", server.url())
        .args(["run", "--key", "job", "--ttl", "10s", "--shared", "-c"])
        .arg(format!(
            r#""{bin}" run --key job --ttl 5s --shared --wait 1m -- sh -c 'echo "inner=$REDLOCK_TOKEN"'
echo "outer=$REDLOCK_TOKEN""#
        ))
        .exits_with(0);
    assert_eq!(
        outcome.printed("inner"),
        outcome.printed("outer"),
        "{outcome}"
    );
    assert_eq!(lock_status(&server, "job").int("counters.runs"), 1);
    let acquired = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "10s", "--shared"])
        .exits_with(0);
    assert_eq!(acquired.stdout.lines().count(), 2, "{acquired}");
}

#[test]
fn shapes_are_refused_in_quorum_mode() {
    let quorum = RedisQuorum::start(3);
    for shape in [&["--shared"][..], &["--slots", "3"]] {
        quorum
            .redlock()
            .args(["run", "--key", "job", "--ttl", "5s"])
            .args(shape)
            .args(["--", "true"])
            .exits_with(64)
            .error_mentions(&["quorum"]);
        quorum
            .redlock()
            .args(["acquire", "--key", "job", "--ttl", "5s"])
            .args(shape)
            .exits_with(64);
    }
    for node in quorum.nodes() {
        assert!(!node.exists(&companion_key("job", "fence")));
    }
}

/// Three contenders for two slots through `url`: two hold (slots 0 and 1), the third is busy.
fn two_slots_through(url: &str) {
    let redlock = || Redlock::without_url().args(["--url", url]);
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut run = redlock()
            .args(["run", "--key", "job", "--ttl", "3s", "--slots", "2"])
            .args([
                "-c",
                r#"echo "slot=$REDLOCK_SLOT"; echo ready; read _ || true"#,
            ])
            .spawn();
        let slot = run.expect_line_starting("slot=");
        run.expect_line("ready");
        holders.push((run, slot));
    }
    let mut slots: Vec<&str> = holders.iter().map(|(_, s)| s.as_str()).collect();
    slots.sort_unstable();
    assert_eq!(slots, ["0", "1"]);
    redlock()
        .args([
            "run", "--key", "job", "--ttl", "3s", "--slots", "2", "--", "true",
        ])
        .exits_with(75);
    let status = redlock().args(["status", "job"]).exits_with(0);
    assert!(
        status.stdout.contains("held by 2 holders of 2 slots"),
        "{status}"
    );
    for (run, _) in holders {
        finish(run);
    }
}

#[test]
fn slots_work_on_a_cluster() {
    let cluster = RedisCluster::start();
    two_slots_through(&cluster.seed_url(cluster.not_owner("job")));
}

#[test]
fn slots_work_through_sentinel() {
    let sentinel = RedisSentinel::start();
    two_slots_through(&sentinel.url());
}

#[test]
fn a_slotted_run_keeps_its_slot_for_hold_at_least_and_max_runtime_stops_only_its_own_command() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--slots", "2"])
        .args(["--hold-at-least", "20s", "--", "true"])
        .exits_with(0);
    // The finished run still holds its slot; one slot is left.
    let lock = lock_status(&server, "job");
    assert_eq!(lock.items("holders").len(), 1, "{lock}");
    assert!(lock.int("holders.0.ttl_left_ms") > 10_000, "{lock}");
    let scratch = TempDir::new("slot-runtime");
    let log = scratch.join("ran.log");
    let (other, _, _) = hold(&server, &log, "other", &["--slots", "2"]);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--slots", "2", "--", "true",
        ])
        .exits_with(75);
    finish(other);
    // --max-runtime on a slot: 124, and the slot is given back.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--slots", "2"])
        .args([
            "--max-runtime",
            "500ms",
            "--kill-after",
            "500ms",
            "--",
            "sleep",
            "30",
        ])
        .exits_with(124);
    let lock = lock_status(&server, "job");
    assert_eq!(lock.items("holders").len(), 1, "{lock}");
    assert_eq!(lock.str("last_run.outcome"), "timed out", "{lock}");
}
