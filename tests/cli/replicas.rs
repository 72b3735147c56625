//! `--replicas N` (`REDLOCK_REPLICAS`): a grant, and each renewal, count only once N replicas
//! acknowledged them (WAIT behind the script, in the same round trip). A grant too few
//! acknowledge is given back and the run or `acquire` exits 69, saying how many replicas the
//! master has; a renewal too few acknowledge moves nothing, so the command is stopped at the
//! kill point (76); a server that refuses WAIT is its class (77 for an ACL), never a silent
//! downgrade; a quorum is refused (64). `status` and `doctor` show the replicas. What a
//! failover does with and without it is in `failover.rs`.

use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::process::send_signal;
use crate::support::{RedisServer, Redlock, child, says, wait_until};

const PASSWORD: &str = "replicas-Pa55word";

/// A master and a replica of it, in sync.
fn replicated() -> (RedisServer, RedisServer) {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]);
    crate::support::fleet::acknowledging(&master, 1);
    (master, replica)
}

#[test]
fn a_grant_no_replica_acknowledges_is_given_back_and_the_run_exits_69() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "3s", "--replicas", "1"])
        .args(["-c", "echo ran"])
        .exits_with(69);
    outcome.error_mentions(&["--replicas 1"]);
    outcome.error_mentions(&["no replica"]);
    outcome.error_mentions(&["given back"]);
    assert!(
        !outcome.stdout.contains("ran"),
        "the command ran\n{outcome}"
    );
    assert!(
        !server.exists("job"),
        "the grant was left behind\n{outcome}"
    );
}

#[test]
fn acquire_without_an_acknowledging_replica_exits_69_holding_nothing() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .env("REDLOCK_REPLICAS", "1")
        .args(["acquire", "--key", "job", "--ttl", "3s"])
        .exits_with(69);
    outcome.error_mentions(&["--replicas 1"]);
    assert!(outcome.stdout.is_empty(), "a token was printed\n{outcome}");
    assert!(
        !server.exists("job"),
        "the grant was left behind\n{outcome}"
    );
}

#[test]
fn with_a_replica_run_acquire_and_extend_go_ahead_and_the_replica_has_the_lock() {
    let (master, replica) = replicated();
    Redlock::new(&master)
        .args(["run", "--key", "job", "--ttl", "3s", "--replicas", "1"])
        .args(["-c", "true"])
        .exits_with(0);
    let acquired = Redlock::new(&master)
        .args([
            "acquire",
            "--key",
            "held",
            "--ttl",
            "30s",
            "--replicas",
            "1",
        ])
        .exits_with(0);
    let token = acquired
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    // Acknowledged: the replica had it when the answer came.
    assert_eq!(replica.get("held"), Some(token.clone()), "{acquired}");
    Redlock::new(&master)
        .env("REDLOCK_REPLICAS", "1")
        .args(["extend", "--key", "held", "--token", &token, "--ttl", "60s"])
        .exits_with(0);
    let left = replica.pttl("held").unwrap_or_default();
    assert!(
        left > Duration::from_secs(45),
        "the replica had not the renewal when extend returned: {left:?}"
    );
}

#[test]
fn a_renewal_no_replica_acknowledges_does_not_move_the_kill_point() {
    let (master, replica) = replicated();
    let mut run = Redlock::new(&master)
        .args(["run", "--key", "job", "--ttl", "3s", "--replicas", "1"])
        .args(["-c", child::HOLD])
        .spawn();
    run.expect_line("ready");
    // The replica stops acknowledging: every renewal renews the key on the master, and none
    // counts.
    send_signal(replica.pid(), libc::SIGSTOP);
    let outcome = run.wait();
    send_signal(replica.pid(), libc::SIGCONT);
    outcome.expect_code(76);
    outcome.last_error_mentions(says::LEASE_LOST);
    assert!(
        outcome.stderr.contains("--replicas 1") && outcome.stderr.contains("does not count"),
        "the renewals' failure does not say why\n{outcome}"
    );
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "the command outlived its unrenewed lease\n{outcome}"
    );
}

#[test]
fn a_waiters_grant_counts_only_once_a_replica_acknowledged_it() {
    let (master, replica) = replicated();
    let mut holder = Redlock::new(&master)
        .args(["run", "--key", "job", "--ttl", "10s", "--replicas", "1"])
        .args(["-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = Redlock::new(&master)
        .args([
            "-v",
            "run",
            "--key",
            "job",
            "--ttl",
            "10s",
            "--replicas",
            "1",
        ])
        .args(["--wait", "10s", "-c", "echo ran"])
        .spawn();
    wait_until("the waiter to queue", Duration::from_secs(10), || {
        waiter.stderr_contains("waiting for").then_some(())
    });
    send_signal(replica.pid(), libc::SIGSTOP);
    holder.close_stdin();
    holder.exits_with(0);
    let outcome = waiter.wait();
    send_signal(replica.pid(), libc::SIGCONT);
    outcome.expect_code(69);
    outcome.last_error_mentions(&["--replicas 1"]);
    assert!(!outcome.stdout.contains("ran"), "the waiter ran\n{outcome}");
    assert!(
        !master.exists("job"),
        "the grant was left behind\n{outcome}"
    );
}

#[test]
fn a_server_that_refuses_wait_ends_the_run_with_77_and_keeps_nothing() {
    let (master, _replica) = replicated();
    master.acl_setuser(
        "cron",
        &["on", &format!(">{PASSWORD}"), "~*", "&*", "+@all", "-wait"],
    );
    let outcome = Redlock::without_url()
        .args(["--url", &master.url_with_user("cron", PASSWORD)])
        .args(["run", "--key", "job", "--ttl", "3s", "--replicas", "1"])
        .args(["-c", "echo ran"])
        .exits_with(77);
    outcome.error_mentions(&["+wait"]);
    outcome.never_shows(PASSWORD);
    assert!(
        !outcome.stdout.contains("ran"),
        "the command ran\n{outcome}"
    );
    assert!(
        !master.exists("job"),
        "the grant was left behind\n{outcome}"
    );
}

#[test]
fn replicas_with_a_quorum_is_a_usage_error_before_anything_is_contacted() {
    for args in [
        &[
            "run",
            "--key",
            "k",
            "--ttl",
            "3s",
            "--replicas",
            "1",
            "--",
            "true",
        ][..],
        &["acquire", "--key", "k", "--ttl", "3s", "--replicas", "1"],
        &[
            "extend",
            "--key",
            "k",
            "--token",
            "t",
            "--ttl",
            "3s",
            "--replicas",
            "1",
        ],
        &["doctor", "--replicas", "1"],
    ] {
        let outcome = Redlock::without_url()
            .args([
                "--url",
                "redis://127.0.0.1:1",
                "--url",
                "redis://127.0.0.1:2",
            ])
            .args(args)
            .exits_with(64);
        outcome.error_mentions(&["--replicas"]);
        outcome.error_mentions(&["quorum"]);
    }
}

#[test]
fn status_shows_the_replicas_and_a_read_only_user_gets_a_note() {
    let (master, replica) = replicated();
    let outcome = Redlock::new(&master).args(["status", "job"]).exits_with(1);
    let line = outcome
        .stdout
        .lines()
        .find(|l| l.starts_with("replication"))
        .unwrap_or_else(|| outcome.fail("no replication line"));
    assert!(
        line.contains("1 replica connected") && line.contains(&replica.port().to_string()),
        "{line}"
    );
    let outcome = Redlock::new(&master)
        .args(["status", "--json", "job"])
        .exits_with(1);
    let doc = Json::parse(outcome.stdout.trim_end()).expect("status --json");
    let servers = doc.items("replication");
    assert_eq!(servers.len(), 1, "{doc}");
    assert_eq!(servers[0].str("role"), "master", "{doc}");
    assert_eq!(servers[0].items("replicas").len(), 1, "{doc}");

    master.acl_setuser(
        "reader",
        &["on", &format!(">{PASSWORD}"), "~*", "&*", "-@all", "+@read"],
    );
    let outcome = Redlock::without_url()
        .args(["--url", &master.url_with_user("reader", PASSWORD)])
        .args(["status", "job"])
        .exits_with(1);
    assert!(
        outcome
            .stdout
            .lines()
            .any(|l| l.starts_with("replication") && l.contains("+info")),
        "a user that may not run INFO is not told why the replicas are not shown\n{outcome}"
    );
}

#[test]
fn status_of_a_lone_server_says_nothing_of_replication() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    assert!(
        !outcome.stdout.contains("replication"),
        "a server without replicas has nothing to say about them\n{outcome}"
    );
}

#[test]
fn doctor_warns_of_replicas_without_replicas_and_fails_when_too_few_acknowledge() {
    let (master, _replica) = replicated();
    let finding = |outcome: &crate::support::Outcome, verdict: &str| {
        outcome
            .stdout
            .lines()
            .find(|l| l.starts_with(verdict) && l.contains(" replication:"))
            .map(str::to_owned)
            .unwrap_or_else(|| outcome.fail(&format!("no `{verdict} replication` line")))
    };
    let outcome = Redlock::new(&master).arg("doctor").exits_with(1);
    assert!(
        finding(&outcome, "warn").contains("--replicas 1"),
        "{outcome}"
    );
    let outcome = Redlock::new(&master)
        .args(["doctor", "--replicas", "1"])
        .exits_with(1);
    assert!(finding(&outcome, "ok").contains("1 replica"), "{outcome}");
    // With every replica the master has, the guarantee holds through every partition.
    assert!(
        finding(&outcome, "ok").contains("exclusive through a master crash and every partition"),
        "{outcome}"
    );
    let outcome = Redlock::new(&master)
        .env("REDLOCK_REPLICAS", "2")
        .arg("doctor")
        .exits_with(69);
    assert!(
        finding(&outcome, "fail").contains("--replicas 2"),
        "{outcome}"
    );
}

#[test]
fn shapes_and_once_per_wait_for_the_replica_too() {
    let (master, replica) = replicated();
    for shape in [&["--shared"][..], &["--slots", "2"]] {
        Redlock::new(&master)
            .args(["run", "--key", "shaped", "--ttl", "3s", "--replicas", "1"])
            .args(shape)
            .args(["-c", "true"])
            .exits_with(0);
    }
    let once = ["run", "--key", "nightly", "--ttl", "3s", "--once-per", "1h"];
    crate::support::poll::clear_of_the_hours_edge();
    Redlock::new(&master)
        .args(once)
        .args(["--replicas", "1", "-c", "true"])
        .exits_with(0);
    // Acknowledged: the window's record is on the replica, so a failover keeps the window.
    let record = crate::support::companion_key("nightly", "once");
    assert!(replica.exists(&record), "the replica has no {record}");
    // Without an acknowledging replica, the window is given back with the grant.
    send_signal(replica.pid(), libc::SIGSTOP);
    let outcome = Redlock::new(&master)
        .args(["run", "--key", "other", "--ttl", "3s", "--once-per", "1h"])
        .args(["--replicas", "1", "-c", "echo ran"])
        .run();
    send_signal(replica.pid(), libc::SIGCONT);
    outcome.expect_code(69);
    assert!(!outcome.stdout.contains("ran"), "{outcome}");
    Redlock::new(&master)
        .args(["run", "--key", "other", "--ttl", "3s", "--once-per", "1h"])
        .args(["--replicas", "1", "-c", "echo ran"])
        .exits_with(0);
}

#[test]
fn on_a_cluster_the_wait_goes_to_the_shard_that_ran_the_script() {
    let cluster = crate::support::RedisCluster::start_with_replicas();
    let keys = cluster.keys_on_every_master("shard");
    let (stalled_key, stalled_master) = &keys[0];
    let (other_key, _) = &keys[1];
    let stalled = cluster.node(cluster.replica_of(*stalled_master));
    send_signal(stalled.pid(), libc::SIGSTOP);
    let run = |key: &str| {
        Redlock::without_url()
            .args(["--url", &cluster.url(), "run", "--key", key, "--ttl", "3s"])
            .args(["--replicas", "1", "-c", "true"])
            .run()
    };
    let on_stalled = run(stalled_key);
    let on_other = run(other_key);
    send_signal(stalled.pid(), libc::SIGCONT);
    // The shard whose replica is stopped cannot acknowledge, whatever the other shards' can.
    on_stalled.expect_code(69);
    on_stalled.error_mentions(&[&stalled.port().to_string()]);
    on_other.expect_code(0);
    assert!(
        !cluster.owner_node(stalled_key).exists(stalled_key),
        "the grant was left behind\n{on_stalled}"
    );
    // `status` shows every master's replicas.
    let status = Redlock::without_url()
        .args(["--url", &cluster.url(), "status", other_key])
        .exits_with(1);
    let masters = status
        .stdout
        .lines()
        .filter(|l| l.starts_with("replication") && l.contains("1 replica connected"))
        .count();
    assert_eq!(masters, 3, "{status}");
}

#[test]
fn status_says_which_replicas_setting_the_holder_runs_with() {
    let (master, _replica) = replicated();
    for replicas in [None, Some("1")] {
        let mut redlock = Redlock::new(&master).args(["run", "--key", "job", "--ttl", "10s"]);
        if let Some(n) = replicas {
            redlock = redlock.args(["--replicas", n]);
        }
        let mut run = redlock.args(["-c", child::HOLD]).spawn();
        run.expect_line("ready");
        let lock = crate::support::lock_status(&master, "job");
        let text = Redlock::new(&master).args(["status", "job"]).run();
        run.close_stdin();
        run.exits_with(0);
        match replicas {
            Some(n) => {
                assert_eq!(lock.int("holder.replicas").to_string(), n, "{lock}");
                assert!(
                    text.stdout
                        .contains(&format!("replicas  --replicas {n}: each renewal")),
                    "{text}"
                );
            }
            None => {
                assert!(lock.expect("holder.replicas").is_null(), "{lock}");
                assert!(!text.stdout.contains("replicas  --"), "{text}");
            }
        }
    }
}
