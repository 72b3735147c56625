//! Passwords: used from the URL or a password file, refused with 77 when wrong, and never
//! shown on stdout or stderr, even verbosely.

use std::fs;

use crate::support::{RedisServer, Redlock, TempDir, free_port, says};

const PASSWORD: &str = "s3cret-Pa55word";
const WRONG_PASSWORD: &str = "wr0ng-Pa55word";

fn server_with_password() -> RedisServer {
    RedisServer::start_with(&["--requirepass", PASSWORD])
}

fn password_file(scratch: &TempDir, content: &str) -> String {
    let path = scratch.join("password");
    fs::write(&path, content).expect("write password file");
    path.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn password_in_the_url_is_used_and_never_shown() {
    let server = server_with_password();
    Redlock::without_url()
        .args(["-v", "--url", &server.url_with_password(PASSWORD), "run"])
        .args(["--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0)
        .never_shows(PASSWORD);
}

#[test]
fn wrong_password_exits_77_without_showing_it() {
    let server = server_with_password();
    Redlock::without_url()
        .args([
            "-v",
            "--url",
            &server.url_with_password(WRONG_PASSWORD),
            "run",
        ])
        .args(["--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(77)
        .error_mentions(says::DENIED)
        .never_shows(WRONG_PASSWORD);
}

#[test]
fn missing_password_exits_77() {
    let server = server_with_password();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(77)
        .error_mentions(says::DENIED);
}

#[test]
fn password_file_is_used_and_never_shown() {
    let server = server_with_password();
    let scratch = TempDir::new("pw");
    let file = password_file(&scratch, &format!("{PASSWORD}\n"));
    Redlock::new(&server)
        .args([
            "-v",
            "--password-file",
            &file,
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(0)
        .never_shows(PASSWORD);
}

#[test]
fn password_file_can_come_from_redlock_password_file() {
    let server = server_with_password();
    let scratch = TempDir::new("pw");
    let file = password_file(&scratch, &format!("{PASSWORD}\n"));
    Redlock::new(&server)
        .env("REDLOCK_PASSWORD_FILE", &file)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0)
        .never_shows(PASSWORD);
}

#[test]
fn password_file_wins_over_the_password_in_the_url() {
    let server = server_with_password();
    let scratch = TempDir::new("pw");
    let file = password_file(&scratch, &format!("{PASSWORD}\n"));
    Redlock::without_url()
        .args(["--url", &server.url_with_password(WRONG_PASSWORD)])
        .args([
            "--password-file",
            &file,
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(0)
        .never_shows(PASSWORD)
        .never_shows(WRONG_PASSWORD);
}

#[test]
fn wrong_password_in_a_file_exits_77_without_showing_it() {
    let server = server_with_password();
    let scratch = TempDir::new("pw");
    let file = password_file(&scratch, &format!("{WRONG_PASSWORD}\n"));
    Redlock::new(&server)
        .args([
            "-v",
            "--password-file",
            &file,
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(77)
        .never_shows(WRONG_PASSWORD);
}

#[test]
fn unreachable_server_error_does_not_show_the_password() {
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", free_port());
    Redlock::without_url()
        .args([
            "-v", "--url", &url, "run", "--key", "job", "--ttl", "1s", "--", "true",
        ])
        .exits_with(69)
        .never_shows(PASSWORD);
}

#[test]
fn busy_lock_error_does_not_show_the_password() {
    let server = server_with_password();
    let _: () = server.query(&["SET", "job", "someone-elses-token", "PX", "30000"]);
    Redlock::without_url()
        .args(["-v", "--url", &server.url_with_password(PASSWORD), "run"])
        .args([
            "--key", "job", "--ttl", "1s", "--wait", "600ms", "--", "true",
        ])
        .exits_with(75)
        .never_shows(PASSWORD);
}

#[test]
fn a_raw_password_with_a_slash_is_not_shown_in_the_error() {
    Redlock::without_url()
        .args(["--url", "redis://:hun/ter2@127.0.0.1:1", "run"])
        .args(["--key", "job", "--ttl", "1s", "--", "true"])
        .run()
        .never_shows("hun/ter2")
        .never_shows("ter2");
}

#[test]
fn a_password_in_a_unix_url_query_is_not_shown() {
    Redlock::without_url()
        .args([
            "--url",
            "redis+unix:///nonexistent/redis.sock?pass=hunter2",
            "run",
        ])
        .args(["--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(69)
        .never_shows("hunter2");
}
