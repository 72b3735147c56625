//! `--wait` is a fair queue: waiters get the lock in the order they asked, only the head is
//! woken, dead waiters are skipped within the documented bound, and non-waiting runs never jump
//! ahead.

use std::fs;
use std::time::{Duration, Instant};

use crate::support::json::Document;
use crate::support::redlock::Running;
use crate::support::{
    RedisCluster, RedisQuorum, RedisServer, Redlock, TempDir, child, companion_key, lock_status,
    wait_until,
};

/// The longest a killed waiter can hold up the queue (docs/design.md, "Waiting is a fair queue").
const DEAD_WAITER_BOUND: Duration = Duration::from_secs(2);

fn queue_len(server: &RedisServer) -> usize {
    server.query::<usize>(&["ZCARD", &companion_key("job", "queue")])
}

/// A run holding `job` until its stdin is closed.
fn hold(server: &RedisServer) -> Running {
    let mut holder = Redlock::new(server)
        .args(["run", "--key", "job", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    holder
}

/// A waiter on `job` that appends `NAME SECONDS.NANOS` to `log` when it runs; returns once
/// the server has it in the queue (at place `place`, counting from 1).
fn queue_up(server: &RedisServer, log: &std::path::Path, name: &str, place: usize) -> Running {
    let waiter = Redlock::new(server)
        .env("LOG", log)
        .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s", "-c"])
        .arg(format!(r#"echo "{name} $(date +%s.%N)" >> "$LOG""#))
        .spawn();
    wait_until(
        &format!("{name} to join the queue at place {place}"),
        Duration::from_secs(10),
        || (queue_len(server) == place).then_some(()),
    );
    waiter
}

fn ran(log: &std::path::Path) -> Vec<(String, f64)> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (name, stamp) = line.split_once(' ')?;
            Some((name.to_owned(), stamp.replace(',', ".").parse().ok()?))
        })
        .collect()
}

/// Holds `job`, queues `count` waiters one after another (each only once `queued` counts it),
/// releases, and expects the waiters to have run in the order they joined. `redlock` makes a
/// `redlock` command for the setup under test.
fn expect_arrival_order(redlock: impl Fn() -> Redlock, queued: impl Fn() -> usize, count: usize) {
    let scratch = TempDir::new("fifo");
    let log = scratch.join("ran.log");
    let mut holder = redlock()
        .args(["run", "--key", "job", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiters: Vec<Running> = (0..count)
        .map(|i| {
            let waiter = redlock()
                .env("LOG", &log)
                .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s", "-c"])
                .arg(format!(r#"echo "w{i} $(date +%s.%N)" >> "$LOG""#))
                .spawn();
            wait_until(
                &format!("w{i} to join the queue at place {}", i + 1),
                Duration::from_secs(10),
                || (queued() == i + 1).then_some(()),
            );
            waiter
        })
        .collect();
    holder.close_stdin();
    holder.exits_with(0);
    for waiter in waiters {
        waiter.exits_with(0);
    }
    let order: Vec<String> = ran(&log).into_iter().map(|(name, _)| name).collect();
    let expected: Vec<String> = (0..count).map(|i| format!("w{i}")).collect();
    assert_eq!(order, expected, "the waiters did not run in arrival order");
}

#[test]
fn twenty_waiters_get_the_lock_in_the_order_they_asked() {
    let server = RedisServer::start();
    expect_arrival_order(|| Redlock::new(&server), || queue_len(&server), 20);
    assert_eq!(queue_len(&server), 0, "the queue was not emptied");
}

#[test]
fn a_killed_waiter_holds_up_the_queue_at_most_the_documented_bound() {
    let server = RedisServer::start();
    let scratch = TempDir::new("dead-waiter");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    let first = queue_up(&server, &log, "first", 1);
    let mut killed = queue_up(&server, &log, "killed", 2);
    let last = queue_up(&server, &log, "last", 3);
    // Killed just before the lock frees: its entry is still fresh when its turn comes.
    killed.kill9();
    holder.close_stdin();
    holder.exits_with(0);
    first.exits_with(0);
    last.exits_with(0);
    let ran = ran(&log);
    let names: Vec<&str> = ran.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["first", "last"]);
    let gap = Duration::from_secs_f64(ran[1].1 - ran[0].1);
    assert!(
        gap <= DEAD_WAITER_BOUND + Duration::from_secs(1),
        "the killed waiter held up the next one for {gap:?}"
    );
}

#[test]
fn a_waiter_killed_far_back_is_skipped_within_the_bound_once_it_reaches_the_front() {
    let server = RedisServer::start();
    let scratch = TempDir::new("dead-far-back");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    let names = ["w1", "w2", "w3", "w4", "killed", "w6"];
    let mut waiters: Vec<Running> = names
        .iter()
        .enumerate()
        .map(|(i, name)| queue_up(&server, &log, name, i + 1))
        .collect();
    // Killed while far back, where an entry lives long unrefreshed: by its turn, moments
    // later, its entry is still alive.
    waiters[4].kill9();
    holder.close_stdin();
    holder.exits_with(0);
    for (i, waiter) in waiters.into_iter().enumerate() {
        if i != 4 {
            waiter.exits_with(0);
        }
    }
    let ran = ran(&log);
    let order: Vec<&str> = ran.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, ["w1", "w2", "w3", "w4", "w6"]);
    let gap = Duration::from_secs_f64(ran[4].1 - ran[3].1);
    assert!(
        gap <= DEAD_WAITER_BOUND + Duration::from_secs(1),
        "the waiter killed far back held up the next one for {gap:?}"
    );
}

#[test]
fn a_waiter_that_gives_up_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    let scratch = TempDir::new("give-up");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    // Its wait runs out.
    let outcome = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "10s", "--wait", "1s", "--", "true",
        ])
        .exits_with(75);
    assert_eq!(
        queue_len(&server),
        0,
        "a waiter that gave up stayed queued\n{outcome}"
    );
    // Interrupted.
    let waiter = queue_up(&server, &log, "interrupted", 1);
    waiter.signal(libc::SIGINT);
    waiter.exits_with(130);
    assert_eq!(queue_len(&server), 0, "an interrupted waiter stayed queued");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn a_waiter_stopped_with_ctrl_z_steps_out_of_the_queue_and_rejoins_when_continued() {
    let server = RedisServer::start();
    let scratch = TempDir::new("stopped");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    let stopped = queue_up(&server, &log, "stopped", 1);
    let _next = queue_up(&server, &log, "next", 2);
    // Stopped, it must not be granted the lock it could not use: it leaves the queue first.
    stopped.signal(libc::SIGTSTP);
    wait_until(
        "the stopped waiter to leave",
        Duration::from_secs(5),
        || (queue_len(&server) == 1).then_some(()),
    );
    wait_until("the waiter to stop", Duration::from_secs(5), || {
        crate::support::process::is_stopped(stopped.pid()).then_some(())
    });
    holder.close_stdin();
    holder.exits_with(0);
    wait_until("the next waiter to run", Duration::from_secs(10), || {
        (ran(&log).len() == 1).then_some(())
    });
    // Continued, it queues again and runs.
    stopped.signal(libc::SIGCONT);
    stopped.exits_with(0);
    let names: Vec<String> = ran(&log).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["next", "stopped"]);
}

#[test]
fn a_run_without_wait_never_jumps_the_queue() {
    let server = RedisServer::start();
    let queue = companion_key("job", "queue");
    let alive = companion_key("job", "alive");
    // A live waiter queued while the lock is free (it is about to take it).
    let far = (server.micros() / 1000 + 60_000).to_string();
    let _: () = server.query(&["ZADD", &queue, "1", "someone"]);
    let _: () = server.query(&["ZADD", &alive, &far, "someone"]);
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(75);
    assert!(outcome.stderr.contains("queued"), "{outcome}");
    // A dead one is skipped.
    let _: () = server.query(&["ZADD", &alive, "1", "someone"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    assert_eq!(queue_len(&server), 0);
}

#[test]
fn waiters_outlive_a_redis_restart_and_all_run() {
    let mut server = RedisServer::start();
    let scratch = TempDir::new("restart");
    let log = scratch.join("ran.log");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiters: Vec<Running> = (0..3)
        .map(|i| queue_up(&server, &log, &format!("w{i}"), i + 1))
        .collect();
    let restarted = Instant::now();
    server.restart();
    // The holder's next renewal finds its key gone; the waiters queue again and all run.
    holder.close_stdin();
    let _ = holder.wait();
    for waiter in waiters {
        waiter.exits_with(0);
    }
    assert_eq!(ran(&log).len(), 3);
    assert!(
        restarted.elapsed() < Duration::from_secs(15),
        "the waiters took {:?} after the restart",
        restarted.elapsed()
    );
}

#[test]
fn a_waiter_whose_redis_is_gone_says_so_within_its_timeout() {
    let mut server = RedisServer::start();
    let scratch = TempDir::new("gone");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    let waiter = queue_up(&server, &log, "w", 1);
    let killed = Instant::now();
    server.kill9();
    // Not a busy lock at the end of --wait (60 s): the server is unreachable, 69, once
    // reconnecting failed for --timeout (3 s by default).
    waiter
        .exits_with(69)
        .error_mentions(&["nothing listens"])
        .error_does_not_mention("TLS");
    assert!(
        killed.elapsed() < Duration::from_secs(20),
        "the waiter took {:?}",
        killed.elapsed()
    );
    assert!(ran(&log).is_empty());
    holder.close_stdin();
    let _ = holder.wait();
}

#[test]
fn status_lists_the_queue_in_order() {
    let server = RedisServer::start();
    let scratch = TempDir::new("status-queue");
    let log = scratch.join("ran.log");
    let mut holder = hold(&server);
    let waiters: Vec<Running> = (0..3)
        .map(|i| queue_up(&server, &log, &format!("w{i}"), i + 1))
        .collect();
    let lock = lock_status(&server, "job");
    let queue = lock.items("queue");
    assert_eq!(queue.len(), 3, "{lock}");
    for (entry, waiter) in queue.iter().zip(&waiters) {
        assert_eq!(entry.int("pid"), i64::from(waiter.pid()), "{lock}");
        assert!(entry.int("since_ms") > 0, "{lock}");
        assert!(entry.str("command").contains("date +%s.%N"), "{lock}");
    }
    let text = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    for place in 1..=3 {
        assert!(
            text.stdout.contains(&format!("waiting   {place}. ")),
            "no place {place}\n{text}"
        );
    }
    holder.close_stdin();
    holder.exits_with(0);
    for waiter in waiters {
        waiter.exits_with(0);
    }
}

#[test]
fn a_quorum_serves_its_waiters_in_arrival_order() {
    let quorum = RedisQuorum::start(3);
    // Every node has the waiter before the next one comes.
    let queued = || quorum.nodes().iter().map(queue_len).min().unwrap_or(0);
    expect_arrival_order(|| quorum.redlock(), queued, 8);
}

#[test]
fn a_cluster_serves_its_waiters_in_arrival_order() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let owner = cluster.owner("job");
    expect_arrival_order(
        || Redlock::without_url().args(["--url", &url]),
        || queue_len(cluster.node(owner)),
        5,
    );
}

/// Whether the audit log of `job` records the lock taken by the process `pid`.
fn acquired_by(server: &RedisServer, pid: i32) -> bool {
    let entries: Vec<String> = server.query(&["LRANGE", &companion_key("job", "audit"), "0", "-1"]);
    let pid = format!("\x1fpid={pid}\x1f");
    entries
        .iter()
        .any(|entry| entry.contains("\x1facquired\x1f") && entry.contains(&pid))
}

/// Freezes the head waiter while its next attempt waits on the server (its connection open,
/// as when its host dies), then lets the holder go: the server grants the frozen head the lock.
/// Returns the frozen waiter, the next one, and whether the server granted the frozen one.
fn freeze_the_head_and_release(
    server: &RedisServer,
    log: &std::path::Path,
    extra: &[&str],
) -> (Running, Running, bool) {
    let mut holder = Redlock::new(server)
        .args(["run", "--key", "job", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = |name: &str| {
        Redlock::new(server)
            .env("LOG", log)
            .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s"])
            .args(extra)
            .arg("-c")
            .arg(format!(r#"echo "{name} $(date +%s.%N)" >> "$LOG""#))
            .spawn()
    };
    let frozen = waiter("frozen");
    wait_until("the first waiter to queue", Duration::from_secs(10), || {
        (queue_len(server) == 1).then_some(())
    });
    let next = waiter("next");
    server.wait_until_waiting_on_server("job", 2);
    frozen.signal(libc::SIGSTOP);
    holder.close_stdin();
    holder.exits_with(0);
    let granted = acquired_by(server, frozen.pid());
    (frozen, next, granted)
}

#[test]
fn a_head_waiter_granted_the_lock_while_frozen_holds_up_the_queue_at_most_the_bound() {
    // The server grants the frozen head the lock when its attempt is still waiting there at
    // the release, which it is for most of each refresh: tried until that happened.
    let server = RedisServer::start();
    for _ in 0..5 {
        let scratch = TempDir::new("frozen-head");
        let log = scratch.join("ran.log");
        let released = std::time::SystemTime::now();
        let (frozen, next, granted) = freeze_the_head_and_release(&server, &log, &[]);
        next.exits_with(0);
        let released = released
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let gap = ran(&log)[0].1 - released;
        assert!(
            gap <= (DEAD_WAITER_BOUND + Duration::from_secs(1)).as_secs_f64(),
            "the frozen head held up the next waiter for {gap:.3} s"
        );
        // Awake again, its grant lapsed: it queues again and runs after the other.
        frozen.signal(libc::SIGCONT);
        frozen.exits_with(0);
        let names: Vec<String> = ran(&log).into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["next", "frozen"]);
        if granted {
            return;
        }
    }
    panic!("in five rounds the server never granted the lock to the frozen head waiter");
}

#[test]
fn a_frozen_head_does_not_take_the_once_per_window_from_the_next_waiter() {
    let server = RedisServer::start();
    for _ in 0..5 {
        let _: () = server.query(&["FLUSHALL"]);
        let scratch = TempDir::new("frozen-window");
        let log = scratch.join("ran.log");
        let (frozen, next, granted) =
            freeze_the_head_and_release(&server, &log, &["--once-per", "1h"]);
        // The window is the next waiter's: the frozen head never confirmed its grant.
        next.exits_with(0);
        frozen.signal(libc::SIGCONT);
        let outcome = frozen.exits_with(75);
        assert!(outcome.stderr.contains("already ran"), "{outcome}");
        let names: Vec<String> = ran(&log).into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["next"]);
        if granted {
            return;
        }
    }
    panic!("in five rounds the server never granted the lock to the frozen head waiter");
}
