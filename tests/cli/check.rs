//! `redlock check`: the monitoring-plugin convention — one `REDLOCK STATE - …` line and
//! 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN — judged from real runs, holders and pauses.

use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::{RedisServer, Redlock, child, wait_until};

fn check(server: &RedisServer, args: &[&str]) -> crate::support::Outcome {
    Redlock::new(server).arg("check").args(args).run()
}

#[track_caller]
fn expect(outcome: &crate::support::Outcome, code: i32, word: &str, mentions: &[&str]) {
    outcome.expect_code(code);
    let line = outcome.stdout.trim_end();
    assert!(
        line.starts_with(&format!("REDLOCK {word} - ")) && !line.contains('\n'),
        "expected one REDLOCK {word} line\n{outcome}"
    );
    for m in mentions {
        assert!(line.contains(m), "the line does not say {m:?}\n{outcome}");
    }
}

fn run(server: &RedisServer, key: &str, command: &str) {
    Redlock::new(server)
        .args(["run", "--key", key, "--ttl", "3s", "-c", command])
        .run();
}

#[test]
fn a_key_whose_last_run_succeeded_is_ok() {
    let server = RedisServer::start();
    run(&server, "job", "true");
    expect(
        &check(
            &server,
            &["job", "--max-age", "1h", "--max-since-success", "1h"],
        ),
        0,
        "OK",
        &["job"],
    );
}

#[test]
fn never_run_a_failed_last_run_and_an_open_ended_pause_are_warnings() {
    let server = RedisServer::start();
    expect(&check(&server, &["never"]), 1, "WARNING", &["never run"]);
    run(&server, "failing", "exit 4");
    expect(
        &check(&server, &["failing"]),
        1,
        "WARNING",
        &["last run failed (exit 4)"],
    );
    run(&server, "job", "true");
    Redlock::new(&server).args(["pause", "job"]).exits_with(0);
    expect(&check(&server, &["job"]), 1, "WARNING", &["until resumed"]);
    // A pause with an end is fine, and said.
    Redlock::new(&server)
        .args(["pause", "job", "--for", "1h"])
        .exits_with(0);
    expect(&check(&server, &["job"]), 0, "OK", &["paused by"]);
}

#[test]
fn an_old_holder_no_recent_success_and_a_lapsed_pause_are_critical() {
    let server = RedisServer::start();
    // A holder older than --max-age.
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "stuck", "--ttl", "3s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    // Within its age, and the key's first run: OK.
    expect(
        &check(&server, &["stuck", "--max-age", "1h"]),
        0,
        "OK",
        &["held by", "first run in progress"],
    );
    let critical = wait_until(
        "the holder to pass --max-age",
        Duration::from_secs(10),
        || {
            let outcome = check(&server, &["stuck", "--max-age", "1s"]);
            (outcome.code() == Some(2)).then_some(outcome)
        },
    );
    expect(&critical, 2, "CRITICAL", &["over --max-age 1s", "held by"]);
    holder.close_stdin();
    holder.exits_with(0);
    // No success within --max-since-success: the last run failed, and so did the one before.
    run(&server, "failing", "exit 1");
    expect(
        &check(&server, &["failing", "--max-since-success", "1h"]),
        2,
        "CRITICAL",
        &["no run ended ok"],
    );
    // A pause whose --for ran out without a resume.
    run(&server, "paused", "true");
    Redlock::new(&server)
        .args(["pause", "paused", "--for", "1s"])
        .exits_with(0);
    let lapsed = wait_until("the pause to lapse", Duration::from_secs(10), || {
        let outcome = check(&server, &["paused"]);
        (outcome.code() == Some(2)).then_some(outcome)
    });
    expect(&lapsed, 2, "CRITICAL", &["LAPSED"]);
    // Resuming clears it.
    Redlock::new(&server)
        .args(["resume", "paused"])
        .exits_with(0);
    expect(&check(&server, &["paused"]), 0, "OK", &[]);
    // The worst key decides, and the line names each key that is not OK.
    let both = check(&server, &["paused", "failing", "--max-since-success", "1h"]);
    expect(&both, 2, "CRITICAL", &["failing"]);
    assert!(!both.stdout.contains("paused:"), "{both}");
}

#[test]
fn an_unreachable_or_refusing_redis_is_unknown() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill9();
    let down = Redlock::without_url()
        .args(["--url", &url, "--timeout", "1s", "check", "job"])
        .run();
    expect(&down, 3, "UNKNOWN", &[]);
    let locked = RedisServer::start_with(&["--requirepass", "right-password"]);
    let denied = Redlock::without_url()
        .args([
            "--url",
            &locked.url_with_password("wrong-password"),
            "check",
            "job",
        ])
        .run();
    expect(&denied, 3, "UNKNOWN", &[]);
    denied.never_shows("wrong-password");
}

#[test]
fn a_key_it_may_not_read_or_whose_records_are_not_hashes_is_unknown_never_never_run() {
    let server = RedisServer::start();
    run(&server, "job", "true");
    server.acl_setuser(
        "peek",
        &["on", ">pw", "~*", "&*", "+@all", "-hgetall", "-hmget"],
    );
    for args in [&["job"][..], &["job", "--max-since-success", "1h"]] {
        let outcome = Redlock::without_url()
            .args(["--url", &server.url_with_user("peek", "pw"), "check"])
            .args(args)
            .run();
        expect(&outcome, 3, "UNKNOWN", &["job", "hgetall"]);
        assert!(!outcome.stdout.contains("never run"), "{outcome}");
        outcome.error_mentions(&["permission", "noperm"]);
    }
    // A record of another type beside a good key: that key is unknown, the other judged.
    run(&server, "good", "true");
    let _: () = server.query(&["DEL", "{job}:redlock:stats"]);
    let _: () = server.query(&["SET", "{job}:redlock:stats", "not a hash"]);
    let outcome = check(&server, &["good", "job"]);
    expect(
        &outcome,
        3,
        "UNKNOWN",
        &["job: could not be read", "WRONGTYPE"],
    );
    assert!(!outcome.stdout.contains("good:"), "{outcome}");
}

#[test]
fn json_output_says_the_same() {
    let server = RedisServer::start();
    run(&server, "job", "exit 2");
    let outcome = check(&server, &["--json", "job"]);
    outcome.expect_code(1);
    let doc = Json::parse(outcome.stdout.trim_end()).expect("one JSON document");
    assert_eq!(doc.str("status"), "WARNING");
    assert_eq!(doc.int("code"), 1);
    assert_eq!(doc.str("keys.0.key"), "job");
    assert_eq!(doc.str("keys.0.status"), "WARNING");
    assert!(doc.str("keys.0.problems.0").contains("failed"), "{doc}");
}

#[test]
fn a_bad_duration_is_a_usage_error() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["check", "job", "--max-age", "5"])
        .exits_with(64)
        .error_mentions(&["--max-age"]);
}
