//! `redis+sentinel://SENTINEL[,SENTINEL...]/SERVICE` URLs: the lock lives on whichever server
//! the sentinels name as the service's master, found by redlock's own Sentinel lookup
//! (docs/guide.md, "Beyond one Redis"). A password (in the URL or `--password-file`) is the
//! master's; the sentinels' own comes from `--sentinel-password-file`, with `--sentinel-user`
//! for an ACL user. A failover moves new runs to the new master; a run caught in one ends
//! cleanly (0 or 76) and never leaves its command behind.

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::poll::POLL_INTERVAL;
use crate::support::process::is_running;
use crate::support::redlock::Running;
use crate::support::{
    Outcome, RedisSentinel, RedisServer, Redlock, TempDir, child, free_port, says,
};

/// The master's password in the tests that set one.
const PASSWORD: &str = "sentinel-master-pw";

/// Prints its token and fence, then `ready`, then holds until the test closes stdin.
const HOLD_PRINTING_TOKEN_AND_FENCE: &str =
    r#"echo "token=$REDLOCK_TOKEN"; echo "fence=$REDLOCK_FENCE"; echo ready; read _ || true"#;

fn redlock(url: &str) -> Redlock {
    Redlock::without_url().args(["--url", url])
}

/// A run on `key` through the sentinel, holding until the test closes stdin; returns the run,
/// its token and its fence.
fn hold(sentinel: &RedisSentinel, key: &str) -> (Running, String, i64) {
    let mut holder = redlock(&sentinel.url())
        .args(["run", "--key", key, "--ttl", "2s"])
        .args(["-c", HOLD_PRINTING_TOKEN_AND_FENCE])
        .spawn();
    let token = holder.expect_line_starting("token=");
    let fence = holder.expect_line_starting("fence=");
    holder.expect_line("ready");
    let fence = fence
        .parse()
        .unwrap_or_else(|e| panic!("REDLOCK_FENCE {fence:?} is no integer: {e}"));
    (holder, token, fence)
}

fn finish(mut holder: Running) {
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn sentinel_harness_names_the_master_and_fails_over_to_the_replica() {
    let mut sentinel = RedisSentinel::start();
    assert_eq!(sentinel.master_port(), Some(sentinel.master().port()));
    let old_master = sentinel.master().port();
    sentinel.failover();
    assert_ne!(sentinel.master().port(), old_master);
    assert_eq!(sentinel.master_port(), Some(sentinel.master().port()));
    assert_eq!(sentinel.replica().port(), old_master);
    let _: () = sentinel.master().query(&["SET", "k", "v"]);
}

#[test]
fn run_through_the_sentinel_takes_the_lock_on_the_master() {
    let sentinel = RedisSentinel::start();
    let (holder, token, _) = hold(&sentinel, "job");
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token.as_str()),
        "the master does not hold the lock with the run's token"
    );
    finish(holder);
    assert!(
        !sentinel.master().exists("job"),
        "the lock is still on the master"
    );
}

#[test]
fn after_a_failover_a_new_run_takes_the_lock_on_the_new_master() {
    let mut sentinel = RedisSentinel::start();
    redlock(&sentinel.url())
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    let old_master = sentinel.master().port();
    sentinel.failover();

    let (holder, token, _) = hold(&sentinel, "job");
    assert_ne!(sentinel.master().port(), old_master);
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token.as_str()),
        "the new master does not hold the lock with the run's token"
    );
    finish(holder);
}

#[test]
fn fence_keeps_growing_across_a_failover_once_the_counter_has_replicated() {
    let mut sentinel = RedisSentinel::start();
    let (holder, _, first) = hold(&sentinel, "job");
    finish(holder);
    sentinel.wait_until_replicated();
    sentinel.failover();

    let (holder, _, second) = hold(&sentinel, "job");
    assert!(
        second > first,
        "the fence went from {first} to {second} across the failover"
    );
    finish(holder);
}

#[test]
fn run_caught_in_a_failover_ends_with_0_or_76_and_its_command_gone() {
    let mut sentinel = RedisSentinel::start();
    let mut holder = redlock(&sentinel.url())
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(["-c", child::HOLD_PRINTING_PID])
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    sentinel.failover();
    holder.close_stdin();
    let outcome = holder.wait();
    match outcome.code() {
        Some(0) => {}
        Some(76) => {
            outcome.last_error_mentions(says::LEASE_LOST);
        }
        _ => outcome.fail("expected exit status 0 or 76 after a failover"),
    }
    if is_running(child) {
        outcome.fail(&format!(
            "the command (pid {child}) outlived the run that started it"
        ));
    }
}

#[test]
fn run_whose_master_was_demoted_stops_with_76_or_keeps_its_lease_on_the_new_master() {
    let mut sentinel = RedisSentinel::start();
    let mut holder = redlock(&sentinel.url())
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(["-c", HOLD_PRINTING_TOKEN_AND_FENCE])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    sentinel.failover();

    // Longer than the TTL: by then redlock has either given the lease up (its renewals now
    // reach a read-only replica) or renewed it on the new master.
    let deadline = Instant::now() + Duration::from_secs(3);
    while is_running(holder.pid()) && Instant::now() < deadline {
        thread::sleep(POLL_INTERVAL);
    }
    if is_running(holder.pid()) {
        assert_eq!(
            sentinel.master().get("job").as_deref(),
            Some(token.as_str()),
            "redlock still runs its command, but the new master does not hold its lock"
        );
        finish(holder);
    } else {
        holder.exits_with(76).last_error_mentions(says::LEASE_LOST);
    }
}

#[test]
fn password_file_is_the_masters_and_not_sent_to_the_sentinel() {
    let sentinel = RedisSentinel::start_with_password(PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let password_file = scratch.join("password");
    fs::write(&password_file, format!("{PASSWORD}\n")).expect("write the password file");
    let outcome = redlock(&sentinel.url())
        .arg("--password-file")
        .arg(&password_file)
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(0);
    outcome.never_shows(PASSWORD);
    let token = outcome.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token),
        "the master does not hold the lock with the printed token"
    );
}

#[test]
fn a_master_refusing_its_password_exits_77_naming_the_master() {
    let sentinel = RedisSentinel::start_with_password(PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let password_file = scratch.join("password");
    fs::write(&password_file, "not-the-masters\n").expect("write the password file");
    redlock(&sentinel.url())
        .arg("--password-file")
        .arg(&password_file)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&[&format!(
            "the master 127.0.0.1:{} that sentinel 127.0.0.1:{} names for mymaster",
            sentinel.master().port(),
            sentinel.port()
        )])
        .never_shows("not-the-masters")
        .never_shows("started");
    redlock(&sentinel.url())
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["--password-file"])
        .never_shows("started");
}

#[test]
fn password_in_the_url_is_the_masters_and_not_sent_to_the_sentinel() {
    let sentinel = RedisSentinel::start_with_password(PASSWORD);
    let outcome = redlock(&sentinel.url_with_password(PASSWORD))
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(0);
    outcome.never_shows(PASSWORD);
    let token = outcome.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token),
        "the master does not hold the lock with the printed token"
    );
}

#[test]
fn unreachable_sentinel_exits_69() {
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", free_port());
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(69)
        .error_mentions(says::UNAVAILABLE);
}

#[test]
fn sentinel_url_without_a_service_name_is_a_usage_error() {
    let url = format!("redis+sentinel://127.0.0.1:{}", free_port());
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(64);
}

#[test]
fn a_hung_sentinel_does_not_hide_a_working_one() {
    let sentinel = RedisSentinel::start();
    let hung = RedisServer::start();
    hung.pause();
    let url = format!(
        "redis+sentinel://127.0.0.1:{},127.0.0.1:{}/mymaster",
        hung.port(),
        sentinel.port()
    );
    Redlock::without_url()
        .args(["--url", &url, "--timeout", "2s"])
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    hung.resume();
}

#[test]
fn a_sentinel_naming_a_hung_master_does_not_hide_a_working_one() {
    let working = RedisSentinel::start();
    let stale = RedisSentinel::start();
    stale.master().pause();
    // The stale sentinel is listed first; both name a master called mymaster.
    let url = format!(
        "redis+sentinel://127.0.0.1:{},127.0.0.1:{}/mymaster",
        stale.port(),
        working.port()
    );
    Redlock::without_url()
        .args(["--url", &url, "--timeout", "2s"])
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "echo started"])
        .exits_with(0);
    stale.master().resume();
}

#[test]
fn a_hung_master_is_named_when_the_lookup_runs_out_of_time() {
    let sentinel = RedisSentinel::start();
    sentinel.master().pause();
    // Well within the sentinel's down-after-milliseconds (1 s): it still names the master.
    redlock(&sentinel.url())
        .args(["--timeout", "500ms"])
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(69)
        .error_mentions(&[&format!(
            "the master 127.0.0.1:{} that sentinel 127.0.0.1:{} names for mymaster took the \
             connection but did not answer",
            sentinel.master().port(),
            sentinel.port()
        )])
        .never_shows("started");
    sentinel.master().resume();
}

#[test]
fn doctor_through_sentinel_asks_for_role_when_the_user_may_not_run_it() {
    let sentinel = RedisSentinel::start();
    sentinel.master().acl_setuser(
        "locker",
        &[
            "on",
            ">pw",
            "allcommands",
            "allkeys",
            "allchannels",
            "-role",
        ],
    );
    let url = format!(
        "redis+sentinel://locker:pw@127.0.0.1:{}/mymaster",
        sentinel.port()
    );
    // Without ROLE the master named is used unchecked: runs still work.
    redlock(&url)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    // No persistence in the harness: warnings only, 1.
    let outcome = redlock(&url).arg("doctor").exits_with(1);
    assert!(
        outcome.stdout.lines().any(|line| line.starts_with("warn")
            && line.contains("sentinel role check")
            && line.contains("ACL SETUSER locker +role")),
        "no warning about ROLE:\n{outcome}"
    );
    sentinel.master().acl_setuser("locker", &["+role"]);
    let outcome = redlock(&url).arg("doctor").exits_with(1);
    assert!(
        outcome
            .stdout
            .lines()
            .any(|line| line.starts_with("ok") && line.contains("sentinel role check")),
        "ROLE allowed, not reported:\n{outcome}"
    );
}

/// A run through a sentinel whose only user, `locker`, is allowed what `rules` grant, given
/// its password from a file and `--sentinel-user locker`; it must exit with `code`.
fn run_as_sentinel_user(rules: &str, command: &[&str], code: i32) -> Outcome {
    let sentinel =
        RedisSentinel::start_with_sentinel_user_rules("locker", SENTINEL_PASSWORD, rules);
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, SENTINEL_PASSWORD);
    redlock(&sentinel.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["--sentinel-user", "locker"])
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(command)
        .exits_with(code)
}

#[test]
fn a_sentinel_user_needs_only_get_master_addr_by_name() {
    run_as_sentinel_user("+sentinel|get-master-addr-by-name", &["--", "true"], 0);
}

#[test]
fn a_sentinel_user_without_get_master_addr_by_name_exits_77_naming_the_grant() {
    run_as_sentinel_user("+sentinel|masters", &["-c", "echo started"], 77)
        .error_mentions(&["user locker", "+sentinel|get-master-addr-by-name"])
        .never_shows(SENTINEL_PASSWORD)
        .never_shows("started");
}

/// The sentinels' own password in the tests that set one.
const SENTINEL_PASSWORD: &str = "sentinel-own-pw";

/// A file in `scratch` holding `text` as its first line.
fn password_file(scratch: &TempDir, text: &str) -> std::path::PathBuf {
    let file = scratch.join("sentinel-password");
    fs::write(&file, format!("{text}\n")).expect("write the password file");
    file
}

#[test]
fn sentinels_with_a_password_are_asked_with_the_sentinel_password_file() {
    let sentinel = RedisSentinel::start_with_sentinel_password(SENTINEL_PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, SENTINEL_PASSWORD);
    let outcome = redlock(&sentinel.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(0);
    outcome.never_shows(SENTINEL_PASSWORD);
    let token = outcome.stdout.lines().next().unwrap_or_default();
    assert_eq!(sentinel.master().get("job").as_deref(), Some(token));
}

#[test]
fn the_sentinel_password_file_can_come_from_the_environment() {
    let sentinel = RedisSentinel::start_with_sentinel_password(SENTINEL_PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, SENTINEL_PASSWORD);
    redlock(&sentinel.url())
        .env("REDLOCK_SENTINEL_PASSWORD_FILE", &file)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
}

#[test]
fn a_wrong_sentinel_password_exits_77_naming_the_flag_and_not_the_password() {
    let sentinel = RedisSentinel::start_with_sentinel_password(SENTINEL_PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, "not-the-sentinels-pw");
    redlock(&sentinel.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["refused the sentinels' password"])
        .error_mentions(&["--sentinel-password-file"])
        .error_mentions(&[&format!("sentinel 127.0.0.1:{}", sentinel.port())])
        .never_shows("not-the-sentinels-pw")
        .never_shows(SENTINEL_PASSWORD)
        .never_shows("started");
    assert!(!sentinel.master().exists("job"));
}

#[test]
fn sentinels_with_a_password_asked_without_one_exit_77() {
    let sentinel = RedisSentinel::start_with_sentinel_password(SENTINEL_PASSWORD);
    redlock(&sentinel.url())
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["requires a password"])
        .error_mentions(&["--sentinel-password-file"])
        .never_shows("started");
}

#[test]
fn a_missing_sentinel_password_file_is_a_usage_error_naming_the_flag() {
    let scratch = TempDir::new("sentinel-pw");
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", free_port());
    redlock(&url)
        .arg("--sentinel-password-file")
        .arg(scratch.join("missing"))
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(64)
        .error_mentions(&["--sentinel-password-file"])
        .never_shows("started");
}

#[test]
fn a_sentinel_password_file_with_another_kind_of_url_is_a_usage_error() {
    let server = RedisServer::start();
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, SENTINEL_PASSWORD);
    let commands_before = server.info_number("stats", "total_commands_processed");
    redlock(&server.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(64)
        .error_mentions(&["--sentinel-password-file"])
        .never_shows(SENTINEL_PASSWORD);
    // Only the harness's own INFO reached the server.
    assert_eq!(
        server.info_number("stats", "total_commands_processed"),
        commands_before + 1
    );
}

#[test]
fn a_sentinel_user_needs_the_sentinel_password_file() {
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", free_port());
    redlock(&url)
        .args(["--sentinel-user", "redlock"])
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(64)
        .never_shows("started");
}

#[test]
fn sentinels_with_an_acl_user_are_asked_as_the_sentinel_user() {
    let sentinel = RedisSentinel::start_with_sentinel_user("locker", SENTINEL_PASSWORD);
    let scratch = TempDir::new("sentinel-pw");
    let file = password_file(&scratch, SENTINEL_PASSWORD);
    redlock(&sentinel.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .env("REDLOCK_SENTINEL_USER", "locker")
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0)
        .never_shows(SENTINEL_PASSWORD);
    redlock(&sentinel.url())
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["--sentinel-user", "someone-else"])
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(77)
        .error_mentions(&["--sentinel-user"])
        .never_shows(SENTINEL_PASSWORD)
        .never_shows("started");
}
