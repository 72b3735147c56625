//! The command line, as clap sees it.
//!
//! This module is shared by the binary and by the man-page/completion generator, so every
//! user-visible word about flags lives here and nowhere else. Parsing only checks shapes
//! (a duration is a duration); the rules that relate values to each other (a TTL long enough
//! to renew, a `--kill-after` that leaves time to renew) live in `lease.rs` and run before
//! anything is contacted.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit::{self, BUSY, Exit};

mod by_hand;

#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version,
    about = "Guard shell commands and cron jobs with a Redis lock",
    long_about = format!("Guard shell commands and cron jobs with a Redis lock.\n\n\
        `redlock run` takes a lease on a Redis key, runs the command while renewing it, forwards \
        signals, and releases the lock on every exit path. Exactly one holder runs at a time; \
        everyone else gets a distinct exit status ({BUSY}) or waits."),
    after_help = exit::help(None),
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand understands. Each has an environment fallback; the flag wins.
#[derive(Debug, Args)]
pub struct Global {
    /// Redis server URL: redis://, rediss:// or redis+unix://; repeat it for a quorum of
    /// independent masters; or one redis+cluster://HOST:PORT[,HOST:PORT...] or
    /// redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and
    /// rediss+sentinel:// for TLS)
    #[arg(
        long = "url",
        global = true,
        env = "REDLOCK_URL",
        value_delimiter = ',',
        value_name = "URL",
        hide_env_values = true
    )]
    pub urls: Vec<String>,

    /// File holding the Redis password (first line); wins over a password in the URL
    #[arg(
        long,
        global = true,
        env = "REDLOCK_PASSWORD_FILE",
        value_name = "PATH"
    )]
    pub password_file: Option<PathBuf>,

    /// File holding the sentinels' own password (first line), for redis+sentinel:// and
    /// rediss+sentinel://; the master's password is --password-file's
    #[arg(
        long,
        global = true,
        env = "REDLOCK_SENTINEL_PASSWORD_FILE",
        value_name = "PATH"
    )]
    pub sentinel_password_file: Option<PathBuf>,

    /// ACL user the sentinels know redlock as (with --sentinel-password-file)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_SENTINEL_USER",
        value_name = "NAME",
        requires = "sentinel_password_file"
    )]
    pub sentinel_user: Option<String>,

    /// Namespace prepended to every key, so staging never blocks production
    #[arg(
        long,
        global = true,
        env = "REDLOCK_PREFIX",
        default_value = "",
        hide_default_value = true,
        value_name = "STR"
    )]
    pub prefix: String,

    /// Connect and command timeout for talking to Redis outside the heartbeat
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TIMEOUT",
        default_value = "3s",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION"
    )]
    pub timeout: Duration,

    /// CA certificate(s) (PEM) to verify TLS servers (rediss://, rediss+cluster://,
    /// rediss+sentinel://) with, instead of the system's
    ///
    /// A server (a rediss:// one, a cluster node, a sentinel or the master it names) that
    /// presents exactly a certificate listed here is trusted with it, even a self-signed one
    /// marked CA:TRUE, as redis-cli does; its dates and name are still checked.
    #[arg(long, global = true, env = "REDLOCK_TLS_CA_FILE", value_name = "PATH")]
    pub tls_ca_file: Option<PathBuf>,

    /// Client certificate (PEM) for servers that require one (with --tls-key-file)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_CERT_FILE",
        value_name = "PATH",
        requires = "tls_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key (PEM) of the client certificate
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Do not verify the server's certificate (TLS URLs only; prints a warning)
    #[arg(long, global = true, env = "REDLOCK_TLS_INSECURE")]
    pub tls_insecure: bool,

    /// Print a timeline of what redlock does on stderr
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print only the final error line
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Format of redlock's own messages on stderr
    #[arg(
        long,
        global = true,
        env = "REDLOCK_LOG_FORMAT",
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `redlock: message` lines
    Text,
    /// One JSON object per line
    Json,
}

/// Where the command's processes are kept track of (see `tree.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Contain {
    /// A cgroup of its own where redlock may create one, otherwise redlock's descendants
    Auto,
    /// redlock's descendants, found by walking /proc (no cgroup is created)
    Descendants,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock
    #[command(long_about = RUN_LONG_ABOUT)]
    Run(RunArgs),
    // The exit statuses in the one-line abouts and after the help come from the table in
    // `exit.rs`, in each subcommand's own words.
    #[command(about = format!(
        "Show who holds a lock, since when, and how its last run ended ({})",
        exit::briefly("status", &[Exit::Success, Exit::No])
    ))]
    Status(StatusArgs),
    #[command(about = format!(
        "Release a lock by its token, or force it ({})",
        exit::briefly("release", &[Exit::Success, Exit::No])
    ))]
    Release(ReleaseArgs),
    /// Take the lock and print its token, for shell scripts
    Acquire(AcquireArgs),
    #[command(about = format!(
        "Renew a lock held by TOKEN ({})",
        exit::briefly("extend", &[Exit::Success, Exit::No])
    ))]
    Extend(ExtendArgs),
    /// Check the server for lock hazards and print each finding with its fix
    #[command(long_about = DOCTOR_LONG_ABOUT, after_help = exit::help(Some("doctor")))]
    Doctor,
    /// Refuse new runs of locks (for maintenance); with --drain, wait for the running ones
    #[command(long_about = PAUSE_LONG_ABOUT, after_help = exit::help(Some("pause")))]
    Pause(PauseArgs),
    /// Lift a pause: new runs of the locks go ahead again
    #[command(after_help = exit::help(Some("resume")))]
    Resume(ResumeArgs),
    /// Print locks' state and counters as Prometheus metrics
    #[command(long_about = METRICS_LONG_ABOUT, after_help = exit::help(Some("metrics")))]
    Metrics(MetricsArgs),
    /// Health check for Nagios/Icinga: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN
    #[command(long_about = CHECK_LONG_ABOUT, after_help = exit::help(Some("check")))]
    Check(CheckArgs),
    /// Print locks' audit log: acquires, refusals, releases, lost leases, forced releases,
    /// pauses and resumes, oldest first
    #[command(long_about = LOG_LONG_ABOUT, after_help = exit::help(Some("log")))]
    Log(LogArgs),
    /// Write the man pages and shell completions under DIR (for packagers)
    #[command(name = "generate-docs", hide = true)]
    GenerateDocs(GenerateDocsArgs),
}

const RUN_LONG_ABOUT: &str = "\
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

const LOG_LONG_ABOUT: &str = "\
Print locks' audit log, oldest first.

Every acquire, busy refusal, run skipped by --once-per, release, lost lease, forced release, \
pause and resume is written to the lock's audit log by the script that already runs for it (no \
extra round trip): a Redis Stream beside the lock, {L}:redlock:log, in its hash slot, kept to \
at most 1100 entries and to 30 days. Each line gives the time (the server's clock), the key, \
the event and who (host, pid, user), and what applies: fence, outcome and exit status, \
duration, who forced or paused it and why, the command. Pauses and resumes of every lock \
(pause --all) are in the prefix-wide log, shown by --all.

--follow keeps printing new entries (it asks every 250ms) until SIGINT or SIGTERM, then exits \
0. With a quorum each node keeps its own log; log reads the first node that answers. Read-only: \
a +@read user can read the log.";

const DOCTOR_LONG_ABOUT: &str = "\
Check the server for lock hazards and print each finding with its fix.

Every check prints one line on stdout that starts with ok, warn or fail, names the check, says \
what was found and, unless it is ok, what to do about it (after \"fix:\"). Nothing is changed on \
the server except a probe lock that is taken and released again.

version: the Redis version from INFO. Before 5.0 the lock scripts cannot run (they need effects \
replication): fail. Before 6.2: warn, that version is no longer maintained upstream.

role: a replica (role:slave) is a fail: locks must be taken on the primary, and a replica \
refuses writes anyway.

sentinel role check (Sentinel URLs only): redlock asks the master a sentinel names for its ROLE \
before using it, so that a master demoted since is not used; a user that may not run ROLE \
skips that check: warn, naming the ACL to grant (+role).

maxmemory-policy: any policy other than noeviction lets Redis evict lock keys under memory \
pressure, so a second holder can take a lock that is still in use: warn. When CONFIG GET is not \
permitted for this user, the policy could not be checked; that is a warning that names the ACL \
to grant (+config|get).

persistence: with neither AOF nor RDB snapshots a restart forgets every lock (warn); with RDB \
alone it forgets the locks taken since the last snapshot (warn). AOF without appendfsync always \
is ok, with a note that a crash can forget the last second of locks.

latency: the median of 10 PINGs; above 10ms it is a warning, because every acquire and every \
renewal pays it, and renewals must finish well within a third of the TTL.

clock: the offset between this host's clock and the server's (TIME, corrected by half the \
round trip). Leases do not depend on it (they are measured on the monotonic clock), but the \
holder ages that status shows compare the server's instants with this host's clock: above \
500ms it is a warning.

permissions: a real probe lock under the prefix (PREFIX + redlock:doctor: + a random id, TTL \
2s) is acquired, refused to a second contender, extended, read back with the status pipeline \
and released, exactly as run and status do, and a short SCAN runs as status --all does; a \
subscription to its release channel (used by --wait) is tried too. Every key it created is deleted afterwards. A \
permission error is a fail that names the missing command, key pattern or channel pattern and \
the ACL SETUSER rule that grants it. A missing subscription permission is only a warning: \
waiters then poll.";

const PAUSE_LONG_ABOUT: &str = "\
Refuse new runs of locks, for maintenance, until resumed or until --for runs out.

While a key is paused, every new redlock run and redlock acquire of it exits with the busy \
status (75, or run's --conflict-exit-code) and a line naming who paused it (host, pid, user), \
why (--reason) and until when. Runs that hold the lock already are not touched, and neither are \
nested runs inside them. A run with --wait keeps its place in the queue and goes ahead once the \
pause is lifted, unless its wait runs out first (then 75).

--all pauses every lock under the prefix, including locks that do not exist yet, with one \
prefix-wide record ({PREFIX}:redlock:paused); a key's own pause and the prefix-wide one are \
independent, and either refuses runs. On Redis Cluster --all needs a prefix with a hash tag \
(e.g. 'jobs:{nightly}:'), otherwise it is refused (64): the record would live in another slot \
than the locks, where the acquire script cannot read it.

--drain D then waits up to D until none of the paused locks has a running holder of any shape \
(exclusive, shared or slotted), printing every holder that still runs (and again whenever that \
changes): exit 0 once drained, 75 when holders still run after D (the pause stays in force \
either way); a lock it cannot read ends it with that error's status (77, 78, 69). A pause again replaces the earlier pause \
record. A pause with --for lapses by itself; redlock check reports a pause that ran out \
without a resume as CRITICAL (for 24h, or until resumed).";

const METRICS_LONG_ABOUT: &str = "\
Print locks' state and counters as Prometheus metrics (text exposition format), for \
node_exporter's textfile collector or a sidecar.

Every sample carries a key label: the lock's Redis key (prefix included). Gauges: \
redlock_held (0/1), redlock_holders (commands running under the lock, in any shape: 0 or 1 \
for an exclusive hold, how many holders run for a shared or slotted one; a hold kept by \
--hold-at-least after its command ended counts none), redlock_lease_age_seconds (the oldest \
holder's), redlock_ttl_seconds (until the last holder's lease ends; 0 when free; -1 without \
expiry), redlock_fence, redlock_queue_length, \
redlock_paused (0/1), redlock_last_run_start_timestamp_seconds, \
redlock_last_run_duration_seconds, redlock_last_run_exit_status, redlock_last_run_outcome (one \
sample per outcome, 1 for the last run's), redlock_last_success_timestamp_seconds (when a run \
last ended ok). Counters: redlock_runs_total, redlock_busy_total, redlock_lease_lost_total, \
redlock_failed_total, redlock_forced_releases_total. A sample the records cannot give (no run \
yet) is left out. The counters live in Redis and expire 30 days after their last change, \
which a scraper sees as a counter reset. A lock that could not be read (an ACL denying a read, \
a record of another type) has no samples, and metrics exits with that error's status (77, 78, \
69).

Only read commands are used, as for status.";

const CHECK_LONG_ABOUT: &str = "\
Health check in the monitoring-plugin convention (Nagios, Icinga, Sensu): one line on stdout, \
REDLOCK OK - ..., REDLOCK WARNING - ..., REDLOCK CRITICAL - ... or REDLOCK UNKNOWN - ..., \
and the exit status 0, 1, 2 or 3. These statuses are the plugin convention, not the exit table \
the other subcommands share.

CRITICAL: a running holder, of any shape, has held the lock longer than --max-age; no run \
ended ok within --max-since-success (or ever, as far as the records go back: 30 days); a pause \
with --for ran out without a resume (the runs go ahead again, but nobody said the maintenance \
is done); the key holds another type of value (no lock can be taken).

WARNING: a pause in force without an end (--for); the key was never run (no record of a run); \
the last run did not end ok (failed, killed, lease lost, timed out).

UNKNOWN: Redis could not be asked (unreachable, timed out, authentication or ACL denied, a \
quorum that cannot tell), or a lock could not be read (an ACL denying one of the reads, a \
record of another type): never \"never run\". A command line redlock cannot parse still \
exits 64, which the monitoring systems count as UNKNOWN too. The worst key decides; the line \
names every key that is not OK. With --json, one object: {\"status\", \"code\", \"summary\", \"keys\": [{\"key\", \
\"status\", \"problems\"}]}.";

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// Keys to pause
    #[arg(value_name = "KEY", required_unless_present = "all")]
    pub keys: Vec<String>,

    /// Pause every lock under the prefix, existing or not (one prefix-wide record)
    #[arg(long, conflicts_with = "keys")]
    pub all: bool,

    /// Lift the pause by itself after this long [default: until resumed]
    #[arg(long = "for", value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub span: Option<Duration>,

    /// Why, shown to every run that is refused
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Then wait up to this long until no paused lock has a running holder (exit 75 if some
    /// still run)
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub drain: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Keys to resume
    #[arg(value_name = "KEY", required_unless_present = "all")]
    pub keys: Vec<String>,

    /// Lift the prefix-wide pause and every key's own pause under the prefix
    #[arg(long, conflicts_with = "keys")]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Keys to report
    #[arg(value_name = "KEY", required_unless_present = "all")]
    pub keys: Vec<String>,

    /// Every lock redlock created under the prefix (found with SCAN)
    #[arg(long, conflicts_with = "keys")]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Keys whose log to print (merged by time)
    #[arg(value_name = "KEY", required_unless_present = "all")]
    pub keys: Vec<String>,

    /// Every lock under the prefix that has a log (found with SCAN), and the prefix-wide
    /// pauses and resumes
    #[arg(long, conflicts_with = "keys")]
    pub all: bool,

    /// Only entries from this long ago onwards (by this host's clock)
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub since: Option<Duration>,

    /// After the entries so far, print new ones as they come, until interrupted (SIGINT or
    /// SIGTERM, exit 0)
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// One JSON object per line (JSON Lines) instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Keys to check
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<String>,

    /// CRITICAL when a holder has held a lock longer than this
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub max_age: Option<Duration>,

    /// CRITICAL when no run of a key ended ok within this long
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub max_since_success: Option<Duration>,

    /// One JSON object on stdout instead of the plugin line
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GenerateDocsArgs {
    /// Directory under which man/ and completions/ are written (created when missing)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock key (the prefix is prepended)
    #[arg(long, value_name = "KEY")]
    pub key: String,

    /// Lease length; renewed every TTL/3 while the command runs
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub ttl: Duration,

    /// Wait up to this long for a busy lock instead of giving up at once
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub wait: Option<Duration>,

    /// Exit status when the lock is busy (instead of 75); 0 counts a skipped run as success
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8))]
    pub conflict_exit_code: Option<u8>,

    /// Grace between SIGTERM and SIGKILL when redlock must stop the command
    /// [default: TTL/5, at most 10s]
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub kill_after: Option<Duration>,

    /// Keep the lock at least this long after acquiring it, even when the command ends sooner
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub hold_at_least: Option<Duration>,

    /// Hold the lock shared: any number of shared holders at once, none while an exclusive
    /// holder (a run without --shared or --slots) has it; a waiting exclusive run is not
    /// overtaken. Not with several --url (a quorum)
    #[arg(long, conflicts_with = "slots")]
    pub shared: bool,

    /// Let up to N holders hold the lock at once, each in its own slot: the command gets
    /// REDLOCK_SLOT (0..N-1). Every holder of the key must ask for the same N (78 otherwise);
    /// --slots 1 is the exclusive lock. Not with several --url (a quorum)
    #[arg(long, allow_hyphen_values = true, value_name = "N")]
    pub slots: Option<u32>,

    /// Stop the command's whole tree this long after the lock was taken: SIGTERM, SIGKILL
    /// --kill-after later; redlock then exits 124 (as timeout(1) does) and the run is recorded
    /// as timed out. Renewals never carry the lease past it plus the kill grace
    #[arg(
        long,
        env = "REDLOCK_MAX_RUNTIME",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION"
    )]
    pub max_runtime: Option<Duration>,

    /// Run the command at most once per window of this length on the Redis server's clock
    /// (e.g. 1h for an hourly cron line on several hosts): a later run in the same window exits
    /// with the busy status, saying who ran it and how it ended. A run belongs to the window
    /// boundary nearest its start, so hosts whose clocks are up to a quarter of the window apart
    /// still run it once
    #[arg(
        long,
        env = "REDLOCK_ONCE_PER",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION"
    )]
    pub once_per: Option<Duration>,

    /// With --once-per: a later run in the same window may run when the window's first run
    /// failed (non-zero exit, killed, timed out, lost its lease, or died without a release)
    #[arg(long, env = "REDLOCK_RETRY_FAILED")]
    pub retry_failed: bool,

    /// How redlock finds every process the command starts: auto (a cgroup of its own where
    /// redlock may create one, otherwise its descendants), or descendants
    #[arg(
        long,
        env = "REDLOCK_CONTAIN",
        value_enum,
        default_value = "auto",
        value_name = "HOW"
    )]
    pub contain: Contain,

    /// Recorded (holder and last-run records, `status`) instead of the command
    #[arg(long, env = "REDLOCK_LABEL", value_name = "TEXT")]
    pub label: Option<String>,

    /// When the run ends (after the release), write the key's Prometheus metrics to this file
    /// atomically (a temporary file in the same directory, then renamed); runs sharing the file
    /// write it one at a time, and no counter in it goes backwards; a failure to write is a
    /// warning and leaves the exit status alone
    #[arg(long, env = "REDLOCK_METRICS_FILE", value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,

    /// Run this through `sh -c` instead of a command after `--`
    #[arg(short = 'c', value_name = "SHELL COMMAND", conflicts_with = "command")]
    pub shell: Option<String>,

    /// The command to run, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Keys to inspect
    #[arg(value_name = "KEY", required_unless_present = "all")]
    pub keys: Vec<String>,

    /// Every lock redlock created under the prefix (found with SCAN)
    #[arg(long, conflicts_with = "keys")]
    pub all: bool,

    /// One JSON document on stdout
    #[arg(long)]
    pub json: bool,

    /// Include the holder's token
    #[arg(long)]
    pub show_token: bool,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock key
    #[arg(value_name = "KEY")]
    pub key: String,

    /// Release only if this is the holder's token
    #[arg(
        long,
        value_name = "TOKEN",
        required_unless_present = "force",
        conflicts_with = "force"
    )]
    pub token: Option<String>,

    /// Delete the lock whoever holds it, and say whom it removed
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// The lock key (the prefix is prepended)
    #[arg(long, value_name = "KEY")]
    pub key: String,

    /// Lease length; keep it alive with `redlock extend`
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub ttl: Duration,

    /// Wait up to this long for a busy lock
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub wait: Option<Duration>,

    /// Take a shared hold (see `redlock run --shared`)
    #[arg(long, conflicts_with = "slots")]
    pub shared: bool,

    /// Take one of N slots (see `redlock run --slots`); the slot is printed on a third line
    #[arg(long, allow_hyphen_values = true, value_name = "N")]
    pub slots: Option<u32>,

    /// Print {"token", "fence", "deadline_ms", ...} as one JSON object
    #[arg(long)]
    pub json: bool,

    /// Recorded (holder and last-run records, `status`) instead of the calling command line
    #[arg(long, env = "REDLOCK_LABEL", value_name = "TEXT")]
    pub label: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The lock key
    #[arg(long, value_name = "KEY")]
    pub key: String,

    /// The token `redlock acquire` printed
    #[arg(long, value_name = "TOKEN")]
    pub token: String,

    /// New lease length, from now
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub ttl: Duration,
}

/// humantime durations (`500ms`, `30s`, `1h 30m`), plus a clear word for the mistakes people
/// actually make: a bare number or a negative value.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("missing unit; write e.g. '{t}s' or '{t}ms'"));
    }
    humantime::parse_duration(t).map_err(|e| e.to_string())
}

impl Cli {
    /// Parses the command line. clap builds every subcommand, and copies each global option
    /// into each of them, before it parses anything: for `redlock run`, which cron starts
    /// thousands of times a day, that was most of redlock's own start-up work. So a command
    /// line that plainly names `run` (and asks for no help or version) is first read by hand
    /// (`by_hand.rs`: the usual forms, exactly as clap reads them), then, if that declines,
    /// parsed against a tree holding `run` alone; anything else, and any error there, goes
    /// through the full tree, so help and error messages are always the full tree's.
    pub fn parse_args(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
        if let Some(at) = names_run(&args) {
            if let Some(cli) = by_hand::parse(&args, at, &|name| std::env::var_os(name)) {
                return Ok(cli);
            }
            if let Ok(cli) = Cli::parse_run_only(&args, at) {
                return Ok(cli);
            }
        }
        Cli::try_parse_from(args)
    }

    /// `args` with the word `run` (at `at`) taken out, parsed against one flat command that has
    /// the global options and `run`'s: everything before `run` is a global option (see
    /// [`names_run`]), so the result is the same, without the work of copying every global
    /// option into a subcommand and the values back out.
    fn parse_run_only(args: &[std::ffi::OsString], at: usize) -> Result<Cli, clap::Error> {
        use clap::{Args as _, FromArgMatches as _};
        let mut flat = args.to_vec();
        flat.remove(at);
        let cmd = RunArgs::augment_args(Global::augment_args(
            clap::Command::new("redlock")
                .disable_help_flag(true)
                .disable_version_flag(true),
        ));
        let mut matches = cmd.try_get_matches_from(flat)?;
        Ok(Cli {
            global: Global::from_arg_matches_mut(&mut matches)?,
            command: Command::Run(RunArgs::from_arg_matches_mut(&mut matches)?),
        })
    }
}

/// Where the word `run` is, when it is the first word that is not an option (or an option's
/// value), every option before it is a global one, and no help or version flag comes before
/// the command's own words.
fn names_run(args: &[std::ffi::OsString]) -> Option<usize> {
    let mut words = args.iter().map(|a| a.to_str()).enumerate().skip(1);
    let mut at = None;
    while let Some((i, word)) = words.next() {
        let word = word?;
        if word == "run" {
            at = Some(i);
            break;
        }
        // A global option, which alone may come before `run` (clap refuses `run`'s own there).
        let global = by_hand::OPTS[..by_hand::GLOBALS].iter().find(|o| {
            word.strip_prefix("--")
                .is_some_and(|w| !o.long.is_empty() && w.split('=').next() == Some(o.long))
                || o.short.is_some()
                    && word.strip_prefix('-').and_then(|w| w.parse::<char>().ok()) == o.short
        })?;
        if global.value && !word.contains('=') {
            words.next();
        }
    }
    for (_, word) in words {
        match word {
            Some("--") => return at,
            Some("-h" | "--help" | "-V" | "--version") | None => return None,
            _ => {}
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn words(line: &str) -> Vec<std::ffi::OsString> {
        line.split(' ').map(Into::into).collect()
    }

    #[test]
    fn the_run_only_tree_parses_run_exactly_as_the_full_tree_does() {
        for line in [
            "redlock run --key k --ttl 5s -- true",
            "redlock --url redis://a:1 run --key k --ttl 5s -c true",
            "redlock run --url redis://a:1,redis://b:2 --key k --ttl 5s --wait 1m -v -- a -b",
            "redlock --prefix run run --key run --ttl 1s --kill-after 100ms -- run",
            "redlock -q --log-format json run --key k --ttl 5s --hold-at-least 1m --conflict-exit-code 0 -- x --help",
            "redlock --timeout 2s --tls-insecure run --key k --ttl 5s -- x",
            "redlock run --key k --ttl 5s --max-runtime 1m --kill-after 1s -- x",
            "redlock --url=redis://a:1 -v run --contain descendants --key=k --ttl=5s -c x",
            "redlock run --tls-cert-file c --tls-key-file k --key k --ttl 5s --password-file p -- x",
        ] {
            let at = names_run(&words(line)).unwrap_or_else(|| panic!("{line}"));
            let fast = Cli::parse_run_only(&words(line), at).unwrap();
            let full = Cli::try_parse_from(words(line)).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{line}");
        }
    }

    #[test]
    fn help_version_and_other_subcommands_take_the_full_tree() {
        for line in [
            "redlock run --help",
            "redlock run -h --key k",
            "redlock -V run",
            "redlock status run",
            "redlock --url run status",
            "redlock --wait=5s run --key k --ttl 5s -- x",
            "redlock --key k run --ttl 5s -- x",
        ] {
            assert!(names_run(&words(line)).is_none(), "{line}");
        }
        // An error on the short path is reported by the full tree.
        assert!(Cli::parse_args(words("redlock run --key k --ttl 5 -- x")).is_err());
    }

    #[test]
    fn the_busy_status_the_help_names_is_the_contracts() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").unwrap();
        let conflict = run
            .get_arguments()
            .find(|a| a.get_id() == "conflict_exit_code")
            .and_then(|a| a.get_help())
            .unwrap()
            .to_string();
        assert!(
            conflict.contains(&format!("(instead of {BUSY})")),
            "{conflict}"
        );
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_accept_humantime_and_reject_bare_numbers() {
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5").unwrap_err().contains("5s"));
        assert!(parse_duration("-5s").unwrap_err().contains("negative"));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("99999999999999999999999h").is_err());
    }
}
