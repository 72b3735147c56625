//! A waiter follows a failover (Sentinel): while its `--wait` lasts, a waiter whose master stops
//! answering — killed, or frozen with SIGSTOP — asks the sentinels again and waits on the
//! master they name after the failover, then runs once the holder is gone. It does not end with
//! 69 while it has wait left.
//!
//! Each test plays it on a fleet of its own (`support/fleet.rs`: three sentinels, a master, a
//! promotable replica): a holder runs a short command, a waiter queues behind it, and the
//! master goes. The waiter says with `-v` when it follows (`master_followed`); the test prints
//! how long after the master went that was, and how long after the sentinels named the new
//! master.
//!
//! And a reconnection never trusts a stale master: it connects to the master a majority of
//! the sentinels name, not the first one named.

use std::time::{Duration, Instant};

use crate::support::Redlock;
use crate::support::fleet::Fleet;
use crate::support::poll::wait_until;

/// The waiter's own timeout: an attempt unanswered this long past its block is a master out
/// of reach.
const TIMEOUT: &str = "2s";

/// `redlock -v --url URL --timeout TIMEOUT run --key KEY`; add the rest of the run.
fn run_through(url: &str, key: &str) -> Redlock {
    Redlock::without_url().args([
        "-v",
        "--url",
        url,
        "--timeout",
        TIMEOUT,
        "run",
        "--key",
        key,
    ])
}

#[derive(Clone, Copy, Debug)]
enum Loss {
    /// Links cut, then the master killed.
    Killed,
    /// The master frozen (SIGSTOP): its connections stay open, nothing is answered.
    Frozen,
}

fn follow(loss: Loss) {
    let mut fleet = Fleet::start(1);
    let url = fleet.url(0);
    let key = "follow";
    let holder = Redlock::without_url()
        .args(["--url", &url, "--timeout", TIMEOUT, "run", "--key", key])
        .args(["--ttl", "4s", "--", "sleep", "3"])
        .timeout(Duration::from_secs(60))
        .spawn();
    let master = &fleet.group(0).master;
    wait_until("the holder's grant", Duration::from_secs(20), || {
        master.exists(key).then_some(())
    });
    let waiter = run_through(&url, key)
        .args(["--ttl", "4s", "--wait", "60s", "--", "true"])
        .timeout(Duration::from_secs(90))
        .spawn();
    master.wait_until_waiting_on_server(key, 1);
    // The promotable replica lags by 300 ms: what the holder and the waiter wrote reaches it.
    std::thread::sleep(Duration::from_millis(600));
    let lost = Instant::now();
    match loss {
        Loss::Killed => fleet.lose_master(0),
        Loss::Frozen => fleet.group(0).master.pause(),
    }
    let failover = fleet.wait_for_failover(0);
    let named = lost + failover;
    wait_until(
        "the waiter to follow the failover",
        Duration::from_secs(40),
        || {
            waiter
                .stderr_contains("the sentinels name now")
                .then_some(())
        },
    );
    let followed = lost.elapsed();
    let outcome = waiter.wait();
    let holder = holder.wait();
    println!(
        "{loss:?}: the sentinels named the new master {failover:?} after the loss; the waiter \
         followed {followed:?} after the loss ({:?} after the new master was named); waiter \
         exit {:?}, holder exit {:?}",
        followed.saturating_sub(named.duration_since(lost)),
        outcome.code(),
        holder.code()
    );
    outcome.expect_code(0);
    assert!(
        outcome.stderr.contains("the sentinels name now"),
        "the waiter did not say it followed:\n{}",
        outcome.stderr
    );
}

#[test]
fn a_waiter_follows_a_failover_from_a_killed_master() {
    follow(Loss::Killed);
}

#[test]
fn a_waiter_follows_a_failover_from_a_frozen_master() {
    follow(Loss::Frozen);
}

/// A reconnection trusts no lone sentinel: one sentinel names another server, a master too
/// (as a sentinel cut off from the others, or one that has not seen a failover, names the old
/// master), while two name the real one. The holder's connection is dropped again and again;
/// each time its heartbeat reconnects, to the master the majority names, and renews there.
/// The lone sentinel's master never sees a renewal, and the holder keeps its lease.
#[test]
fn a_reconnection_uses_the_master_a_majority_of_sentinels_name() {
    let fleet = Fleet::start(1);
    let url = fleet.url(0);
    let key = "agreed";
    let stale = crate::support::RedisServer::start();
    let scratch = crate::support::TempDir::new("agreed");
    let done = scratch.join("done");
    let script = format!(
        "echo ready; while [ ! -e {} ]; do sleep 0.05; done",
        done.display()
    );
    let mut holder = run_through(&url, key)
        .args(["--ttl", "3s", "--", "sh", "-c", &script])
        .timeout(Duration::from_secs(60))
        .spawn();
    holder.expect_line("ready");
    // After the first connection: that one is the run's start-up, not a reconnection.
    fleet.mislead(0, 0, stale.port());
    let master = &fleet.group(0).master;
    for round in 0..6 {
        drop_holders_connections(master);
        // A renewal after the drop: the lease's time to live rises again.
        let mut least = master.pttl(key).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = master.pttl(key).unwrap_or_default();
            if now > least + Duration::from_millis(300) {
                break;
            }
            least = least.min(now);
            if holder.has_exited() || Instant::now() >= deadline {
                holder.kill9();
                let outcome = holder.wait();
                let stats: String = stale.query(&["INFO", "commandstats"]);
                panic!(
                    "the holder did not renew on the real master after drop {round}: exit \
                     {:?}\n{}\nthe lone sentinel's master saw: {stats}",
                    outcome.code(),
                    outcome.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::fs::write(&done, "").expect("write the done file");
    let outcome = holder.wait();
    let stats: String = stale.query(&["INFO", "commandstats"]);
    println!(
        "the lone sentinel's master saw: {}",
        stats.replace("\r\n", " ")
    );
    assert!(
        !stats.contains("cmdstat_evalsha") && !stats.contains("cmdstat_eval:"),
        "a reconnection renewed on the master a lone sentinel named:\n{stats}"
    );
    outcome.expect_code(0);
}

/// Closes the connections on `master` whose last command was a script (the holder's), and no
/// other: the sentinels' and the replicas' stay.
fn drop_holders_connections(master: &crate::support::RedisServer) {
    let list: String = master.query(&["CLIENT", "LIST"]);
    for line in list.lines().filter(|l| l.contains("cmd=evalsha")) {
        if let Some(id) = line.split(' ').find_map(|field| field.strip_prefix("id=")) {
            let _: redis::RedisResult<()> = master.try_query(&["CLIENT", "KILL", "ID", id]);
        }
    }
}

/// A waiter ends within its `--wait` plus its `--timeout` whatever the master does: frozen
/// (SIGSTOP) with the waiter's attempt on it, the waiter neither waits on that attempt nor on
/// the undoing of it, nor on a lookup that names the frozen master, past that bound. Two
/// waiters, one whose wait ends before the failover is done and one whose wait ends after.
#[test]
fn a_waiter_behind_a_frozen_master_ends_within_its_wait_and_timeout() {
    let fleet = Fleet::start(1);
    let url = fleet.url(0);
    let key = "frozen-bound";
    let timeout = Duration::from_secs(2);
    let holder = Redlock::without_url()
        .args(["--url", &url, "--timeout", "2s", "run", "--key", key])
        .args(["--ttl", "4s", "--", "sleep", "20"])
        .timeout(Duration::from_secs(60))
        .spawn();
    let master = &fleet.group(0).master;
    wait_until("the holder's grant", Duration::from_secs(20), || {
        master.exists(key).then_some(())
    });
    let waits = [Duration::from_millis(2500), Duration::from_secs(5)];
    let mut waiters: Vec<_> = waits
        .iter()
        .map(|wait| {
            let started = Instant::now();
            let running = run_through(&url, key)
                .args(["--ttl", "4s", "--wait", &format!("{}ms", wait.as_millis())])
                .args(["--", "true"])
                .timeout(Duration::from_secs(60))
                .spawn();
            (started, *wait, running, None::<Duration>)
        })
        .collect();
    master.wait_until_waiting_on_server(key, waits.len());
    master.pause();
    // Each waiter's exit, seen within a bound far above the promise (a waiter that overshoots
    // fails the assertion below, not this loop).
    let deadline = Instant::now() + Duration::from_secs(40);
    while waiters.iter().any(|w| w.3.is_none()) && Instant::now() < deadline {
        for (started, _, running, ended) in &mut waiters {
            if ended.is_none() && running.has_exited() {
                *ended = Some(started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Slack for a loaded machine: start-up, and a lookup's last pause.
    let slack = timeout / 2 + Duration::from_millis(500);
    for (_, wait, mut running, ended) in waiters {
        running.kill9();
        let outcome = running.wait();
        println!(
            "--wait {wait:?} --timeout {timeout:?}: ended after {ended:?}, exit {:?}",
            outcome.code()
        );
        let ended = ended.unwrap_or(Duration::MAX);
        assert!(
            ended <= wait + timeout + slack,
            "a waiter with --wait {wait:?} --timeout {timeout:?} ended after {ended:?}:\n{outcome}"
        );
        assert!(
            matches!(outcome.code(), Some(69 | 75)),
            "a waiter that cannot have the lock in time exits 69 or 75:\n{outcome}"
        );
    }
    master.resume();
    drop(holder);
}

/// `--replicas`: a waiter granted the lock on a new master that has no replica yet (it
/// resyncs, or comes later) gives the grant back and keeps waiting while its `--wait` lasts,
/// then runs once a replica acknowledges; it does not end with 69 with its wait left.
#[test]
fn a_waiter_with_replicas_waits_for_a_replica_after_a_failover() {
    let mut fleet = Fleet::start(1);
    let url = fleet.url(0);
    let key = "late-replica";
    let holder = Redlock::without_url()
        .args(["--url", &url, "--timeout", TIMEOUT, "run", "--key", key])
        .args(["--ttl", "4s", "--replicas", "1", "--", "sleep", "3"])
        .timeout(Duration::from_secs(60))
        .spawn();
    let master = &fleet.group(0).master;
    wait_until("the holder's grant", Duration::from_secs(20), || {
        master.exists(key).then_some(())
    });
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            run_through(&url, key)
                .args([
                    "--ttl",
                    "4s",
                    "--replicas",
                    "1",
                    "--wait",
                    "60s",
                    "--",
                    "true",
                ])
                .timeout(Duration::from_secs(90))
                .spawn()
        })
        .collect();
    master.wait_until_waiting_on_server(key, waiters.len());
    std::thread::sleep(Duration::from_millis(600));
    // The new master's only other replica is frozen: it has no replica until it comes back.
    fleet.group(0).standby.pause();
    fleet.lose_master(0);
    fleet.wait_for_failover(0);
    wait_until(
        "a waiter's grant to go unacknowledged",
        Duration::from_secs(40),
        || {
            waiters
                .iter()
                .any(|w| w.stderr_contains("trying again while the wait lasts"))
                .then_some(())
        },
    );
    let group = fleet.group(0);
    group.standby.resume();
    let port = group.promotable.port().to_string();
    let _: () = group.standby.query(&["REPLICAOF", "127.0.0.1", &port]);
    for waiter in waiters {
        let outcome = waiter.wait();
        outcome.expect_code(0);
    }
    holder.wait();
}
