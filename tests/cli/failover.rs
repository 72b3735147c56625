//! A failover must not let a second holder run beside the first (`--replicas`, docs/guide.md
//! "Beyond one Redis"). Replication is asynchronous: a master that dies takes with it what its
//! replicas had not received yet, and the replica promoted in its place may not have the lock
//! (taken just before) or its last renewal.
//!
//! Each round plays that on a service of its own: a contender takes the lock and runs a long
//! critical section, two more wait for it, and the master's host goes away (its links cut,
//! then the master killed) at a random moment shortly after the first contender's command
//! started, or shortly after its first renewal. The replica that is promoted lags by 300 ms,
//! and the one that could acknowledge sooner is never promoted, so the promoted one is the
//! first to acknowledge (see `support/fleet.rs` and `RedisCluster::start_with_lagging_replicas`).
//! The sections oracle (`support/sections.rs`) then reads who ran when.
//!
//! Without `--replicas`, the grant a moment old is lost in the failover, and the next
//! contender runs while the first still does: the test asserts it saw that double run, so
//! that it cannot pass for want of a failover that bites. With `--replicas 1`, no two
//! sections overlap in any round, and some contender runs after the failover in some round.
//! The rounds are bounded (three each, one per service or shard), and print what they saw.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::cluster::RedisCluster;
use crate::support::fleet::Fleet;
use crate::support::redlock::Running;
use crate::support::sections::{Dice, SECTION, Section, expect_fences_in_start_order};
use crate::support::{RedisServer, Redlock, TempDir};

/// The lease: renewed every 4 s, so the first renewal comes well after the failover is over.
const TTL: &str = "12s";
/// The first contender's section: long enough to outlive the failover and a renewal.
const LONG_TICKS: &str = "50";
/// The others' sections.
const SHORT_TICKS: &str = "3";
const TICK: &str = "0.1";
/// How long after the moment a round aims at (a command's start, a renewal) the master goes:
/// within the promoted replica's lag, so that without `--replicas` what came last is lost.
const WITHIN: u64 = 250;
const ROUNDS: usize = 3;

/// Where a round's lock lives, and how its master is lost.
trait Topology {
    fn url(&self, round: usize) -> String;
    fn key(&self, round: usize) -> String;
    /// The master holding the round's key, on a connection of the test's own.
    fn master(&self, round: usize) -> &RedisServer;
    fn lose_master(&mut self, round: usize);
    /// Waits until the round's key is served by the promoted replica; how long that took.
    fn wait_for_failover(&self, round: usize) -> Duration;
}

impl Topology for Fleet {
    fn url(&self, round: usize) -> String {
        Fleet::url(self, round)
    }

    fn key(&self, _round: usize) -> String {
        "failover".to_string()
    }

    fn master(&self, round: usize) -> &RedisServer {
        &self.group(round).master
    }

    fn lose_master(&mut self, round: usize) {
        Fleet::lose_master(self, round);
    }

    fn wait_for_failover(&self, round: usize) -> Duration {
        Fleet::wait_for_failover(self, round)
    }
}

/// A cluster's rounds use a key on a shard each.
struct Shards {
    cluster: RedisCluster,
    keys: Vec<(String, usize)>,
}

impl Topology for Shards {
    fn url(&self, _round: usize) -> String {
        self.cluster.url()
    }

    fn key(&self, round: usize) -> String {
        self.keys[round].0.clone()
    }

    fn master(&self, round: usize) -> &RedisServer {
        self.cluster.node(self.keys[round].1)
    }

    fn lose_master(&mut self, round: usize) {
        self.cluster.lose_master(self.keys[round].1);
    }

    fn wait_for_failover(&self, round: usize) -> Duration {
        let (key, master) = &self.keys[round];
        self.cluster.wait_for_failover(*master, key)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aim {
    /// Shortly after the first contender's command started.
    Start,
    /// Shortly after its first renewal reached the master.
    Renewal,
}

/// What one round saw.
#[derive(Debug)]
struct Round {
    aim: Aim,
    /// From the moment aimed at to the master's loss.
    after: Duration,
    /// From the master's loss until the promoted replica served the key.
    failover: Duration,
    sections: Vec<Section>,
    exits: Vec<Option<i32>>,
}

impl Round {
    /// The longest time two sections ran at once.
    fn overlap(&self) -> Option<Duration> {
        let mut worst = None;
        for (i, a) in self.sections.iter().enumerate() {
            for b in &self.sections[i + 1..] {
                if a.last >= b.first {
                    let both = Duration::from_micros(a.last.min(b.last) - b.first);
                    worst = Some(worst.map_or(both, |w: Duration| w.max(both)));
                }
            }
        }
        worst
    }
}

/// A contender whose section lasts `ticks` tenths of a second; with `-v`, so that it says
/// when it waits.
fn contender(url: &str, key: &str, replicas: Option<&str>, log: &Path, ticks: &str) -> Running {
    let mut redlock = Redlock::without_url()
        .args(["-v", "--url", url, "--timeout", "10s", "run", "--key", key])
        .args(["--ttl", TTL, "--wait", "40s"]);
    if let Some(n) = replicas {
        redlock = redlock.args(["--replicas", n]);
    }
    redlock
        .env("STRESS_LOG", log)
        .env("TICKS", ticks)
        .env("TICK", TICK)
        .arg("--")
        .args(SECTION)
        .timeout(Duration::from_secs(60))
        .spawn()
}

/// Polls every millisecond (the moments matter to a few) until `check` holds.
fn poll(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) -> Instant {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn play(
    topology: &mut impl Topology,
    round: usize,
    replicas: Option<&str>,
    aim: Aim,
    dice: &mut Dice,
) -> Round {
    let scratch = TempDir::new("failover");
    let log = scratch.join("sections.log");
    let (url, key) = (topology.url(round), topology.key(round));
    let first = contender(&url, &key, replicas, &log, LONG_TICKS);
    // The others queue once the lock is taken: a waiter's first attempt that the failover
    // cuts ends it (69, as any run that cannot reach Redis before it starts), and a round
    // wants contenders left to run after the failover.
    let master = topology.master(round);
    poll("the first grant", Duration::from_secs(20), || {
        master.exists(&key)
    });
    let others: Vec<Running> = (0..2)
        .map(|_| contender(&url, &key, replicas, &log, SHORT_TICKS))
        .collect();
    let started = poll(
        "the first contender's command to start",
        Duration::from_secs(20),
        || std::fs::read_to_string(&log).is_ok_and(|text| text.contains(" start")),
    );
    poll("the others to queue", Duration::from_secs(20), || {
        others.iter().all(|o| o.stderr_contains("waiting for"))
    });
    let moment = match aim {
        Aim::Start => started,
        Aim::Renewal => {
            let mut last = master.pttl(&key).unwrap_or_default();
            poll("the first renewal", Duration::from_secs(20), || {
                let now = master.pttl(&key).unwrap_or_default();
                let renewed = now > last + Duration::from_millis(500);
                last = now;
                renewed
            })
        }
    };
    let at = moment + Duration::from_millis(dice.below(WITHIN));
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
    let after = moment.elapsed();
    topology.lose_master(round);
    let failover = topology.wait_for_failover(round);
    let exits = std::iter::once(first)
        .chain(others)
        .map(|running| {
            let outcome = running.wait();
            if outcome.code() != Some(0) {
                println!("{}", outcome.stderr.trim_end());
            }
            outcome.code()
        })
        .collect();
    let sections = expect_fences_in_start_order(&log);
    Round {
        aim,
        after,
        failover,
        sections,
        exits,
    }
}

fn rounds(topology: &mut impl Topology, replicas: Option<&str>) -> Vec<Round> {
    let seed = Dice::seed_from_clock();
    println!("failover rounds, seed {seed}");
    let mut dice = Dice::new(seed);
    (0..ROUNDS)
        .map(|round| {
            let aim = if round % 2 == 0 {
                Aim::Start
            } else {
                Aim::Renewal
            };
            let played = play(topology, round, replicas, aim, &mut dice);
            println!(
                "round {round} ({:?} + {:?}): failover in {:?}, {} sections, overlap {:?}, \
                 exits {:?}",
                played.aim,
                played.after,
                played.failover,
                played.sections.len(),
                played.overlap(),
                played.exits
            );
            played
        })
        .collect()
}

#[track_caller]
fn expect_a_double_run(rounds: &[Round]) {
    assert!(
        rounds.iter().any(|r| r.overlap().is_some()),
        "no round showed two sections at once without --replicas: the failovers did not lose \
         a grant, and the test proves nothing\n{rounds:#?}"
    );
}

#[track_caller]
fn expect_no_double_run(rounds: &[Round]) {
    for round in rounds {
        assert!(
            round.overlap().is_none(),
            "two sections ran at once with --replicas 1:\n{round:#?}"
        );
    }
    assert!(
        rounds.iter().any(|r| r.sections.len() >= 2),
        "no contender ran after a failover: the rounds checked nothing\n{rounds:#?}"
    );
}

#[test]
fn without_replicas_a_sentinel_failover_lets_a_second_holder_run() {
    let mut fleet = Fleet::start(ROUNDS);
    let rounds = rounds(&mut fleet, None);
    expect_a_double_run(&rounds);
}

#[test]
fn with_replicas_no_sentinel_failover_lets_a_second_holder_run() {
    let mut fleet = Fleet::start(ROUNDS);
    let rounds = rounds(&mut fleet, Some("1"));
    expect_no_double_run(&rounds);
}

fn shards() -> Shards {
    let cluster = RedisCluster::start_with_lagging_replicas();
    let keys = cluster.keys_on_every_master("failover");
    Shards { cluster, keys }
}

#[test]
fn without_replicas_a_cluster_failover_lets_a_second_holder_run() {
    let mut shards = shards();
    let rounds = rounds(&mut shards, None);
    expect_a_double_run(&rounds);
}

#[test]
fn with_replicas_no_cluster_failover_lets_a_second_holder_run() {
    let mut shards = shards();
    let rounds = rounds(&mut shards, Some("1"));
    expect_no_double_run(&rounds);
}
