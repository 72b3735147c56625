//! `run --max-runtime D`: the command's whole tree is stopped D after the lock was taken
//! (SIGTERM, then SIGKILL `--kill-after` later), redlock exits 124 and records the run as timed
//! out, the lock is let go only once every process is gone, and the lease never reaches past
//! the maximum runtime plus the kill grace (and a margin).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::monitor::Monitor;
use crate::support::process::{Pid, is_running};
use crate::support::{RedisServer, Redlock};

const ROOMS: [&str; 2] = ["auto", "descendants"];

/// Leaves a grandchild in a session of its own that ignores SIGTERM (`grandchild PID`; without
/// job control `setsid` keeps the pid `$!` names), prints `ready`, then waits for a SIGTERM it
/// reports (`term`) before exiting 143.
const OUTLIVES: &str = r#"setsid sh -c 'trap "" TERM; exec sleep 300' &
echo "grandchild $!"
trap 'echo term; exit 143' TERM
echo ready
while :; do sleep 1; done"#;

/// The record of lock `key`: its counters and its last run.
fn last_run(server: &RedisServer, key: &str) -> std::collections::HashMap<String, String> {
    server.lock_record(key)
}

/// Watches, until stopped, whether the lock key was ever seen gone while `pid` still ran
/// afterwards: the key is read first, the process second, so a hit means the process was
/// alive after the release.
fn watch_release_order(server: &RedisServer, key: &str, pid: Pid) -> impl FnOnce() -> bool {
    let url = server.url();
    let key = key.to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    let watcher = thread::spawn(move || {
        let mut con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connect the watcher");
        let mut overlapped = false;
        while !stop.load(Ordering::Relaxed) {
            let exists: bool = redis::cmd("EXISTS")
                .arg(&key)
                .query(&mut con)
                .expect("EXISTS");
            if !exists && is_running(pid) {
                overlapped = true;
            }
            thread::sleep(Duration::from_millis(2));
        }
        overlapped
    });
    move || {
        stopper.store(true, Ordering::Relaxed);
        watcher.join().expect("the watcher thread")
    }
}

#[test]
fn a_command_that_outlives_max_runtime_is_stopped_whole_and_exits_124() {
    for room in ROOMS {
        let server = RedisServer::start();
        let started = Instant::now();
        let mut holder = Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "10s", "--contain", room])
            .args(["--max-runtime", "1s", "--kill-after", "1s", "-c", OUTLIVES])
            .spawn();
        let grandchild = holder.expect_pid("grandchild");
        holder.expect_line("ready");
        assert!(server.exists("job"), "[{room}] the lock is not held");
        let overlapped = watch_release_order(&server, "job", grandchild);

        holder.expect_line("term");
        let outcome = holder.exits_with(124);
        let elapsed = started.elapsed();
        assert!(
            !overlapped(),
            "[{room}] the lock was let go while the grandchild that ignores SIGTERM still ran\n\
             {outcome}"
        );
        assert!(
            !is_running(grandchild),
            "[{room}] the grandchild outlived redlock\n{outcome}"
        );
        // It ignores SIGTERM: only the SIGKILL a grace after the maximum runtime ends it.
        assert!(
            elapsed >= Duration::from_millis(1900),
            "[{room}] redlock exited after {elapsed:?}, before the kill grace had passed\n{outcome}"
        );
        outcome.error_mentions(&["timed out"]);
        outcome.error_mentions(&["--max-runtime"]);
        assert_eq!(
            server.get("job"),
            None,
            "[{room}] the lock was not released"
        );
        let record = last_run(&server, "job");
        assert_eq!(
            record.get("outcome").map(String::as_str),
            Some("timed out"),
            "[{room}] {record:?}"
        );
        let counters = server.lock_record("job");
        assert_eq!(
            counters.get("failed").map(String::as_str),
            Some("1"),
            "[{room}] a timed-out run counts as failed: {counters:?}"
        );

        let status = Redlock::new(&server).args(["status", "job"]).exits_with(1);
        assert!(
            status.stdout.contains("last run  timed out"),
            "[{room}] status does not say the last run timed out\n{status}"
        );
    }
}

#[test]
fn a_command_that_ends_before_max_runtime_keeps_its_own_status() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--max-runtime", "30s"])
        .args(["-c", "exit 3"])
        .exits_with(3);
    assert_eq!(
        last_run(&server, "job").get("outcome").map(String::as_str),
        Some("failed")
    );
    let outcome = Redlock::new(&server)
        .env("REDLOCK_MAX_RUNTIME", "30s")
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "sleep 0.5"])
        .exits_with(0);
    assert_eq!(
        last_run(&server, "job").get("outcome").map(String::as_str),
        Some("ok"),
        "{outcome}"
    );
    assert_eq!(server.get("job"), None);
}

#[test]
fn the_environment_sets_the_maximum_runtime_and_the_flag_wins() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .env("REDLOCK_MAX_RUNTIME", "500ms")
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--kill-after",
            "200ms",
        ])
        .args(["-c", "sleep 30"])
        .exits_with(124);
    Redlock::new(&server)
        .env("REDLOCK_MAX_RUNTIME", "500ms")
        .args(["run", "--key", "job", "--ttl", "5s", "--max-runtime", "30s"])
        .args(["-c", "sleep 1"])
        .exits_with(0);
}

#[test]
fn a_max_runtime_that_is_not_a_positive_duration_is_rejected_before_redis_is_contacted() {
    for (flag, env) in [
        (Some("0s"), None),
        (Some("soon"), None),
        (Some("5"), None),
        (Some("-1s"), None),
        (None, Some("0ms")),
        (None, Some("later")),
    ] {
        let server = RedisServer::start();
        let connections = server.connections_received();
        let mut redlock = Redlock::new(&server).args(["run", "--key", "job", "--ttl", "5s"]);
        if let Some(value) = flag {
            redlock = redlock.args(["--max-runtime", value]);
        }
        if let Some(value) = env {
            redlock = redlock.env("REDLOCK_MAX_RUNTIME", value);
        }
        let outcome = redlock.args(["--", "true"]).exits_with(64);
        let line = outcome.error_line();
        assert!(
            line.contains("max-runtime") || line.contains("MAX_RUNTIME"),
            "{flag:?} {env:?}: the error does not name the flag\n{outcome}"
        );
        assert_eq!(
            server.connections_received(),
            connections,
            "{flag:?} {env:?}: redlock connected before rejecting it\n{outcome}"
        );
        let keys: i64 = server.query(&["DBSIZE"]);
        assert_eq!(
            keys, 0,
            "{flag:?} {env:?}: redlock wrote to Redis\n{outcome}"
        );
    }
}

/// Every expiry the scripts set on the lock key, as MONITOR saw them: when (server clock, in
/// seconds) and for how long (ms).
fn expiries(monitor: &mut Monitor, server: &RedisServer, key: &str) -> Vec<(f64, u64)> {
    monitor
        .commands_so_far(server)
        .into_iter()
        .filter(|c| c.is_from_script() && c.args.get(1).is_some_and(|k| k == key))
        .filter_map(|c| {
            let name = c.args[0].to_ascii_uppercase();
            let ms = match name.as_str() {
                "PEXPIRE" => c.args.get(2)?,
                "SET" => {
                    let px = c.args.iter().position(|a| a.eq_ignore_ascii_case("PX"))?;
                    c.args.get(px + 1)?
                }
                _ => return None,
            };
            Some((c.at, ms.parse().ok()?))
        })
        .collect()
}

/// The lease reaches no further than the maximum runtime, the kill grace and the margin
/// (2 × (TTL/100 + 2 ms) + 50 ms) after the lock was taken: whether the acquire itself is
/// shortened (a TTL longer than that) or the renewals are (a TTL shorter than that). Without
/// the cap, the first renewal alone would carry it to 4/3 of the TTL.
#[test]
fn renewals_never_carry_the_lease_past_the_maximum_runtime_and_the_grace() {
    // (ttl, max runtime, kill after, renewals expected)
    for (ttl, d, kill_after, renewed) in [
        (10_000u64, 1_000u64, 1_000u64, false),
        (3_000, 2_500, 500, true),
    ] {
        let server = RedisServer::start();
        let mut monitor = Monitor::start(&server);
        let margin = 2 * (ttl / 100 + 2) + 50;
        let limit_ms = d + kill_after + margin;
        let (ttl_s, d_s, k_s) = (
            format!("{ttl}ms"),
            format!("{d}ms"),
            format!("{kill_after}ms"),
        );
        let outcome = Redlock::new(&server)
            .args(["-v", "run", "--key", "job", "--ttl", &ttl_s])
            .args(["--max-runtime", &d_s, "--kill-after", &k_s])
            .args(["-c", r#"trap "" TERM; sleep 300"#])
            .exits_with(124);
        let set = expiries(&mut monitor, &server, "job");
        let (acquired_at, first) = *set
            .first()
            .unwrap_or_else(|| panic!("no expiry was set on the lock\n{outcome}"));
        assert!(
            first <= limit_ms,
            "ttl {ttl}: the lock was taken for {first} ms, past {limit_ms} ms\n{outcome}"
        );
        let renewals = &set[1..];
        assert_eq!(
            !renewals.is_empty(),
            renewed,
            "ttl {ttl}: renewals {renewals:?}\n{outcome}"
        );
        // Generous slack for the renewal's own way to the server on a loaded host; an
        // uncapped renewal would overshoot by a third of the TTL (1 s here).
        let slack_ms = 400.0;
        for &(at, ms) in renewals {
            let reach_ms = (at - acquired_at) * 1000.0 + ms as f64;
            assert!(
                reach_ms <= limit_ms as f64 + slack_ms,
                "ttl {ttl}: a renewal carried the lease {reach_ms:.0} ms past the acquire, \
                 beyond {limit_ms} ms\n{outcome}"
            );
        }
        assert_eq!(server.get("job"), None);
    }
}
