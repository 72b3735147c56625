//! Supervision: exit statuses, signals forwarded to the command, and a redlock that dies.

use std::time::{Duration, Instant};

use crate::support::{
    RedisServer, Redlock, TempDir, child, process::signal_name, wait_for_contender, wait_until_gone,
};

#[test]
fn exit_status_of_the_command_is_passed_through() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "exit 3"])
        .exits_with(3);
}

#[test]
fn command_killed_by_a_signal_gives_128_plus_its_number() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "kill -KILL $$"])
        .exits_with(128 + libc::SIGKILL);
}

/// Sends `signal` to redlock while a command that traps it runs; the command must get it
/// (it prints `got NAME` and exits 0) and the lock must be gone afterwards.
fn signal_reaches_the_command(signal: i32) {
    let name = signal_name(signal).trim_start_matches("SIG");
    let server = RedisServer::start();
    let script = format!("trap 'echo got {name}; exit 0' {name}; echo ready; read _ || true");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", &script])
        .spawn();
    holder.expect_line("ready");
    holder.signal(signal);
    holder.expect_line(&format!("got {name}"));
    holder.exits_with(0);
    assert!(
        !server.exists("job"),
        "the lock was not released after {name}"
    );
}

#[test]
fn sigint_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGINT);
}

#[test]
fn sigterm_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGTERM);
}

#[test]
fn sighup_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGHUP);
}

#[test]
fn sigquit_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGQUIT);
}

#[test]
fn sigusr1_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGUSR1);
}

#[test]
fn sigusr2_sent_to_redlock_reaches_the_command() {
    signal_reaches_the_command(libc::SIGUSR2);
}

#[test]
fn signals_reach_every_process_in_the_commands_group() {
    let server = RedisServer::start();
    let script = r#"
        trap 'echo "child got USR1"' USR1
        sh -c 'trap "echo \"grandchild got USR1\"; exit 0" USR1; echo ready; while :; do sleep 0.05; done' &
        wait; wait"#;
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", script])
        .spawn();
    holder.expect_line("ready");
    holder.signal(libc::SIGUSR1);
    let outcome = holder.exits_with(0);
    for line in ["child got USR1", "grandchild got USR1"] {
        if !outcome.stdout.lines().any(|l| l == line) {
            outcome.fail(&format!("missing {line:?}"));
        }
    }
}

#[test]
fn sigterm_kills_a_command_that_does_not_trap_it_with_143() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    holder.signal(libc::SIGTERM);
    holder.exits_with(128 + libc::SIGTERM);
    assert!(!server.exists("job"), "the lock was not released");
}

/// Sends `signal` to a redlock waiting for a busy lock: it must end with 128+N at once,
/// holding nothing and having started nothing.
fn signal_ends_the_wait(signal: i32) {
    let server = RedisServer::start();
    let scratch = TempDir::new("wait");
    let marker = scratch.join("started");
    let _: () = server.query(&["SET", "job", "someone-elses-token", "PX", "30000"]);
    let before = server.script_calls();
    let waiter = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "1s", "--wait", "15s", "--", "touch",
        ])
        .arg(&marker)
        .spawn();
    wait_for_contender(&server, "job", before);

    let sent = Instant::now();
    waiter.signal(signal);
    let outcome = waiter.exits_with(128 + signal);
    let exited = outcome.exited_at.expect("redlock exited");
    assert!(
        exited - sent < Duration::from_secs(2),
        "the waiter took {:?} to stop after {}",
        exited - sent,
        signal_name(signal)
    );
    assert!(!marker.exists(), "the command ran");
    assert_eq!(server.get("job").as_deref(), Some("someone-elses-token"));
}

#[test]
fn sigterm_while_waiting_for_a_busy_lock_exits_143_holding_nothing() {
    signal_ends_the_wait(libc::SIGTERM);
}

#[test]
fn sigint_while_waiting_for_a_busy_lock_exits_130_holding_nothing() {
    signal_ends_the_wait(libc::SIGINT);
}

#[test]
fn command_does_not_outlive_a_redlock_killed_with_sigkill() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c"])
        .arg(child::HOLD_PRINTING_PID)
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");
    holder.kill9();
    wait_until_gone(
        child,
        "the command of a killed redlock",
        Duration::from_secs(5),
    );
}

#[test]
fn background_processes_of_the_command_do_not_outlive_a_redlock_killed_with_sigkill() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c"])
        .arg(r#"sleep 300 & echo "grandchild $!"; echo ready; read _ || true"#)
        .spawn();
    let grandchild = holder.expect_pid("grandchild");
    holder.expect_line("ready");
    // The watchdog is redlock's second child, started once the command has run a moment.
    let redlock = holder.pid();
    crate::support::wait_until("redlock's watchdog", Duration::from_secs(5), || {
        let children =
            std::fs::read_to_string(format!("/proc/{redlock}/task/{redlock}/children")).ok()?;
        (children.split_whitespace().count() >= 2).then_some(())
    });
    holder.kill9();
    wait_until_gone(
        grandchild,
        "a background process of a killed redlock's command",
        Duration::from_secs(5),
    );
}
