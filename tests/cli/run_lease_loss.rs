//! Losing the lease while the command runs: the command's whole process group is stopped,
//! in time, and redlock says so with 76.

use std::thread;
use std::time::{Duration, Instant};

use crate::support::{
    Outcome, RedisServer, Redlock, child, says, stays_held, wait_until, wait_until_gone,
};

/// A command that starts a grandchild (`sleep`) in the background, reports both pids and
/// waits for it.
const WITH_GRANDCHILD: &str =
    r#"sleep 30 & echo "grandchild $!"; echo "child $$"; echo ready; wait"#;

#[test]
fn deleted_key_ends_the_run_with_76() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    let deleted = Instant::now();
    let _: i64 = server.query(&["DEL", "job"]);
    let outcome = holder.exits_with(76);
    outcome.error_mentions(says::LEASE_LOST);
    let exited = outcome.exited_at.expect("redlock exited");
    assert!(
        exited - deleted < Duration::from_secs(2),
        "redlock took {:?} to notice the deleted key under a 1s TTL",
        exited - deleted
    );
}

#[test]
fn deleted_key_terminates_the_commands_whole_process_group() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", WITH_GRANDCHILD])
        .spawn();
    let grandchild = holder.expect_pid("grandchild");
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    let _: i64 = server.query(&["DEL", "job"]);
    holder.exits_with(76);
    wait_until_gone(child, "the command", Duration::from_secs(1));
    wait_until_gone(
        grandchild,
        "the command's background sleep",
        Duration::from_secs(1),
    );
}

#[test]
fn grandchild_ignoring_sigterm_is_killed_when_the_lease_is_lost() {
    let server = RedisServer::start();
    let stubborn = r#"(trap '' TERM; exec sleep 30) & echo "grandchild $!"; echo ready; wait"#;
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", stubborn])
        .spawn();
    let grandchild = holder.expect_pid("grandchild");
    holder.expect_line("ready");

    let _: i64 = server.query(&["DEL", "job"]);
    holder.exits_with(76);
    wait_until_gone(
        grandchild,
        "the grandchild ignoring SIGTERM",
        Duration::from_secs(1),
    );
}

#[test]
fn foreign_token_ends_the_run_with_76_and_stays_in_place() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    let _: () = server.query(&["SET", "job", "someone-elses-token", "PX", "30000"]);
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
    assert_eq!(
        server.get("job").as_deref(),
        Some("someone-elses-token"),
        "redlock removed or changed a lock that was no longer its own"
    );
}

#[test]
fn command_exiting_0_after_losing_the_lease_still_exits_76() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c"])
        .arg("trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done")
        .spawn();
    holder.expect_line("ready");

    let _: i64 = server.query(&["DEL", "job"]);
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
}

#[test]
fn lock_key_replaced_by_another_type_ends_the_run_with_76() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    let _: () = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg("job")
        .ignore()
        .cmd("HSET")
        .arg(&["job", "field", "value"])
        .ignore()
        .query(&mut server.client())
        .expect("replace the lock with a hash");
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
    assert_eq!(server.query::<String>(&["TYPE", "job"]), "hash");
}

#[test]
fn revoked_script_permission_ends_the_run_with_76() {
    let server = RedisServer::start();
    server.acl_setuser("cron", &["on", ">cron-pw", "~*", "&*", "+@all"]);
    let mut holder = Redlock::without_url()
        .args(["--url", &server.url_with_user("cron", "cron-pw"), "run"])
        .args(["--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    server.acl_setuser(
        "cron",
        &[
            "-eval",
            "-evalsha",
            "-eval_ro",
            "-evalsha_ro",
            "-fcall",
            "-fcall_ro",
        ],
    );
    // Releasing fails the same way; a warning about that may precede the final line.
    holder.exits_with(76).last_error_mentions(says::LEASE_LOST);
}

#[test]
fn redlock_resumed_after_being_stopped_past_the_lease_kills_the_command_at_once() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::HOLD_PRINTING_PID,
        ])
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    holder.signal(libc::SIGSTOP);
    wait_until(
        "the stopped holder's lock to expire",
        Duration::from_secs(5),
        || (!server.exists("job")).then_some(()),
    );
    let resumed = Instant::now();
    holder.signal(libc::SIGCONT);
    let gone = wait_until_gone(child, "the command", Duration::from_secs(5));
    holder.exits_with(76);
    assert!(
        gone - resumed < Duration::from_millis(500),
        "the command ran on for {:?} after redlock resumed past its lease",
        gone - resumed
    );
}

/// Starts `redlock ARGS... run --key job --ttl TTL -c SCRIPT`, where the script prints
/// `child PID` and `ready`; then pauses the server for good (it is resumed only once redlock
/// has exited). Returns when the pause began, when the command was first seen gone, and
/// redlock's outcome.
///
/// Once the command is stopped, redlock still tries to release the lock; with
/// `REDLOCK_TIMEOUT=1s` that attempt must give up within a few seconds: redlock never hangs
/// on a server that does not answer.
fn stall_server_under(args: &[&str], ttl: &str, script: &str) -> (Instant, Instant, Outcome) {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .env("REDLOCK_TIMEOUT", "1s")
        .args(args)
        .args(["run", "--key", "job", "--ttl", ttl, "-c", script])
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    server.pause();
    let paused = Instant::now();
    let gone = wait_until_gone(child, "the command", Duration::from_secs(10));
    let outcome = holder.wait();
    server.resume();
    outcome.expect_code(76);
    let exited = outcome.exited_at.expect("redlock exited");
    assert!(
        exited - paused < Duration::from_secs(6),
        "redlock took {:?} to give up on a server that stopped answering\n{outcome}",
        exited - paused
    );
    (paused, gone, outcome)
}

/// The clock-rate allowance of a lease, as `lease.rs` computes it: ttl/100 + 2 ms.
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The last renewal that can have succeeded was sent before the pause. As `lease.rs` draws the
/// timeline from that moment, the command is killed at `ttl − drift − margin` (the margin being
/// drift + 25 ms) and must be dead by the deadline, `ttl − drift`, a margin before the server
/// can expire the key. The command must be seen gone before that deadline: the margin (47 ms at
/// a 2 s TTL) is the only slack, for the kill to land and for this test's polling.
fn assert_gone_within_the_lease(paused: Instant, gone: Instant, ttl: Duration, outcome: &Outcome) {
    let ran_on = gone - paused;
    let margin = drift(ttl) + Duration::from_millis(25);
    let kill_point = ttl - drift(ttl) - margin;
    let deadline = ttl - drift(ttl);
    if ran_on >= deadline {
        outcome.fail(&format!(
            "the command ran until {ran_on:?} after the server stalled: past the lease's \
             deadline {deadline:?} (kill point {kill_point:?}) for a {ttl:?} TTL"
        ));
    }
}

#[test]
fn stalled_server_stops_the_command_before_the_lease_deadline() {
    let (paused, gone, outcome) = stall_server_under(&[], "2s", child::HOLD_PRINTING_PID);
    assert_gone_within_the_lease(paused, gone, Duration::from_secs(2), &outcome);
    outcome.last_error_mentions(says::LEASE_LOST);
}

#[test]
fn stalled_server_kills_a_command_ignoring_sigterm_before_the_lease_deadline() {
    let stubborn = r#"trap '' TERM; echo "child $$"; echo ready; while :; do sleep 0.05; done"#;
    let (paused, gone, outcome) = stall_server_under(&[], "2s", stubborn);
    assert_gone_within_the_lease(paused, gone, Duration::from_secs(2), &outcome);
}

#[test]
fn quiet_lease_loss_prints_only_the_final_error_line() {
    let (_, _, outcome) = stall_server_under(&["-q"], "1s", child::HOLD_PRINTING_PID);
    outcome.error_mentions(says::LEASE_LOST);
}

#[test]
fn stall_shorter_than_a_third_of_the_ttl_is_survived() {
    let ttl = Duration::from_millis(1500);
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1500ms"])
        .args(["-c", child::HOLD_AND_PRINT_TOKEN])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");

    server.pause();
    // The stall itself is the stimulus: a fixed 400 ms, under TTL/3 = 500 ms.
    thread::sleep(Duration::from_millis(400));
    server.resume();
    stays_held(&server, "job", &token, ttl);
    holder.close_stdin();
    holder.exits_with(0);
}
