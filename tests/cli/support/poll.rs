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

/// Waits (bounded) while this host's clock is in the last 30 s before the edge between two
/// one-hour windows of `--once-per 1h` (the half hour), so that the runs of a test share one
/// window; call it once, before a test's first run. The servers
/// run on this host: their clock is this clock.
pub fn clear_of_the_hours_edge() {
    const HOUR: u128 = 3_600_000;
    wait_until(
        "the clock to pass the edge between two one-hour windows",
        Duration::from_secs(60),
        || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("a clock after 1970")
                .as_millis();
            let to_edge = HOUR - (now + HOUR / 2) % HOUR;
            (to_edge > 30_000).then_some(())
        },
    );
}
