//! Redis failures before the command starts are reported by their class (69, 77, 78), never
//! as "busy", and the command never starts.

use std::time::Duration;

use crate::support::{RedisServer, Redlock, TempDir, free_port, says};

#[test]
fn unreachable_server_exits_69_quickly() {
    let port = free_port();
    let outcome = Redlock::without_url()
        .args([
            "--url",
            &format!("redis://127.0.0.1:{port}"),
            "run",
            "--key",
            "job",
        ])
        .args(["--ttl", "1s", "--", "true"])
        .exits_with(69);
    outcome
        .error_mentions(says::UNAVAILABLE)
        .error_does_not_mention("busy");
    assert!(
        outcome.elapsed < Duration::from_secs(3),
        "a refused connection took {:?} to report",
        outcome.elapsed
    );
}

#[test]
fn server_that_stops_answering_exits_69_after_redlock_timeout() {
    let server = RedisServer::start();
    server.pause();
    let outcome = Redlock::new(&server)
        .env("REDLOCK_TIMEOUT", "1s")
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .run();
    server.resume();
    outcome.expect_code(69);
    outcome.error_mentions(says::UNAVAILABLE);
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "a 1s timeout took {:?}",
        outcome.elapsed
    );
}

#[test]
fn read_only_replica_exits_69_and_does_not_claim_busy() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let scratch = TempDir::new("replica");
    let marker = scratch.join("started");
    Redlock::new(&replica)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "touch"])
        .arg(&marker)
        .exits_with(69)
        .error_mentions(says::READ_ONLY)
        .error_does_not_mention("busy");
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn server_out_of_memory_exits_69() {
    let server = RedisServer::start();
    let _: () = server.query(&["SET", "filler", &"x".repeat(10_000)]);
    server.config_set("maxmemory-policy", "noeviction");
    server.config_set("maxmemory", "1");
    let scratch = TempDir::new("oom");
    let marker = scratch.join("started");
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "touch"])
        .arg(&marker)
        .exits_with(69)
        .error_mentions(says::OUT_OF_MEMORY)
        .error_does_not_mention("busy");
    assert!(!marker.exists(), "the command ran");
    assert!(!server.exists("job"));
}

#[test]
fn acl_user_without_script_permission_exits_77() {
    let server = RedisServer::start();
    server.acl_setuser(
        "cron",
        &[
            "on",
            ">cron-pw",
            "~*",
            "&*",
            "+@all",
            "-eval",
            "-evalsha",
            "-eval_ro",
            "-evalsha_ro",
            "-fcall",
            "-fcall_ro",
        ],
    );
    let scratch = TempDir::new("acl");
    let marker = scratch.join("started");
    Redlock::without_url()
        .args(["--url", &server.url_with_user("cron", "cron-pw"), "run"])
        .args(["--key", "job", "--ttl", "1s", "--", "touch"])
        .arg(&marker)
        .exits_with(77)
        .error_mentions(says::DENIED)
        .never_shows("cron-pw");
    assert!(!marker.exists(), "the command ran");
}

/// A refusal reads the same whichever server (Redis, Valkey) words it: the same status, and
/// redlock's own words for what it means after the server's.
#[test]
fn each_refusal_has_its_status_and_words_on_every_server() {
    // An ACL denial inside the acquire script (the user may run scripts, not SET).
    let server = RedisServer::start();
    server.acl_setuser("cron", &["on", ">cron-pw", "~*", "&*", "+@all", "-set"]);
    let denied = Redlock::without_url()
        .args(["--url", &server.url_with_user("cron", "cron-pw"), "run"])
        .args(["--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(77);
    assert!(
        denied.stderr.contains(
            "(permission denied: the user's ACL refuses a command or key a script of redlock's \
             uses; `redlock doctor` names it)"
        ),
        "{denied}"
    );
    // A command the server does not know: the scripts' own, renamed away.
    let renamed = RedisServer::start_with(&["--rename-command", "EVALSHA", ""]);
    let unknown = Redlock::new(&renamed)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(78);
    assert!(
        unknown
            .stderr
            .contains("(the server does not know a command redlock needs:"),
        "{unknown}"
    );
    // A replica.
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &server.port().to_string()]);
    let read_only = Redlock::new(&replica)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(69);
    assert!(
        read_only
            .stderr
            .contains("(the server is a read-only replica:"),
        "{read_only}"
    );
    // maxmemory reached.
    let full = RedisServer::start();
    let _: () = full.query(&["SET", "filler", &"x".repeat(10_000)]);
    full.config_set("maxmemory-policy", "noeviction");
    full.config_set("maxmemory", "1");
    let oom = Redlock::new(&full)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(69);
    assert!(
        oom.stderr
            .contains("(the server is at its maxmemory and refuses writes:"),
        "{oom}"
    );
}

#[test]
fn lock_key_of_another_type_exits_78() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(78)
        .error_mentions(says::WRONG_TYPE);
    assert_eq!(
        server.query::<String>(&["TYPE", "job"]),
        "hash",
        "redlock touched a key it does not own"
    );
}

#[test]
fn lock_key_of_another_type_exits_78_at_once_even_with_wait() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    let outcome = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "1s", "--wait", "5s", "--", "true",
        ])
        .exits_with(78);
    assert!(
        outcome.elapsed < Duration::from_secs(2),
        "waited {:?} on a key that will never be a lock",
        outcome.elapsed
    );
}

#[test]
fn a_companion_key_of_another_type_fails_with_78_and_leaves_no_lock_behind() {
    let server = RedisServer::start();
    let _: () = server.query(&["SET", "{job}:redlock:audit", "not a list"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--", "true"])
        .exits_with(78);
    assert!(
        !server.exists("job"),
        "the failed acquire left the lock behind"
    );
}

#[test]
fn a_panic_is_an_internal_error_on_one_line_and_not_an_abort() {
    // Debug builds (the one under test) panic on purpose when asked to.
    let server = RedisServer::start();
    for args in [
        &["status", "job"][..],
        &["run", "--key", "job", "--ttl", "5s", "--", "true"][..],
    ] {
        let outcome = Redlock::new(&server)
            .env("REDLOCK_DEBUG_PANIC", "1")
            .args(args)
            .exits_with(70);
        let line = outcome.error_line();
        assert!(line.contains("internal error"), "{outcome}");
        assert!(line.contains("src/main.rs"), "{outcome}");
        assert_eq!(outcome.stderr.lines().count(), 1, "{outcome}");
    }
}

/// A record beside the lock of another type is named, not the lock key: the lock key holds
/// nothing, and the record is what to delete; nothing holds the lock afterwards.
#[test]
fn a_record_of_another_type_is_named_and_not_the_lock_key() {
    let server = RedisServer::start();
    // (The holder record is written whole by every take: another type there is replaced.)
    for record in ["queue", "audit", "fence"] {
        let key = format!("{{job}}:redlock:{record}");
        server.query::<()>(&["FLUSHALL"]);
        server.query::<()>(&["SADD", &key, "x"]);
        let outcome = Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "1h", "--", "true"])
            .exits_with(78);
        outcome
            .error_mentions(&[&format!("{key} holds a set where redlock keeps a")])
            .error_does_not_mention("nothing was changed");
        assert!(!server.exists("job"), "{record}: the lock was left held");
    }
}
