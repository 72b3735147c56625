//! `redlock run`'s options and its long help. The groups its `--help` shows are named in
//! `cli/mod.rs`; options without a group (the key, the TTL, the command) come first.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{BUSY_HEADING, Contain, LOCK, RECORDS, SUPERVISION, parse_duration};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock key (the prefix is prepended); repeated, all the keys or none
    ///
    /// With several (--key A --key B), the run takes every key at once or none, waits (--wait)
    /// for all of them without ever deadlocking against another order, and holds them all
    /// while the command runs; a run of any one of them meanwhile is busy. Exclusive holds
    /// only (not with --shared, --slots, --once-per or --metrics-file). On a Redis Cluster the
    /// keys must share a hash slot: give them one hash tag ('{job}:a', '{job}:b').
    #[arg(long, value_name = "KEY", required = true)]
    pub key: Vec<String>,

    /// Lease length; renewed every TTL/3 while the command runs
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub ttl: Duration,

    /// Run this through `sh -c` instead of a command after `--`
    // Any bytes, as a shell reads them: a cron line or a file name need not be UTF-8.
    #[arg(short = 'c', value_name = "SHELL COMMAND", conflicts_with = "command",
          value_parser = clap::value_parser!(OsString))]
    pub shell: Option<OsString>,

    /// The command to run, after `--` (its words may be any bytes, as exec takes them)
    #[arg(last = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    pub command: Vec<OsString>,

    /// Hold the lock shared: any number of shared holders, no exclusive one
    ///
    /// Any number of shared holders at once, none while an exclusive holder (a run without
    /// --shared or --slots) has it; a waiting exclusive run is not overtaken. Not with
    /// several --url (a quorum).
    #[arg(long, conflicts_with = "slots", help_heading = LOCK)]
    pub shared: bool,

    /// Let up to N holders hold the lock at once; the command gets REDLOCK_SLOT
    ///
    /// Each holder has its own slot: the command gets REDLOCK_SLOT (0..N-1). Every holder of
    /// the key must ask for the same N (78 otherwise); --slots 1 is the exclusive lock. Not
    /// with several --url (a quorum).
    #[arg(long, allow_hyphen_values = true, value_name = "N", help_heading = LOCK)]
    pub slots: Option<u32>,

    /// Count the grant and each renewal only once N replicas acknowledged it (Redis WAIT)
    ///
    /// For Sentinel, Cluster or a primary with replicas, where a failover can lose the last
    /// writes: WAIT N follows the acquire and every renewal in the same round trip. A grant
    /// fewer replicas acknowledge (within half --timeout, at most TTL/3) is given back and
    /// the run exits 69; a renewal they do not acknowledge does not count, and the command is
    /// stopped at the kill point unless one does. 0 (the default): do not wait. Not with
    /// several --url (a quorum).
    #[arg(
        long,
        env = "REDLOCK_REPLICAS",
        default_value = "0",
        hide_default_value = true,
        value_name = "N",
        help_heading = LOCK
    )]
    pub replicas: u32,

    /// Keep the lock at least this long after acquiring it, even when the command ends sooner
    #[arg(
        long,
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = LOCK
    )]
    pub hold_at_least: Option<Duration>,

    /// Wait up to this long for a busy lock instead of giving up at once
    ///
    /// Waiters queue first come, first served; only the head of the queue is woken at a
    /// release.
    #[arg(
        long,
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = BUSY_HEADING
    )]
    pub wait: Option<Duration>,

    /// With --wait: queue only while fewer than N runs wait; otherwise busy at once
    ///
    /// A run that finds N runs already waiting for the key exits at once with the busy status
    /// (75, or --conflict-exit-code), saying the queue is full. --max-waiters 1 gives an
    /// overrunning cron job exactly one catch-up run. A waiter counts until its entry lapses
    /// (a frozen or dead one: up to 15s). Needs --wait, longer than 0s.
    #[arg(
        long,
        env = "REDLOCK_MAX_WAITERS",
        value_name = "N",
        help_heading = BUSY_HEADING
    )]
    pub max_waiters: Option<u32>,

    /// Ask the running holder to stop, and run once its command is gone
    ///
    /// The holder's redlock stops its command's whole tree as on a lost lease (SIGTERM, SIGKILL
    /// its --kill-after later), records the run as replaced, releases and exits 79; a frozen or
    /// dead holder's command is killed by its keeper before its lease ends. This run waits for
    /// that, ahead of the plain waiters: up to --wait, or without it as long as the holder's
    /// lease (plus 5s). A holder that said --no-replace, or took the lock with `redlock
    /// acquire` or another client, is not asked: busy, as without --replace. Exclusive runs
    /// only; not with --once-per or several --url (a quorum).
    #[arg(long, conflicts_with_all = ["shared", "slots", "once_per"], help_heading = BUSY_HEADING)]
    pub replace: bool,

    /// Never be stopped by a run with --replace (not with --replace itself)
    #[arg(long, help_heading = BUSY_HEADING)]
    pub no_replace: bool,

    /// Exit status when the lock is busy (instead of 75); 0 counts a skipped run as success
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u8),
        help_heading = BUSY_HEADING
    )]
    pub conflict_exit_code: Option<u8>,

    /// Run at most once per window of this length on the Redis server's clock
    ///
    /// E.g. 1h for an hourly cron line on several hosts: a later run in the same window exits
    /// with the busy status, saying who ran it and how it ended. A run belongs to the window
    /// boundary nearest its start, so hosts whose clocks are up to a quarter of the window
    /// apart still run it once.
    #[arg(
        long,
        env = "REDLOCK_ONCE_PER",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = BUSY_HEADING
    )]
    pub once_per: Option<Duration>,

    /// With --once-per: run again in a window whose first run failed
    ///
    /// A later run in the same window may run when the window's first run failed (non-zero
    /// exit, killed, timed out, lost its lease, or died without a release).
    #[arg(
        long,
        env = "REDLOCK_RETRY_FAILED",
        help_heading = BUSY_HEADING
    )]
    pub retry_failed: bool,

    /// Stop the command's whole tree this long after the lock was taken (exit 124)
    ///
    /// SIGTERM, SIGKILL --kill-after later; redlock then exits 124 (as timeout(1) does) and
    /// the run is recorded as timed out. Renewals never carry the lease past it plus the kill
    /// grace.
    #[arg(
        long,
        env = "REDLOCK_MAX_RUNTIME",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = SUPERVISION
    )]
    pub max_runtime: Option<Duration>,

    /// Grace between SIGTERM and SIGKILL when redlock must stop the command
    /// [default: TTL/5, at most 10s]
    #[arg(
        long,
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = SUPERVISION
    )]
    pub kill_after: Option<Duration>,

    /// How redlock finds every process the command starts
    ///
    /// auto: a cgroup of its own where redlock may create one, otherwise its descendants;
    /// descendants: redlock's descendants only.
    #[arg(
        long,
        env = "REDLOCK_CONTAIN",
        value_enum,
        default_value = "auto",
        value_name = "HOW",
        help_heading = SUPERVISION,
        hide_short_help = true
    )]
    pub contain: Contain,

    /// Recorded (holder and last-run records, `status`) instead of the command
    #[arg(long, env = "REDLOCK_LABEL", value_name = "TEXT", help_heading = RECORDS)]
    pub label: Option<String>,

    /// When the run ends, write the key's Prometheus metrics to this file
    ///
    /// Written after the release, atomically (a temporary file in the same directory, then
    /// renamed); runs sharing the file write it one at a time, and no counter in it goes
    /// backwards; a failure to write is a warning and leaves the exit status alone.
    #[arg(
        long,
        env = "REDLOCK_METRICS_FILE",
        value_name = "PATH",
        help_heading = RECORDS
    )]
    pub metrics_file: Option<PathBuf>,
}

pub(super) const RUN_LONG_ABOUT: &str = "\
Run a command while holding the lock.

redlock takes the lock, starts the command, renews the lease every TTL/3 and releases the lock \
when the command is gone. Nothing the command starts outlives the lease: every process it starts \
lives in a cgroup of its own where redlock may make one (root, or a delegated cgroup), otherwise \
among redlock's descendants (redlock is a child subreaper), whatever process group or session it \
moves to (timeout, setsid, set -m). Forwarded signals reach all of them; leftovers of a command \
that exited are stopped before the release.

With --max-runtime D, every process of the command gets SIGTERM D after the lock was taken, \
and SIGKILL --kill-after later; once all of them are gone the lock is released and redlock exits \
124, as timeout(1) does. The lease never reaches further than that: the lock is acquired, and \
renewed, for no longer than D, the grace and a margin (2 x (TTL/100 + 2ms) + 50ms; at least \
500ms at the acquire), so a redlock that dies mid-run leaves the key for no longer than the run \
could have lasted. A lost lease still exits 76.

With --once-per D, runs of the key are once per window of D on the Redis server's clock: a run belongs to the window boundary nearest its start, and only the window's first run runs its command; later ones exit with the busy status (75 or --conflict-exit-code), saying who ran it, when and how it ended, and stop waiting (--wait) at once. With --retry-failed a later run may retry a window whose run failed (non-zero, killed, timed out, lease lost, or died without a release). The window's record expires twice D after it was taken. Not with a quorum.

If no renewal is confirmed, every process of the command gets SIGTERM, and SIGKILL \
--kill-after later, early enough to be dead before the lease can lapse on the server. A keeper \
process enforces that kill point too, so a redlock that is frozen (SIGSTOP, a debugger, starved \
of CPU) or killed cannot extend its command's life; the lease is counted on CLOCK_BOOTTIME, so \
time the machine spent suspended counts. redlock never waits for its own stderr: messages that do \
not fit a full pipe are dropped and counted.

Nested runs: inside a command that redlock runs, a run of the same key (REDLOCK_KEY and \
REDLOCK_TOKEN in its environment, same prefix, and the server confirms that token still holds \
the lock) runs its command at once under the outer lease: no second acquisition, no release, its \
command's status passes through, and its own lease options are checked but unused. A token that \
no longer holds the lock is treated like any other holder's.";
