//! redlock's own messages: a timeline with `-v`, nothing but the final error with `-q`, one JSON
//! object per line with `--log-format json`, and stdout left to the command.

use crate::support::json::{Document, Json};
use crate::support::{RedisServer, Redlock};

fn events(stderr: &str) -> Vec<Json> {
    stderr
        .lines()
        .map(|line| {
            Json::parse(line).unwrap_or_else(|e| panic!("not one JSON object: {line:?}: {e}"))
        })
        .collect()
}

#[test]
fn verbose_json_prints_the_timeline_with_stable_fields() {
    let server = RedisServer::start();
    let before = server.micros();
    let outcome = Redlock::new(&server)
        .args(["-v", "--log-format", "json"])
        .args(["run", "--key", "job", "--ttl", "1s", "--", "sleep", "0.6"])
        .exits_with(0);
    let events = events(&outcome.stderr);
    let names: Vec<&str> = events.iter().map(|e| e.str("event")).collect();
    for expected in [
        "connected",
        "acquired",
        "started",
        "renewed",
        "exited",
        "released",
    ] {
        assert!(
            names.contains(&expected),
            "no {expected} event in {names:?}"
        );
    }
    for event in &events {
        assert_eq!(event.str("level"), "info");
        assert!(event.str("ts").ends_with('Z'), "{}", event.str("ts"));
        assert!(!event.str("msg").is_empty());
    }
    let acquired = events
        .iter()
        .find(|e| e.str("event") == "acquired")
        .unwrap();
    crate::support::expect_fresh_fence(acquired.int("fence"), before);
    assert_eq!(acquired.str("key"), "job");
    let exited = events.iter().find(|e| e.str("event") == "exited").unwrap();
    assert_eq!(exited.int("exit"), 0);
    assert!(exited.int("duration_ms") >= 600);
}

#[test]
fn verbose_text_lines_all_start_with_redlock() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["-v", "run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(outcome.stderr.lines().count() >= 4, "{outcome}");
    assert!(
        outcome.stderr.lines().all(|l| l.starts_with("redlock: ")),
        "{outcome}"
    );
}

#[test]
fn stdout_belongs_to_the_command_even_when_verbose() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "-v",
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "--",
            "echo",
            "only this",
        ])
        .exits_with(0);
    assert_eq!(outcome.stdout, "only this\n");
}

#[test]
fn default_verbosity_prints_nothing_on_success() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(outcome.stderr.is_empty(), "{outcome}");
}

#[test]
fn quiet_prints_only_the_final_error_line_as_json() {
    let server = RedisServer::start();
    let held = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "-c",
            "echo ready; read _ || true",
        ])
        .spawn();
    let mut held = held;
    held.expect_line("ready");
    let outcome = Redlock::new(&server)
        .args(["-q", "--log-format", "json"])
        .args([
            "run", "--key", "job", "--ttl", "1s", "--wait", "200ms", "--", "true",
        ])
        .exits_with(75);
    let events = events(&outcome.stderr);
    assert_eq!(events.len(), 1, "{outcome}");
    assert_eq!(events[0].str("level"), "error");
    assert_eq!(events[0].str("event"), "busy");
    assert_eq!(events[0].int("exit"), 75, "{outcome}");
    held.close_stdin();
    held.exits_with(0);
}
