//! `redlock acquire` and `redlock extend`: a lock held across the steps of a shell script.
//! `acquire` prints the token (and fence, or one JSON object), is busy (75) on a held key and
//! can wait for it; `extend` renews only the holder's lease; `release --token` ends it.

use std::time::{Duration, Instant};

use crate::support::json::{Document, Json};
use crate::support::{
    LockKeys, Outcome, RedisServer, Redlock, expect_fresh_fence, is_uuid_v4, lock_status, says,
    wait_for_contender, wait_until,
};

/// `redlock acquire --key KEY --ttl TTL`, expected to succeed.
fn acquire(server: &RedisServer, key: &str, ttl: &str) -> Outcome {
    Redlock::new(server)
        .args(["acquire", "--key", key, "--ttl", ttl])
        .exits_with(0)
}

/// The token and the fence `acquire` printed on its first two lines.
fn token_and_fence(outcome: &Outcome) -> (String, i64) {
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    let [token, fence, ..] = lines.as_slice() else {
        outcome.fail("expected the token and the fence on stdout");
    };
    let fence = fence
        .parse()
        .unwrap_or_else(|e| outcome.fail(&format!("the fence {fence:?} is no integer: {e}")));
    ((*token).to_owned(), fence)
}

fn token(outcome: &Outcome) -> String {
    token_and_fence(outcome).0
}

/// `redlock extend --key KEY --token TOKEN --ttl TTL`, expected to exit `code`.
fn extend(server: &RedisServer, key: &str, token: &str, ttl: &str, code: i32) -> Outcome {
    Redlock::new(server)
        .args(["extend", "--key", key, "--token", token, "--ttl", ttl])
        .exits_with(code)
}

fn pttl(server: &RedisServer, key: &str) -> Duration {
    server
        .pttl(key)
        .unwrap_or_else(|| panic!("{key} is gone or has no expiry"))
}

#[test]
fn acquire_prints_the_token_then_the_fence() {
    let server = RedisServer::start();
    let before = server.micros();
    let outcome = acquire(&server, "job", "30s");
    let (token, fence) = token_and_fence(&outcome);
    assert!(is_uuid_v4(&token), "the token {token:?} is no UUID v4");
    assert_eq!(
        server.get("job"),
        Some(token),
        "the token is not the lock's value"
    );
    expect_fresh_fence(fence, before);
    let left = pttl(&server, "job");
    assert!(
        Duration::from_secs(25) < left && left <= Duration::from_secs(30),
        "a 30s lease has {left:?} left"
    );
}

#[test]
fn acquire_json_prints_one_object_describing_the_lease() {
    let server = RedisServer::start();
    let before = server.micros();
    let outcome = Redlock::new(&server)
        .args(["--prefix", "ci:", "acquire", "--key", "job", "--ttl", "30s"])
        .arg("--json")
        .exits_with(0);
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    let [line] = lines.as_slice() else {
        outcome.fail("expected exactly one line on stdout");
    };
    let lease = Json::parse(line)
        .unwrap_or_else(|e| outcome.fail(&format!("stdout is no JSON object: {e}")));
    assert_eq!(lease.str("key"), "job");
    assert_eq!(lease.str("redis_key"), "ci:job");
    assert_eq!(Some(lease.str("token").to_owned()), server.get("ci:job"));
    expect_fresh_fence(lease.int("fence"), before);
    assert_eq!(lease.int("ttl_ms"), 30_000);
    assert!(lease.int("acquired_ms") > 0);
    assert_eq!(
        lease.int("deadline_ms") - lease.int("acquired_ms"),
        lease.int("ttl_ms")
    );
}

#[test]
fn fence_grows_with_each_acquire() {
    let server = RedisServer::start();
    let (first, first_fence) = token_and_fence(&acquire(&server, "job", "30s"));
    Redlock::new(&server)
        .args(["release", "job", "--token", &first])
        .exits_with(0);
    let (_, second_fence) = token_and_fence(&acquire(&server, "job", "30s"));
    assert!(
        second_fence > first_fence,
        "fence went from {first_fence} to {second_fence}"
    );
}

#[test]
fn acquired_lock_names_the_calling_process_as_its_holder() {
    let server = RedisServer::start();
    acquire(&server, "job", "30s");
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("state"), "held");
    assert_eq!(lock.int("holder.pid"), i64::from(std::process::id()));
}

#[test]
fn acquire_on_a_held_key_exits_75_and_prints_no_token() {
    let server = RedisServer::start();
    let holder = token(&acquire(&server, "job", "30s"));
    let outcome = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(75);
    outcome.error_mentions(says::BUSY).never_shows(&holder);
    if !outcome.stdout.is_empty() {
        outcome.fail("a busy acquire printed something a script could take for a token");
    }
    assert_eq!(server.get("job"), Some(holder), "the lock changed hands");
}

#[test]
fn busy_acquire_is_counted_once() {
    let server = RedisServer::start();
    acquire(&server, "job", "30s");
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(75);
    assert_eq!(lock_status(&server, "job").int("counters.busy"), 1);
}

#[test]
fn busy_acquire_whose_wait_runs_out_is_counted_once() {
    let server = RedisServer::start();
    acquire(&server, "job", "30s");
    let outcome = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s", "--wait", "300ms"])
        .exits_with(75);
    assert!(
        outcome.elapsed >= Duration::from_millis(250),
        "gave up after {:?}, before the wait ran out",
        outcome.elapsed
    );
    assert_eq!(lock_status(&server, "job").int("counters.busy"), 1);
}

#[test]
fn acquire_with_wait_gets_the_lock_once_the_holder_releases_by_token() {
    let server = RedisServer::start();
    let (first, first_fence) = token_and_fence(&acquire(&server, "job", "30s"));

    let before = server.script_calls();
    let waiter = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s", "--wait", "10s"])
        .spawn();
    wait_for_contender(&server, "job", before);

    let released = Instant::now();
    Redlock::new(&server)
        .args(["release", "job", "--token", &first])
        .exits_with(0);
    let outcome = waiter.exits_with(0);
    let (second, fence) = token_and_fence(&outcome);
    assert_ne!(second, first);
    assert_eq!(
        server.get("job"),
        Some(second),
        "the waiter's token is not the lock's value"
    );
    assert!(fence > first_fence, "fence {fence} after {first_fence}");
    let delay = outcome.exited_at.expect("acquire exited") - released;
    assert!(
        delay < Duration::from_secs(2),
        "the waiter took the lock {delay:?} after the release"
    );
}

#[test]
fn extend_renews_the_holders_lease() {
    let server = RedisServer::start();
    let token = token(&acquire(&server, "job", "2s"));
    extend(&server, "job", &token, "30s", 0);
    let left = pttl(&server, "job");
    assert!(
        Duration::from_secs(25) < left && left <= Duration::from_secs(30),
        "extended to 30s, the lease has {left:?} left"
    );
    assert_eq!(server.get("job"), Some(token));
    assert!(
        pttl(&server, &LockKeys::of("job").holder) > Duration::from_secs(25),
        "the holder record was not renewed with the lease"
    );
}

#[test]
fn extend_with_a_wrong_token_exits_1_and_does_not_raise_the_ttl() {
    let server = RedisServer::start();
    let token = token(&acquire(&server, "job", "5s"));
    extend(&server, "job", "not-the-holders-token", "30s", 1);
    let left = pttl(&server, "job");
    assert!(
        left <= Duration::from_secs(5),
        "a wrong token raised the lease to {left:?}"
    );
    assert_eq!(server.get("job"), Some(token), "the lock changed hands");
}

#[test]
fn extend_after_the_lease_expired_exits_1_and_does_not_revive_it() {
    let server = RedisServer::start();
    let token = token(&acquire(&server, "job", "500ms"));
    wait_until("the lease to expire", Duration::from_secs(5), || {
        (!server.exists("job")).then_some(())
    });
    extend(&server, "job", &token, "30s", 1);
    assert!(!server.exists("job"), "extend brought an expired lock back");
}

#[test]
fn extend_with_a_zero_ttl_is_a_usage_error_and_contacts_nothing() {
    let server = RedisServer::start();
    let token = token(&acquire(&server, "job", "30s"));
    let before = server.connections_received();
    extend(&server, "job", &token, "0s", 64);
    assert_eq!(server.connections_received(), before, "redlock connected");
}

#[test]
fn acquire_with_a_ttl_too_short_or_too_long_is_a_usage_error() {
    let server = RedisServer::start();
    for ttl in ["0s", "100ms", "25h"] {
        Redlock::new(&server)
            .args(["acquire", "--key", "job", "--ttl", ttl])
            .exits_with(64);
    }
    assert!(!server.exists("job"));
}

#[test]
fn script_flow_of_acquire_extend_and_release_leaves_nothing_held() {
    let server = RedisServer::start();
    let script = |args: &[&str]| {
        Redlock::new(&server)
            .env("REDLOCK_PREFIX", "ci:")
            .args(args)
            .exits_with(0)
    };
    let token = token(&script(&["acquire", "--key", "deploy", "--ttl", "10s"]));
    script(&[
        "extend", "--key", "deploy", "--token", &token, "--ttl", "20s",
    ]);
    script(&["release", "deploy", "--token", &token]);

    let keys = LockKeys::of("ci:deploy");
    assert!(!server.exists(&keys.lock), "the lock is still held");
    assert!(
        !server.exists(&keys.holder),
        "the holder record is still there"
    );
    Redlock::new(&server)
        .env("REDLOCK_PREFIX", "ci:")
        .args(["status", "deploy"])
        .exits_with(1);
}

#[test]
fn extend_refused_by_an_acl_exits_77_not_1() {
    let server = RedisServer::start();
    let token = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "10s"])
        .exits_with(0)
        .stdout
        .lines()
        .next()
        .expect("token")
        .to_owned();
    server.acl_setuser("reader", &["on", ">pw", "~*", "-@all", "+@read"]);
    Redlock::without_url()
        .args(["--url", &server.url_with_user("reader", "pw")])
        .args(["extend", "--key", "job", "--token", &token, "--ttl", "20s"])
        .exits_with(77);
}
