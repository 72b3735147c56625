//! The exit-status contract (the README's "Exit status") as a type.
//!
//! Exit statuses are a promise to crontabs, scripts and Kubernetes `podFailurePolicy` rules:
//! the numbers below never change. What an *error* means (which status it stands for, how it
//! reads) is decided in `error.rs`; `main` is the only place a status ends the process.

/// What redlock tells its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done (`status`: held; `release`/`extend`: done).
    Success,
    /// 1: `status`: not held; `release`/`extend`: nothing done (not the holder).
    No,
    /// The child's own status, passed through.
    Child(u8),
    /// 128+N: the child (or redlock while waiting) ended by signal N.
    Signal(i32),
    /// 64: usage error or bad input; nothing was contacted.
    Usage,
    /// 69: Redis unreachable, timed out, read-only, out of memory, loading.
    Unavailable,
    /// 75 (or `--conflict-exit-code`): somebody else holds the lock.
    Busy(u8),
    /// 76: the lease was lost while the child ran; the child was stopped.
    LeaseLost,
    /// 77: authentication failed or an ACL denied a command.
    Permission,
    /// 78: the server is set up in a way redlock cannot work with (WRONGTYPE, unknown command).
    Config,
    /// 126: the command exists but could not be executed.
    NotExecutable,
    /// 127: the command was not found.
    NotFound,
}

pub const BUSY: u8 = 75;

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::No => 1,
            Exit::Child(code) => code,
            Exit::Signal(n) => (128 + n).clamp(0, 255) as u8,
            Exit::Usage => 64,
            Exit::Unavailable => 69,
            Exit::Busy(code) => code,
            Exit::LeaseLost => 76,
            Exit::Permission => 77,
            Exit::Config => 78,
            Exit::NotExecutable => 126,
            Exit::NotFound => 127,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_contract() {
        assert_eq!(Exit::Success.code(), 0);
        assert_eq!(Exit::No.code(), 1);
        assert_eq!(Exit::Usage.code(), 64);
        assert_eq!(Exit::Unavailable.code(), 69);
        assert_eq!(Exit::Busy(BUSY).code(), 75);
        assert_eq!(Exit::Busy(0).code(), 0);
        assert_eq!(Exit::LeaseLost.code(), 76);
        assert_eq!(Exit::Permission.code(), 77);
        assert_eq!(Exit::Config.code(), 78);
        assert_eq!(Exit::NotExecutable.code(), 126);
        assert_eq!(Exit::NotFound.code(), 127);
        assert_eq!(Exit::Signal(libc::SIGTERM).code(), 143);
        assert_eq!(Exit::Signal(libc::SIGKILL).code(), 137);
        assert_eq!(Exit::Child(3).code(), 3);
    }
}
