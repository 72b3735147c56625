//! Lease arithmetic on the monotonic clock.
//!
//! Invariant: the child may run only while `Instant::now() < kill_at`, where every instant is
//! derived from the moment a successful acquire or extend was *sent* (not answered): the server
//! started its TTL no earlier than that, so `sent + ttl` is an upper bound on the server's
//! expiry. We subtract a drift allowance (ttl/100 + 2 ms, for clock-rate differences) and a kill
//! margin (the same amount again, for SIGKILL to take effect), and put SIGTERM `kill_after`
//! before SIGKILL:
//!
//! ```text
//! sent ── renew every ttl/3 ──── term_at ── kill_after ── kill_at ─ margin ─ deadline ─ drift ─ sent+ttl
//! ```
//!
//! A TTL is accepted only when at least a third of it lies between the first renewal and
//! `term_at`, so a Redis stall shorter than ttl/3 never stops the child. `Instant` is
//! CLOCK_MONOTONIC: it keeps counting while redlock is stopped (SIGSTOP, a paused VM) but not
//! while the whole machine is suspended, which is not a state a lock holder should be in.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::exit::usage;

/// The smallest TTL `run` accepts. Below it, renewal round trips and scheduling noise eat the
/// margins that keep the child inside its lease.
pub const MIN_TTL: Duration = Duration::from_millis(500);
/// A longer TTL only delays recovery after a crash; `5M` (months) is a typo for `5m`.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// The default grace between SIGTERM and SIGKILL never exceeds this.
pub const MAX_DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

/// The timing rules of one lease, fixed at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub ttl: Duration,
    pub kill_after: Duration,
}

impl Lease {
    /// Checks `ttl` and `--kill-after` against each other; fails with a usage error (64).
    pub fn new(ttl: Duration, kill_after: Option<Duration>) -> Result<Lease> {
        check_ttl(ttl)?;
        let max_kill_after = max_kill_after(ttl);
        let kill_after = match kill_after {
            None => (ttl / 5).min(MAX_DEFAULT_KILL_AFTER),
            Some(d) if d.is_zero() => {
                return Err(usage(
                    "--kill-after must be greater than 0 (it is the grace between SIGTERM and SIGKILL)",
                ));
            }
            Some(d) if d > max_kill_after => {
                return Err(usage(format!(
                    "--kill-after {} leaves no time to renew a {} lease; use at most {} or raise --ttl",
                    fmt(d),
                    fmt(ttl),
                    fmt(max_kill_after)
                )));
            }
            Some(d) => d,
        };
        Ok(Lease { ttl, kill_after })
    }

    /// Clock-rate allowance: ttl/100 + 2 ms.
    pub fn drift(&self) -> Duration {
        drift(self.ttl)
    }

    /// How often the heartbeat renews.
    pub fn interval(&self) -> Duration {
        self.ttl / 3
    }

    /// The timeline of a lease whose acquire or extend was sent at `sent`.
    pub fn timeline(&self, sent: Instant) -> Timeline {
        let drift = self.drift();
        let deadline = sent + self.ttl - drift;
        let kill_at = deadline - drift;
        Timeline {
            sent,
            deadline,
            kill_at,
            term_at: kill_at - self.kill_after,
        }
    }
}

/// The instants that matter for one confirmed lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// When the confirming command was sent.
    pub sent: Instant,
    /// The latest moment we may believe we hold the lock.
    pub deadline: Instant,
    /// SIGKILL to the child's group, so it is dead by `deadline`.
    pub kill_at: Instant,
    /// SIGTERM to the child's group, `kill_after` before `kill_at`.
    pub term_at: Instant,
}

pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL {
        return Err(usage(format!(
            "--ttl {} is too short to renew safely; the smallest TTL is {}",
            fmt(ttl),
            fmt(MIN_TTL)
        )));
    }
    if ttl > MAX_TTL {
        return Err(usage(format!(
            "--ttl {} is longer than 24h; redlock renews the lease, so a short TTL (e.g. 30s) \
             is safer, and a crash frees the lock sooner",
            fmt(ttl)
        )));
    }
    Ok(())
}

/// Clock-rate allowance for a TTL: ttl/100 + 2 ms.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The longest `--kill-after` that still leaves a third of the TTL for renewal retries.
fn max_kill_after(ttl: Duration) -> Duration {
    (ttl / 3).saturating_sub(drift(ttl) * 2)
}

/// A duration as an operator would write it (`1s 500ms`).
pub fn fmt(d: Duration) -> String {
    let rounded = if d >= Duration::from_secs(1) {
        Duration::from_millis(d.as_millis() as u64)
    } else {
        Duration::from_micros(d.as_micros() as u64 / 1000 * 1000)
    };
    if rounded.is_zero() {
        return "0s".to_string();
    }
    humantime::format_duration(rounded).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn default_kill_after_scales_with_the_ttl_and_is_capped() {
        assert_eq!(Lease::new(1000 * MS, None).unwrap().kill_after, 200 * MS);
        assert_eq!(
            Lease::new(Duration::from_secs(3600), None)
                .unwrap()
                .kill_after,
            MAX_DEFAULT_KILL_AFTER
        );
        assert_eq!(Lease::new(MIN_TTL, None).unwrap().kill_after, 100 * MS);
    }

    #[test]
    fn every_accepted_lease_leaves_a_third_of_the_ttl_for_retries() {
        for ttl_ms in [500u64, 501, 999, 1000, 3000, 30_000, 3_600_000, 86_400_000] {
            let lease = Lease::new(Duration::from_millis(ttl_ms), None).unwrap();
            let t0 = Instant::now();
            let line = lease.timeline(t0);
            let first_renewal = t0 + lease.interval();
            assert!(
                line.term_at >= first_renewal + lease.interval() - MS,
                "{ttl_ms}"
            );
            assert!(line.term_at < line.kill_at && line.kill_at < line.deadline);
            assert!(line.deadline < t0 + lease.ttl);
        }
    }

    #[test]
    fn ttl_outside_the_bounds_is_a_usage_error() {
        for ttl in [Duration::ZERO, 499 * MS, MAX_TTL + MS] {
            let err = Lease::new(ttl, None).unwrap_err();
            assert_eq!(crate::exit::classify(&err), crate::exit::Exit::Usage);
            assert!(err.to_string().contains("--ttl"));
        }
    }

    #[test]
    fn kill_after_that_leaves_no_time_to_renew_is_rejected() {
        let err = Lease::new(Duration::from_secs(1), Some(Duration::from_secs(5))).unwrap_err();
        assert!(err.to_string().contains("--kill-after 5s"), "{err}");
        assert!(err.to_string().contains("309ms"), "{err}");
        assert!(Lease::new(Duration::from_secs(1), Some(309 * MS)).is_ok());
        assert!(Lease::new(Duration::from_secs(1), Some(Duration::ZERO)).is_err());
    }

    #[test]
    fn durations_print_as_an_operator_writes_them() {
        assert_eq!(fmt(Duration::from_millis(1500)), "1s 500ms");
        assert_eq!(fmt(Duration::from_micros(309_333)), "309ms");
    }
}
