//! Lease arithmetic on CLOCK_BOOTTIME.
//!
//! Invariant: the command may run only while `Moment::now() < kill_at`, where every instant is
//! derived from the moment a successful acquire or extend was *sent* (not answered): the server
//! started its TTL no earlier than that, so `sent + ttl` is an upper bound on the server's
//! expiry. We subtract a drift allowance (ttl/100 + 2 ms, for clock-rate differences between
//! this host and the server) and a kill margin (the drift again plus [`SCHED_FLOOR`], for the
//! kill to be issued and take effect on a loaded host), and put SIGTERM `kill_after` before
//! SIGKILL:
//!
//! ```text
//! sent ─ renew every ttl/3 ─ term_at ─ kill_after ─ kill_at ─ margin ─ deadline ─ drift ─ sent+ttl
//! ```
//!
//! A TTL is accepted only when at least a third of it lies between the first renewal and
//! `term_at`, so a Redis stall shorter than ttl/3 never stops the command.
//!
//! **Why the floor.** Whoever kills at `kill_at` — the supervisor, or the keeper when the
//! supervisor is frozen (`keeper.rs`) — must first be scheduled. A kill issued late by L lets
//! the old command run until `kill_at + L`; the next holder can start no earlier than the
//! server-side expiry, `sent + ttl`, at least `2·drift + SCHED_FLOOR` after `kill_at`. So the
//! two never overlap while L < 2·drift + SCHED_FLOOR: 39 ms at the smallest TTL, more above it.
//! The keeper runs with real-time priority where it may (root), where L is microseconds; as an
//! ordinary process with every core busy L is larger: the benchmark's keeper section (run as an
//! ordinary user for that case) measures it, see docs/performance.md, and SCHED_FLOOR must stay
//! well above it. A SIGKILL takes effect before the target runs another instruction in user
//! space, so no output follows it.
//!
//! **Why BOOTTIME.** CLOCK_MONOTONIC stops while the machine is suspended; a laptop or VM
//! resumed after an hour would believe its lease still fresh. CLOCK_BOOTTIME counts the
//! suspension, so the keeper's timer (a BOOTTIME timerfd) fires the moment the machine resumes.
//! A *paused* VM (live migration, a hypervisor stall) is different: its guest clocks usually
//! stop too, so nothing in the guest can tell the pause from no time at all; the next renewal
//! (at most ttl/3 later) finds the key gone and the command is killed then. Use the fence
//! (`REDLOCK_FENCE`) where a pause longer than the TTL is possible.

use std::ops::{Add, Sub};
use std::time::Duration;

use anyhow::Result;

use crate::report::error::usage;

/// The smallest TTL `run` accepts. Below it, renewal round trips and scheduling noise eat the
/// margins that keep the child inside its lease.
pub const MIN_TTL: Duration = Duration::from_millis(500);
/// A longer TTL only delays recovery after a crash; `5M` (months) is a typo for `5m`.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Time for the kill to be issued and take effect on a loaded host, beyond the drift (see the
/// module doc for the argument).
pub const SCHED_FLOOR: Duration = Duration::from_millis(25);
/// The default grace between SIGTERM and SIGKILL never exceeds this.
pub const MAX_DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

/// A `--max-runtime` longer than this (a century) is as good as none; capped here so that the
/// instants it gives stay within a [`Moment`].
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

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

    /// The timeline of a lease granted for `ttl` (the TTL, or less under `--max-runtime`) by
    /// an acquire or extend sent at `sent`.
    pub fn timeline(&self, ttl: Duration, sent: Moment) -> Timeline {
        let deadline = sent + ttl - drift(ttl);
        let kill_at = deadline - margin(ttl);
        Timeline {
            sent,
            deadline,
            kill_at,
            term_at: kill_at - self.kill_after,
        }
    }

    /// How far past the `--max-runtime` kill point a lease must reach for its own kill point
    /// to be no earlier: the drift and the kill margin of this TTL (every shorter TTL needs
    /// less), plus [`SCHED_FLOOR`] once more, for the tree the supervisor killed at the
    /// `--max-runtime` kill point to be gone before the lease's own kill point comes.
    pub fn reach(&self) -> Duration {
        self.drift() + margin(self.ttl) + SCHED_FLOOR
    }

    /// The limit `--max-runtime` sets on a run whose lock was taken by a request sent at `from`.
    pub fn limit(&self, max_runtime: Duration, from: Moment) -> Limit {
        let term_at = from + max_runtime.min(FOREVER);
        let kill_at = term_at + self.kill_after;
        Limit {
            term_at,
            kill_at,
            lease_end: kill_at + self.reach(),
        }
    }

    /// The TTL to acquire with under `--max-runtime`: the TTL, or, when that would outlast the
    /// run's limit, just enough to cover it (whole milliseconds, rounded up; never below
    /// [`MIN_TTL`]). Such a lease needs no renewal at all.
    pub fn first_ttl(&self, max_runtime: Option<Duration>) -> Duration {
        match max_runtime {
            Some(d) => self
                .ttl
                .min(ceil_ms(d.min(FOREVER) + self.kill_after + self.reach()).max(MIN_TTL)),
            None => self.ttl,
        }
    }
}

/// The limit `--max-runtime` sets on a run: SIGTERM to the command's tree at `term_at`,
/// SIGKILL at `kill_at`, and no lease asked for past `lease_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub term_at: Moment,
    pub kill_at: Moment,
    /// `kill_at` plus [`Lease::reach`]: what renewals may ask for at most.
    pub lease_end: Moment,
}

impl Limit {
    /// The TTL a renewal sent at `sent` asks for: `ttl`, or less where that would carry the
    /// lease past `lease_end` (whole milliseconds, rounded up, as the server counts them).
    /// `None`: the limit has passed, nothing is left to renew for.
    pub fn ttl_at(&self, ttl: Duration, sent: Moment) -> Option<Duration> {
        let left = self.lease_end.checked_duration_since(sent)?;
        (!left.is_zero()).then(|| ttl.min(ceil_ms(left)))
    }

    /// Whether a lease with this timeline outlives the limit: its own kill point comes no
    /// earlier than the limit's, so it needs no further renewal.
    pub fn covered_by(&self, line: &Timeline) -> bool {
        line.kill_at >= self.kill_at
    }
}

/// `d` rounded up to whole milliseconds (what a PX or PEXPIRE carries).
fn ceil_ms(d: Duration) -> Duration {
    let ms = d.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The instants that matter for one confirmed lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// When the confirming command was sent.
    pub sent: Moment,
    /// The latest moment we may believe we hold the lock.
    pub deadline: Moment,
    /// SIGKILL to the command's tree, so it is dead by `deadline`.
    pub kill_at: Moment,
    /// SIGTERM to the command's tree, `kill_after` before `kill_at`.
    pub term_at: Moment,
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
             is safer, and a crash frees the lock sooner{}",
            fmt(ttl),
            months_hint(ttl)
        )));
    }
    Ok(())
}

/// For a duration refused as too long that is a whole number of months: `M` is months and
/// `m` minutes, a slip of the shift key (`5M` for `5m`) that reads as a long lease.
pub fn months_hint(d: Duration) -> String {
    // humantime's month: 30.44 days.
    const MONTH: u64 = 2_630_016;
    let months = d.as_secs() / MONTH;
    if d.subsec_nanos() != 0 || months == 0 || !d.as_secs().is_multiple_of(MONTH) {
        return String::new();
    }
    format!(" (M is months, m minutes: for {months} minutes write {months}m)")
}

/// Clock-rate allowance for a TTL: ttl/100 + 2 ms.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// How long before the deadline the kill is issued: the drift again plus [`SCHED_FLOOR`].
pub fn margin(ttl: Duration) -> Duration {
    drift(ttl) + SCHED_FLOOR
}

/// The longest `--kill-after` that still leaves a third of the TTL for renewal retries.
fn max_kill_after(ttl: Duration) -> Duration {
    (ttl / 3).saturating_sub(drift(ttl) + margin(ttl))
}

/// A point in time on CLOCK_BOOTTIME (nanoseconds since boot, suspension included). Unlike
/// `Instant`, it keeps counting while the machine sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Moment(u64);

impl Moment {
    pub fn now() -> Moment {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is valid for writes; CLOCK_BOOTTIME exists on every supported kernel.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        Moment(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    pub fn from_nanos(ns: u64) -> Moment {
        Moment(ns)
    }

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    pub fn elapsed(self) -> Duration {
        Moment::now().saturating_duration_since(self)
    }

    pub fn checked_duration_since(self, earlier: Moment) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_nanos)
    }

    pub fn saturating_duration_since(self, earlier: Moment) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Moment {
    type Output = Moment;
    fn add(self, d: Duration) -> Moment {
        Moment(self.0.saturating_add(d.as_nanos() as u64))
    }
}

impl Sub<Duration> for Moment {
    type Output = Moment;
    fn sub(self, d: Duration) -> Moment {
        Moment(self.0.saturating_sub(d.as_nanos() as u64))
    }
}

impl Sub for Moment {
    type Output = Duration;
    /// The time from `earlier` to `self`; zero if `earlier` is later.
    fn sub(self, earlier: Moment) -> Duration {
        self.saturating_duration_since(earlier)
    }
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
    fn months_read_for_minutes_are_pointed_out() {
        let month = humantime::parse_duration("5M").unwrap();
        let text = check_ttl(month).unwrap_err().to_string();
        assert!(text.ends_with("for 5 minutes write 5m)"), "{text}");
        assert_eq!(months_hint(Duration::from_secs(48 * 3600)), "");
    }

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
            let t0 = Moment::now();
            let line = lease.timeline(lease.ttl, t0);
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
            assert_eq!(
                crate::report::error::classify(&err),
                crate::report::exit::Exit::Usage
            );
            assert!(err.to_string().contains("--ttl"));
        }
    }

    #[test]
    fn kill_after_that_leaves_no_time_to_renew_is_rejected() {
        let err = Lease::new(Duration::from_secs(1), Some(Duration::from_secs(5))).unwrap_err();
        assert!(err.to_string().contains("--kill-after 5s"), "{err}");
        assert!(err.to_string().contains("284ms"), "{err}");
        assert!(Lease::new(Duration::from_secs(1), Some(284 * MS)).is_ok());
        assert!(Lease::new(Duration::from_secs(1), Some(Duration::ZERO)).is_err());
    }

    #[test]
    fn every_accepted_lease_kills_with_the_scheduling_floor_to_spare() {
        for ttl_ms in [500u64, 1000, 30_000, 86_400_000] {
            let lease = Lease::new(Duration::from_millis(ttl_ms), None).unwrap();
            let t0 = Moment::now();
            let line = lease.timeline(lease.ttl, t0);
            let server_expiry = t0 + lease.ttl;
            assert!(server_expiry - line.kill_at >= SCHED_FLOOR + lease.drift() * 2);
        }
    }

    #[test]
    fn a_lease_under_max_runtime_reaches_the_limit_and_no_further() {
        for (ttl_ms, d_ms, kill_ms) in [
            (10_000u64, 1_000u64, Some(1_000u64)),
            (1_000, 60_000, None),
            (500, 1, None),
            (86_400_000, 3_600_000, None),
            (30_000, 20_000, Some(5_000)),
        ] {
            let lease = Lease::new(
                Duration::from_millis(ttl_ms),
                kill_ms.map(Duration::from_millis),
            )
            .unwrap();
            let d = Duration::from_millis(d_ms);
            let t0 = Moment::now();
            let limit = lease.limit(d, t0);
            assert_eq!(limit.term_at, t0 + d);
            assert_eq!(limit.kill_at, t0 + d + lease.kill_after);
            // The first lease: the TTL, or just enough to cover the limit.
            let first = lease.first_ttl(Some(d));
            assert!(first <= lease.ttl);
            let line = lease.timeline(first, t0);
            if first < lease.ttl {
                assert!(limit.covered_by(&line), "{ttl_ms} {d_ms}");
                assert!(t0 + first <= limit.lease_end + MS || first == MIN_TTL);
            }
            // Its own stop never comes before the limit's.
            assert!(line.term_at >= limit.term_at || !limit.covered_by(&line));
            // Every renewal until the limit: never past lease_end (to the millisecond), and
            // the one that is capped covers the limit.
            let mut sent = t0 + lease.interval();
            while let Some(ttl) = limit.ttl_at(lease.ttl, sent) {
                assert!(sent + ttl <= limit.lease_end + MS, "{ttl_ms} {d_ms}");
                let renewed = lease.timeline(ttl, sent);
                if ttl < lease.ttl {
                    assert!(limit.covered_by(&renewed), "{ttl_ms} {d_ms}");
                    assert!(renewed.term_at >= limit.term_at);
                }
                if sent > limit.kill_at {
                    break;
                }
                sent = sent + lease.interval();
            }
            assert_eq!(lease.first_ttl(None), lease.ttl);
        }
    }

    #[test]
    fn moments_count_on_the_boot_clock() {
        let a = Moment::now();
        let b = Moment::now();
        assert!(b >= a);
        assert_eq!((a + Duration::from_millis(5)) - a, Duration::from_millis(5));
        assert_eq!(a - (a + Duration::from_millis(5)), Duration::ZERO);
    }

    #[test]
    fn durations_print_as_an_operator_writes_them() {
        assert_eq!(fmt(Duration::from_millis(1500)), "1s 500ms");
        assert_eq!(fmt(Duration::from_micros(309_333)), "309ms");
    }
}
