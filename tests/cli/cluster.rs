//! `redis+cluster://` URLs: a lock on Redis Cluster, reached through the redis crate's own
//! cluster support (docs/guide.md, "Beyond one Redis") from one or more seed nodes. The lock key
//! and its companions share one hash slot (docs/design.md, "Data in Redis"), so each lock lives
//! whole on the master owning that slot; redlock follows the cluster when a slot moves, and
//! when a replica takes over its master's slots in a failover.

use std::thread;
use std::time::{Duration, Instant};

use crate::support::json::{Document, Json};
use crate::support::poll::POLL_INTERVAL;
use crate::support::process::is_running;
use crate::support::redlock::Running;
use crate::support::{
    LockKeys, Outcome, RedisCluster, Redlock, TempDir, child, free_port, holds_throughout, says,
    wait_until,
};

/// `redlock --url URL`, for a cluster URL.
fn redlock(url: &str) -> Redlock {
    Redlock::without_url().args(["--url", url])
}

/// Starts a run on `key` through `url`, its command printing its token and `ready`, then
/// holding until the test closes stdin. Returns the run and the token.
fn hold(url: &str, key: &str, ttl: &str) -> (Running, String) {
    let mut holder = redlock(url)
        .args(["run", "--key", key, "--ttl", ttl])
        .args(["-c", child::HOLD_AND_PRINT_TOKEN])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    (holder, token)
}

/// Lets a holder's command finish and expects the run to succeed.
fn finish(mut holder: Running) -> Outcome {
    holder.close_stdin();
    holder.exits_with(0)
}

#[test]
fn cluster_harness_spreads_the_slots_over_three_masters_that_agree() {
    let cluster = RedisCluster::start();
    let keys = cluster.keys_on_every_master("job");
    assert_eq!(keys.len(), 3, "{keys:?}");
    for (key, owner) in &keys {
        let slot = cluster.slot(key);
        for viewer in 0..3 {
            assert_eq!(
                cluster.owner_of_slot(slot, viewer),
                Some(*owner),
                "node {viewer} disagrees about who owns {key} (slot {slot})"
            );
        }
        let _: () = cluster.owner_node(key).query(&["SET", key, "value"]);
    }
}

#[test]
fn run_through_a_single_seed_locks_keys_on_every_master() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    for (key, owner) in cluster.keys_on_every_master("job") {
        let (holder, token) = hold(&url, &key, "2s");
        assert_eq!(
            cluster.node(owner).get(&key).as_deref(),
            Some(token.as_str()),
            "{key} is not held with the run's token on node {owner}, which owns its slot"
        );
        finish(holder);
        assert!(
            !cluster.node(owner).exists(&key),
            "{key} is still held after the run"
        );
    }
}

#[test]
fn lock_and_its_companion_keys_live_on_the_master_owning_the_locks_slot() {
    let cluster = RedisCluster::start();
    let (holder, _) = hold(&cluster.seed_url(0), "report:daily", "2s");
    let node = cluster.owner_node("report:daily");
    let keys = LockKeys::of("report:daily");
    for key in [&keys.lock, &keys.fence, &keys.holder] {
        assert_eq!(
            cluster.owner(key),
            cluster.owner("report:daily"),
            "{key} is not in the lock's slot"
        );
        assert!(node.exists(key), "{key} is not on the lock's master");
    }
    finish(holder);
}

#[test]
fn lock_held_in_the_cluster_makes_another_run_exit_75() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let (holder, token) = hold(&url, "job", "2s");
    let outcome = redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(75);
    outcome.error_mentions(says::BUSY);
    if outcome.stdout.contains("started") {
        outcome.fail("the command ran although the lock was held");
    }
    assert_eq!(
        cluster.owner_node("job").get("job").as_deref(),
        Some(token.as_str())
    );
    finish(holder);
}

#[test]
fn seed_that_does_not_own_the_keys_slot_leads_redlock_to_the_owner() {
    let cluster = RedisCluster::start();
    let seed = cluster.not_owner("job");
    let (holder, token) = hold(&cluster.seed_url(seed), "job", "2s");
    assert_eq!(
        cluster.owner_node("job").get("job").as_deref(),
        Some(token.as_str()),
        "the lock is not on the slot's owner"
    );
    finish(holder);
}

#[test]
fn status_of_a_lock_held_in_the_cluster_exits_0() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let (holder, _) = hold(&url, "job", "30s");
    let outcome = redlock(&url).args(["status", "job"]).exits_with(0);
    if !outcome
        .stdout
        .lines()
        .any(|l| l.starts_with("job: held by "))
    {
        outcome.fail("expected a line `job: held by ...`");
    }
    finish(holder);
}

#[test]
fn status_all_lists_the_locks_of_every_master() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let keys = cluster.keys_on_every_master("job");
    for (key, _) in &keys {
        redlock(&url)
            .args(["acquire", "--key", key, "--ttl", "30s"])
            .exits_with(0);
    }
    let outcome = redlock(&url)
        .args(["status", "--all", "--json"])
        .exits_with(0);
    let document = Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("status --json printed no JSON document: {e}")));
    let listed: Vec<&str> = document
        .items("locks")
        .iter()
        .map(|lock| lock.str("key"))
        .collect();
    for (key, owner) in &keys {
        if !listed.contains(&key.as_str()) {
            outcome.fail(&format!("{key}, on node {owner}, is not listed"));
        }
    }
}

#[test]
fn metrics_and_log_all_list_the_locks_of_every_master_once() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let keys = cluster.keys_on_every_master("job");
    for (key, _) in &keys {
        redlock(&url)
            .args(["run", "--key", key, "--ttl", "30s", "--", "true"])
            .exits_with(0);
    }
    let metrics = redlock(&url).args(["metrics", "--all"]).exits_with(0);
    let log = redlock(&url).args(["log", "--all", "--json"]).exits_with(0);
    for (key, owner) in &keys {
        let samples = metrics
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("redlock_runs_total{{key=\"{key}\"}} ")))
            .count();
        if samples != 1 {
            metrics.fail(&format!(
                "{key}, on node {owner}, has {samples} runs samples"
            ));
        }
        let entries = log
            .stdout
            .lines()
            .filter(|l| Json::parse(l).expect("a JSON line").str("key") == key)
            .count();
        if entries != 2 {
            log.fail(&format!(
                "{key}, on node {owner}, has {entries} entries, not 2"
            ));
        }
    }
}

#[test]
fn lock_follows_its_slot_to_another_master_with_its_fence() {
    let cluster = RedisCluster::start();
    let from = cluster.owner("job");
    let to = (from + 1) % 3;
    let run = |seed: usize| {
        let outcome = redlock(&cluster.seed_url(seed))
            .args([
                "run",
                "--key",
                "job",
                "--ttl",
                "2s",
                "-c",
                child::PRINT_LOCK_ENV,
            ])
            .exits_with(0);
        outcome.printed_fence()
    };
    let before = cluster.node(from).micros();
    let first = run(from);
    crate::support::expect_fresh_fence(first, before);

    cluster.migrate_slot(cluster.slot("job"), from, to);
    assert_eq!(
        cluster.owner("job"),
        to,
        "the harness did not move the slot"
    );
    // The old owner, as the seed, answers for this slot only with MOVED.
    let second = run(from);
    assert!(
        second > first,
        "the fence went from {first} to {second} across the migration"
    );
    let fence_key = LockKeys::of("job").fence;
    assert_eq!(cluster.node(to).get(&fence_key), Some(second.to_string()));
}

#[test]
fn lease_survives_its_slot_moving_to_another_master_during_the_run() {
    let cluster = RedisCluster::start();
    let from = cluster.owner("job");
    let to = (from + 1) % 3;
    let (holder, token) = hold(&cluster.seed_url(from), "job", "1s");

    cluster.migrate_slot(cluster.slot("job"), from, to);
    // Longer than the TTL: the renewals reach the new owner.
    holds_throughout(
        "the lock to stay held on its new master",
        Duration::from_millis(1500),
        || match cluster.node(to).get("job") {
            Some(value) if value == token => Ok(()),
            other => Err(format!("the new master has {other:?}")),
        },
    );
    finish(holder);
    assert!(!cluster.node(to).exists("job"), "the lock was not released");
}

/// Clients subscribed to `channel` or to one of its per-waiter channels (`channel:TICKET`) on
/// any node, by SUBSCRIBE or SSUBSCRIBE.
fn subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    let pattern = format!("{}*", crate::support::redis_server::glob_escape(channel));
    cluster
        .nodes()
        .iter()
        .map(|node| {
            [("CHANNELS", "NUMSUB"), ("SHARDCHANNELS", "SHARDNUMSUB")]
                .iter()
                .map(|(list, count)| {
                    let channels: Vec<String> = node.query(&["PUBSUB", list, &pattern]);
                    channels
                        .iter()
                        .filter(|c| *c == channel || c.starts_with(&format!("{channel}:")))
                        .map(|c| {
                            let reply: Vec<redis::Value> = node.query(&["PUBSUB", count, c]);
                            match reply.get(1) {
                                Some(redis::Value::Int(n)) => *n,
                                _ => 0,
                            }
                        })
                        .sum::<i64>()
                })
                .sum::<i64>()
        })
        .sum()
}

#[test]
fn waiter_in_the_cluster_is_notified_when_the_holder_finishes() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    let (holder, _) = hold(&url, "job", "30s");
    let mut waiter = redlock(&url)
        .args(["run", "--key", "job", "--ttl", "30s", "--wait", "20s"])
        .args(["-c", "echo started"])
        .spawn();
    let channel = LockKeys::of("job").released_channel;
    wait_until(
        "the waiter to subscribe to the release channel",
        Duration::from_secs(10),
        || (subscribers(&cluster, &channel) > 0).then_some(()),
    );

    let released = Instant::now();
    let holder_outcome = finish(holder);
    let started = waiter.expect_line("started");
    waiter.exits_with(0);
    let delay = started - released;
    if delay >= Duration::from_secs(2) {
        holder_outcome.fail(&format!(
            "the waiter started {delay:?} after the holder finished"
        ));
    }
}

#[test]
fn unreachable_cluster_seed_exits_69() {
    let url = format!("redis+cluster://127.0.0.1:{}", free_port());
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(69)
        .error_mentions(says::UNAVAILABLE);
}

/// Prints its token and fence, then `ready`, then holds until the test closes stdin.
const HOLD_PRINTING_TOKEN_AND_FENCE: &str =
    r#"echo "token=$REDLOCK_TOKEN"; echo "fence=$REDLOCK_FENCE"; echo ready; read _ || true"#;

/// The bound on a run caught in a failover, from start to exit.
const FAILOVER_RUN_TIMEOUT: Duration = Duration::from_secs(15);

/// Like [`hold`], and also returns the run's fence.
fn hold_with_fence(url: &str, key: &str) -> (Running, String, i64) {
    let mut holder = redlock(url)
        .args(["run", "--key", key, "--ttl", "2s"])
        .args(["-c", HOLD_PRINTING_TOKEN_AND_FENCE])
        .spawn();
    let token = holder.expect_line_starting("token=");
    let fence = holder.expect_line_starting("fence=");
    holder.expect_line("ready");
    let fence = fence
        .parse()
        .unwrap_or_else(|e| panic!("REDLOCK_FENCE {fence:?} is no integer: {e}"));
    (holder, token, fence)
}

#[test]
fn cluster_harness_with_replicas_fails_a_shard_over_to_its_replica() {
    let cluster = RedisCluster::start_with_replicas();
    assert_eq!(cluster.nodes().len(), 6);
    let slot = cluster.slot("job");
    let old = cluster.owner("job");
    let replica = cluster.replica_of(old);
    let _: () = cluster.node(old).query(&["SET", "job", "value"]);
    cluster.wait_until_replicated(old);

    let new = cluster.fail_over(slot);
    assert_eq!(
        new, replica,
        "the harness promoted another node than the replica"
    );
    for viewer in 0..cluster.nodes().len() {
        assert_eq!(
            cluster.owner_of_slot(slot, viewer),
            Some(new),
            "node {viewer} does not see slot {slot} on the promoted replica"
        );
    }
    assert_eq!(
        cluster.replica_of(new),
        old,
        "the old master is not its replica"
    );
    assert_eq!(cluster.node(new).get("job").as_deref(), Some("value"));
}

#[test]
fn a_run_after_a_cluster_failover_takes_the_lock_on_the_new_master() {
    let cluster = RedisCluster::start_with_replicas();
    let old = cluster.owner("job");
    let outside = cluster.master_outside_shard_of("job");
    let fence_key = LockKeys::of("job").fence;
    let (holder, _, first) = hold_with_fence(&cluster.seed_url(outside), "job");
    finish(holder);
    assert_eq!(
        cluster.node(old).get(&fence_key),
        Some(first.to_string()),
        "the fence counter is not on the shard's master"
    );
    cluster.wait_until_replicated(old);

    let new = cluster.fail_over(cluster.slot("job"));
    assert_eq!(
        cluster.node(new).get(&fence_key),
        Some(first.to_string()),
        "the fence counter did not reach the replica before the failover"
    );
    // A seed outside the shard, then the old master itself (now a replica) as the only seed.
    let mut last = first;
    for seed in [outside, old] {
        let (holder, token, fence) = hold_with_fence(&cluster.seed_url(seed), "job");
        assert_eq!(
            cluster.node(new).get("job").as_deref(),
            Some(token.as_str()),
            "seeded by node {seed}, the run does not hold the lock on the new master"
        );
        assert!(
            fence > last,
            "seeded by node {seed}, the fence went from {last} to {fence} across the failover"
        );
        last = fence;
        finish(holder);
        assert!(
            !cluster.node(new).exists("job"),
            "seeded by node {seed}, the run did not release the lock on the new master"
        );
    }
    assert_eq!(cluster.node(new).get(&fence_key), Some(last.to_string()));
}

#[test]
fn a_run_during_a_cluster_failover_ends_in_0_or_76_and_never_hangs() {
    let cluster = RedisCluster::start_with_replicas();
    let old = cluster.owner("job");
    let mut holder = redlock(&cluster.seed_url(old))
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(["-c", child::HOLD_PRINTING_PID])
        .timeout(FAILOVER_RUN_TIMEOUT)
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    cluster.fail_over(cluster.slot("job"));
    // Longer than the TTL: by then redlock has renewed its lease on the new master, or given
    // it up.
    let deadline = Instant::now() + Duration::from_secs(3);
    while is_running(holder.pid()) && Instant::now() < deadline {
        thread::sleep(POLL_INTERVAL);
    }
    holder.close_stdin();
    let outcome = holder.wait();
    match outcome.code() {
        Some(0) => {}
        Some(76) => {
            outcome.last_error_mentions(says::LEASE_LOST);
        }
        _ => outcome.fail("expected exit status 0 or 76 after a failover"),
    }
    if is_running(child) {
        outcome.fail(&format!(
            "the command (pid {child}) outlived the run that started it"
        ));
    }
}

#[test]
fn pause_works_per_key_in_the_cluster_and_prefix_wide_only_with_a_hash_tagged_prefix() {
    let cluster = RedisCluster::start();
    let url = cluster.seed_url(0);
    redlock(&url)
        .args(["pause", "job", "--reason", "cluster maintenance"])
        .exits_with(0);
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(75)
        .error_mentions(&["cluster maintenance"]);
    redlock(&url).args(["resume", "job"]).exits_with(0);
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    // Without a hash tag the prefix-wide record could not share the locks' slot: refused.
    redlock(&url)
        .args(["--prefix", "prod:", "pause", "--all"])
        .exits_with(64)
        .error_mentions(&["hash tag"]);
    // With one it does, and every key under the prefix is paused.
    redlock(&url)
        .args(["--prefix", "jobs:{nightly}:", "pause", "--all"])
        .exits_with(0);
    for key in ["a", "b"] {
        redlock(&url)
            .args([
                "--prefix",
                "jobs:{nightly}:",
                "run",
                "--key",
                key,
                "--ttl",
                "2s",
            ])
            .args(["--", "true"])
            .exits_with(75)
            .error_mentions(&["paused"]);
    }
    redlock(&url)
        .args(["--prefix", "jobs:{nightly}:", "resume", "--all"])
        .exits_with(0);
    redlock(&url)
        .args([
            "--prefix",
            "jobs:{nightly}:",
            "run",
            "--key",
            "a",
            "--ttl",
            "2s",
        ])
        .args(["--", "true"])
        .exits_with(0);
}

#[test]
fn a_cluster_that_refuses_the_password_exits_77_saying_which_flag() {
    let cluster = RedisCluster::start();
    for node in cluster.nodes() {
        node.config_set("requirepass", "cluster-pw");
    }
    let scratch = TempDir::new("cluster-pw");
    let (good, bad) = (scratch.join("good"), scratch.join("bad"));
    std::fs::write(&good, "cluster-pw\n").expect("write the password file");
    std::fs::write(&bad, "not-the-clusters\n").expect("write the password file");
    redlock(&cluster.url())
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["requires a password", "--password-file"])
        .never_shows("started");
    redlock(&cluster.url())
        .arg("--password-file")
        .arg(&bad)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["refused the password", "--password-file"])
        .never_shows("not-the-clusters")
        .never_shows("started");
    redlock(&cluster.url())
        .arg("--password-file")
        .arg(&good)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
}
