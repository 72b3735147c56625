//! `run --once-per D`: of all runs of a key that start in one window of the server's clock,
//! only the first runs its command; the others exit with the busy status and say who ran it,
//! when, and how it ended. `--retry-failed` lets a later run of the window retry a first run
//! that failed. A run belongs to the window boundary nearest its start.

use std::time::Duration;

use crate::support::poll::{clear_of_the_hours_edge, wait_until};
use crate::support::process::{host_name, send_signal};
use crate::support::{RedisCluster, RedisQuorum, RedisServer, Redlock, companion_key};

/// The server's clock in ms.
fn server_ms(server: &RedisServer) -> i64 {
    server.micros() / 1000
}

/// Waits (bounded) until the server's clock is between `offset_ms` and `offset_ms + span_ms`
/// from a multiple of `every_ms` (a negative offset is before it), and returns that multiple.
fn await_phase(server: &RedisServer, every_ms: i64, offset_ms: i64, span_ms: i64) -> i64 {
    wait_until(
        "the server's clock to reach the wanted phase",
        Duration::from_millis(3 * every_ms as u64),
        || {
            let now = server_ms(server);
            let boundary = (now - offset_ms).div_euclid(every_ms) * every_ms;
            if now - offset_ms - boundary <= span_ms {
                return Some(boundary);
            }
            None
        },
    )
}

fn once(server: &RedisServer, every: &str, command: &str) -> Redlock {
    Redlock::new(server).args([
        "run",
        "--key",
        "daily",
        "--ttl",
        "10s",
        "--once-per",
        every,
        "-c",
        command,
    ])
}

#[test]
fn only_the_first_run_of_a_window_runs_and_the_next_says_who_ran_it() {
    let server = RedisServer::start();
    clear_of_the_hours_edge();
    let first = once(&server, "1h", "echo ran").exits_with(0);
    assert_eq!(first.stdout.trim(), "ran", "{first}");

    let second = once(&server, "1h", "echo ran").exits_with(75);
    assert_eq!(
        second.stdout, "",
        "the second run ran its command\n{second}"
    );
    second.error_mentions(&[
        "daily",
        "already ran in the window",
        "--once-per 1h",
        &host_name(),
        "ok (exit 0)",
        "not running the command",
    ]);

    // As for a busy lock, --conflict-exit-code 0 makes a skip a success (with a warning).
    let quiet = once(&server, "1h", "echo ran")
        .args(["--conflict-exit-code", "0"])
        .exits_with(0);
    assert_eq!(quiet.stdout, "", "{quiet}");
    quiet.error_mentions(&["already ran in the window"]);

    // Skips are counted, and the window's record expires on its own, after twice the window.
    let stats = server.lock_record("daily");
    assert_eq!(
        stats.get("skipped").map(String::as_str),
        Some("2"),
        "{stats:?}"
    );
    assert_eq!(
        stats.get("runs").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    let life = server
        .pttl(&companion_key("daily", "once"))
        .expect("the window's record expires");
    assert!(
        life > Duration::from_secs(3600) && life <= Duration::from_secs(7200),
        "the window's record lives {life:?}, not between 1h and 2h"
    );
}

#[test]
fn a_run_in_the_next_window_runs() {
    let server = RedisServer::start();
    // A run well inside a window, then one well inside the next.
    let boundary = await_phase(&server, 2000, -700, 300);
    once(&server, "2s", "echo first").exits_with(0);
    wait_until("the next window", Duration::from_secs(5), || {
        (server_ms(&server) >= boundary + 1000 + 200).then_some(())
    });
    let next = once(&server, "2s", "echo second").exits_with(0);
    assert_eq!(next.stdout.trim(), "second", "{next}");
}

/// Hosts whose cron fires the same schedule with clocks apart, one early and the others late,
/// land in the same window however short the job: the window is centred on the boundary. Three
/// runs of `--once-per 10s`, 1 s before and 2 s after a boundary: one runs. The next window runs
/// again.
#[test]
fn runs_around_a_boundary_share_one_window_and_the_next_window_runs_again() {
    let server = RedisServer::start();
    let every = 10_000;
    // The early host: between 1.3 s and 0.8 s before a boundary.
    let boundary = await_phase(&server, every, -1300, 500);
    let early = once(&server, "10s", "echo early").exits_with(0);
    assert_eq!(early.stdout.trim(), "early", "{early}");
    let record = server.hgetall(&companion_key("daily", "once"));
    let started: i64 = record["started"].parse().expect("started");
    assert!(
        started < boundary,
        "the early run started after the boundary: {record:?}"
    );

    // Two late hosts: 2 s after the same boundary, done well before the window ends (+5 s).
    wait_until("the late hosts' start", Duration::from_secs(5), || {
        (server_ms(&server) >= boundary + 2000).then_some(())
    });
    for _ in 0..2 {
        let late = once(&server, "10s", "echo late").exits_with(75);
        assert_eq!(late.stdout, "", "{late}");
        late.error_mentions(&["already ran in the window", "ok (exit 0)"]);
    }
    assert!(
        server_ms(&server) < boundary + every / 2,
        "the late runs ended after their window; the test's host is too slow to tell"
    );

    // The next window: its boundary is 10 s on; it starts 5 s after this one.
    wait_until("the next window", Duration::from_secs(10), || {
        (server_ms(&server) >= boundary + every / 2 + 200).then_some(())
    });
    let next = once(&server, "10s", "echo next").exits_with(0);
    assert_eq!(next.stdout.trim(), "next", "{next}");
}

#[test]
fn retry_failed_lets_a_later_run_retry_a_failed_first_run_only() {
    let server = RedisServer::start();
    clear_of_the_hours_edge();
    once(&server, "1h", "exit 3").exits_with(3);

    once(&server, "1h", "echo again")
        .exits_with(75)
        .error_mentions(&["failed (exit 3)"]);

    let retry = once(&server, "1h", "echo retry")
        .arg("--retry-failed")
        .exits_with(0);
    assert_eq!(retry.stdout.trim(), "retry", "{retry}");

    // The retry succeeded: the window is done, even for --retry-failed.
    once(&server, "1h", "echo third")
        .arg("--retry-failed")
        .exits_with(75)
        .error_mentions(&["ok (exit 0)"]);
}

#[test]
fn a_run_still_in_progress_skips_the_next_even_when_it_would_wait() {
    let server = RedisServer::start();
    clear_of_the_hours_edge();
    let mut first = once(&server, "1h", "echo ready; read line; echo done").spawn();
    first.expect_line("ready");

    // --wait does not wait for a window that is taken: nothing could change that.
    let second = once(&server, "1h", "echo second")
        .args(["--wait", "1m"])
        .exits_with(75);
    second.error_mentions(&["already ran in the window", "still running"]);
    assert!(server.exists("daily"), "the first run's lock is gone");

    first.close_stdin();
    first.wait().expect_code(0);
    let record = server.hgetall(&companion_key("daily", "once"));
    assert_eq!(
        record.get("outcome").map(String::as_str),
        Some("ok"),
        "{record:?}"
    );
}

/// A run whose redlock was killed never records how it ended; once its lease has lapsed, the
/// window's record says it vanished, which --retry-failed counts as a failure.
#[test]
fn a_first_run_that_died_without_a_release_can_be_retried() {
    let server = RedisServer::start();
    clear_of_the_hours_edge();
    let mut first = Redlock::new(&server)
        .args(["run", "--key", "daily", "--ttl", "1s", "--once-per", "1h"])
        .args(["-c", "echo ready; exec sleep 60"])
        .spawn();
    first.expect_line("ready");
    send_signal(first.pid(), libc::SIGKILL);
    first.wait();
    wait_until(
        "the dead run's lease to lapse",
        Duration::from_secs(10),
        || (!server.exists("daily")).then_some(()),
    );

    once(&server, "1h", "echo again")
        .exits_with(75)
        .error_mentions(&["ended without a release"]);
    let retry = once(&server, "1h", "echo retry")
        .arg("--retry-failed")
        .exits_with(0);
    assert_eq!(retry.stdout.trim(), "retry", "{retry}");
}

#[test]
fn once_per_works_on_a_cluster() {
    let cluster = RedisCluster::start();
    clear_of_the_hours_edge();
    let run = |command: &str| {
        Redlock::without_url()
            .args(["--url", &cluster.url()])
            .args(["run", "--key", "report", "--ttl", "10s", "--once-per", "1h"])
            .args(["-c", command])
    };
    let first = run("echo ran").exits_with(0);
    assert_eq!(first.stdout.trim(), "ran", "{first}");
    run("echo ran")
        .exits_with(75)
        .error_mentions(&["already ran in the window"]);
}

#[test]
fn bad_once_per_values_are_rejected_before_redis_is_contacted() {
    let server = RedisServer::start();
    let quorum = RedisQuorum::start(3);
    let cases: Vec<(Redlock, &str)> = vec![
        (once(&server, "0s", "true"), "--once-per"),
        (once(&server, "500ms", "true"), "--once-per"),
        (once(&server, "367d", "true"), "--once-per"),
        (once(&server, "soon", "true"), "--once-per"),
        (
            Redlock::new(&server).args([
                "run",
                "--key",
                "k",
                "--ttl",
                "5s",
                "--retry-failed",
                "--",
                "true",
            ]),
            "--retry-failed",
        ),
        (
            quorum.redlock().args([
                "run",
                "--key",
                "k",
                "--ttl",
                "5s",
                "--once-per",
                "1h",
                "--",
                "true",
            ]),
            "--once-per",
        ),
    ];
    let connections = server.connections_received();
    for (redlock, flag) in cases {
        let outcome = redlock.exits_with(64);
        outcome.error_mentions(&[flag]);
    }
    assert_eq!(
        server.connections_received(),
        connections,
        "redlock contacted Redis"
    );
    for node in quorum.nodes() {
        let keys: i64 = node.query(&["DBSIZE"]);
        assert_eq!(keys, 0, "a quorum node was written to");
    }
}

#[test]
fn status_shows_who_took_the_window_and_how_it_went() {
    let server = RedisServer::start();
    clear_of_the_hours_edge();
    once(&server, "1h", "exit 4").exits_with(4);
    let text = Redlock::new(&server)
        .args(["status", "daily"])
        .exits_with(1);
    let line = text
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("once per"))
        .unwrap_or_else(|| text.fail("no `once per` line"));
    assert!(
        line.contains("(--once-per 1h)") && line.contains("failed (exit 4)"),
        "{line}"
    );
    assert!(line.contains(&host_name()), "{line}");

    let json = Redlock::new(&server)
        .args(["status", "daily", "--json"])
        .exits_with(1);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let once = &doc["locks"][0]["once"];
    assert_eq!(once["every_ms"], 3_600_000, "{doc}");
    assert_eq!(once["outcome"], "failed", "{doc}");
    assert_eq!(once["exit"], 4, "{doc}");

    // Without --once-per runs there is no record.
    let other = Redlock::new(&server)
        .args(["status", "other", "--json"])
        .exits_with(1);
    let doc: serde_json::Value = serde_json::from_str(&other.stdout).expect("JSON");
    assert!(doc["locks"][0]["once"].is_null(), "{doc}");
}
