//! The supervised command: spawn, reap, lend the terminal.
//!
//! Invariants:
//! * The child leads its own process group (`setpgid(0, 0)` before exec), so a terminal's
//!   Ctrl-C reaches redlock, which forwards it, and a forwarded signal reaches the group as a
//!   terminal would send it.
//! * The child is in the command's room before its first instruction: it joins the cgroup
//!   (`tree.rs`) and records its pid for the keeper before exec, while redlock is suspended
//!   (CLONE_VFORK), so nothing the command starts is ever outside the tree, and the keeper
//!   knows whom to kill from the moment the command exists. If it cannot join, it says so in
//!   the shared tree and the walk of redlock's descendants takes over.
//! * In a cgroup, the child also dies with redlock (`PR_SET_PDEATHSIG(SIGKILL)`), as a second
//!   line behind the keeper. Not when the tree is redlock's descendants: there the command must
//!   outlive redlock for the moment the keeper needs to find its descendants through it.
//! * redlock is a child subreaper: orphaned descendants are re-parented to it, so it can reap
//!   them (and, as PID 1, every zombie) and knows when the whole tree is gone.
//! * stdio is inherited, never re-piped.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

use libc::{c_int, pid_t};

use crate::report::exit::Exit;
use crate::supervise::tree::{MODE_DESCENDANTS, Tree};

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
///
/// This is `posix_spawnp` plus the one thing posix_spawn cannot do, `PR_SET_PDEATHSIG`:
/// `clone(CLONE_VM | CLONE_VFORK)` runs [`exec_child`] on a small stack of its own while redlock
/// is suspended until the child has exec'd or failed. Copying redlock's page tables with fork(2)
/// (what `Command::pre_exec` forces) costs more than the rest of a short run's overhead. The
/// child shares redlock's memory, so everything it needs is prepared here and it only calls
/// async-signal-safe functions, allocating nothing.
pub fn spawn(argv: &[OsString], env: &[(&str, &str)], tree: &Tree) -> io::Result<Child> {
    let cstr = |s: &[u8]| {
        CString::new(s)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in command"))
    };
    let args: Vec<CString> = argv
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let ours: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstr(format!("{k}={v}").as_bytes()))
        .collect::<io::Result<_>>()?;
    let paths = candidates(&argv[0])
        .iter()
        .map(|p| cstr(p))
        .collect::<io::Result<Vec<_>>>()?;

    let nul = |v: &[CString]| {
        let mut ptrs: Vec<*const libc::c_char> = v.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        ptrs
    };
    let argv_ptrs = nul(&args);
    let env_ptrs = environment(env, &ours);
    let path_ptrs = nul(&paths);
    let mut plan = ExecPlan {
        paths: path_ptrs.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        cgroup: tree.cgroup_fd().unwrap_or(-1),
        joined: false,
        tree: tree as *const Tree,
        errno: 0,
    };
    // Uninitialised memory is a fine stack; only the child's few frames touch it.
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK);
    let plan_ptr = (&mut plan as *mut ExecPlan).cast();
    let mut pid = -1;
    #[cfg(target_arch = "x86_64")]
    if plan.cgroup >= 0 {
        let args = crate::supervise::sys::CloneArgs {
            flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64
                | crate::supervise::sys::CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.as_mut_ptr() as u64,
            stack_size: (CHILD_STACK - stack.as_ptr() as usize % 16) as u64,
            cgroup: plan.cgroup as u64,
            ..Default::default()
        };
        plan.joined = true;
        // SAFETY: as for clone below; the stack's top (base + size) is 16-byte aligned.
        let rc = unsafe { crate::supervise::sys::clone3_run(&args, exec_child, plan_ptr) };
        if rc > 0 {
            pid = rc as pid_t;
        } else {
            // No clone3 (an old kernel, a seccomp filter): the child joins by writing to
            // cgroup.procs.
            plan.joined = false;
        }
    }
    if pid < 0 {
        // SAFETY: the stack grows down from its (16-byte aligned) top; `plan`, the pointer
        // arrays and the strings they point to outlive the child's use of them, because
        // CLONE_VFORK suspends this thread until the child has exec'd or exited. Without
        // CLONE_SIGHAND the child gets its own copy of the signal dispositions.
        pid = unsafe {
            let top = stack.as_mut_ptr().add(CHILD_STACK);
            let top = top.sub(top as usize % 16);
            libc::clone(
                exec_child,
                top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                plan_ptr,
            )
        };
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the child is done with `plan`; read what it wrote through our shared memory.
    let errno = unsafe { std::ptr::read_volatile(&plan.errno) };
    if errno != 0 {
        let mut raw = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(pid, &mut raw, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Child { pid })
}

const CHILD_STACK: usize = 32 * 1024;

/// What the cloned child needs, prepared by the parent.
#[repr(C)]
struct ExecPlan {
    /// NULL-terminated candidate paths for the program, in PATH order.
    paths: *const *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    /// The command's cgroup directory, or -1.
    cgroup: c_int,
    /// Whether the child was cloned into the cgroup already.
    joined: bool,
    /// Where the child records its pid, and its room if it cannot join the cgroup.
    tree: *const Tree,
    /// Written by the child when no exec succeeded.
    errno: c_int,
}

/// Runs in the cloned child, in redlock's memory, before exec.
extern "C" fn exec_child(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ExecPlan`, alive while the parent is suspended. Only
    // async-signal-safe calls follow.
    unsafe {
        let plan = &mut *(arg as *mut ExecPlan);
        let tree = &*plan.tree;
        libc::setpgid(0, 0);
        tree.command
            .store(libc::getpid(), std::sync::atomic::Ordering::SeqCst);
        // The keeper gave up on this lease before the command existed (redlock was stopped
        // between arming it and this spawn): the command must not start at all. If the keeper
        // fires after this check, its walk finds this process, which exists already.
        if tree.fired.load(std::sync::atomic::Ordering::SeqCst) {
            libc::_exit(127);
        }
        if plan.cgroup >= 0 && !plan.joined && !join(plan.cgroup) {
            tree.mode
                .store(MODE_DESCENDANTS, std::sync::atomic::Ordering::Release);
        } else if plan.cgroup >= 0 {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        }
        // Before unblocking anything: the handlers std installed (SIGSEGV, SIGBUS) must not run
        // in a child that shares redlock's memory, and SIGPIPE, which std ignores, must reach
        // the command with its default action (an ignored disposition survives exec). Every
        // other signal redlock cares about is blocked with its default disposition.
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // execvp's search: remember EACCES, keep looking past ENOENT/ENOTDIR, stop at anything
        // else.
        let mut errno = libc::ENOENT;
        let mut denied = false;
        let mut p = plan.paths;
        while !(*p).is_null() {
            libc::execve(*p, plan.argv, plan.envp);
            errno = *libc::__errno_location();
            match errno {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => break,
            }
            p = p.add(1);
        }
        if denied && (errno == libc::ENOENT || errno == libc::ENOTDIR) {
            errno = libc::EACCES;
        }
        std::ptr::write_volatile(&mut plan.errno, errno);
        libc::_exit(127)
    }
}

/// Moves the calling process into the cgroup whose directory is `dir` (async-signal-safe).
///
/// # Safety
/// Only for the cloned child before exec: it uses the C library's `errno`.
unsafe fn join(dir: c_int) -> bool {
    // SAFETY: a NUL-terminated name relative to an open directory; one byte from a literal.
    unsafe {
        let fd = libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) == 1
    }
}

/// Where execvp would look for `program`.
fn candidates(program: &OsStr) -> Vec<Vec<u8>> {
    let program = program.as_bytes();
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            if dir.is_empty() {
                return program.to_vec();
            }
            let mut dir = dir;
            while let [rest @ .., b'/'] = dir {
                dir = rest;
            }
            [dir, b"/", program].concat()
        })
        .collect()
}

/// The command's environment: redlock's own, without the variables redlock sets, then those
/// (`ours`, `NAME=value` each), NULL-terminated. redlock's entries are passed as pointers into its
/// environment block: copying each one (what `std::env::vars_os` does) was most of the spawn's
/// preparation, on the path from the lock's grant to the command's start, with a few dozen
/// variables (a container's environment often has more).
fn environment(env: &[(&str, &str)], ours: &[CString]) -> Vec<*const libc::c_char> {
    let mut ptrs = Vec::with_capacity(64);
    // SAFETY: `environ` is the process's environment block, a NULL-terminated array of
    // NUL-terminated strings. redlock never changes its environment (no `set_var`), so the
    // block and its entries stay as they are until the child has exec'd.
    unsafe {
        let mut at = libc::environ as *const *const libc::c_char;
        while !at.is_null() && !(*at).is_null() {
            let entry = CStr::from_ptr(*at).to_bytes();
            // As `std::env::vars_os` reads it: the name ends at the first '=' after the first
            // byte; an entry without one is left out.
            if let Some(eq) = entry
                .get(1..)
                .and_then(|e| e.iter().position(|&b| b == b'='))
            {
                let name = &entry[..=eq];
                if !env.iter().any(|(k, _)| k.as_bytes() == name) {
                    ptrs.push(*at);
                }
            }
            at = at.add(1);
        }
    }
    ptrs.extend(ours.iter().map(|c| c.as_ptr()));
    ptrs.push(std::ptr::null());
    ptrs
}

/// The exit status for a command that could not be started, tini's convention.
pub fn spawn_failure_exit(err: &io::Error) -> Exit {
    match err.kind() {
        io::ErrorKind::NotFound => Exit::NotFound,
        _ => Exit::NotExecutable,
    }
}

/// What became of the supervised child, as far as one round of reaping saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaped {
    Nothing,
    Ended(Status),
    /// Stopped by this signal (job control).
    Stopped(c_int),
}

/// Reaps every child that has ended (adopted orphans included) and reports what happened to
/// `pid`: its end, or that it was stopped.
pub fn reap(pid: pid_t) -> Reaped {
    let mut seen = Reaped::Nothing;
    loop {
        let mut raw: c_int = 0;
        // SAFETY: `raw` is a valid out-pointer for the duration of the call.
        let reaped = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG | libc::WUNTRACED) };
        if reaped <= 0 {
            return seen;
        }
        if reaped != pid {
            continue;
        }
        if libc::WIFEXITED(raw) {
            seen = Reaped::Ended(Status::Exited(libc::WEXITSTATUS(raw) as u8));
        } else if libc::WIFSIGNALED(raw) {
            seen = Reaped::Ended(Status::Signaled(libc::WTERMSIG(raw)));
        } else if libc::WIFSTOPPED(raw) && !matches!(seen, Reaped::Ended(_)) {
            seen = Reaped::Stopped(libc::WSTOPSIG(raw));
        }
    }
}

/// The terminal on stdin, when redlock runs in its foreground: a command that reads from it
/// must be given the foreground.
pub fn foreground_terminal() -> bool {
    // SAFETY: isatty/tcgetpgrp/getpgrp only query the kernel.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Makes `pgid` the foreground process group of the terminal on stdin. redlock blocks SIGTTOU,
/// so this works from the background too.
pub fn give_terminal(pgid: pid_t) {
    // SAFETY: tcsetpgrp on fd 0 has no memory effects; failure leaves things as they were.
    unsafe {
        libc::tcsetpgrp(0, pgid);
    }
}

/// Stops redlock itself (SIGSTOP cannot be blocked), as a job stopped by Ctrl-Z; returns when
/// it is continued. A SIGCONT that came while it was getting ready to stop (blocked, so it
/// waits, pending) already asked it to go on.
pub fn stop_self() {
    // SAFETY: sigset_t is plain data that sigpending fills; kill with our own pid has no
    // memory effects.
    unsafe {
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut pending);
        if libc::sigismember(&pending, libc::SIGCONT) == 1 {
            return;
        }
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_looked_up_like_execvp_does() {
        assert_eq!(candidates("./job.sh".as_ref()), vec![b"./job.sh".to_vec()]);
        assert_eq!(
            candidates("/bin/true".as_ref()),
            vec![b"/bin/true".to_vec()]
        );
    }

    #[test]
    fn spawn_reports_missing_and_non_executable_programs() {
        let tree = Tree::prepare(true);
        let missing = spawn(&["/nonexistent/redlock-test".into()], &[], &tree)
            .err()
            .unwrap();
        assert_eq!(spawn_failure_exit(&missing), Exit::NotFound);
        let denied = spawn(&["/etc/hostname".into()], &[], &tree).err().unwrap();
        assert_eq!(spawn_failure_exit(&denied), Exit::NotExecutable);
    }
}
