//! The least-privilege ACL recipes in the guide work, and nothing more is needed: the tests
//! read the exact `ACL SETUSER` lines from docs/guide.md, apply them to a real server, and run
//! every command the recipe promises — including the paths that need rare permissions
//! (SCRIPT LOAD after the server's script cache was flushed, SUBSCRIBE while waiting).

use std::fs;
use std::time::Duration;

use crate::support::{RedisServer, Redlock};

pub(crate) const PASSWORD: &str = "acl-Pa55word";

/// The guide's `ACL SETUSER NAME ...` line ("Least-privilege ACL users"), as a list of rules
/// after the user name, with the password placeholder filled in.
pub(crate) fn recipe(user: &str) -> Vec<String> {
    let guide = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md"))
        .expect("read docs/guide.md");
    let prefix = format!("ACL SETUSER {user} ");
    let line = guide
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("docs/guide.md has no line starting with {prefix:?}"));
    line[prefix.len()..]
        .split_whitespace()
        .map(|rule| rule.replace("PASSWORD", PASSWORD))
        .collect()
}

pub(crate) fn server_with_recipes() -> RedisServer {
    let server = RedisServer::start();
    for user in ["locker", "lockreader"] {
        let rules = recipe(user);
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        server.acl_setuser(user, &rules);
    }
    server
}

pub(crate) fn as_user(server: &RedisServer, user: &str) -> Redlock {
    Redlock::without_url()
        .args(["--url", &server.url_with_user(user, PASSWORD)])
        .args(["--prefix", "jobs:"])
}

#[test]
fn the_lock_user_can_run_wait_and_record() {
    let server = server_with_recipes();
    as_user(&server, "locker")
        .args([
            "run", "--key", "report", "--ttl", "1s", "--", "sleep", "0.5",
        ])
        .exits_with(0);
    assert_eq!(
        server
            .lock_record("jobs:report")
            .get("outcome")
            .map(String::as_str),
        Some("ok")
    );
    // A second run after the script cache was flushed needs SCRIPT LOAD.
    server.query::<()>(&["SCRIPT", "FLUSH"]);
    as_user(&server, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(0);
}

#[test]
fn the_lock_user_can_wait_for_a_busy_lock() {
    let server = server_with_recipes();
    let mut holder = as_user(&server, "locker")
        .args([
            "run",
            "--key",
            "report",
            "--ttl",
            "5s",
            "-c",
            "echo ready; read _ || true",
        ])
        .spawn();
    holder.expect_line("ready");
    let waiter = as_user(&server, "locker")
        .args([
            "run", "--key", "report", "--ttl", "5s", "--wait", "10s", "--", "true",
        ])
        .spawn();
    crate::support::wait_until("the waiter queues", Duration::from_secs(10), || {
        (server.query::<i64>(&["ZCARD", "{jobs:report}:redlock:queue"]) > 0).then_some(())
    });
    holder.close_stdin();
    holder.exits_with(0);
    waiter.exits_with(0);
}

/// A user set up before waiters waited on the server (no `+blpop`) still waits: woken on its
/// channel instead.
#[test]
fn a_lock_user_without_blpop_waits_the_notified_way() {
    let server = server_with_recipes();
    let rules: Vec<String> = recipe("locker")
        .into_iter()
        .filter(|rule| rule != "+blpop")
        .chain(["-blpop".to_string()])
        .collect();
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    server.acl_setuser("locker", &rules);
    let mut holder = as_user(&server, "locker")
        .args([
            "run",
            "--key",
            "report",
            "--ttl",
            "5s",
            "-c",
            "echo ready; read _ || true",
        ])
        .spawn();
    holder.expect_line("ready");
    let mut waiter = as_user(&server, "locker")
        .args([
            "run",
            "--key",
            "report",
            "--ttl",
            "5s",
            "--wait",
            "10s",
            "-c",
            "echo took",
        ])
        .spawn();
    crate::support::wait_until("the waiter listens", Duration::from_secs(10), || {
        (server.subscribers("{jobs:report}:redlock:released") > 0).then_some(())
    });
    holder.close_stdin();
    holder.exits_with(0);
    waiter.expect_line("took");
    waiter.wait().expect_code(0);
}

#[test]
fn the_lock_user_can_script_acquire_extend_release_and_force() {
    let server = server_with_recipes();
    let out = as_user(&server, "locker")
        .args(["acquire", "--key", "deploy", "--ttl", "5s"])
        .exits_with(0);
    let token = out.stdout.lines().next().expect("token line").to_owned();
    as_user(&server, "locker")
        .args([
            "extend", "--key", "deploy", "--token", &token, "--ttl", "10s",
        ])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["release", "deploy", "--token", &token])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["acquire", "--key", "deploy", "--ttl", "5s"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["release", "deploy", "--force"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["status", "deploy"])
        .exits_with(1);
}

#[test]
fn the_lock_user_cannot_touch_keys_outside_its_prefix() {
    let server = server_with_recipes();
    Redlock::without_url()
        .args(["--url", &server.url_with_user("locker", PASSWORD)])
        .args(["run", "--key", "elsewhere", "--ttl", "1s", "--", "true"])
        .exits_with(77);
    assert!(!server.exists("elsewhere"));
}

#[test]
fn the_read_only_user_can_see_status_and_list_locks() {
    let server = server_with_recipes();
    let mut holder = as_user(&server, "locker")
        .args([
            "run",
            "--key",
            "report",
            "--ttl",
            "5s",
            "-c",
            "echo ready; read _ || true",
        ])
        .spawn();
    holder.expect_line("ready");
    let out = as_user(&server, "lockreader")
        .args(["status", "report"])
        .exits_with(0);
    assert!(out.stdout.contains("held by"), "{out}");
    let out = as_user(&server, "lockreader")
        .args(["status", "--all", "--json"])
        .exits_with(0);
    assert!(
        out.stdout.contains("\"redis_key\":\"jobs:report\""),
        "{out}"
    );
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn the_read_only_user_cannot_take_or_release_locks() {
    let server = server_with_recipes();
    as_user(&server, "lockreader")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(77);
    as_user(&server, "lockreader")
        .args(["release", "report", "--force"])
        .exits_with(77);
    assert!(!server.exists("jobs:report"));
}

#[test]
fn the_lock_user_can_pause_and_resume_and_the_read_only_user_can_watch() {
    let server = server_with_recipes();
    as_user(&server, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["pause", "report", "--for", "1h", "--drain", "1s"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["pause", "--all", "--reason", "acl"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(75);
    let metrics = as_user(&server, "lockreader")
        .args(["metrics", "--all"])
        .exits_with(0);
    assert!(
        metrics
            .stdout
            .contains("redlock_paused{key=\"jobs:report\"} 1"),
        "{metrics}"
    );
    // The open-ended prefix-wide pause is a warning.
    as_user(&server, "lockreader")
        .args(["check", "report"])
        .exits_with(1);
    // The read-only user cannot pause.
    as_user(&server, "lockreader")
        .args(["pause", "report"])
        .exits_with(77);
    as_user(&server, "locker")
        .args(["resume", "--all"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(0);
}

#[test]
fn the_lock_user_can_wait_for_a_replica() {
    let server = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let _replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &server.port().to_string()]);
    crate::support::fleet::acknowledging(&server, 1);
    let rules = recipe("locker");
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    server.acl_setuser("locker", &rules);
    as_user(&server, "locker")
        .args(["run", "--key", "report", "--ttl", "3s", "--replicas", "1"])
        .args(["--", "true"])
        .exits_with(0);
}

/// `redlock --url` for `user` on each of `servers` (a quorum), under the `jobs:` prefix.
fn as_user_over(servers: &[&RedisServer], user: &str) -> Redlock {
    servers
        .iter()
        .fold(Redlock::without_url(), |redlock, server| {
            redlock.args(["--url", &server.url_with_user(user, PASSWORD)])
        })
        .args(["--prefix", "jobs:"])
}

#[test]
fn the_recipes_work_over_a_quorum_whose_nodes_say_which_server_each_is() {
    let servers = [
        server_with_recipes(),
        server_with_recipes(),
        server_with_recipes(),
    ];
    let servers: Vec<&RedisServer> = servers.iter().collect();
    as_user_over(&servers, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    as_user_over(&servers, "lockreader")
        .args(["status", "report"])
        .exits_with(1);
    // Without +info no node can say which server it is: none is used, and the line says what
    // to grant.
    for server in &servers {
        server.acl_setuser("locker", &["-info"]);
    }
    as_user_over(&servers, "locker")
        .args(["run", "--key", "report", "--ttl", "1s", "--", "true"])
        .exits_with(77)
        .error_mentions(&["+info"]);
}
