//! The audit log: every acquire, busy refusal, skip, release, lost lease, forced release, pause
//! and resume is appended by the scripts that already run to a capped list per lock, and
//! `redlock log` prints it (text or JSON Lines), and follows it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::audit::{AuditEntry, audit_entries, expect_every_take_ended, takes};
use crate::support::process::host_name;
use crate::support::{RedisQuorum, RedisServer, Redlock, child, companion_key, wait_until};

/// The lock's audit log (a list).
fn audit_key(lock: &str) -> String {
    companion_key(lock, "audit")
}

/// An entry as the scripts write it.
fn entry(ms: u64, event: &str) -> String {
    format!("{ms}\x1f{event}")
}

/// The events of a key's log, oldest first, as `redlock log --json` prints them.
fn events(server: &RedisServer, key: &str) -> Vec<serde_json::Value> {
    let out = Redlock::new(server)
        .args(["log", key, "--json"])
        .exits_with(0);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| out.fail(&format!("{e}: {l}"))))
        .collect()
}

fn names(events: &[serde_json::Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn every_kind_of_event_is_logged_with_who_and_how() {
    let server = RedisServer::start();
    // A run that ends ok, one that fails.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "-c", "exit 3"])
        .exits_with(3);
    // A busy refusal, then a forced release of the holder.
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "1m"])
        .exits_with(0);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(75);
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    // A lease lost: the key vanishes under a running command.
    let mut lost = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1500ms",
            "-c",
            "echo ready; sleep 30",
        ])
        .spawn();
    lost.expect_line("ready");
    let _: i64 = server.query(&["DEL", "job"]);
    lost.wait().expect_code(76);
    // A pause and a resume.
    Redlock::new(&server)
        .args(["pause", "job", "--reason", "db upgrade"])
        .exits_with(0);
    Redlock::new(&server).args(["resume", "job"]).exits_with(0);

    let log = events(&server, "job");
    assert_eq!(
        names(&log),
        [
            "acquired", "released", "acquired", "released", "acquired", "busy", "forced",
            "acquired", "lost", "paused", "resumed"
        ],
        "{log:#?}"
    );
    let host = host_name();
    for e in &log {
        assert_eq!(e["key"], "job", "{e}");
        assert_eq!(e["host"], host.as_str(), "{e}");
        assert!(e["time_ms"].as_u64().unwrap() <= now_ms() + 1000, "{e}");
    }
    assert_eq!(log[1]["outcome"], "ok");
    assert_eq!(log[1]["exit"], 0);
    assert_eq!(log[1]["fence"], log[0]["fence"]);
    assert_eq!(log[3]["outcome"], "failed");
    assert_eq!(log[3]["exit"], 3);
    assert_eq!(log[5]["cmd"], "true");
    assert_eq!(
        log[6]["fence"], log[4]["fence"],
        "the forced entry names the holder removed"
    );
    assert!(log[6]["by"].as_str().unwrap().contains(&host), "{}", log[6]);
    assert_eq!(log[8]["outcome"], "lease lost");
    assert_eq!(log[9]["reason"], "db upgrade");
    // Fences grow along the log.
    let fences: Vec<i64> = log
        .iter()
        .filter(|e| e["event"] == "acquired")
        .map(|e| e["fence"].as_i64().unwrap())
        .collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");

    // The text form: one line per entry, with the same facts.
    let text = Redlock::new(&server).args(["log", "job"]).exits_with(0);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), log.len(), "{text}");
    assert!(
        lines[3].contains("  job  released  ") && lines[3].contains("failed (exit 3)"),
        "{text}"
    );
    assert!(
        lines[9].contains("paused") && lines[9].contains("reason: db upgrade"),
        "{text}"
    );
}

#[test]
fn the_log_is_capped_in_length_and_age_and_expires() {
    let server = RedisServer::start();
    let list = audit_key("job");
    let month_ago = now_ms() - 31 * 24 * 3600 * 1000;
    // An entry older than 30 days, then 1245 more: a run's entries are the 1247th and the
    // 1248th, a multiple of 32, which trims the log back to its last 1000.
    let _: i64 = server.query(&["RPUSH", &list, &entry(month_ago, "ancient")]);
    for _ in 0..1245 {
        let _: i64 = server.query(&["RPUSH", &list, &entry(now_ms(), "filler")]);
    }
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let kept: Vec<String> = server.query(&["LRANGE", &list, "0", "-1"]);
    assert_eq!(kept.len(), 1000, "the log keeps its last 1000 entries");
    assert!(kept[0].contains("\x1ffiller"), "{}", kept[0]);
    assert!(kept[999].contains("\x1freleased"), "{}", kept[999]);
    // Between trims it grows by at most 31: the next run's entries are the 1001st and the
    // 1002nd, and nothing is trimmed until the 1024th.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let len: i64 = server.query(&["LLEN", &list]);
    assert_eq!(len, 1002, "appends between trims are kept");
    let life = server.pttl(&list).expect("the log expires");
    assert!(life <= Duration::from_millis(2_692_000_000), "{life:?}");

    // An old entry among the kept ones: once the log has grown by 32, it is gone.
    let _: i64 = server.query(&["DEL", &list]);
    let _: i64 = server.query(&["RPUSH", &list, &entry(month_ago, "ancient")]);
    for _ in 0..29 {
        let _: i64 = server.query(&["RPUSH", &list, &entry(now_ms(), "recent")]);
    }
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let kept: Vec<String> = server.query(&["LRANGE", &list, "0", "-1"]);
    let events: Vec<&str> = kept
        .iter()
        .map(|e| e.split('\x1f').nth(1).unwrap_or(""))
        .collect();
    let mut expected = vec!["recent"; 29];
    expected.extend(["acquired", "released"]);
    assert_eq!(events, expected);
}

#[test]
fn since_leaves_out_older_entries_and_all_merges_keys_by_time() {
    let server = RedisServer::start();
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;
    for (at, event) in [(two_hours_ago, "acquired"), (two_hours_ago + 1, "released")] {
        let old = format!("{}\x1fhost=old\x1fpid=1\x1ffence=1", entry(at, event));
        let _: i64 = server.query(&["RPUSH", &audit_key("a"), &old]);
    }
    let _: String = server.query(&["SET", &companion_key("a", "fence"), "1"]);
    for key in ["a", "b", "a"] {
        Redlock::new(&server)
            .args(["run", "--key", key, "--ttl", "5s", "--", "true"])
            .exits_with(0);
    }
    Redlock::new(&server)
        .args(["pause", "--all", "--for", "1m"])
        .exits_with(0);

    let recent = Redlock::new(&server)
        .args(["log", "a", "--since", "1h"])
        .exits_with(0);
    assert!(!recent.stdout.contains(" old"), "{recent}");
    assert_eq!(recent.stdout.lines().count(), 4, "{recent}");
    let all = Redlock::new(&server).args(["log", "a"]).exits_with(0);
    assert_eq!(all.stdout.lines().count(), 6, "{all}");

    let merged = Redlock::new(&server)
        .args(["log", "--all", "--since", "1h", "--json"])
        .exits_with(0);
    let keys: Vec<String> = merged
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(keys, ["a", "a", "b", "b", "a", "a", ""], "{merged}");
}

#[test]
fn follow_prints_new_entries_until_interrupted() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let mut follow = Redlock::new(&server)
        .args(["log", "job", "--follow"])
        .spawn();
    follow.expect_line_containing("  acquired  ");
    follow.expect_line_containing("  released  ");
    // Nothing new yet; then a busy refusal and a forced release appear as they happen.
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "1m"])
        .exits_with(0);
    follow.expect_line_containing("  acquired  ");
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    follow.expect_line_containing("  forced  ");
    follow.signal(libc::SIGTERM);
    follow.wait().expect_code(0);
}

#[test]
fn follow_all_prints_every_logs_new_entries_and_never_those_since_left_out() {
    let server = RedisServer::start();
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;
    let _: i64 = server.query(&[
        "RPUSH",
        &audit_key("quiet"),
        &format!("{two_hours_ago}\x1facquired\x1fhost=old"),
    ]);
    Redlock::new(&server)
        .args(["run", "--key", "busy", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let mut follow = Redlock::new(&server)
        .args(["log", "--all", "--follow", "--since", "1h"])
        .spawn();
    follow.expect_line_containing("  busy  acquired  ");
    follow.expect_line_containing("  busy  released  ");
    // Both logs are followed: the one with recent entries and the one without.
    Redlock::new(&server)
        .args(["run", "--key", "busy", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  busy  acquired  ");
    follow.expect_line_containing("  busy  released  ");
    Redlock::new(&server)
        .args(["run", "--key", "quiet", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  quiet  acquired  ");
    follow.expect_line_containing("  quiet  released  ");
    follow.signal(libc::SIGTERM);
    let outcome = follow.wait();
    outcome.expect_code(0);
    assert!(
        !outcome.stdout.contains("acquired  old"),
        "an entry older than --since was printed: {outcome}"
    );
    // The old take never ended: the new one shows its lapse, just before it.
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{outcome}");
    assert!(
        lines[4].contains("  quiet  expired  old, inferred"),
        "{outcome}"
    );
}

#[test]
fn skips_and_slots_are_logged() {
    let server = RedisServer::start();
    crate::support::poll::clear_of_the_hours_edge();
    for expected in [0, 75] {
        Redlock::new(&server)
            .args([
                "run",
                "--key",
                "job",
                "--ttl",
                "5s",
                "--once-per",
                "1h",
                "--",
                "true",
            ])
            .exits_with(expected);
    }
    Redlock::new(&server)
        .args([
            "run", "--key", "pool", "--ttl", "5s", "--slots", "3", "--", "true",
        ])
        .exits_with(0);
    assert_eq!(
        names(&events(&server, "job")),
        ["acquired", "released", "skipped"]
    );
    let pool = events(&server, "pool");
    assert_eq!(names(&pool), ["acquired", "released"]);
    assert_eq!(pool[0]["slot"], 0, "{pool:?}");
    assert_eq!(pool[0]["shape"], "3", "{pool:?}");
}

#[test]
fn releases_that_come_together_keep_the_log_within_its_length_bound() {
    let server = RedisServer::start();
    let list = audit_key("job");
    // 984 entries, then 20 shared holders: their acquires bring the log to 1004, and their
    // 20 releases, ending together, to 1024, the 32nd entry that trims it back to 1000: it
    // never holds more than 1023 after a script.
    for _ in 0..984 {
        let _: i64 = server.query(&["RPUSH", &list, &entry(now_ms(), "filler")]);
    }
    let holders: Vec<_> = (0..20)
        .map(|_| {
            let mut run = Redlock::new(&server)
                .args(["run", "--key", "job", "--ttl", "10s", "--shared"])
                .args(["-c", crate::support::child::HOLD])
                .spawn();
            run.expect_line("ready");
            run
        })
        .collect();
    let before: i64 = server.query(&["LLEN", &list]);
    assert_eq!(before, 1004);
    let mut most = before;
    for mut run in holders {
        run.close_stdin();
        run.exits_with(0);
        let len: i64 = server.query(&["LLEN", &list]);
        most = most.max(len);
    }
    assert!(most <= 1023, "the log held {most} entries");
    let len: i64 = server.query(&["LLEN", &list]);
    assert_eq!(len, 1000, "the log holds {len} entries, not its last 1000");
    let events = events(&server, "job");
    assert_eq!(
        names(&events).iter().filter(|e| **e == "released").count(),
        20
    );
}

/// `--follow` reads a log's last entries when it has news, and the whole list when those do
/// not reach back far enough: a burst longer than that is printed whole and once, and a
/// release whose take is further back still shows the take's command.
#[test]
fn follow_prints_a_long_burst_once_and_fills_a_release_from_a_distant_take() {
    let server = RedisServer::start();
    let log = audit_key("job");
    let entry = |ms: u64, body: &str| format!("{ms}\x1f{body}");
    let start = now_ms();
    let old: Vec<String> = (0..200)
        .map(|n| entry(start, &format!("busy\x1fhost=old{n}\x1fpid=1")))
        .collect();
    let mut push = vec!["RPUSH", log.as_str()];
    push.extend(old.iter().map(String::as_str));
    let _: i64 = server.query(&push);
    let mut follow = Redlock::new(&server)
        .args(["log", "job", "--follow"])
        .spawn();
    follow.expect_line_containing("  old199 (");
    // A burst of 100 in one command: more than the tail `--follow` reads first.
    let burst: Vec<String> = (0..100)
        .map(|n| entry(start + 1, &format!("busy\x1fhost=burst{n}\x1fpid=2")))
        .collect();
    let mut push = vec!["RPUSH", log.as_str()];
    push.extend(burst.iter().map(String::as_str));
    let _: i64 = server.query(&push);
    follow.expect_line_containing("  burst99 (");
    // A take, then 70 other entries, then (after a poll) its release alone.
    let mut push = vec!["RPUSH".to_string(), log.clone()];
    push.push(entry(
        start + 2,
        "acquired\x1ffence=77\x1fhost=deep\x1fpid=3\x1fuser=u\x1fcmd=the-deep-command",
    ));
    push.extend((0..70).map(|n| entry(start + 3, &format!("busy\x1fhost=between{n}\x1fpid=4"))));
    let push: Vec<&str> = push.iter().map(String::as_str).collect();
    let _: i64 = server.query(&push);
    follow.expect_line_containing("  between69 (");
    let _: i64 = server.query(&[
        "RPUSH",
        &log,
        &entry(
            start + 4,
            "released\x1foutcome=ok\x1fexit=0\x1fduration_ms=5\x1ffence=77\x1fhost=deep\x1fpid=3",
        ),
    ]);
    let released = follow.expect_line_containing("  released  ");
    assert!(released.ends_with(": the-deep-command"), "{released}");
    // A plain run, as it happens.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  acquired  ");
    let released = follow.expect_line_containing("  released  ");
    assert!(released.ends_with(": true"), "{released}");
    follow.signal(libc::SIGTERM);
    let outcome = follow.wait();
    outcome.expect_code(0);
    for n in 0..100 {
        let host = format!("  burst{n} (");
        let printed = outcome.stdout.matches(&host).count();
        assert_eq!(printed, 1, "{host} printed {printed} times: {outcome}");
    }
    assert_eq!(
        outcome.stdout.lines().count(),
        200 + 100 + 71 + 1 + 2,
        "{outcome}"
    );
}

/// `--follow --all` over more locks than it asks per poll: the server answers a bounded
/// number of `LINDEX` per poll (all of them would be 5,000 every 250 ms), a quiet lock's new
/// entries still show, and then those of the next run at once.
#[test]
fn follow_all_over_many_locks_asks_a_bounded_number_per_poll() {
    const LOCKS: usize = 5000;
    let server = RedisServer::start();
    let long_ago = format!(
        "{}\x1fbusy\x1fhost=old\x1fpid=1",
        now_ms() - 2 * 3600 * 1000
    );
    let mut pipe = redis::pipe();
    for n in 0..LOCKS {
        pipe.cmd("RPUSH")
            .arg(audit_key(&format!("k{n}")))
            .arg(&long_ago)
            .ignore();
    }
    let _: () = pipe.query(&mut server.client()).expect("write the logs");
    let mut follow = Redlock::new(&server)
        .args(["log", "--all", "--follow", "--since", "1h"])
        .spawn();
    // Once its first poll has asked for news, the follow has read every log.
    wait_until_lindex(&server, 1);
    let _: () = server.query(&["CONFIG", "RESETSTAT"]);
    let started = std::time::Instant::now();
    Redlock::new(&server)
        .args(["run", "--key", "k4321", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  k4321  acquired  ");
    follow.expect_line_containing("  k4321  released  ");
    Redlock::new(&server)
        .args(["run", "--key", "k4321", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  k4321  acquired  ");
    follow.expect_line_containing("  k4321  released  ");
    let asked = lindex_calls(&server);
    // Polls every 250 ms at most (fewer when the machine is busy), each asking 1024 quiet
    // logs and the one that had entries.
    let polls = started.elapsed().as_millis() as u64 / 250 + 2;
    assert!(
        asked <= polls * 1025,
        "{asked} LINDEX in {polls} polls at most: more than 1025 a poll"
    );
    follow.signal(libc::SIGTERM);
    follow.wait().expect_code(0);
}

/// The server's count of `LINDEX` since its statistics were last reset.
fn lindex_calls(server: &RedisServer) -> u64 {
    let stats: String = server.query(&["INFO", "commandstats"]);
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_lindex:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn wait_until_lindex(server: &RedisServer, at_least: u64) {
    crate::support::wait_until("the follow's first poll", Duration::from_secs(30), || {
        (lindex_calls(server) >= at_least).then_some(())
    });
}

/// What `--follow` remembers of a log is its last entry in the list's order, not in the
/// printed order: a release is stamped with when its run ended, which can sort before an
/// entry written just ahead of it, and must not be printed again at the next poll. A log that
/// lost the entry last shown (trimmed, deleted) is said to have a gap.
#[test]
fn follow_prints_an_entry_that_sorts_early_once_and_says_when_a_log_has_a_gap() {
    let server = RedisServer::start();
    let log = audit_key("job");
    let start = now_ms();
    let entry = |ms: u64, body: &str| format!("{ms}\x1f{body}");
    let _: i64 = server.query(&[
        "RPUSH",
        &log,
        &entry(
            start,
            "acquired\x1ffence=5\x1fhost=a\x1fpid=1\x1fuser=u\x1fcmd=job.sh",
        ),
    ]);
    // Its holder holds the lock: the take is not found lapsed before its release comes.
    let _: () = server.query(&["SET", "job", "t", "PX", "60000"]);
    let _: () = server.query(&[
        "SET",
        &companion_key("job", "holder"),
        "v=1\x1ffence=5",
        "PX",
        "60000",
    ]);
    let mut follow = Redlock::new(&server)
        .args(["log", "job", "--follow"])
        .spawn();
    follow.expect_line_containing("  acquired  ");
    // A refusal logged at +20 ms, then the release of a run that ended at +10 ms.
    let _: i64 = server.query(&[
        "RPUSH",
        &log,
        &entry(start + 20, "busy\x1fhost=b\x1fpid=2"),
        &entry(
            start + 10,
            "released\x1foutcome=ok\x1fexit=0\x1fduration_ms=10\x1ffence=5\x1fhost=a\x1fpid=1",
        ),
    ]);
    follow.expect_line_containing("  released  ");
    follow.expect_line_containing("  busy  ");
    let _: i64 = server.query(&["RPUSH", &log, &entry(start + 30, "busy\x1fhost=c\x1fpid=3")]);
    follow.expect_line_containing("  c (pid 3)");
    // The log loses the entry last shown; what comes next is printed, with a warning.
    let _: () = server.query(&["DEL", &log]);
    let _: i64 = server.query(&["RPUSH", &log, &entry(start + 40, "busy\x1fhost=d\x1fpid=4")]);
    follow.expect_line_containing("  d (pid 4)");
    follow.signal(libc::SIGTERM);
    let outcome = follow.wait();
    outcome.expect_code(0);
    assert_eq!(
        outcome.stdout.matches("  released  ").count(),
        1,
        "{outcome}"
    );
    assert_eq!(outcome.stdout.lines().count(), 5, "{outcome}");
    assert!(
        outcome.stderr.contains("gone from the log of job"),
        "{outcome}"
    );
}

/// On a quorum each node logs the take with the fence it handed out, the release with the
/// run's (the highest): `log` read from any one node still puts who and what on the release.
#[test]
fn a_quorum_nodes_log_fills_a_release_from_its_own_take() {
    let quorum = RedisQuorum::start(3);
    // Node 1's counter far ahead: its fence is the run's, the others' differ from it.
    let _: String =
        quorum
            .node(1)
            .query(&["SET", &companion_key("job", "fence"), "9000000000000000"]);
    quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "5s"])
        .args(["--", "echo", "quorum-run"])
        .exits_with(0);
    for node in quorum.nodes() {
        let log = events(node, "job");
        assert_eq!(names(&log), ["acquired", "released"], "{log:?}");
        assert_eq!(
            log[1]["fence"].as_i64(),
            Some(9_000_000_000_000_001),
            "{log:?}"
        );
        assert_eq!(log[1]["cmd"], log[0]["cmd"], "{log:?}");
        assert_eq!(log[1]["user"], log[0]["user"], "{log:?}");
        assert!(
            log[1]["cmd"].as_str().unwrap().contains("quorum-run"),
            "{log:?}"
        );
        let text = Redlock::new(node).args(["log", "job"]).exits_with(0);
        let released = text.stdout.lines().nth(1).unwrap_or_default();
        assert!(released.ends_with("echo quorum-run"), "{text}");
    }
}

/// The entries of `lock`'s log that end a hold without a run, with the outcome `why`.
fn given_back(server: &RedisServer, lock: &str, why: &str) -> Vec<AuditEntry> {
    audit_entries(server, lock)
        .into_iter()
        .filter(|e| e.event == "released" && e.get("outcome") == Some(why))
        .collect()
}

#[test]
fn a_grant_too_few_replicas_acknowledged_ends_its_take_in_the_log() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "3s",
            "--replicas",
            "1",
            "--",
            "true",
        ])
        .exits_with(69);
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "3s", "--replicas", "1"])
        .exits_with(69);
    assert_eq!(takes(&server, "job"), 2);
    expect_every_take_ended(&server, "job");
    assert_eq!(given_back(&server, "job", "given back").len(), 2);
    // `log` shows the end with the take's user and command.
    let log = events(&server, "job");
    assert_eq!(
        names(&log),
        ["acquired", "released", "acquired", "released"]
    );
    assert_eq!(log[1]["outcome"], "given back");
    assert_eq!(log[1]["fence"], log[0]["fence"]);
    assert_eq!(log[1]["cmd"], "true");
}

#[test]
fn a_grant_that_came_too_late_to_run_anything_ends_its_take_in_the_log() {
    let server = RedisServer::start();
    // The server holds every write for 900 ms: the grant comes after a 1 s lease's stop.
    let _: () = server.query(&["CLIENT", "PAUSE", "900", "WRITE"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(69)
        .error_mentions(&["too late"]);
    assert_eq!(takes(&server, "job"), 1);
    expect_every_take_ended(&server, "job");
    let ends = given_back(&server, "job", "not started");
    assert_eq!(ends.len(), 1, "{:?}", audit_entries(&server, "job"));
    // Nothing ran: not a run in the counters.
    assert_eq!(server.lock_record("job").get("runs"), None);
}

#[test]
fn a_hold_released_by_its_token_ends_its_take_in_the_log() {
    let server = RedisServer::start();
    let acquired = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "1m"])
        .exits_with(0);
    let token = acquired
        .stdout
        .lines()
        .next()
        .expect("the token")
        .to_string();
    // A token that does not hold it ends nothing.
    Redlock::new(&server)
        .args(["release", "job", "--token", "not-the-token"])
        .exits_with(1);
    Redlock::new(&server)
        .args(["release", "job", "--token", &token])
        .exits_with(0);
    Redlock::new(&server)
        .args(["release", "job", "--token", &token])
        .exits_with(1);
    expect_every_take_ended(&server, "job");
    let log = events(&server, "job");
    assert_eq!(names(&log), ["acquired", "released"], "{log:#?}");
    assert_eq!(log[1]["outcome"], "by token");
    assert_eq!(log[1]["fence"], log[0]["fence"]);
    let text = Redlock::new(&server).args(["log", "job"]).exits_with(0);
    assert!(text.stdout.contains(", by token"), "{text}");
}

#[test]
fn a_provisional_grant_displaced_by_a_replacer_ends_its_take_in_the_log() {
    // The head waiter is frozen while its attempt waits on the server, so the release grants
    // it the lock provisionally; a replacer then asks that holder to stop, and the waiter,
    // continued within its provisional lease, finds the request at its confirmation and
    // gives the grant back. Tried until the continue came in time.
    let server = RedisServer::start();
    for round in 0..5 {
        let key = format!("job{round}");
        let mut holder = Redlock::new(&server)
            .args(["run", "--key", &key, "--ttl", "10s", "-c", child::HOLD])
            .spawn();
        holder.expect_line("ready");
        let waiter = Redlock::new(&server)
            .args([
                "run", "--key", &key, "--ttl", "10s", "--wait", "60s", "--", "true",
            ])
            .spawn();
        server.wait_until_waiting_on_server(&key, 1);
        waiter.signal(libc::SIGSTOP);
        holder.close_stdin();
        holder.exits_with(0);
        let replacer = Redlock::new(&server)
            .args([
                "run",
                "--key",
                &key,
                "--ttl",
                "10s",
                "--replace",
                "--wait",
                "60s",
            ])
            .args(["--", "true"])
            .spawn();
        // Within the provisional lease (1 s from the grant), or not at all.
        let deadline = std::time::Instant::now() + Duration::from_millis(800);
        let mut asked = false;
        while !asked && std::time::Instant::now() < deadline {
            asked = server.holder_record(&key).contains_key("stop");
            std::thread::sleep(Duration::from_millis(5));
        }
        waiter.signal(libc::SIGCONT);
        replacer.exits_with(0);
        waiter.exits_with(0);
        if !asked || given_back(&server, &key, "given back").is_empty() {
            continue;
        }
        expect_every_take_ended(&server, &key);
        return;
    }
    panic!("in five rounds the waiter was never continued within its provisional lease");
}

/// redlock's process tree: itself, its keeper and its command, each pid once.
fn tree_of(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut at = 0;
    while at < out.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", out[at]))
            .map(|d| d.flatten().map(|t| t.path()).collect::<Vec<_>>())
            .unwrap_or_default();
        for task in tasks {
            let children = std::fs::read_to_string(task.join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&child) {
                    out.push(child);
                }
            }
        }
        at += 1;
    }
    out
}

/// A host that dies under a run: redlock, its keeper and its command are killed at once
/// (SIGKILL), so nothing gives the lock back and its lease lapses.
fn crash(run: &mut crate::support::redlock::Running) {
    for pid in tree_of(run.pid()) {
        // SAFETY: kill(2) with a pid of the test's own descendants and a valid signal.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    run.kill9();
}

/// `log --json`'s entries for `lock` once one of them is an inferred `expired`; fails after
/// `within`.
fn until_expired(server: &RedisServer, lock: &str, within: Duration) -> Vec<serde_json::Value> {
    wait_until("the lapse to show in the log", within, || {
        let log = events(server, lock);
        log.iter().any(|e| e["event"] == "expired").then_some(log)
    })
}

#[test]
fn a_crashed_holders_take_ends_as_an_inferred_expiry_once_its_lease_lapses() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    // While it holds, its take has no end.
    assert_eq!(names(&events(&server, "job")), ["acquired"]);
    crash(&mut holder);
    let log = until_expired(&server, "job", Duration::from_secs(10));
    assert_eq!(names(&log), ["acquired", "expired"], "{log:#?}");
    assert_eq!(log[1]["fence"], log[0]["fence"]);
    assert_eq!(log[1]["inferred"], true);
    assert_eq!(log[1]["cmd"], log[0]["cmd"]);
    assert_eq!(log[1]["id"], format!("expired-{}", log[0]["fence"]));
    assert!(log[1]["time_ms"].as_i64() >= log[0]["time_ms"].as_i64());
    let text = Redlock::new(&server).args(["log", "job"]).exits_with(0);
    let line = text.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        line.contains("  expired  ") && line.contains(", inferred"),
        "{text}"
    );
    expect_every_take_ended(&server, "job");
    // The next take shows the lapse just before it, from then on.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let log = events(&server, "job");
    assert_eq!(
        names(&log),
        ["acquired", "expired", "acquired", "released"],
        "{log:#?}"
    );
    assert_eq!(log[1]["time_ms"], log[2]["time_ms"]);
    expect_every_take_ended(&server, "job");
    // Nothing was written for the lapse: the list holds what the scripts wrote.
    assert_eq!(audit_entries(&server, "job").len(), 3);
}

#[test]
fn follow_shows_a_lapse_as_it_is_found() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let mut follow = Redlock::new(&server)
        .args(["log", "job", "--follow", "--json"])
        .spawn();
    follow.expect_line_containing("\"acquired\"");
    crash(&mut holder);
    let expired = follow.expect_line_containing("\"expired\"");
    assert!(expired.contains("\"inferred\":true"), "{expired}");
    // The next take, and nothing more for the lapse.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("\"acquired\"");
    follow.expect_line_containing("\"released\"");
    follow.signal(libc::SIGTERM);
    let out = follow.wait();
    out.expect_code(0);
    assert_eq!(out.stdout.matches("\"expired\"").count(), 1, "{out}");
}

#[test]
fn a_shared_holders_lapsed_lease_ends_its_take_and_not_the_others() {
    let server = RedisServer::start();
    let mut lapsing = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--shared", "-c"])
        .arg(child::HOLD)
        .spawn();
    lapsing.expect_line("ready");
    let mut living = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "10s", "--shared", "-c"])
        .arg(child::HOLD)
        .spawn();
    living.expect_line("ready");
    crash(&mut lapsing);
    let log = until_expired(&server, "job", Duration::from_secs(15));
    assert_eq!(names(&log), ["acquired", "acquired", "expired"], "{log:#?}");
    assert_eq!(log[2]["fence"], log[0]["fence"], "the lapsed one: {log:#?}");
    assert_eq!(log[2]["shape"], "shared");
    living.close_stdin();
    living.exits_with(0);
    // No later take could not have been made while it held: the lapse shows at each read.
    let log = events(&server, "job");
    assert_eq!(
        names(&log),
        ["acquired", "acquired", "released", "expired"],
        "{log:#?}"
    );
    assert_eq!(log[2]["fence"], log[1]["fence"]);
    assert_eq!(log[3]["fence"], log[0]["fence"]);
    expect_every_take_ended(&server, "job");
}

#[test]
fn a_provisional_grant_nobody_confirmed_ends_as_an_expiry_before_the_next_take() {
    // The head waiter is frozen while its attempt waits on the server, so the release grants
    // it the lock provisionally; continued after that lease lapsed, it waits again and runs.
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "10s", "--wait", "60s", "--", "true",
        ])
        .spawn();
    server.wait_until_waiting_on_server("job", 1);
    waiter.signal(libc::SIGSTOP);
    holder.close_stdin();
    holder.exits_with(0);
    // The grant is made at the release, unconfirmed; 1 s later its lease lapsed.
    let log = until_expired(&server, "job", Duration::from_secs(10));
    assert_eq!(
        names(&log),
        ["acquired", "released", "acquired", "expired"],
        "{log:#?}"
    );
    waiter.signal(libc::SIGCONT);
    waiter.exits_with(0);
    let log = events(&server, "job");
    assert_eq!(
        names(&log),
        [
            "acquired", "released", "acquired", "expired", "acquired", "released"
        ],
        "{log:#?}"
    );
    assert_eq!(log[3]["fence"], log[2]["fence"]);
    assert_eq!(log[5]["fence"], log[4]["fence"]);
    expect_every_take_ended(&server, "job");
}

#[test]
fn a_forced_run_has_one_end_and_its_own_release_is_noticed() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    holder.exits_with(76);
    // The scripts wrote the forced release and the run's own lost lease.
    let raw: Vec<String> = audit_entries(&server, "job")
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(raw, ["acquired", "forced", "lost"]);
    let log = events(&server, "job");
    assert_eq!(names(&log), ["acquired", "forced", "noticed"], "{log:#?}");
    assert_eq!(log[2]["logged_as"], "lost");
    assert_eq!(log[2]["fence"], log[0]["fence"]);
    assert_eq!(log[2]["outcome"], "lease lost");
    expect_every_take_ended(&server, "job");
    let text = Redlock::new(&server).args(["log", "job"]).exits_with(0);
    assert!(text.stdout.contains("  noticed  "), "{text}");
}

/// The `redlock:` lines of an outcome's stderr.
fn error_lines(outcome: &crate::support::Outcome) -> Vec<&str> {
    outcome
        .stderr
        .lines()
        .filter(|l| l.starts_with("redlock:"))
        .collect()
}

/// `log --all` over locks it cannot read (a record of another type, one of another data
/// layout, a lock the ACL user may not read): every other log is shown, each such lock is named
/// once on stderr in the words `status` uses, and the exit status is that lock's error's, as
/// `status --all`'s is; `--json` and `--follow` alike. A named lock it cannot read is still
/// an error with nothing shown.
#[test]
fn log_all_shows_every_log_it_can_read_and_names_each_lock_it_cannot() {
    let server = RedisServer::start();
    for key in ["a", "wrong", "later", "denied", "c"] {
        Redlock::new(&server)
            .args(["run", "--key", key, "--ttl", "5s", "--", "true"])
            .exits_with(0);
    }
    // A record of another type, and one written by a redlock of another layout.
    let stats = companion_key("wrong", "stats");
    let _: () = server.query(&["DEL", &stats]);
    let _: () = server.query(&["SET", &stats, "not a hash"]);
    let _: i64 = server.query(&["HSET", &companion_key("later", "stats"), "v", "2"]);
    let shown = |outcome: &crate::support::Outcome| -> Vec<String> {
        let mut keys: Vec<String> = outcome
            .stdout
            .lines()
            .map(|l| l.split("  ").nth(1).unwrap_or_default().to_string())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    };

    let outcome = Redlock::new(&server).args(["log", "--all"]).exits_with(78);
    assert_eq!(shown(&outcome), ["a", "c", "denied"], "{outcome}");
    let lines = error_lines(&outcome);
    assert_eq!(
        lines.len(),
        2,
        "one line per lock it could not read: {outcome}"
    );
    let status = Redlock::new(&server)
        .args(["status", "--all"])
        .exits_with(78);
    let wrong = lines.iter().find(|l| l.contains(&stats)).expect("wrong");
    assert!(wrong.to_lowercase().contains("wrongtype"), "{outcome}");
    assert!(
        status.stdout.contains(&wrong["redlock: ".len()..]),
        "not in status's words: {outcome}\n{status}"
    );
    assert!(
        lines.iter().any(|l| l.contains("layout \"2\"")),
        "{outcome}"
    );

    let json = Redlock::new(&server)
        .args(["log", "--all", "--json"])
        .exits_with(78);
    assert_eq!(error_lines(&json).len(), 2, "{json}");
    let keys: std::collections::BTreeSet<String> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["key"].to_string())
        .collect();
    assert_eq!(keys.len(), 3, "{json}");

    let mut follow = Redlock::new(&server)
        .args(["log", "--all", "--follow"])
        .spawn();
    follow.expect_line_containing("  c  released  ");
    Redlock::new(&server)
        .args(["run", "--key", "a", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  a  released  ");
    // A log that becomes unreadable while followed is named once and left; the others are
    // still followed.
    let c_log = audit_key("c");
    let _: () = server.query(&["DEL", &c_log]);
    let _: () = server.query(&["SET", &c_log, "not a list"]);
    wait_until("follow names the log of c", Duration::from_secs(10), || {
        follow
            .stderr_contains("cannot read the log of c")
            .then_some(())
    });
    Redlock::new(&server)
        .args(["run", "--key", "a", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    follow.expect_line_containing("  a  acquired  ");
    follow.expect_line_containing("  a  released  ");
    follow.signal(libc::SIGTERM);
    let followed = follow.wait();
    followed.expect_code(78);
    assert_eq!(error_lines(&followed).len(), 3, "{followed}");

    // A lock named is read or the command fails: nothing shown.
    for key in ["wrong", "later"] {
        let named = Redlock::new(&server).args(["log", "a", key]).exits_with(78);
        assert_eq!(named.stdout, "", "{named}");
        named.error_line();
    }

    // A user the ACL denies one lock's keys: 77, and the other logs.
    let _: () = server.query(&["DEL", &stats, &companion_key("later", "stats"), &c_log]);
    Redlock::new(&server)
        .args(["run", "--key", "c", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    let mut rules = vec!["on", ">pw", "+@all", "resetkeys", "~{}:*"];
    let patterns: Vec<String> = ["a", "c", "wrong", "later"]
        .iter()
        .flat_map(|k| [format!("~{k}"), format!("~{{{k}}}:*")])
        .collect();
    rules.extend(patterns.iter().map(String::as_str));
    server.acl_setuser("peek", &rules);
    let denied = Redlock::without_url()
        .args(["--url", &server.url_with_user("peek", "pw"), "log", "--all"])
        .exits_with(77);
    assert_eq!(shown(&denied), ["a", "c", "later", "wrong"], "{denied}");
    denied
        .error_mentions(crate::support::says::DENIED)
        .error_mentions(&["denied"]);
}

/// A label and a reason with a newline and an escape character: `log` prints each entry on a
/// line of its own with those characters escaped, so no recorded value can forge an entry or
/// drive the terminal; `--json` keeps the exact values.
#[test]
fn recorded_values_with_control_characters_cannot_forge_a_line() {
    let server = RedisServer::start();
    let forged = "lab\n2026-01-01T00:00:00.000Z  nl  forced  evil\x1b[2K";
    Redlock::new(&server)
        .args([
            "run", "--key", "nl", "--ttl", "5s", "--label", forged, "--", "true",
        ])
        .exits_with(0);
    Redlock::new(&server)
        .args(["pause", "nl", "--reason", "r\nLINE2\x1b[31m"])
        .exits_with(0);
    let text = Redlock::new(&server).args(["log", "nl"]).exits_with(0);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "acquired, released, paused: {text}");
    assert!(!text.stdout.contains('\x1b'), "{text}");
    let escaped = r"lab\n2026-01-01T00:00:00.000Z  nl  forced  evil\x1b[2K";
    for line in &lines[..2] {
        assert!(line.ends_with(&format!(": {escaped}")), "{text}");
    }
    assert!(lines[2].contains(r"reason: r\nLINE2\x1b[31m"), "{text}");
    let log = events(&server, "nl");
    assert_eq!(log[0]["cmd"], forged, "JSON keeps the exact value");
    assert_eq!(log[2]["reason"], "r\nLINE2\x1b[31m");
}
