//! The heartbeat: a lease renewed for as long as the command runs, through the hiccups a
//! Redis server has in practice.

use std::time::Duration;

use crate::support::{RedisServer, Redlock, child, says, stays_held, wait_until};

const TTL: Duration = Duration::from_secs(1);

#[test]
fn job_three_times_longer_than_the_ttl_completes_with_its_own_status() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "sleep 3"])
        .exits_with(0);
    assert!(!server.exists("job"), "the lock was not released");
}

#[test]
fn ten_second_job_under_a_one_second_ttl_completes() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            "sleep 10; exit 4",
        ])
        .timeout(Duration::from_secs(30))
        .exits_with(4);
}

#[test]
fn lock_outlives_its_ttl_while_the_command_runs() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::HOLD_AND_PRINT_TOKEN,
        ])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    stays_held(&server, "job", &token, 3 * TTL);
    let pttl = server.pttl("job").expect("the lock key has an expiry");
    assert!(pttl <= TTL, "renewal set PTTL {pttl:?}, more than the TTL");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn lease_survives_a_script_flush() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::HOLD_AND_PRINT_TOKEN,
        ])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");

    let _: () = server.query(&["SCRIPT", "FLUSH"]);
    // The next renewal finds its script gone and loads it again.
    wait_until(
        "redlock to load its script again",
        Duration::from_secs(5),
        || (server.info_number("memory", "number_of_cached_scripts") > 0).then_some(()),
    );
    stays_held(&server, "job", &token, 2 * TTL);
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn lease_survives_its_connections_being_killed() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::HOLD_AND_PRINT_TOKEN,
        ])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");

    let _: i64 = server.query(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    stays_held(&server, "job", &token, 2 * TTL);
    let _: i64 = server.query(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    stays_held(&server, "job", &token, 2 * TTL);
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn lease_is_lost_when_the_server_restarts_without_the_key() {
    let mut server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");

    // Without persistence the restarted server has forgotten the lock: whoever asks now
    // gets it, so the command must not go on.
    server.restart();
    holder.exits_with(76).error_mentions(says::LEASE_LOST);
    assert!(!server.exists("job"), "redlock wrote the lock back");
}
