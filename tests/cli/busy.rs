//! Busy policies beyond "skip" (75) and "wait" (`--wait`): `--max-waiters N`, a queue that
//! never piles up (a full one is busy at once), and `--replace`, which stops the running holder
//! (79) and runs once its command is gone.
//!
//! Every test checks mutual exclusion with the sections oracle: the commands of every holder
//! and contender never overlap, and their fences grow in the order they started.

use std::path::Path;
use std::time::Duration;

use crate::support::process::is_stopped;
use crate::support::redlock::Running;
use crate::support::sections::{SECTION, expect_exclusive_sections};
use crate::support::{RedisServer, Redlock, TempDir, companion_key, wait_until};

/// Live entries of `job`'s queue (not lapsed), as the acquire script counts them.
fn live_waiters(server: &RedisServer) -> usize {
    let now_ms = server.micros() / 1000;
    server.query::<usize>(&[
        "ZCOUNT",
        &companion_key("job", "alive"),
        &format!("({now_ms}"),
        "+inf",
    ])
}

/// A run of `job` whose command is a stamped section of `ticks` ticks, 50 ms apart.
fn section(server: &RedisServer, log: &Path, ticks: u32) -> Redlock {
    Redlock::new(server)
        .env("STRESS_LOG", log)
        .env("TICKS", ticks.to_string())
        .env("TICK", "0.05")
}

/// A run of `job` with `ttl` whose section runs 50 s unless stopped; returns once the section
/// started.
fn long_section(server: &RedisServer, log: &Path, ttl: &str) -> Running {
    let holder = section(server, log, 1000)
        .args(["run", "--key", "job", "--ttl", ttl, "--"])
        .args(SECTION)
        .spawn();
    wait_until(
        "the holder's command to start",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(log)
                .is_ok_and(|t| t.contains("start"))
                .then_some(())
        },
    );
    holder
}

/// A holder of `job` running a section until its stdin is closed: it prints `ready` once its
/// section started.
fn holding(server: &RedisServer, log: &Path) -> Running {
    let mut holder = Redlock::new(server)
        .env("STRESS_LOG", log)
        .args(["run", "--key", "job", "--ttl", "10s", "--", "bash", "-c"])
        .arg(format!(
            "{}\necho ready; read _ || true\n{}",
            "echo \"$EPOCHREALTIME $$ $REDLOCK_FENCE start\" >> \"$STRESS_LOG\"",
            "echo \"$EPOCHREALTIME $$ $REDLOCK_FENCE end\" >> \"$STRESS_LOG\""
        ))
        .spawn();
    holder.expect_line("ready");
    holder
}

/// A contender with `--wait 60s --max-waiters N`, to be given `--` and its section.
fn bounded(server: &RedisServer, log: &Path, n: u32) -> Redlock {
    section(server, log, 2).args([
        "run",
        "--key",
        "job",
        "--ttl",
        "10s",
        "--wait",
        "60s",
        "--max-waiters",
        &n.to_string(),
    ])
}

#[test]
fn max_waiters_one_gives_an_overrunning_job_exactly_one_catch_up_run() {
    let server = RedisServer::start();
    let scratch = TempDir::new("catch-up");
    let log = scratch.join("sections.log");
    let mut holder = holding(&server, &log);
    let catch_up = bounded(&server, &log, 1).arg("--").args(SECTION).spawn();
    wait_until("the catch-up run to queue", Duration::from_secs(10), || {
        (live_waiters(&server) == 1).then_some(())
    });
    // The queue is full: later runs of the overrunning schedule are busy at once.
    for _ in 0..3 {
        bounded(&server, &log, 1)
            .arg("--")
            .args(SECTION)
            .exits_with(75)
            .error_mentions(&["queue is full (--max-waiters 1: 1 is waiting)"]);
    }
    // With its own exit status for a busy run, too.
    bounded(&server, &log, 1)
        .args(["--conflict-exit-code", "0"])
        .arg("--")
        .args(SECTION)
        .exits_with(0);
    holder.close_stdin();
    holder.exits_with(0);
    catch_up.exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(
        sections.len(),
        2,
        "the holder and one catch-up run: {sections:?}"
    );
    // Every refusal counted once, as a busy run.
    let busy: i64 = server.query(&["HGET", &companion_key("job", "stats"), "busy"]);
    assert_eq!(busy, 4);
}

#[test]
fn a_waiter_already_queued_keeps_its_place_when_the_queue_is_full() {
    let server = RedisServer::start();
    let scratch = TempDir::new("keeps-place");
    let log = scratch.join("sections.log");
    let mut holder = holding(&server, &log);
    // Two waiters under a limit of two: both join; a third is refused; the first two, which
    // refresh their entries while they wait, keep their places and run.
    let first = bounded(&server, &log, 2).arg("--").args(SECTION).spawn();
    wait_until("the first waiter to queue", Duration::from_secs(10), || {
        (live_waiters(&server) == 1).then_some(())
    });
    let second = bounded(&server, &log, 2).arg("--").args(SECTION).spawn();
    wait_until(
        "the second waiter to queue",
        Duration::from_secs(10),
        || (live_waiters(&server) == 2).then_some(()),
    );
    bounded(&server, &log, 2)
        .arg("--")
        .args(SECTION)
        .exits_with(75)
        .error_mentions(&["queue is full (--max-waiters 2: 2 are waiting)"]);
    // A waiter without a limit is not refused by others' limits.
    let unbounded = section(&server, &log, 2)
        .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s", "--"])
        .args(SECTION)
        .spawn();
    wait_until(
        "the unbounded waiter to queue",
        Duration::from_secs(10),
        || (live_waiters(&server) == 3).then_some(()),
    );
    holder.close_stdin();
    holder.exits_with(0);
    first.exits_with(0);
    second.exits_with(0);
    unbounded.exits_with(0);
    assert_eq!(expect_exclusive_sections(&log).len(), 4);
}

/// A frozen waiter (SIGSTOP: its connection open, its entry no longer refreshed) counts as
/// waiting until its entry lapses; then the queue has room again.
#[test]
fn a_frozen_waiter_counts_until_its_entry_lapses() {
    let server = RedisServer::start();
    let scratch = TempDir::new("frozen-waiter");
    let log = scratch.join("sections.log");
    let mut holder = holding(&server, &log);
    let frozen = bounded(&server, &log, 1).arg("--").args(SECTION).spawn();
    wait_until("the waiter to queue", Duration::from_secs(10), || {
        (live_waiters(&server) == 1).then_some(())
    });
    frozen.signal(libc::SIGSTOP);
    wait_until("the waiter to stop", Duration::from_secs(5), || {
        is_stopped(frozen.pid()).then_some(())
    });
    bounded(&server, &log, 1)
        .arg("--")
        .args(SECTION)
        .exits_with(75)
        .error_mentions(&["queue is full (--max-waiters 1: 1 is waiting)"]);
    // The release puts the front of the queue on notice: the frozen head's entry lapses
    // within the documented 2 s (its grant, if it had one, sooner).
    holder.close_stdin();
    holder.exits_with(0);
    wait_until(
        "the frozen waiter's entry to lapse",
        Duration::from_secs(5),
        || (live_waiters(&server) == 0).then_some(()),
    );
    bounded(&server, &log, 1)
        .arg("--")
        .args(SECTION)
        .exits_with(0);
    // Awake again, the frozen waiter finds its place gone, queues again (room: nobody waits)
    // and runs.
    frozen.signal(libc::SIGCONT);
    frozen.exits_with(0);
    assert_eq!(expect_exclusive_sections(&log).len(), 3);
}

/// A replacer of `job` (`--replace`, and `extra`) running a section of `ticks` ticks.
fn replacer(server: &RedisServer, log: &Path, ticks: u32, extra: &[&str]) -> Redlock {
    section(server, log, ticks)
        .args(["run", "--key", "job", "--ttl", "10s", "--replace"])
        .args(extra)
        .arg("--")
        .args(SECTION)
}

fn audit_log(server: &RedisServer) -> Vec<String> {
    server.query(&["LRANGE", &companion_key("job", "audit"), "0", "-1"])
}

#[test]
fn a_replaced_holder_stops_its_command_records_it_and_exits_79() {
    let server = RedisServer::start();
    let scratch = TempDir::new("replace");
    let log = scratch.join("sections.log");
    let holder = long_section(&server, &log, "10s");
    replacer(&server, &log, 2, &[]).exits_with(0);
    holder
        .exits_with(79)
        .error_mentions(&["replaced", "--replace"]);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2, "{sections:?}");
    assert!(!sections[0].ended, "the replaced command ran to its end");
    let stats = server.lock_record("job");
    assert_eq!(stats.get("outcome").map(String::as_str), Some("ok"));
    let audit = audit_log(&server).join("\n");
    assert!(audit.contains("\u{1f}replacing\u{1f}"), "{audit}");
    assert!(
        audit.contains("outcome=replaced") && audit.contains("\u{1f}by="),
        "the replaced run's release names who replaced it:\n{audit}"
    );
}

/// A frozen holder (SIGSTOP of its redlock) cannot hear the request: its keeper kills the
/// command at the kill point, and only then may the replacer's command start.
#[test]
fn a_frozen_holder_is_replaced_only_once_its_keeper_killed_the_command() {
    let server = RedisServer::start();
    let scratch = TempDir::new("replace-frozen");
    let log = scratch.join("sections.log");
    let holder = long_section(&server, &log, "2s");
    holder.signal(libc::SIGSTOP);
    wait_until("the holder to stop", Duration::from_secs(5), || {
        is_stopped(holder.pid()).then_some(())
    });
    replacer(&server, &log, 2, &[]).exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2, "{sections:?}");
    holder.signal(libc::SIGCONT);
    // Continued past its kill point: its lease is lost, whatever was asked meanwhile.
    holder.exits_with(76);
}

/// While a holder has not yet stopped (its redlock frozen here), `status` and `check` say who
/// asked it to stop, in text and JSON; continued, it is replaced.
#[test]
fn a_pending_stop_request_shows_in_status_and_check() {
    let server = RedisServer::start();
    let scratch = TempDir::new("replace-pending");
    let log = scratch.join("sections.log");
    let holder = long_section(&server, &log, "30s");
    holder.signal(libc::SIGSTOP);
    wait_until("the holder to stop", Duration::from_secs(5), || {
        is_stopped(holder.pid()).then_some(())
    });
    let waiting = replacer(&server, &log, 2, &["--wait", "60s"]).spawn();
    let asked = wait_until("the stop request", Duration::from_secs(10), || {
        let status = Redlock::new(&server).args(["status", "job"]).exits_with(0);
        status
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("stopping"))
            .map(str::to_string)
    });
    assert!(
        asked.contains("asked to stop by") && asked.contains(&format!("pid {}", waiting.pid())),
        "{asked}"
    );
    let json = Redlock::new(&server)
        .args(["status", "--json", "job"])
        .exits_with(0);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("status --json");
    let by = doc["locks"][0]["holder"]["stop_asked_by"].as_str();
    assert!(
        by.is_some_and(|by| asked.contains(by)),
        "the JSON's stop_asked_by {by:?} is not the text's: {asked}"
    );
    let check = Redlock::new(&server).args(["check", "job"]).exits_with(0);
    assert!(
        check.stdout.contains("asked to stop by"),
        "{}",
        check.stdout
    );
    holder.signal(libc::SIGCONT);
    holder.exits_with(79);
    waiting.exits_with(0);
    expect_exclusive_sections(&log);
    // Free now (status 1), and the request went with the holder's record.
    let status = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    assert!(
        !status.stdout.contains("asked to stop"),
        "{}",
        status.stdout
    );
}

#[test]
fn a_holder_with_no_replace_is_not_asked_and_the_replacer_is_busy() {
    let server = RedisServer::start();
    let scratch = TempDir::new("no-replace");
    let log = scratch.join("sections.log");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "10s", "--no-replace", "-c"])
        .arg(crate::support::child::HOLD)
        .spawn();
    holder.expect_line("ready");
    replacer(&server, &log, 2, &[])
        .exits_with(75)
        .error_mentions(&["--replace does not apply", "--no-replace"]);
    replacer(&server, &log, 2, &["--wait", "1s"]).exits_with(75);
    // A lock taken by `redlock acquire` is not asked either: no redlock supervises its work.
    holder.close_stdin();
    holder.exits_with(0);
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "10s"])
        .exits_with(0);
    replacer(&server, &log, 2, &[]).exits_with(75);
    assert!(!audit_log(&server).iter().any(|e| e.contains("replacing")));
    assert!(expect_exclusive_sections(&log).is_empty());
}

/// Contenders that each replace the one before: at every moment one command runs, never two.
#[test]
fn a_loop_of_replacing_contenders_never_overlaps() {
    let server = RedisServer::start();
    let scratch = TempDir::new("replace-loop");
    let log = scratch.join("sections.log");
    let mut runs = Vec::new();
    for _ in 0..10 {
        runs.push(replacer(&server, &log, 20, &["--wait", "20s"]).spawn());
        std::thread::sleep(Duration::from_millis(150));
    }
    let mut replaced = 0;
    for run in runs {
        let out = run.wait();
        match out.code() {
            Some(0) => {}
            Some(79) => replaced += 1,
            _ => out.fail("a contender ended neither 0 nor 79"),
        }
    }
    let sections = expect_exclusive_sections(&log);
    assert!(replaced >= 1, "nobody was replaced: {sections:?}");
    assert!(sections.len() >= 2, "{sections:?}");
}

/// Shared and slotted holds are never asked to stop: a replacer is busy, as without --replace.
#[test]
fn shared_and_slotted_holders_are_not_replaced() {
    for shape in [&["--shared"][..], &["--slots", "2"][..]] {
        let server = RedisServer::start();
        let scratch = TempDir::new("replace-shapes");
        let log = scratch.join("sections.log");
        let mut holder = Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "10s"])
            .args(shape)
            .args(["-c", crate::support::child::HOLD])
            .spawn();
        holder.expect_line("ready");
        replacer(&server, &log, 2, &[])
            .exits_with(75)
            .error_mentions(&["--replace does not apply", "shared"]);
        holder.close_stdin();
        holder.exits_with(0);
    }
}

/// A holder record that outlived its lock (a foreign client deleted the key while a replacer's
/// stop request stood in it) lends the next holder none of its fields: that run renews and
/// ends 0, not 79, and its record names it alone.
#[test]
fn a_stop_request_left_in_a_stale_record_does_not_stop_the_next_holder() {
    let server = RedisServer::start();
    let holder = companion_key("job", "holder");
    // As a holder's record is: the fields every record has, and those a run may add.
    let record = [
        "v=1",
        "started=1",
        "renewed=1",
        "ttl=60000",
        "fence=1",
        "finished=0",
        "host=gone",
        "stop=someone else",
        "label=stale",
        "replace=no",
    ]
    .join("\x1f");
    let _: () = server.query(&["SET", &holder, &record, "PX", "60000"]);
    // Renewed every 300 ms: the renewals meet the record.
    let outcome = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "900ms", "--", "sleep", "1.5",
        ])
        .exits_with(0);
    assert!(!outcome.stderr.contains("replaced"), "{outcome}");
    let mut held = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "10s",
            "-c",
            crate::support::child::HOLD,
        ])
        .spawn();
    held.expect_line("ready");
    let fields = server.holder_record("job");
    for stale in ["stop", "label", "replace"] {
        assert!(!fields.contains_key(stale), "{stale} left: {fields:?}");
    }
    held.close_stdin();
    held.exits_with(0);
}

#[test]
fn a_replacer_frozen_on_its_grant_is_superseded_even_when_the_grant_lapses() {
    // R1 waits to replace a holder that may not be replaced, and is frozen while the release
    // grants it the lock provisionally; R2 arrives and asks R1 to stop. R1, continued after
    // its grant lapsed, must not come back as a fresh replacer and stop R2: the last replacer
    // to arrive is the one that runs.
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--no-replace"])
        .args(["-c", crate::support::child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let r1 = Redlock::replacing(&server, "job")
        .args(["--", "echo", "r1-ran"])
        .spawn();
    server.wait_until_waiting_on_server("job", 1);
    r1.signal(libc::SIGSTOP);
    holder.close_stdin();
    holder.exits_with(0);
    // The release granted R1 the lock, which it cannot confirm.
    wait_until("R1's provisional grant", Duration::from_secs(5), || {
        server.exists("job").then_some(())
    });
    let mut r2 = Redlock::replacing(&server, "job")
        .args(["-c", crate::support::child::HOLD])
        .spawn();
    // R1's grant lapses (1 s) and R2 takes the lock.
    r2.expect_line("ready");
    r1.signal(libc::SIGCONT);
    r1.exits_with(79)
        .error_mentions(&["superseded"])
        .never_shows("r1-ran");
    r2.close_stdin();
    r2.exits_with(0);
}
