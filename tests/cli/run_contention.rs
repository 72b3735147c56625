//! `redlock run` against a lock someone else holds: give up, or wait for it.

use std::time::{Duration, Instant};

use crate::support::{RedisServer, Redlock, TempDir, child, host_name, says, wait_for_contender};

/// Holds `key` the way another client would: a plain string with an expiry.
fn hold_elsewhere(server: &RedisServer, key: &str) {
    let _: () = server.query(&["SET", key, "someone-elses-token", "PX", "30000"]);
}

#[test]
fn busy_lock_exits_75_and_never_starts_the_command() {
    let server = RedisServer::start();
    let scratch = TempDir::new("busy");
    let marker = scratch.join("started");
    hold_elsewhere(&server, "job");
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "touch"])
        .arg(&marker)
        .exits_with(75)
        .error_mentions(says::BUSY);
    assert!(
        !marker.exists(),
        "the command ran although the lock was busy"
    );
    assert_eq!(server.get("job").as_deref(), Some("someone-elses-token"));
}

#[test]
fn busy_lock_without_wait_gives_up_at_once() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(75);
    assert!(
        outcome.elapsed < Duration::from_secs(2),
        "giving up took {:?}",
        outcome.elapsed
    );
}

#[test]
fn conflict_exit_code_zero_makes_a_busy_lock_a_success() {
    let server = RedisServer::start();
    let scratch = TempDir::new("busy");
    let marker = scratch.join("started");
    hold_elsewhere(&server, "job");
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "--conflict-exit-code",
            "0",
        ])
        .args(["--", "touch"])
        .arg(&marker)
        .exits_with(0);
    assert!(
        !marker.exists(),
        "the command ran although the lock was busy"
    );
}

#[test]
fn conflict_exit_code_replaces_75() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "--conflict-exit-code",
            "3",
        ])
        .args(["--", "true"])
        .exits_with(3)
        .error_mentions(says::BUSY);
}

#[test]
fn waiter_starts_as_soon_as_the_holder_releases() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    let before = server.script_calls();
    let mut waiter = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--wait", "20s"])
        .args(["-c", "echo started"])
        .spawn();
    wait_for_contender(&server, "job", before);

    let released = Instant::now();
    holder.close_stdin();
    let started = waiter.expect_line("started");
    holder.exits_with(0);
    waiter.exits_with(0);
    // The holder's key would have lived 30 s; the waiter must not sit that out.
    let delay = started - released;
    assert!(
        delay < Duration::from_secs(2),
        "the waiter started {delay:?} after the holder finished"
    );
}

#[test]
fn waiter_whose_wait_runs_out_exits_75_naming_the_holder() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c"])
        .arg(child::HOLD_PRINTING_PID)
        .spawn();
    let child_pid = holder.expect_pid("child");
    holder.expect_line("ready");

    let outcome = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "1s", "--wait", "1s", "--", "true",
        ])
        .exits_with(75);
    assert!(
        outcome.elapsed >= Duration::from_millis(900),
        "gave up after {:?}, before the 1s wait ran out",
        outcome.elapsed
    );
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "gave up only after {:?}",
        outcome.elapsed
    );
    let line = outcome.error_line();
    let names_holder = [host_name(), holder.pid().to_string(), child_pid.to_string()]
        .iter()
        .any(|who| line.contains(who.as_str()));
    if !names_holder {
        outcome.fail("the busy message names neither the holder's host nor its pid");
    }
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn waiter_gets_the_lock_once_a_killed_holders_key_expires() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    let before = server.script_calls();
    let mut waiter = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--wait", "15s"])
        .args(["-c", "echo started"])
        .spawn();
    wait_for_contender(&server, "job", before);

    // No release is ever published: only the key's expiry frees the lock.
    let killed = Instant::now();
    holder.kill9();
    let started = waiter.expect_line("started");
    waiter.exits_with(0);
    let delay = started - killed;
    assert!(
        delay < Duration::from_secs(3),
        "the waiter started {delay:?} after the holder died with a 1s TTL"
    );
}

#[test]
fn busy_error_is_one_json_object_with_redlock_log_format_json() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    let outcome = Redlock::new(&server)
        .env("REDLOCK_LOG_FORMAT", "json")
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(75);
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    let [line] = lines.as_slice() else {
        outcome.fail("expected exactly one line on stderr");
    };
    if !(line.starts_with('{') && line.ends_with('}')) {
        outcome.fail("the error line is not a JSON object");
    }
    let lowered = line.to_lowercase();
    if !says::BUSY.iter().any(|word| lowered.contains(word)) {
        outcome.fail(&format!(
            "the error does not mention one of {:?}",
            says::BUSY
        ));
    }
}
