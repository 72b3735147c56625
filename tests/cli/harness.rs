//! The harness checks itself first, so a broken environment (no redis-server, a busy port)
//! shows up as such rather than as a hundred redlock failures.

use std::time::Duration;

use crate::support::{RedisServer, Redlock, wait_until_gone};

#[test]
fn redis_server_answers_on_its_port_and_on_its_unix_socket() {
    let server = RedisServer::start();
    let pong: String = redis::cmd("PING")
        .query(&mut server.client())
        .expect("PING over TCP");
    assert_eq!(pong, "PONG");
    let mut unix = redis::Client::open(server.unix_url().as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("connect over the unix socket");
    let pong: String = redis::cmd("PING").query(&mut unix).expect("PING over unix");
    assert_eq!(pong, "PONG");
}

#[test]
fn redis_server_is_gone_once_dropped() {
    let server = RedisServer::start();
    let pid = server.pid();
    drop(server);
    wait_until_gone(pid, "redis-server", Duration::from_secs(5));
}

#[test]
fn restarted_redis_server_keeps_its_port_and_loses_its_data() {
    let mut server = RedisServer::start();
    let port = server.port();
    let _: () = server.query(&["SET", "k", "v"]);
    server.restart();
    assert_eq!(server.port(), port);
    assert!(
        !server.exists("k"),
        "data survived a restart without persistence"
    );
}

#[test]
fn paused_redis_server_stops_answering_until_resumed() {
    let server = RedisServer::start();
    let mut con = server.client();
    con.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("set read timeout");
    server.pause();
    let stalled = redis::cmd("PING").query::<String>(&mut con);
    server.resume();
    assert!(stalled.is_err(), "a paused server answered: {stalled:?}");
    let pong: String = server.query(&["PING"]);
    assert_eq!(pong, "PONG");
}

#[test]
fn redis_server_with_a_password_is_reachable_by_the_harness() {
    let server = RedisServer::start_with(&["--requirepass", "harness-pw"]);
    let _: () = server.query(&["SET", "k", "v"]);
    assert_eq!(server.get("k").as_deref(), Some("v"));
}

#[test]
fn redlock_builder_reports_status_and_output() {
    let outcome = Redlock::without_url().arg("--version").exits_with(0);
    assert!(
        outcome.stdout.contains("redlock"),
        "--version should name the program\n{outcome}"
    );
}
