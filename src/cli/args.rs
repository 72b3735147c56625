//! The other subcommands' options, and the long help of those that have one.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse_duration;

pub(super) const LOG_LONG_ABOUT: &str = "\
Print locks' audit log, oldest first.

Every acquire, busy refusal, run skipped by --once-per, release, lost lease, forced release, \
pause and resume is written to the lock's audit log by the script that already runs for it (no \
extra round trip): a Redis list beside the lock, {L}:redlock:audit, in its hash slot, kept to \
its last 1000 entries (at most 1023 between trims) and to 30 days. Each line gives the time (the server's clock), the key, \
the event and who (host, pid, user), and what applies: fence, outcome and exit status, \
duration, who forced or paused it and why, the command. Pauses and resumes of every lock \
(pause --all) are in the prefix-wide log, shown by --all.

--follow keeps printing new entries (it asks every 250ms) until SIGINT or SIGTERM, then exits \
0; past 1024 locks, a lock without entries in the last minute is asked 1024 locks at a time, \
in turn. With a quorum each node keeps its own log; log reads the first node that answers. Read-only: \
a +@read user can read the log.";

pub(super) const DOCTOR_LONG_ABOUT: &str = "\
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

replication: a primary with replicas loses the last writes when it fails over (replication is \
asynchronous), and with them a lock just taken or renewed: warn, naming --replicas. With \
--replicas N (REDLOCK_REPLICAS), WAIT must be allowed (fail, 77: grant +wait) and offered (fail, \
78), and N replicas must acknowledge (fail, 69); a replica not in sync, or lagging, is a warning.

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

pub(super) const PAUSE_LONG_ABOUT: &str = "\
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

pub(super) const METRICS_LONG_ABOUT: &str = "\
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
redlock_failed_total, redlock_forced_releases_total, redlock_replaced_total. A sample the records cannot give (no run \
yet) is left out. The counters live in Redis and expire 30 days after their last change, \
which a scraper sees as a counter reset. A lock that could not be read (an ACL denying a read, \
a record of another type) has no samples, and metrics exits with that error's status (77, 78, \
69).

Only read commands are used, as for status.";

pub(super) const CHECK_LONG_ABOUT: &str = "\
Health check in the monitoring-plugin convention (Nagios, Icinga, Sensu): one line on stdout, \
REDLOCK OK - ..., REDLOCK WARNING - ..., REDLOCK CRITICAL - ... or REDLOCK UNKNOWN - ..., \
and the exit status 0, 1, 2 or 3. These statuses are the plugin convention, not the exit table \
the other subcommands share.

CRITICAL: a running holder, of any shape, has held the lock longer than --max-age; no run \
ended ok within --max-since-success (or ever, as far as the records go back: 30 days); a pause \
with --for ran out without a resume (the runs go ahead again, but nobody said the maintenance \
is done); the key holds another type of value (no lock can be taken).

WARNING: a pause in force without an end (--for); the key was never run (no record of a run); \
the last run did not end ok (failed, killed, lease lost, timed out, replaced).

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
    /// SIGTERM: exit 0, or with --all the status of a lock it could not read)
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// One JSON object per line (JSON Lines) instead of text
    #[arg(long)]
    pub json: bool,

    /// Draw the keys' runs as a timeline instead: holders as bars per host, refusals, how each
    /// hold ended, waits and pauses (plain ASCII when stdout is not a terminal)
    #[arg(long, conflicts_with_all = ["all", "follow", "json"])]
    pub timeline: bool,

    /// The timeline's width in columns, at least 40 (default: $COLUMNS when it is a positive
    /// number, else the terminal's, else 80; never below 40)
    #[arg(long, requires = "timeline", value_name = "COLUMNS",
          value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
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
    /// The lock key; several with --token: the keys `acquire --key A --key B` took
    ///
    /// With several keys and --token, each key the token holds is released (one round trip),
    /// and the exit status is 0 only if the token held every one. --force takes one key.
    #[arg(value_name = "KEY", required = true)]
    pub key: Vec<String>,

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
    /// The lock key (the prefix is prepended); repeated, all the keys or none
    ///
    /// With several, one token holds them all, and the fences are printed one per key, in
    /// order, on the second line (space-separated); `extend` and `release` take the same keys.
    #[arg(long, value_name = "KEY", required = true)]
    pub key: Vec<String>,

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

    /// Count the grant only once N replicas acknowledged it (see `redlock run --replicas`)
    ///
    /// A grant fewer replicas acknowledge is given back, and acquire exits 69.
    #[arg(
        long,
        env = "REDLOCK_REPLICAS",
        default_value = "0",
        hide_default_value = true,
        value_name = "N"
    )]
    pub replicas: u32,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Check that N replicas acknowledge writes, as `redlock run --replicas N` needs
    #[arg(
        long,
        env = "REDLOCK_REPLICAS",
        default_value = "0",
        hide_default_value = true,
        value_name = "N"
    )]
    pub replicas: u32,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The lock key; repeated: the keys `acquire --key A --key B` took
    ///
    /// With several keys every one is renewed in one round trip, and the exit status is 0
    /// only if the token still held every one (1 otherwise: the set is lost).
    #[arg(long, value_name = "KEY", required = true)]
    pub key: Vec<String>,

    /// The token `redlock acquire` printed
    #[arg(long, value_name = "TOKEN")]
    pub token: String,

    /// New lease length, from now
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, value_name = "DURATION")]
    pub ttl: Duration,

    /// Count the renewal only once N replicas acknowledged it (see `redlock run --replicas`)
    ///
    /// A renewal fewer replicas acknowledge renewed the key on the master, but a failover may
    /// lose it: extend exits 69 and the lease stands as the last acknowledged one left it.
    #[arg(
        long,
        env = "REDLOCK_REPLICAS",
        default_value = "0",
        hide_default_value = true,
        value_name = "N"
    )]
    pub replicas: u32,
}
