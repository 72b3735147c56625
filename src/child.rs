//! The supervised command: spawn, signal its process group, reap.
//!
//! Invariants:
//! * The child leads its own process group (`process_group(0)`), so one `killpg` reaches every
//!   descendant that did not deliberately leave the group, and a terminal's Ctrl-C reaches
//!   redlock, which forwards it.
//! * The child dies with redlock: `PR_SET_PDEATHSIG(SIGKILL)` is set in the child before exec,
//!   so a `kill -9` of redlock never leaves it running unsupervised. The death signal follows the
//!   thread that spawned the child, which is why only the main thread spawns.
//! * redlock is a child subreaper: orphaned descendants are reparented to it, so it can reap
//!   them (and, as PID 1, every zombie) and knows when the whole group is gone.
//! * stdio is inherited, never re-piped.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use libc::{c_int, pid_t};

use crate::exit::Exit;

pub struct Child {
    pub pid: pid_t,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Exited(u8),
    Signaled(c_int),
}

impl Status {
    pub fn exit(self) -> Exit {
        match self {
            Status::Exited(code) => Exit::Child(code),
            Status::Signaled(sig) => Exit::Signal(sig),
        }
    }
}

/// Marks redlock as a subreaper for its descendants.
pub fn become_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Starts `argv` in a new process group with `env` added to redlock's environment.
pub fn spawn(argv: &[String], env: &[(&str, &str)]) -> io::Result<Child> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions (prctl, getppid, kill); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            // redlock may have died between fork and prctl; then nobody would ever kill us.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    Ok(Child {
        pid: child.id() as pid_t,
    })
}

/// The exit status for a command that could not be started, tini's convention.
pub fn spawn_failure_exit(err: &io::Error) -> Exit {
    match err.kind() {
        io::ErrorKind::NotFound => Exit::NotFound,
        _ => Exit::NotExecutable,
    }
}

/// Sends `sig` to every process in the group led by `pgid`. Returns false when none is left.
pub fn signal_group(pgid: pid_t, sig: c_int) -> bool {
    // SAFETY: killpg has no memory effects.
    unsafe { libc::killpg(pgid, sig) == 0 }
}

/// Whether any process of the group still exists.
pub fn group_alive(pgid: pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::killpg(pgid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Reaps every child that has ended; returns the status of `pid` if it was among them.
pub fn reap(pid: pid_t) -> Option<Status> {
    let mut found = None;
    loop {
        let mut raw: c_int = 0;
        // SAFETY: `raw` is a valid out-pointer for the duration of the call.
        let reaped = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        if reaped <= 0 {
            return found;
        }
        if reaped == pid {
            if libc::WIFEXITED(raw) {
                found = Some(Status::Exited(libc::WEXITSTATUS(raw) as u8));
            } else if libc::WIFSIGNALED(raw) {
                found = Some(Status::Signaled(libc::WTERMSIG(raw)));
            }
        }
    }
}
