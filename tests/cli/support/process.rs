//! Looking at and signalling processes by pid, for processes the test did not spawn itself
//! (the command redlock runs, and whatever that command starts); and making the ones it does
//! spawn go with it.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use super::poll::wait_until;

pub type Pid = i32;

/// True while `pid` exists and is not a zombie: a zombie has finished running, it merely
/// waits for a parent (often init) to collect its status.
pub fn is_running(pid: Pid) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state letter follows the parenthesised command name, which may itself contain
    // spaces and parentheses; the last ')' ends it.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x") | None)
}

/// True while `pid` is stopped (SIGSTOP, a terminal's Ctrl-Z): state `T`.
pub fn is_stopped(pid: Pid) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next())
        == Some("T")
}

pub fn send_signal(pid: Pid, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; a stale pid at worst yields ESRCH.
    let rc = unsafe { libc::kill(pid, signal) };
    assert!(
        rc == 0,
        "kill({pid}, {}) failed: {}",
        signal_name(signal),
        std::io::Error::last_os_error()
    );
}

/// Waits, up to `timeout`, until `pid` no longer runs; returns when it was first seen gone.
pub fn wait_until_gone(pid: Pid, what: &str, timeout: Duration) -> Instant {
    wait_until(&format!("{what} (pid {pid}) to be gone"), timeout, || {
        (!is_running(pid)).then(Instant::now)
    })
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGCONT => "SIGCONT",
        _ => "another signal",
    }
}

/// The machine's host name, as a lock holder records it.
pub fn host_name() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read /proc/sys/kernel/hostname")
        .trim()
        .to_owned()
}

/// Makes `command`'s process die with the test's thread that starts it (`PR_SET_PDEATHSIG`),
/// so that a test that panics or is killed leaves no server or helper behind.
pub fn dies_with_the_test(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe and touches no memory of this process.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
