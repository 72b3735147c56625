//! `redlock doctor` against real servers: every finding is one stdout line starting `ok`, `warn`
//! or `fail`; warnings alone exit 1, a failure exits with its class (77 for a missing
//! permission, 69 for a replica), and the probe lock leaves nothing behind.

use crate::support::{Outcome, RedisServer, Redlock, free_port, says};

const PASSWORD: &str = "doctor-Pa55word";

/// The least-privilege rules `run` and `status` need (key and channel patterns for every lock),
/// plus what doctor itself reads: INFO, CONFIG GET, PING.
const LEAST_PRIVILEGE: &[&str] = &[
    "on",
    ">doctor-Pa55word",
    "resetkeys",
    "~*",
    "resetchannels",
    "&*",
    "-@all",
    "+evalsha",
    "+script|load",
    "+time",
    "+set",
    "+get",
    "+pttl",
    "+exists",
    "+incr",
    "+hset",
    "+hmget",
    "+hsetnx",
    "+hdel",
    "+zadd",
    "+zrange",
    "+zrangebyscore",
    "+zrank",
    "+zcard",
    "+zrem",
    "+zscore",
    "+rpush",
    "+ltrim",
    "+lindex",
    "+lrange",
    "+lpop",
    "+lpush",
    "+blpop",
    "+hincrby",
    "+pexpire",
    "+del",
    "+publish",
    "+subscribe",
    "+type",
    "+mget",
    "+hgetall",
    "+scan",
    "+info",
    "+config|get",
    "+ping",
];

/// A server fit for locks: nothing evicted, every write in the AOF.
fn healthy_server() -> RedisServer {
    RedisServer::start_with(&["--maxmemory-policy", "noeviction", "--appendonly", "yes"])
}

fn doctor(server: &RedisServer) -> Redlock {
    Redlock::new(server).arg("doctor")
}

/// [`LEAST_PRIVILEGE`] without one of its rules.
fn least_privilege_without(rule: &str) -> Vec<&'static str> {
    LEAST_PRIVILEGE
        .iter()
        .copied()
        .filter(|r| *r != rule)
        .collect()
}

fn doctor_as(server: &RedisServer, user: &str) -> Redlock {
    Redlock::without_url()
        .args(["--url", &server.url_with_user(user, PASSWORD)])
        .arg("doctor")
}

/// The stdout lines with this verdict (`ok`, `warn`, `fail`).
fn findings<'a>(outcome: &'a Outcome, verdict: &str) -> Vec<&'a str> {
    outcome
        .stdout
        .lines()
        .filter(|line| line.split_whitespace().next() == Some(verdict))
        .collect()
}

/// The one finding of `verdict` for `check`, e.g. `("warn", "persistence")`.
fn finding<'a>(outcome: &'a Outcome, verdict: &str, check: &str) -> &'a str {
    let prefix = format!("{check}:");
    findings(outcome, verdict)
        .into_iter()
        .find(|line| line[verdict.len()..].trim_start().starts_with(&prefix))
        .unwrap_or_else(|| outcome.fail(&format!("expected a `{verdict} {check}:` line")))
}

fn expect_every_line_is_a_finding(outcome: &Outcome) {
    for line in outcome.stdout.lines() {
        let verdict = line.split_whitespace().next();
        if !matches!(verdict, Some("ok" | "warn" | "fail")) {
            outcome.fail(&format!("stdout line {line:?} is not ok/warn/fail"));
        }
    }
}

fn expect_no_keys_left(server: &RedisServer, outcome: &Outcome) {
    let keys: Vec<String> = server.query(&["KEYS", "*"]);
    if !keys.is_empty() {
        outcome.fail(&format!("the probe left keys behind: {keys:?}"));
    }
}

#[test]
fn a_server_fit_for_locks_passes_every_check_and_exits_0() {
    let server = healthy_server();
    let outcome = doctor(&server).exits_with(0);
    expect_every_line_is_a_finding(&outcome);
    for check in [
        "version",
        "role",
        "maxmemory-policy",
        "persistence",
        "latency",
        "clock",
        "permissions",
    ] {
        finding(&outcome, "ok", check);
    }
    assert!(
        findings(&outcome, "warn").is_empty() && findings(&outcome, "fail").is_empty(),
        "a healthy server got warnings\n{outcome}"
    );
    assert!(
        finding(&outcome, "ok", "persistence").contains("appendfsync"),
        "AOF without appendfsync always deserves a note\n{outcome}"
    );
    // The server by its own name and version (Valkey's, not the Redis one it mimics).
    let server_name = crate::support::server_kind::name();
    assert!(
        finding(&outcome, "ok", "version")
            .to_lowercase()
            .contains(server_name),
        "the version check does not say {server_name}\n{outcome}"
    );
    expect_no_keys_left(&server, &outcome);
}

#[test]
fn a_server_without_persistence_is_a_warning_and_exits_1() {
    // The harness's default: --save "" --appendonly no.
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let outcome = doctor(&server).exits_with(1);
    expect_every_line_is_a_finding(&outcome);
    let warning = finding(&outcome, "warn", "persistence");
    assert!(warning.contains("restart"), "{warning}");
    assert!(
        warning.contains("fix:"),
        "a warning without its fix: {warning}"
    );
    assert_eq!(findings(&outcome, "warn").len(), 1, "{outcome}");
    assert!(findings(&outcome, "fail").is_empty(), "{outcome}");
    outcome.error_mentions(&["warning"]);
}

#[test]
fn an_evicting_maxmemory_policy_is_a_warning() {
    let server =
        RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru", "--appendonly", "yes"]);
    let outcome = doctor(&server).exits_with(1);
    let warning = finding(&outcome, "warn", "maxmemory-policy");
    assert!(warning.contains("allkeys-lru"), "{warning}");
    assert!(
        warning.contains("noeviction"),
        "the fix names the policy: {warning}"
    );
    assert_eq!(findings(&outcome, "warn").len(), 1, "{outcome}");
}

#[test]
fn a_replica_fails_with_69() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let outcome = doctor(&replica).exits_with(69);
    let failure = finding(&outcome, "fail", "role");
    assert!(
        failure.contains("replica") && failure.contains("primary"),
        "{failure}"
    );
    outcome.error_mentions(&["failure"]);
}

#[test]
fn a_user_without_publish_fails_naming_it_with_77() {
    let server = healthy_server();
    server.acl_setuser(
        "cron",
        &["on", ">doctor-Pa55word", "~*", "&*", "+@all", "-publish"],
    );
    let outcome = doctor_as(&server, "cron").exits_with(77);
    let failure = finding(&outcome, "fail", "permissions");
    assert!(
        failure.contains("ACL SETUSER cron +publish"),
        "the fix grants the missing command: {failure}"
    );
    assert_eq!(findings(&outcome, "fail").len(), 1, "{outcome}");
    outcome.never_shows(PASSWORD);
    expect_no_keys_left(&server, &outcome);
}

#[test]
fn a_least_privilege_user_without_evalsha_fails_naming_it_with_77() {
    let server = healthy_server();
    server.acl_setuser("locker", &least_privilege_without("+evalsha"));
    let outcome = doctor_as(&server, "locker").exits_with(77);
    let failure = finding(&outcome, "fail", "permissions");
    assert!(failure.contains("+evalsha"), "{failure}");
    assert!(
        !failure.contains("+publish"),
        "names only what is missing: {failure}"
    );
    expect_no_keys_left(&server, &outcome);
}

#[test]
fn the_least_privilege_rules_are_enough_for_every_check() {
    let server = healthy_server();
    server.acl_setuser("locker", LEAST_PRIVILEGE);
    let outcome = doctor_as(&server, "locker").exits_with(0);
    finding(&outcome, "ok", "permissions");
    expect_no_keys_left(&server, &outcome);
}

#[test]
fn a_user_who_may_not_read_the_configuration_gets_a_warning_naming_the_acl() {
    let server = healthy_server();
    server.acl_setuser("locker", &least_privilege_without("+config|get"));
    let outcome = doctor_as(&server, "locker").exits_with(1);
    let warning = finding(&outcome, "warn", "maxmemory-policy");
    assert!(
        warning.contains("could not be checked") && warning.contains("+config|get"),
        "{warning}"
    );
    assert!(findings(&outcome, "fail").is_empty(), "{outcome}");
}

#[test]
fn the_probe_lock_lives_under_the_prefix_and_is_gone_afterwards() {
    let server = healthy_server();
    let outcome = doctor(&server).args(["--prefix", "staging:"]).exits_with(0);
    let ok = finding(&outcome, "ok", "permissions");
    assert!(ok.contains("staging:redlock:doctor:"), "{ok}");
    expect_no_keys_left(&server, &outcome);
}

#[test]
fn an_unreachable_server_exits_69() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    Redlock::without_url()
        .args(["--url", &url, "doctor"])
        .exits_with(69)
        .error_mentions(says::UNAVAILABLE);
}

#[test]
fn a_wrong_password_exits_77() {
    let server = RedisServer::start_with(&["--requirepass", "right-password"]);
    Redlock::without_url()
        .args([
            "--url",
            &server.url_with_password("wrong-password"),
            "doctor",
        ])
        .exits_with(77)
        .error_mentions(says::DENIED)
        .never_shows("wrong-password");
}

#[test]
fn a_user_named_in_the_url_beside_a_password_file_is_named_in_the_fixes() {
    // `redis://locker@host` with the password in a file: the userinfo is the user, and the
    // ACL lines name it (a lone userinfo without a password file may be a password, and is
    // never shown).
    let server = healthy_server();
    server.acl_setuser("locker", &least_privilege_without("+config|get"));
    let dir = crate::support::TempDir::new("doctor-user");
    let file = dir.join("pass");
    std::fs::write(&file, format!("{PASSWORD}\n")).expect("write the password file");
    let url = format!("redis://locker@127.0.0.1:{}", server.port());
    let outcome = Redlock::without_url()
        .args(["--url", &url, "--password-file"])
        .arg(&file)
        .arg("doctor")
        .exits_with(1);
    let warning = finding(&outcome, "warn", "maxmemory-policy");
    assert!(
        warning.contains("ACL SETUSER locker +config|get"),
        "{warning}"
    );
    outcome.never_shows(PASSWORD);
}

#[test]
fn a_server_that_wants_a_password_none_was_given_for_exits_77_saying_how_to_give_it() {
    let server = RedisServer::start_with(&["--requirepass", "right-password"]);
    let outcome = Redlock::without_url()
        .args(["--url", &server.url(), "doctor"])
        .exits_with(77);
    outcome.error_mentions(&["the server requires a password: give it with --password-file"]);
    assert!(findings(&outcome, "warn").is_empty(), "{outcome}");
    assert!(!outcome.stderr.contains("NOAUTH"), "{outcome}");
}
