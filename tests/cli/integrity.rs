//! Fences, leases and records that stay true through data loss and races: a server restarted
//! without persistence, a flush, quorum nodes restarted one at a time, an acquire that timed
//! out, a lease lost between two renewals, late renewals, companion keys given as locks, and
//! secrets in the command; and a fence counter that expired.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::json::Document;
use crate::support::sections::{
    Dice, SECTION, expect_exclusive_sections, expect_fences_in_start_order, read_sections,
};
use crate::support::{
    LockKeys, Outcome, RedisQuorum, RedisSentinel, RedisServer, Redlock, TempDir, child,
    companion_key, expect_fresh_fence, holds_throughout, lock_status, says, wait_until,
};

/// A short run that prints its lock environment; returns its fence.
fn fence_of_a_run(redlock: Redlock) -> i64 {
    let outcome = redlock
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
}

#[test]
fn fences_keep_growing_across_a_restart_without_persistence_and_a_flush() {
    let mut server = RedisServer::start();
    let before = server.micros();
    let first = fence_of_a_run(Redlock::new(&server));
    expect_fresh_fence(first, before);
    let second = fence_of_a_run(Redlock::new(&server));
    assert!(second > first, "fence {second} after {first}");

    server.restart();
    assert!(
        !server.exists(&LockKeys::of("job").fence),
        "the restart kept data"
    );
    let third = fence_of_a_run(Redlock::new(&server));
    assert!(
        third > second,
        "after a restart: fence {third} after {second}"
    );

    let _: () = server.query(&["FLUSHALL"]);
    let fourth = fence_of_a_run(Redlock::new(&server));
    assert!(
        fourth > third,
        "after FLUSHALL: fence {fourth} after {third}"
    );
    assert!(fourth < 1 << 53, "fence {fourth} is not exact in JSON");
}

#[test]
fn a_fence_counter_that_expired_hands_out_a_fence_above_every_earlier_one() {
    let server = RedisServer::start();
    let fence_key = LockKeys::of("job").fence;
    let earlier: Vec<i64> = (0..5)
        .map(|_| fence_of_a_run(Redlock::new(&server)))
        .collect();
    // The counter lives 30 days after the last fence; here it lapses at once.
    let _: i64 = server.query(&["PEXPIRE", &fence_key, "1"]);
    wait_until(
        "the fence counter to expire",
        Duration::from_secs(5),
        || (!server.exists(&fence_key)).then_some(()),
    );
    let next = fence_of_a_run(Redlock::new(&server));
    let highest = earlier.iter().max().copied().unwrap_or_default();
    assert!(
        next > highest,
        "fence {next} after the counter expired, earlier ones up to {highest}"
    );
    assert!(server.pttl(&fence_key).is_some(), "the new counter expires");
}

/// A fence stays below 2^53, where JSON readers keep it exact: the last one is handed out, and
/// a counter at the end (only set by hand) refuses the take (78) and is left as it was, never
/// wrapped or repeated.
#[test]
fn a_fence_counter_at_its_end_refuses_the_take_and_never_wraps() {
    let server = RedisServer::start();
    let fence_key = LockKeys::of("job").fence;
    let _: () = server.query(&["SET", &fence_key, "9007199254740990"]);
    assert_eq!(fence_of_a_run(Redlock::new(&server)), 9_007_199_254_740_991);
    for counter in [
        "9007199254740991",
        "9223372036854775806",
        "99999999999999999999999",
    ] {
        let _: () = server.query(&["SET", &fence_key, counter]);
        Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
            .exits_with(78)
            .error_mentions(&["fence counter", "below 2^53", "nothing was taken"]);
        assert_eq!(server.get(&fence_key).as_deref(), Some(counter));
        assert!(!server.exists("job"), "{counter}: the lock was taken");
    }
    // Over several keys, before any is taken: the free one is left untouched.
    Redlock::new(&server)
        .args([
            "run", "--key", "free", "--key", "job", "--ttl", "2s", "--", "true",
        ])
        .exits_with(78)
        .error_mentions(&["below 2^53", "nothing was taken"]);
    let keys: Vec<String> = server.query(&["KEYS", "*free*"]);
    assert!(keys.is_empty(), "the free lock was written: {keys:?}");
}

#[test]
fn quorum_nodes_restarted_one_at_a_time_keep_the_lock_with_its_holder() {
    let mut quorum = RedisQuorum::start(3);
    let scratch = TempDir::new("rolling");
    let log = scratch.join("sections.log");
    // A section of about 8 s under a 2 s lease: renewed every 667 ms throughout the restarts.
    let holder = quorum
        .redlock()
        .env("STRESS_LOG", &log)
        .env("TICKS", "40")
        .env("TICK", "0.2")
        .args(["run", "--key", "job", "--ttl", "2s", "--"])
        .args(SECTION)
        .spawn();
    wait_until(
        "the holder's section to start",
        Duration::from_secs(10),
        || (!read_sections(&log).is_empty()).then_some(()),
    );
    let token = quorum.node(0).get("job").expect("the lock on node 0");
    let waiter = quorum
        .redlock()
        .env("STRESS_LOG", &log)
        .args(["run", "--key", "job", "--ttl", "2s", "--wait", "60s", "--"])
        .args(SECTION)
        .spawn();

    for node in 0..3 {
        quorum.node_mut(node).restart();
        // The next renewals write the key back, with the holder's token.
        wait_until(
            &format!("the lock to be re-established on restarted node {node}"),
            Duration::from_secs(6),
            || (quorum.node(node).get("job").as_deref() == Some(token.as_str())).then_some(()),
        );
        let fence: i64 = quorum
            .node(node)
            .get(&LockKeys::of("job").fence)
            .and_then(|f| f.parse().ok())
            .expect("the fence counter on the restarted node");
        let holder_fence: i64 = quorum
            .node((node + 1) % 3)
            .holder_record("job")
            .get("fence")
            .and_then(|f| f.parse().ok())
            .expect("the holder record's fence");
        assert!(
            fence >= holder_fence,
            "node {node}'s counter {fence} is below the holder's fence {holder_fence}"
        );
    }

    let first = holder.exits_with(0);
    assert!(
        first.stderr.contains("re-established"),
        "the holder did not say it healed a node\n{first}"
    );
    waiter.exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2, "{sections:?}");
    assert!(sections.iter().all(|s| s.ended), "{sections:?}");
}

#[test]
fn an_acquire_that_timed_out_leaves_no_lock_behind() {
    for command in ["acquire", "run"] {
        let server = RedisServer::start();
        let fence_key = LockKeys::of("job").fence;
        // Scripts cached, as on any server in use: the stalled acquire runs when it resumes.
        fence_of_a_run(Redlock::new(&server));
        let fence_before = server.get(&fence_key);

        server.pause();
        let mut redlock = Redlock::new(&server).args([
            "--timeout",
            "300ms",
            command,
            "--key",
            "job",
            "--ttl",
            "1h",
        ]);
        if command == "run" {
            redlock = redlock.args(["--", "true"]);
        }
        let outcome = redlock.exits_with(69);
        outcome.error_mentions(says::UNAVAILABLE);
        server.resume();

        // The acquire did run on resuming (the counter moved), and was undone right after.
        wait_until(
            &format!("[{command}] the stalled acquire to run"),
            Duration::from_secs(5),
            || (server.get(&fence_key) != fence_before).then_some(()),
        );
        holds_throughout(
            &format!("[{command}] the lock to stay free"),
            Duration::from_millis(300),
            || match server.get("job") {
                None => Ok(()),
                Some(token) => Err(format!("the lock is held by {token}")),
            },
        );
        Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
            .exits_with(0);
    }
}

#[test]
fn status_calls_a_holder_whose_process_is_gone_dead() {
    let server = RedisServer::start();
    // The holder of `acquire` is the calling script, which exits at once.
    let script = format!(
        "'{}' --url {} acquire --key job --ttl 1m >/dev/null; true",
        env!("CARGO_BIN_EXE_redlock"),
        server.url()
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .expect("sh");
    assert!(status.success());
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    assert!(
        outcome.stdout.contains("DEAD"),
        "status does not call the holder dead\n{outcome}"
    );
    let lock = lock_status(&server, "job");
    assert_eq!(
        lock.expect("holder.pid_alive").as_bool(),
        Some(false),
        "{lock}"
    );
}

#[test]
fn a_lease_lost_between_renewals_ends_in_76_and_is_recorded_as_lost() {
    for (what, foreign) in [("deleted", None), ("taken over", Some("someone-else"))] {
        let server = RedisServer::start();
        // Renewed every 10 s: the command ends long before anyone notices by renewing.
        let mut holder = Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
            .spawn();
        holder.expect_line("ready");
        let _: () = server.query(&["DEL", "job"]);
        if let Some(token) = foreign {
            let _: () = server.query(&["SET", "job", token, "PX", "30000"]);
        }
        holder.close_stdin();
        let outcome = holder.exits_with(76);
        outcome.error_mentions(says::LEASE_LOST);
        let stats = server.lock_record("job");
        assert_eq!(
            stats.get("outcome").map(String::as_str),
            Some("lease lost"),
            "[{what}] {stats:?}"
        );
        assert_eq!(stats.get("lost").map(String::as_str), Some("1"), "[{what}]");
        assert_eq!(
            server.get("job").as_deref(),
            foreign,
            "[{what}] the release touched a lock that was not ours"
        );
    }
}

#[test]
fn no_renewal_shortens_what_is_left_of_a_lock() {
    let server = RedisServer::start();
    let acquired = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "1m"])
        .exits_with(0);
    let token = acquired.stdout.lines().next().expect("a token").to_owned();
    Redlock::new(&server)
        .args(["extend", "--key", "job", "--token", &token, "--ttl", "2s"])
        .exits_with(0);
    let left = server.pttl("job").expect("the lock");
    assert!(
        left > Duration::from_secs(50),
        "extend shortened the lock to {left:?}"
    );
    Redlock::new(&server)
        .args(["release", "job", "--token", &token])
        .exits_with(0);

    // A renewal that lands after --hold-at-least kept the key leaves the hold alone.
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "--hold-at-least",
            "1m",
        ])
        .args(["--", "true"])
        .exits_with(0);
    let token = server.get("job").expect("the kept lock");
    Redlock::new(&server)
        .args(["extend", "--key", "job", "--token", &token, "--ttl", "1s"])
        .exits_with(0);
    let left = server.pttl("job").expect("the kept lock");
    assert!(
        left > Duration::from_secs(50),
        "a late renewal cut the hold to {left:?}"
    );
}

#[test]
fn companion_keys_are_refused_as_locks_by_every_command() {
    let server = RedisServer::start();
    fence_of_a_run(Redlock::new(&server));
    let fence_key = LockKeys::of("job").fence;
    let fence = server.get(&fence_key).expect("the fence counter");
    let keys_before: i64 = server.query(&["DBSIZE"]);
    // Every companion, with the role its refusal names; the waiters' mark, a waiter's grant
    // list and a holder's stop list carry a suffix after the companion's name. (A run of the
    // waiters' mark as a lock would be deleted by the next release of `job`.)
    let companions = [
        (fence_key.clone(), "the fence counter"),
        (
            companion_key("job", "stats"),
            "the counters and last-run record",
        ),
        (companion_key("job", "holder:queued"), "the waiters' mark"),
        (
            companion_key("job", "queue:T1"),
            "the grant list of a waiter",
        ),
        (companion_key("job", "stop:12"), "the stop list"),
        (companion_key("job", "audit"), "the audit log"),
    ];
    for (companion, role) in &companions {
        let commands: [Vec<&str>; 10] = [
            vec!["status", companion],
            vec!["release", companion, "--force"],
            vec!["extend", "--key", companion, "--token", "t", "--ttl", "5s"],
            vec!["acquire", "--key", companion, "--ttl", "5s"],
            vec!["run", "--key", companion, "--ttl", "5s", "--", "true"],
            vec!["pause", companion],
            vec!["resume", companion],
            vec!["metrics", companion],
            vec!["log", companion],
            vec!["check", companion],
        ];
        for args in commands {
            let outcome = Redlock::new(&server).args(&args).exits_with(64);
            for words in ["not a lock", role, "of lock \"job\""] {
                outcome.error_mentions(&[words]);
            }
        }
    }
    assert_eq!(
        server.get(&fence_key),
        Some(fence),
        "the fence counter was touched"
    );
    let keys_after: i64 = server.query(&["DBSIZE"]);
    assert_eq!(keys_after, keys_before, "a refused command wrote to Redis");
}

#[test]
fn records_keep_no_secrets_and_a_label_replaces_the_command() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c"])
        .arg(format!("PGPASSWORD=hunter2 sh -c '{}'", child::HOLD))
        .spawn();
    holder.expect_line("ready");
    let held = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    held.never_shows("hunter2");
    assert!(held.stdout.contains("PGPASSWORD=***"), "{held}");
    holder.close_stdin();
    holder.exits_with(0);
    let last = server.lock_record("job");
    assert!(!format!("{last:?}").contains("hunter2"), "{last:?}");
    let log: Vec<String> = server.query(&["LRANGE", &companion_key("job", "audit"), "0", "-1"]);
    assert!(!format!("{log:?}").contains("hunter2"), "{log:?}");

    let labelled = |redlock: Redlock, label: &[&str]| -> Outcome {
        redlock
            .args(["run", "--key", "job", "--ttl", "2s"])
            .args(label)
            .args(["--", "sh", "-c", "true", "--password", "hunter2"])
            .exits_with(0)
    };
    labelled(Redlock::new(&server), &["--label", "nightly report"]);
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.command"), "nightly report");
    labelled(
        Redlock::new(&server).env("REDLOCK_LABEL", "from the environment"),
        &[],
    );
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.command"), "from the environment");
    // Without a label, the flag's value is redacted.
    labelled(Redlock::new(&server), &[]);
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.command"), "sh -c true --password ***");
}

/// Every value in the server, read whatever its type, as debug text.
fn everything_stored(server: &RedisServer) -> String {
    let keys: Vec<String> = server.query(&["KEYS", "*"]);
    let mut all = format!("{keys:?}");
    for key in &keys {
        let kind: String = server.query(&["TYPE", key]);
        let value: redis::Value = match kind.as_str() {
            "string" => server.query(&["GET", key]),
            "hash" => server.query(&["HGETALL", key]),
            "list" => server.query(&["LRANGE", key, "0", "-1"]),
            "set" => server.query(&["SMEMBERS", key]),
            "zset" => server.query(&["ZRANGE", key, "0", "-1"]),
            "stream" => server.query(&["XRANGE", key, "-", "+"]),
            other => panic!("key {key} of unexpected type {other}"),
        };
        all.push_str(&format!("{key}: {value:?}\n"));
    }
    all
}

/// A secret holding a quote or bytes that are not UTF-8 is hidden whole, as the words of the
/// command and as `-c`'s text: in `status` while held and after, in `log` and in every record.
#[test]
fn secrets_holding_quotes_or_odd_bytes_are_hidden_whole() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let server = RedisServer::start();
    let words: Vec<OsString> = vec![
        "--password".into(),
        "abc'defSECRET123".into(),
        "--db-password=x'ySECRET".into(),
        "PGPASSWORD=q'SECRETq".into(),
        "postgres://u:p'SECRET@h/db".into(),
        "--token".into(),
        OsString::from_vec(b"zz'\xffSECRET".to_vec()),
    ];
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "rd",
            "--ttl",
            "5s",
            "--",
            "sh",
            "-c",
            child::HOLD,
            "sh",
        ])
        .args(&words)
        .spawn();
    holder.expect_line("ready");
    let held = Redlock::new(&server).args(["status", "rd"]).exits_with(0);
    held.never_shows("SECRET");
    assert!(held.stdout.contains("--password ***"), "{held}");
    assert!(held.stdout.contains("postgres://***@h/db"), "{held}");
    let held = Redlock::new(&server)
        .args(["status", "--json", "rd"])
        .exits_with(0);
    held.never_shows("SECRET");
    holder.close_stdin();
    holder.exits_with(0);

    // The same command as the shell text a user types after -c.
    Redlock::new(&server)
        .args(["run", "--key", "rd", "--ttl", "5s", "-c"])
        .arg(r#"true --password "abc'defSECRET123" "--db-password=x'ySECRET" PGPASSWORD="q'SECRETq" 'postgres://u:p'"'"'SECRET@h/db'"#)
        .exits_with(0);
    // A free lock's status exits 1; its JSON shows the last run's command.
    let after = Redlock::new(&server)
        .args(["status", "--json", "rd"])
        .exits_with(1);
    after.never_shows("SECRET");
    // (The last run's record keeps the command's start.)
    let last = lock_status(&server, "rd")
        .str("last_run.command")
        .to_string();
    assert!(
        last.starts_with(r#"true --password *** "--db-password=***" PGPASSWORD=*** "#),
        "{last}"
    );
    let log = Redlock::new(&server).args(["log", "rd"]).exits_with(0);
    log.never_shows("SECRET");
    assert!(log.stdout.contains("--password ***"), "{log}");
    let stored = everything_stored(&server);
    assert!(!stored.contains("SECRET"), "{stored}");
    assert!(stored.contains("PGPASSWORD=***"), "{stored}");
}

/// Six contenders take turns on one key while the server is restarted without persistence,
/// flushed and stalled: whatever was lost, the fences, read in the order the sections
/// started, only grow.
#[test]
fn fences_grow_in_start_order_through_restarts_flushes_and_stalls() {
    const CONTENDERS: usize = 6;
    let server = Arc::new(std::sync::Mutex::new(RedisServer::start()));
    let url = server.lock().unwrap().url();
    let scratch = TempDir::new("integrity-stress");
    let log = scratch.join("sections.log");
    let seed = Dice::seed_from_clock();
    let until = Instant::now() + Duration::from_secs(12);
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let (url, log) = (url.clone(), log.clone());
            thread::spawn(move || {
                let mut turns = 0;
                while Instant::now() < until {
                    let outcome = Redlock::without_url()
                        .args(["--url", &url, "--timeout", "500ms"])
                        .env("STRESS_LOG", &log)
                        .env("TICKS", "4")
                        .env("TICK", "0.02")
                        .args(["run", "--key", "job", "--ttl", "1s", "--wait", "5s", "--"])
                        .args(SECTION)
                        .timeout(Duration::from_secs(60))
                        .run();
                    // 69: the server was down or stalled; 75: the wait ran out across a
                    // stall; 76: the lease went with the data.
                    assert!(
                        matches!(outcome.code(), Some(0 | 69 | 75 | 76)),
                        "unexpected exit\n{outcome}"
                    );
                    turns += 1;
                }
                turns
            })
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let chaos = {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        thread::spawn(move || {
            let mut dice = Dice::new(seed);
            let mut faults = [0; 3];
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(200 + dice.below(400)));
                let mut server = server.lock().unwrap();
                let fault = dice.below(3) as usize;
                match fault {
                    0 => server.restart(),
                    1 => {
                        let _: () = server.query(&["FLUSHALL"]);
                    }
                    _ => {
                        server.pause();
                        thread::sleep(Duration::from_millis(dice.below(1500)));
                        server.resume();
                    }
                }
                faults[fault] += 1;
            }
            faults
        })
    };
    let turns: usize = contenders
        .into_iter()
        .map(|c| c.join().expect("contender"))
        .sum();
    stop.store(true, Ordering::SeqCst);
    let [restarts, flushes, stalls] = chaos.join().expect("chaos");
    let sections = expect_fences_in_start_order(&log);
    eprintln!(
        "seed {seed}: {turns} turns, {} sections, {restarts} restarts, {flushes} flushes, \
         {stalls} stalls",
        sections.len()
    );
    assert!(
        sections.len() >= CONTENDERS && restarts + flushes > 0,
        "too little happened: {} sections",
        sections.len()
    );
}

#[test]
fn through_a_sentinel_fences_survive_a_flush_and_a_lost_lease_is_76() {
    let sentinel = RedisSentinel::start();
    let url = sentinel.url();
    let first = fence_of_a_run(Redlock::without_url().args(["--url", &url]));
    let _: () = sentinel.master().query(&["FLUSHALL"]);
    let second = fence_of_a_run(Redlock::without_url().args(["--url", &url]));
    assert!(
        second > first,
        "after FLUSHALL: fence {second} after {first}"
    );

    let mut holder = Redlock::without_url()
        .args([
            "--url",
            &url,
            "run",
            "--key",
            "job",
            "--ttl",
            "30s",
            "-c",
            child::HOLD,
        ])
        .spawn();
    holder.expect_line("ready");
    let _: () = sentinel.master().query(&["DEL", "job"]);
    holder.close_stdin();
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
}

#[test]
fn in_a_quorum_a_stalled_node_is_sent_no_write_and_a_lost_lease_is_76() {
    let quorum = RedisQuorum::start(3);
    // Scripts cached on every node.
    fence_of_a_run(quorum.redlock());
    let fence_key = LockKeys::of("job").fence;
    let fence_on_0 = quorum.node(0).get(&fence_key);
    // Node 0 stalls: it cannot say which server it is, so nothing is sent to it but that
    // question; the acquire succeeds on the other two.
    quorum.node(0).pause();
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    assert!(
        outcome.stderr.contains("node"),
        "no word of the stalled node\n{outcome}"
    );
    quorum.node(0).resume();
    // What node 0 reads on resuming changes nothing there: no lock, the fence where it was.
    holds_throughout(
        "node 0 to stay as it was",
        Duration::from_millis(300),
        || match (quorum.node(0).get("job"), quorum.node(0).get(&fence_key)) {
            (Some(token), _) => Err(format!("node 0 holds {token}")),
            (None, fence) if fence != fence_on_0 => Err(format!(
                "node 0's fence moved from {fence_on_0:?} to {fence:?}"
            )),
            _ => Ok(()),
        },
    );

    // The key deleted on a majority between renewals: the release finds it lost.
    let mut holder = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    for node in 0..2 {
        let _: () = quorum.node(node).query(&["DEL", "job"]);
    }
    holder.close_stdin();
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
}
