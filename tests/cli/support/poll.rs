//! Bounded waiting. Tests never sleep to let something happen; they poll for the state they
//! need, every few milliseconds, and fail with a clear message when it does not come.

use std::thread;
use std::time::{Duration, Instant};

pub const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Calls `check` until it returns `Some`, for at most `timeout`; panics naming `what` otherwise.
pub fn wait_until<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Calls `check` for the whole of `period`, panicking as soon as it reports a violation.
/// Used to show that a state *stays* true (a lease that keeps being renewed), not to wait.
pub fn holds_throughout(
    what: &str,
    period: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) {
    let start = Instant::now();
    while start.elapsed() < period {
        if let Err(violation) = check() {
            panic!(
                "expected {what} for {period:?}, but after {:?}: {violation}",
                start.elapsed()
            );
        }
        thread::sleep(POLL_INTERVAL);
    }
}
