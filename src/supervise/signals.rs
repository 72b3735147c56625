//! Signal policy, in one place.
//!
//! redlock blocks every signal it cares about in the main thread *before* any other thread
//! exists, so all threads inherit the mask and no signal ever runs a handler or kills redlock by
//! its default action. The main thread then waits for them synchronously with `sigtimedwait`,
//! which makes the supervisor one event loop over {signal, child exited, wake-up, timeout} — the
//! design tini uses as PID 1. Blocked signals are queued even for PID 1, which otherwise drops
//! signals it has no handler for.
//!
//! * INT, TERM, HUP, QUIT, USR1, USR2: forwarded to the child's process group as the same signal
//!   while the child runs (followed by CONT, so a stopped command can act on it); while waiting
//!   for the lock they end redlock with 128+N, holding nothing.
//! * TSTP, TTIN, TTOU, CONT: job control. redlock itself must never be stopped by them — a
//!   stopped redlock renews nothing while the command, in its own group, would run on — so they
//!   are blocked too and passed on to the command's group (see `commands/run.rs` for how a
//!   command that needs the terminal gets it).
//! * CHLD: a child (or an orphan reparented to redlock) changed state; reap.
//! * The first real-time signal: a wake-up that other redlock threads send to the process when
//!   they have news (lease lost, release notification). Its payload travels through shared
//!   state; the signal is only the doorbell.
//!
//! The child gets an empty signal mask, and default dispositions for the signals redlock
//! handles itself (`child.rs`); dispositions that were *ignored* when redlock started (nohup's
//! HUP, a background job's INT) stay ignored, as with any exec.

use std::time::Duration;

use libc::c_int;

/// Signals redlock passes on to the child's process group; while waiting for the lock, they
/// end redlock.
pub const FORWARDED: [c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Job-control signals: passed on to the child's group, never acted on by redlock itself.
pub const JOB_CONTROL: [c_int; 4] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU, libc::SIGCONT];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// One of [`FORWARDED`] arrived.
    Signal(c_int),
    /// SIGCHLD: reap.
    Child,
    /// Another redlock thread rang the doorbell.
    Wake,
    Timeout,
}

pub struct Signals {
    set: libc::sigset_t,
}

fn wake_signal() -> c_int {
    libc::SIGRTMIN()
}

impl Signals {
    /// Blocks redlock's signals in the calling thread. Call it first thing, before spawning any
    /// thread, so every thread inherits the mask.
    pub fn block() -> Signals {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it, and
        // pthread_sigmask only reads it. None of these can fail with valid signal numbers.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in FORWARDED
                .into_iter()
                .chain(JOB_CONTROL)
                .chain([libc::SIGCHLD, wake_signal()])
            {
                libc::sigaddset(&mut set, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Signals { set }
        }
    }

    /// Waits until a signal arrives or `timeout` passes (`None`: no limit).
    pub fn wait(&self, timeout: Option<Duration>) -> Event {
        let ts = timeout.map(|d| {
            let d = d.min(Duration::from_secs(24 * 3600));
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        });
        loop {
            // SAFETY: `self.set` is an initialised sigset; `ts` outlives the call; a null
            // siginfo pointer is allowed.
            let sig = unsafe {
                libc::sigtimedwait(
                    &self.set,
                    std::ptr::null_mut(),
                    ts.as_ref().map_or(std::ptr::null(), |t| t as *const _),
                )
            };
            if sig >= 0 {
                return match sig {
                    libc::SIGCHLD => Event::Child,
                    s if s == wake_signal() => Event::Wake,
                    s => Event::Signal(s),
                };
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                // EAGAIN: the timeout passed.
                _ => return Event::Timeout,
            }
        }
    }

    /// The next pending signal, without waiting.
    pub fn poll(&self) -> Event {
        self.wait(Some(Duration::ZERO))
    }

    /// A file that is readable while one of these signals is pending, for waiting on signals
    /// and a socket at once (`poll`). It consumes nothing: [`Signals::poll`] takes the signal.
    pub fn readable(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: `self.set` is an initialised sigset; a new descriptor is returned or -1.
        let fd = unsafe { libc::signalfd(-1, &self.set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }
}

/// Rings the main thread's doorbell. Safe to call from any thread, any number of times.
pub fn wake() {
    // SAFETY: kill with our own pid and a valid signal number has no memory effects.
    unsafe {
        libc::kill(libc::getpid(), wake_signal());
    }
}

pub fn name(sig: c_int) -> String {
    let name = match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGCONT => "SIGCONT",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}
