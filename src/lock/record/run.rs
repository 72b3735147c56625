//! The records of how runs ended: the last run's ([`LastRun`], with its [`Outcome`]) and the
//! [`Counters`], kept by the release script; and the fields of the `--once-per` window's record.

use std::time::Duration;

use super::{Fields, Holder, SEPARATOR, get, num, text};
use crate::report::json::Json;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command exited 0 with the lease held throughout.
    Ok,
    /// The command exited non-zero.
    Failed,
    /// The command ended by a signal.
    Killed,
    /// The lease was lost while the command ran.
    LeaseLost,
    /// `--max-runtime` ran out and redlock stopped the command.
    TimedOut,
    /// Another run asked this one to stop (`--replace`), and redlock stopped the command.
    Replaced,
    /// A value this version does not know (written by another version).
    Other(String),
}

impl Outcome {
    pub fn as_str(&self) -> &str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Killed => "killed",
            Outcome::LeaseLost => "lease lost",
            Outcome::TimedOut => "timed out",
            Outcome::Replaced => "replaced",
            Outcome::Other(s) => s,
        }
    }

    fn parse(s: &str) -> Outcome {
        match s {
            "ok" => Outcome::Ok,
            "failed" => Outcome::Failed,
            "killed" => Outcome::Killed,
            "lease lost" => Outcome::LeaseLost,
            "timed out" => Outcome::TimedOut,
            "replaced" => Outcome::Replaced,
            other => Outcome::Other(other.to_string()),
        }
    }
}

/// Why a hold ends without a run to record (release.lua's ARGV[4]): the audit log's
/// `released` entry says it as its outcome, so that every `acquired` there has its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GivenBack {
    /// A grant nothing ran under: too few replicas acknowledged it, a replacer displaced it
    /// before it was confirmed, its waiter gave up or its acquire timed out, a quorum's
    /// majority was not won, or its token could not be handed over.
    Unused,
    /// A run held the lock but started nothing (a signal during the acquire, a grant that came
    /// too late to run anything).
    NotStarted,
    /// `redlock release --token`: the end of a hold taken by `redlock acquire`.
    ByToken,
}

impl GivenBack {
    pub fn as_str(self) -> &'static str {
        match self {
            GivenBack::Unused => "given back",
            GivenBack::NotStarted => "not started",
            GivenBack::ByToken => "by token",
        }
    }

    /// release.lua's ARGV[4..5] for a hold ended without a run: why, and who ends it (this
    /// process: host and pid).
    pub fn release_args(self) -> [String; 2] {
        let who = [
            ("host", super::hostname()),
            ("pid", std::process::id().to_string()),
        ];
        [self.as_str().to_string(), super::audit_pairs(&who)]
    }
}

/// The last finished run of a lock: a hash that outlives the lock by `RECORD_TTL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastRun {
    pub outcome: Outcome,
    pub exit: Option<i64>,
    pub host: Option<String>,
    pub pid: Option<i64>,
    pub user: Option<String>,
    pub command: Option<String>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    pub fence: Option<i64>,
    /// The run's `--once-per` window length (ms): the release script then records how the
    /// window's run ended in its record.
    pub once_per_ms: Option<i64>,
    /// Who replaced the run (`--replace`), as its redlock reported itself.
    pub replaced_by: Option<String>,
    /// The run held a shared or slotted lease (`--shared`, `--slots`): its release names the
    /// leases, which an exclusive holder's need not. Not stored.
    pub shared: bool,
    /// A run over several keys: the fences of its other locks (`Keys::also`), in order; each
    /// lock's record gets its own fence. Not stored as such.
    pub also_fences: Vec<i64>,
}

/// How much of a command the lock's record keeps (the audit log keeps it whole): a longer
/// value would turn the hash from Redis's compact encoding into a table several times larger.
const RECORDED_COMMAND: usize = 60;

/// The last-run record's fields (the `--once-per` record names `started`, `ended`, `exit` and
/// `outcome` too, see `ONCE_FIELDS`).
#[cfg(test)]
pub(super) const LAST_RUN_FIELDS: [&str; 5] =
    ["last", "replaced_by", "host", "cmd", super::LAYOUT_FIELD];

impl LastRun {
    /// The record of a run by `holder` that started at `started_ms` (server time).
    pub fn new(
        outcome: Outcome,
        exit: u8,
        holder: &Holder,
        started_ms: i64,
        duration: Duration,
        fence: i64,
    ) -> LastRun {
        let duration_ms = duration.as_millis() as i64;
        LastRun {
            outcome,
            exit: Some(exit.into()),
            host: Some(holder.host.clone()),
            pid: holder.pid.map(i64::from),
            user: holder.user.clone(),
            command: holder.command.clone(),
            started_ms: Some(started_ms),
            ended_ms: Some(started_ms + duration_ms),
            duration_ms: Some(duration_ms),
            fence: Some(fence),
            once_per_ms: None,
            replaced_by: None,
            shared: false,
            also_fences: Vec::new(),
        }
    }

    /// The run as the release script takes it (release.lua's ARGV[3..9]): the outcome, when
    /// it ended (the start plus the duration; '' when unknown), the rest of `last` (exit,
    /// started, duration, fence, pid, user, separated by 0x1F), the host, the command, the
    /// audit entry's fields after the outcome, and who replaced it ('' for none, which the call
    /// leaves out). The lock's record keeps `outcome` and `last` as `last`, and the host and the
    /// command in fields of their own: each value stays under Redis's 64-byte limit for a
    /// compact hash (the command is cut to fit: the audit log keeps it whole), which keeps a
    /// lock that ran once under a kilobyte (its audit log grows with further runs).
    pub fn release_args(&self) -> [String; 7] {
        let num = |n: Option<i64>| n.map_or(String::new(), |n| n.to_string());
        let sep = SEPARATOR.to_string();
        let last = [
            num(self.exit),
            num(self.started_ms),
            num(self.duration_ms),
            num(self.fence),
            num(self.pid),
            self.user.clone().unwrap_or_default(),
        ]
        .join(&sep);
        let command = self
            .command
            .as_deref()
            .map_or(String::new(), |c| super::who::truncate(c, RECORDED_COMMAND));
        let mut audit = vec![
            ("exit", num(self.exit)),
            ("duration_ms", num(self.duration_ms)),
            ("fence", num(self.fence)),
        ];
        if let Some(by) = &self.replaced_by {
            audit.push(("by", by.clone()));
        }
        audit.push(("host", self.host.clone().unwrap_or_default()));
        audit.push(("pid", num(self.pid)));
        [
            self.outcome.as_str().to_string(),
            num(self.ended_ms),
            last,
            self.host.clone().unwrap_or_default(),
            command,
            super::audit_pairs(&audit),
            self.replaced_by.clone().unwrap_or_default(),
        ]
    }

    /// Reads the lock's record; `None` when it has no last run. The last run is `last`
    /// (OUTCOME, EXIT, STARTED, DURATION_MS, FENCE, PID, USER separated by 0x1F) beside the
    /// host and the command.
    pub fn decode(fields: &Fields) -> Option<LastRun> {
        let last = get(fields, "last")?;
        let mut part = last.split(SEPARATOR);
        let outcome = Outcome::parse(part.next().unwrap_or_default());
        let mut next = || part.next().and_then(|v| v.parse::<i64>().ok());
        let (exit, started, duration, fence, pid) = (next(), next(), next(), next(), next());
        let user = part.next().filter(|u| !u.is_empty()).map(str::to_string);
        Some(LastRun {
            outcome,
            exit,
            pid,
            user,
            started_ms: started,
            ended_ms: started.zip(duration).map(|(s, d)| s + d),
            duration_ms: duration,
            fence,
            ..LastRun::identity(fields)
        })
    }

    /// The identity fields of a lock's record, the rest unknown.
    fn identity(fields: &Fields) -> LastRun {
        let text = |name| text(fields, name).filter(|v: &String| !v.is_empty());
        LastRun {
            outcome: Outcome::Other(String::new()),
            exit: None,
            host: text("host"),
            pid: None,
            user: None,
            command: text("cmd"),
            started_ms: None,
            ended_ms: None,
            duration_ms: None,
            fence: None,
            once_per_ms: None,
            replaced_by: text("replaced_by"),
            shared: false,
            also_fences: Vec::new(),
        }
    }

    pub fn json(&self) -> Json {
        Json::Obj(vec![
            ("outcome", Json::str(self.outcome.as_str())),
            ("exit", Json::opt_num(self.exit)),
            ("host", Json::opt_str(self.host.as_deref())),
            ("pid", Json::opt_num(self.pid)),
            ("user", Json::opt_str(self.user.as_deref())),
            ("command", Json::opt_str(self.command.as_deref())),
            ("started_ms", Json::opt_num(self.started_ms)),
            ("ended_ms", Json::opt_num(self.ended_ms)),
            ("duration_ms", Json::opt_num(self.duration_ms)),
            ("fence", Json::opt_num(self.fence)),
        ])
    }
}

/// How often runs of a lock ran, were refused, lost their lease, failed, were forced out or
/// replaced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub runs: i64,
    pub busy: i64,
    pub lost: i64,
    pub failed: i64,
    pub forced: i64,
    /// Server time (ms) when a run last ended ok: the last run's end while it ended ok, else
    /// `last_ok`, where the release of a run that did not moves it (release_record.lua).
    pub last_ok_ms: Option<i64>,
    /// Runs skipped by `--once-per`: their window had run already.
    pub skipped: i64,
    /// Runs stopped by another run's `--replace`.
    pub replaced: i64,
}

/// The counters' fields (the scripts increment them by these names).
pub const COUNTER_FIELDS: [&str; 7] = [
    "runs", "busy", "lost", "failed", "forced", "skipped", "replaced",
];

/// When a run last ended ok, in the counters' hash once a later run did not (see
/// [`Counters::last_ok_ms`]).
pub const LAST_OK: &str = "last_ok";

/// The fields of the `--once-per` window's record besides the holder's identity (acquire.lua
/// writes it, release.lua records the run's end there).
#[cfg(test)]
pub const ONCE_FIELDS: [&str; 8] = [
    "window", "every", "token", "fence", "started", "outcome", "ended", "exit",
];

impl Counters {
    pub fn decode(fields: &Fields) -> Counters {
        let n = |name| num(fields, name).unwrap_or(0);
        Counters {
            runs: n("runs"),
            busy: n("busy"),
            lost: n("lost"),
            failed: n("failed"),
            forced: n("forced"),
            last_ok_ms: LastRun::decode(fields)
                .filter(|run| run.outcome == Outcome::Ok)
                .and_then(|run| run.ended_ms)
                .or_else(|| num(fields, LAST_OK)),
            skipped: n("skipped"),
            replaced: n("replaced"),
        }
    }

    pub fn json(&self) -> Json {
        let values = [
            self.runs,
            self.busy,
            self.lost,
            self.failed,
            self.forced,
            self.skipped,
            self.replaced,
        ];
        Json::Obj(
            COUNTER_FIELDS
                .into_iter()
                .zip(values)
                .map(|(name, n)| (name, Json::Num(n.into())))
                .collect(),
        )
    }
}
