//! The exit-status contract (DESIGN.md §3) as a type.
//!
//! Exit statuses are a promise to crontabs, scripts and Kubernetes `podFailurePolicy` rules:
//! the numbers below never change. Errors travel up as `anyhow::Error`; [`classify`] is the one
//! place that turns an error into a status, by looking for a [`Failure`] or a Redis error in the
//! chain. Anything unrecognised is "unavailable" (69): when in doubt, redlock says it could not
//! do its job, never that the lock is busy or free.

use std::fmt;

use redis::{ErrorKind, RedisError, ServerErrorKind};

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

/// An error whose exit status is already decided by the code that raised it.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

/// An error that ends redlock with `exit`.
pub fn fail(exit: Exit, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure {
        exit,
        message: message.into(),
    })
}

/// Bad input (64): said before anything is contacted.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    fail(Exit::Usage, message)
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The Redis errors in an error's chain of causes, outermost first.
pub fn redis_errors(err: &anyhow::Error) -> impl Iterator<Item = &RedisError> {
    err.chain().filter_map(|c| c.downcast_ref::<RedisError>())
}

/// The exit status an error stands for.
pub fn classify(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return failure.exit;
        }
        if let Some(redis) = cause.downcast_ref::<RedisError>() {
            return classify_redis(redis);
        }
    }
    Exit::Unavailable
}

/// Redis errors by class. Transient server states (LOADING, MASTERDOWN, BUSY, CLUSTERDOWN,
/// TRYAGAIN), READONLY and OOM mean "this server cannot take the lock right now": 69.
pub fn classify_redis(err: &RedisError) -> Exit {
    // Some clients (the cluster client) wrap an authentication failure in another kind.
    let text = err.to_string();
    if text.contains("WRONGPASS") || text.contains("invalid username-password") {
        return Exit::Permission;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => return Exit::Permission,
        ErrorKind::Server(ServerErrorKind::NoPerm) => return Exit::Permission,
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => return Exit::Unavailable,
        _ => {}
    }
    match err.code() {
        Some("WRONGPASS" | "NOAUTH" | "NOPERM") => Exit::Permission,
        Some("WRONGTYPE") => Exit::Config,
        Some(
            "OOM" | "BUSY" | "READONLY" | "LOADING" | "MASTERDOWN" | "CLUSTERDOWN" | "TRYAGAIN",
        ) => Exit::Unavailable,
        Some(_)
            if err
                .detail()
                .is_some_and(|d| d.contains("max number of clients")) =>
        {
            Exit::Unavailable
        }
        // An ACL denial inside a script is an ERR, not a NOPERM.
        Some(_)
            if err.detail().is_some_and(|d| {
                d.contains("executing the script can't") || d.contains("No permissions")
            }) =>
        {
            Exit::Permission
        }
        // A server with requirepass answers an unauthenticated client's large request this way.
        Some(_) if err.detail().is_some_and(|d| d.contains("unauthenticated")) => Exit::Permission,
        // Any other error reply (an unknown or renamed command, a script the server refuses)
        // means the server is not set up for redlock.
        Some(_) => Exit::Config,
        None => Exit::Unavailable,
    }
}

/// Whether a Redis error is an answer about the lock (the server spoke and refused) rather than
/// a failure to reach it. The heartbeat treats the former as lease loss at once and retries the
/// latter until the kill point.
pub fn is_definitive(err: &RedisError) -> bool {
    match classify_redis(err) {
        Exit::Permission | Exit::Config => true,
        Exit::Unavailable => matches!(err.code(), Some("READONLY" | "OOM")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(line: &str) -> RedisError {
        let (code, detail) = line.split_once(' ').unwrap();
        redis::make_extension_error(code.to_string(), Some(detail.to_string()))
    }

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

    #[test]
    fn redis_errors_are_classified_by_their_code() {
        assert_eq!(classify_redis(&server_error("WRONGTYPE x")), Exit::Config);
        assert_eq!(classify_redis(&server_error("OOM x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error("WRONGPASS x")),
            Exit::Permission
        );
        assert_eq!(classify_redis(&server_error("NOAUTH x")), Exit::Permission);
        assert_eq!(classify_redis(&server_error("BUSY x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error(
                "ERR Protocol error: unauthenticated multibulk length"
            )),
            Exit::Permission
        );
        assert_eq!(
            classify_redis(&server_error(
                "ERR The user executing the script can't run this command or subcommand"
            )),
            Exit::Permission
        );
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_redis(&io), Exit::Unavailable);
        assert!(!is_definitive(&io));
        assert!(is_definitive(&server_error("WRONGTYPE x")));
        assert!(is_definitive(&server_error("READONLY x")));
        assert!(!is_definitive(&server_error("LOADING x")));
    }

    #[test]
    fn failures_win_over_everything_else() {
        let err = fail(Exit::LeaseLost, "lost").context("while running");
        assert_eq!(classify(&err), Exit::LeaseLost);
        assert_eq!(
            classify(&anyhow::anyhow!("something odd")),
            Exit::Unavailable
        );
    }
}
