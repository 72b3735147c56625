//! `redlock release KEY`: by token, only the holder's lock goes (0) and anything else stays
//! untouched (1); `--force` removes whoever holds it during an incident, says whom, stops a live
//! run at its next renewal (76), counts the removal, and wakes waiters at once.

use std::time::{Duration, Instant};

use crate::support::json::Document;
use crate::support::{
    LockKeys, RedisServer, Redlock, child, host_name, lock_status, says, wait_until,
    wait_until_gone,
};

/// `redlock acquire --key KEY --ttl TTL`; returns the token it printed.
fn acquire(server: &RedisServer, key: &str, ttl: &str) -> String {
    let outcome = Redlock::new(server)
        .args(["acquire", "--key", key, "--ttl", ttl])
        .exits_with(0);
    match outcome.stdout.lines().next() {
        Some(token) => token.to_owned(),
        None => outcome.fail("acquire printed no token"),
    }
}

/// The lock's value and remaining time to live, or panics when it is gone.
fn value_and_pttl(server: &RedisServer, key: &str) -> (String, Duration) {
    let value = server.get(key).unwrap_or_else(|| panic!("{key} is gone"));
    let pttl = server
        .pttl(key)
        .unwrap_or_else(|| panic!("{key} has no expiry"));
    (value, pttl)
}

#[test]
fn release_with_the_holders_token_deletes_the_lock() {
    let server = RedisServer::start();
    let token = acquire(&server, "job", "30s");
    Redlock::new(&server)
        .args(["release", "job", "--token", &token])
        .exits_with(0);
    let keys = LockKeys::of("job");
    assert!(!server.exists(&keys.lock), "the lock is still there");
    assert!(
        !server.exists(&keys.holder),
        "the holder record is still there"
    );
}

#[test]
fn release_with_a_wrong_token_exits_1_and_leaves_the_lock_untouched() {
    let server = RedisServer::start();
    let token = acquire(&server, "job", "30s");
    let outcome = Redlock::new(&server)
        .args(["release", "job", "--token", "not-the-holders-token"])
        .exits_with(1);
    outcome.never_shows(&token);
    let (value, pttl) = value_and_pttl(&server, "job");
    assert_eq!(value, token, "the lock changed hands");
    assert!(
        pttl > Duration::from_secs(25),
        "the lock's TTL is now {pttl:?}"
    );
    assert!(server.exists(&LockKeys::of("job").holder));
}

#[test]
fn release_of_a_free_key_exits_1() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["release", "job", "--token", "any-token"])
        .exits_with(1);
    assert!(!server.exists("job"));
}

#[test]
fn release_without_token_or_force_is_a_usage_error_and_contacts_nothing() {
    let server = RedisServer::start();
    let token = acquire(&server, "job", "30s");
    let before = server.connections_received();
    Redlock::new(&server)
        .args(["release", "job"])
        .exits_with(64);
    assert_eq!(server.connections_received(), before, "redlock connected");
    assert_eq!(server.get("job"), Some(token));
}

#[test]
fn release_with_both_token_and_force_is_a_usage_error_and_contacts_nothing() {
    let server = RedisServer::start();
    let token = acquire(&server, "job", "30s");
    let before = server.connections_received();
    Redlock::new(&server)
        .args(["release", "job", "--token", &token, "--force"])
        .exits_with(64);
    assert_eq!(server.connections_received(), before, "redlock connected");
    assert_eq!(server.get("job"), Some(token));
}

#[test]
fn forced_release_removes_the_lock_and_names_its_holder_on_stdout() {
    let server = RedisServer::start();
    // `acquire` records its caller, this test process, as the holder.
    acquire(&server, "job", "30s");
    let outcome = Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    for expected in [host_name(), format!("pid {}", std::process::id())] {
        if !outcome.stdout.contains(&expected) {
            outcome.fail(&format!("stdout does not name the holder: no {expected:?}"));
        }
    }
    let keys = LockKeys::of("job");
    assert!(!server.exists(&keys.lock), "the lock is still there");
    assert!(
        !server.exists(&keys.holder),
        "the holder record is still there"
    );
}

#[test]
fn forced_release_does_not_show_the_removed_token() {
    // docs/guide.md, "Security": the token is printed only by `acquire` and `status --show-token`.
    let server = RedisServer::start();
    let token = acquire(&server, "job", "30s");
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0)
        .never_shows(&token);
}

#[test]
fn forced_release_removes_a_lock_taken_by_another_client() {
    let server = RedisServer::start();
    let _: () = server.query(&["SET", "job", "someone-elses-token", "PX", "30000"]);
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    assert!(!server.exists("job"));
}

#[test]
fn forced_release_of_a_free_key_exits_1() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(1);
    assert_eq!(lock_status(&server, "job").int("counters.forced"), 0);
}

#[test]
fn forced_release_leaves_a_key_of_another_type_alone_and_exits_78() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(78)
        .error_mentions(says::WRONG_TYPE);
    assert_eq!(server.query::<String>(&["TYPE", "job"]), "hash");
}

#[test]
fn forced_release_of_a_live_run_stops_it_with_76_within_a_renewal_interval() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c"])
        .arg(child::HOLD_PRINTING_PID)
        .spawn();
    let child_pid = holder.expect_pid("child");
    holder.expect_line("ready");

    let released = Instant::now();
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    let outcome = holder.exits_with(76);
    outcome.last_error_mentions(says::LEASE_LOST);
    // Renewals come every ttl/3 (333 ms); the rest is slack for a loaded machine.
    let noticed = outcome.exited_at.expect("redlock exited") - released;
    assert!(
        noticed < Duration::from_secs(2),
        "the run took {noticed:?} to notice the forced release under a 1s TTL"
    );
    wait_until_gone(child_pid, "the command", Duration::from_secs(1));
}

#[test]
fn forced_release_of_a_live_run_is_counted_in_status() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    holder.exits_with(76);

    let text = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    if !text.stdout.contains("forced releases 1") {
        text.fail("status does not count the forced release");
    }
    let lock = lock_status(&server, "job");
    assert_eq!(lock.int("counters.forced"), 1);
    assert_eq!(lock.int("counters.lost"), 1);
    assert_eq!(lock.str("last_run.outcome"), "lease lost");
}

/// With nobody queued, a forced release tells nobody: no PUBLISH reaches the server (every
/// waiter of this version is queued, and is woken on its own channel, as the test below shows).
#[test]
fn forced_release_with_nobody_queued_publishes_nothing() {
    let server = RedisServer::start();
    acquire(&server, "job", "30s");
    let _: () = server.query(&["CONFIG", "RESETSTAT"]);
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    assert!(!server.exists("job"));
    let commands = server.info("commandstats");
    assert!(!commands.contains_key("cmdstat_publish"), "{commands:?}");
}

#[test]
fn waiter_starts_promptly_after_a_forced_release() {
    let server = RedisServer::start();
    // Held for 30 s by a script: only the forced release can free it in time.
    acquire(&server, "job", "30s");
    let mut waiter = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--wait", "10s"])
        .args(["-c", "echo started"])
        .spawn();
    let queue = crate::support::companion_key("job", "queue");
    wait_until("the waiter to queue", Duration::from_secs(10), || {
        (server.query::<i64>(&["ZCARD", &queue]) > 0).then_some(())
    });

    let released = Instant::now();
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    let started = waiter.expect_line("started");
    waiter.exits_with(0);
    let delay = started - released;
    assert!(
        delay < Duration::from_secs(2),
        "the waiter started {delay:?} after the forced release"
    );
}
