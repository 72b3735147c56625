//! The lock is released on every way out of `redlock run`, and `--hold-at-least` keeps it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::support::{
    LockKeys, RedisServer, Redlock, TempDir, child, companion_key, says, wait_until,
    wait_until_gone,
};

#[test]
fn lock_is_released_after_the_command_succeeds() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--", "true"])
        .exits_with(0);
    assert!(!server.exists("job"), "the lock outlived the run");
}

#[test]
fn lock_is_released_after_the_command_fails() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", "exit 3"])
        .exits_with(3);
    assert!(!server.exists("job"), "the lock outlived the run");
}

#[test]
fn lock_is_released_after_the_command_dies_of_a_signal() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", "kill -KILL $$"])
        .exits_with(128 + libc::SIGKILL);
    assert!(!server.exists("job"), "the lock outlived the run");
}

#[test]
fn command_not_found_exits_127_and_releases_the_lock() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--"])
        .arg("redlock-test-no-such-command")
        .exits_with(127)
        .error_mentions(says::NOT_FOUND);
    assert!(
        !server.exists("job"),
        "a command that never started left the lock held"
    );
}

#[test]
fn command_not_executable_exits_126_and_releases_the_lock() {
    let server = RedisServer::start();
    let scratch = TempDir::new("noexec");
    let script = scratch.join("script.sh");
    fs::write(&script, "#!/bin/sh\necho should not run\n").expect("write script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).expect("chmod 644");
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--"])
        .arg(&script)
        .exits_with(126);
    outcome.error_mentions(says::NOT_EXECUTABLE);
    assert!(!outcome.stdout.contains("should not run"));
    assert!(
        !server.exists("job"),
        "a command that never started left the lock held"
    );
}

#[test]
fn background_process_left_by_the_command_is_stopped() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c"])
        .arg(r#"sleep 30 & echo "leftover $!""#)
        .exits_with(0);
    let leftover: i32 = outcome
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("leftover "))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| outcome.fail("no leftover pid printed"));
    wait_until_gone(
        leftover,
        "the leftover background sleep",
        Duration::from_secs(2),
    );
    assert!(!server.exists("job"), "the lock outlived the run");
}

/// A release tells the head of the queue on its own channel, `{L}:redlock:released:TICKET`;
/// with nobody queued it publishes nothing at all.
#[test]
fn a_release_wakes_the_queued_waiter_on_its_channel_and_tells_nobody_else() {
    let server = RedisServer::start();
    let keys = LockKeys::of("job");
    let _: () = server.query(&["CONFIG", "RESETSTAT"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--", "true"])
        .exits_with(0);
    let commands = server.info("commandstats");
    assert!(!commands.contains_key("cmdstat_publish"), "{commands:?}");

    let mut subscriber = server.client();
    let mut pubsub = subscriber.as_pubsub();
    pubsub
        .psubscribe(format!("{}:*", keys.released_channel))
        .expect("subscribe to the waiters' channels");
    pubsub
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("set read timeout");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "30s", "--wait", "30s", "--", "true",
        ])
        .spawn();
    let queue = companion_key("job", "queue");
    wait_until("the waiter's queue entry", Duration::from_secs(10), || {
        (server.query::<i64>(&["ZCARD", &queue]) == 1).then_some(())
    });
    holder.close_stdin();
    holder.exits_with(0);
    let message = pubsub
        .get_message()
        .unwrap_or_else(|e| panic!("nothing published to the waiter: {e}"));
    let channel = message.get_channel_name().to_string();
    assert!(
        channel.starts_with(&format!("{}:", keys.released_channel)),
        "{channel}"
    );
    waiter.exits_with(0);
}

#[test]
fn hold_at_least_keeps_the_lock_until_that_long_after_acquiring() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "10s",
            "--hold-at-least",
            "3s",
        ])
        .args(["-c", r#"echo "token=$REDLOCK_TOKEN""#])
        .exits_with(0);
    assert_eq!(server.get("job"), Some(outcome.printed("token")));
    let pttl = server.pttl("job").expect("the held key has an expiry");
    assert!(
        pttl > Duration::from_millis(1500) && pttl <= Duration::from_secs(3),
        "PTTL {pttl:?} after a run that ended at once under --hold-at-least 3s"
    );
}

#[test]
fn hold_at_least_shorter_than_the_run_releases_as_usual() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "10s",
            "--hold-at-least",
            "500ms",
        ])
        .args(["-c", "sleep 0.7"])
        .exits_with(0);
    assert!(
        !server.exists("job"),
        "the lock outlived a run longer than --hold-at-least"
    );
}

#[test]
fn hold_at_least_keeps_nothing_when_the_command_never_started() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--hold-at-least",
            "1h",
        ])
        .args(["--", "/nonexistent/command"])
        .exits_with(127);
    assert!(!server.exists("job"), "the lock was kept for an hour");
}
