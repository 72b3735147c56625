//! The records redlock keeps beside a lock, as types: who holds it ([`Holder`]), how the last
//! run ended ([`LastRun`]), the [`Counters`], and what state a lock is in ([`LockState`]).
//!
//! Each record is a Redis hash (see `keys.rs` for the key names). This module is the one place
//! that spells the fields: it writes the fields redlock knows before a script runs (the
//! holder's identity, the whole last-run record) as name/value pairs the scripts store as they
//! are, and it decodes every hash read back. The scripts add only what the server decides
//! (`started`, `renewed`, `ttl`, `fence`, `finished` in the holder record; the counters); a
//! test checks that every field a script names is one this module knows.
//!
//! Decoding is lenient: a field that is missing or not a number reads as absent, because the
//! hashes are plain data that a foreign client (or an older redlock) may have written.

use std::time::Duration;

use crate::json::Json;
use crate::lease::fmt;

/// A hash as Redis returns it (HGETALL): field/value pairs.
pub type Fields = [(String, String)];

fn get<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn num(fields: &Fields, name: &str) -> Option<i64> {
    get(fields, name).and_then(|v| v.parse().ok())
}

fn text(fields: &Fields, name: &str) -> Option<String> {
    get(fields, name).map(str::to_string)
}

/// "host (pid 12, user bob, fence 7)", leaving out what is unknown: how every line names a
/// holder, waiter, pause or run.
pub fn who(host: &str, pid: Option<i64>, user: Option<&str>, fence: Option<i64>) -> String {
    let details: Vec<String> = [
        pid.map(|p| format!("pid {p}")),
        user.map(|u| format!("user {u}")),
        fence.map(|f| format!("fence {f}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if details.is_empty() {
        host.to_string()
    } else {
        format!("{host} ({})", details.join(", "))
    }
}

/// Who holds a lock: the holder hash, which lives and expires with the lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: Option<u32>,
    pub user: Option<String>,
    pub command: Option<String>,
    /// Server time (ms since the epoch) when the lock was taken.
    pub started_ms: Option<i64>,
    /// Server time of the last renewal.
    pub renewed_ms: Option<i64>,
    /// The lease length the holder asked for, in milliseconds.
    pub ttl_ms: Option<i64>,
    pub fence: Option<i64>,
    /// The command has ended; the lock is kept until expiry by `--hold-at-least`.
    pub finished: bool,
}

/// The holder record's fields; the scripts may name no others.
#[cfg(test)]
const HOLDER_FIELDS: [&str; 9] = [
    "host", "pid", "user", "cmd", "started", "renewed", "ttl", "fence", "finished",
];

/// The holder fields a refusal (and `release --force`) reads back, in the order the scripts
/// list them in their HMGET.
pub const BRIEF: [&str; 5] = ["host", "pid", "user", "started", "fence"];

impl Holder {
    /// This process, about to take a lock for `command`; the records keep `label` when given,
    /// else the command without what looks like a credential ([`redact`]).
    pub fn current(command: &str, label: Option<&str>) -> Holder {
        let recorded = label.map_or_else(|| redact(command), str::to_string);
        Holder {
            host: hostname(),
            pid: Some(std::process::id()),
            user: Some(user_name()),
            command: Some(truncate(&recorded, 256)),
            ..Holder::default()
        }
    }

    /// The identity fields a taker writes; the acquire script adds the server's.
    pub fn identity(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("host", self.host.clone())];
        if let Some(pid) = self.pid {
            out.push(("pid", pid.to_string()));
        }
        if let Some(user) = &self.user {
            out.push(("user", user.clone()));
        }
        if let Some(command) = &self.command {
            out.push(("cmd", command.clone()));
        }
        out
    }

    /// Reads a holder hash; `None` when it names no host (no record, or not one of ours).
    pub fn decode(fields: &Fields) -> Option<Holder> {
        Some(Holder {
            host: text(fields, "host")?,
            pid: num(fields, "pid").and_then(|p| u32::try_from(p).ok()),
            user: text(fields, "user"),
            command: text(fields, "cmd"),
            started_ms: num(fields, "started"),
            renewed_ms: num(fields, "renewed"),
            ttl_ms: num(fields, "ttl"),
            fence: num(fields, "fence"),
            finished: get(fields, "finished") == Some("1"),
        })
    }

    /// Reads the [`BRIEF`] fields, given as values in that order.
    pub fn decode_brief(values: Vec<Option<String>>) -> Option<Holder> {
        let fields: Vec<(String, String)> = BRIEF
            .iter()
            .zip(values)
            .filter_map(|(name, v)| v.map(|v| ((*name).to_string(), v)))
            .collect();
        Holder::decode(&fields)
    }

    /// "held by host (pid 12, user bob, fence 7) for 3m 2s"; the age only when the server's
    /// clock is known.
    pub fn describe(holder: Option<&Holder>, server_now_ms: Option<i64>) -> String {
        let Some(h) = holder else {
            return "held by a client that left no holder record".to_string();
        };
        let mut who = format!(
            "held by {}",
            self::who(&h.host, h.pid.map(i64::from), h.user.as_deref(), h.fence)
        );
        if let (Some(started), Some(now)) = (h.started_ms, server_now_ms) {
            let age = (now - started).max(0) as u64;
            who.push_str(&format!(
                " for {}",
                fmt(Duration::from_millis(age / 1000 * 1000))
            ));
        }
        who
    }

    /// `status --json`'s holder object; ages against `now_ms`.
    pub fn json(&self, now_ms: i64) -> Json {
        Json::Obj(vec![
            ("host", Json::str(&self.host)),
            ("pid", Json::opt_num(self.pid.map(i64::from))),
            ("user", Json::opt_str(self.user.as_deref())),
            ("command", Json::opt_str(self.command.as_deref())),
            ("started_ms", Json::opt_num(self.started_ms)),
            ("renewed_ms", Json::opt_num(self.renewed_ms)),
            ("ttl_ms", Json::opt_num(self.ttl_ms)),
            ("fence", Json::opt_num(self.fence)),
            ("finished", Json::Bool(self.finished)),
            ("age_ms", Json::opt_num(self.started_ms.map(|s| now_ms - s))),
            (
                "since_renewal_ms",
                Json::opt_num(self.renewed_ms.map(|r| now_ms - r)),
            ),
        ])
    }
}

/// A waiter in a key's queue, as the waiters hash keeps it: one value per ticket, the server's
/// time of joining and then who waits, separated by the ASCII unit separator (0x1F).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiter {
    pub since_ms: Option<i64>,
    pub host: String,
    pub pid: Option<u32>,
    pub user: Option<String>,
    pub command: Option<String>,
}

const SEPARATOR: char = '\u{1f}';

impl Waiter {
    /// Who waits, as the acquire script stores it after the time of joining.
    pub fn who(holder: &Holder) -> String {
        [
            holder.host.clone(),
            holder.pid.map_or(String::new(), |p| p.to_string()),
            holder.user.clone().unwrap_or_default(),
            holder.command.clone().unwrap_or_default(),
        ]
        .join(&SEPARATOR.to_string())
    }

    pub fn decode(value: &str) -> Waiter {
        let mut parts = value.splitn(5, SEPARATOR);
        let mut next = || parts.next().filter(|p| !p.is_empty()).map(str::to_string);
        Waiter {
            since_ms: next().and_then(|v| v.parse().ok()),
            host: next().unwrap_or_default(),
            pid: next().and_then(|v| v.parse().ok()),
            user: next(),
            command: next(),
        }
    }

    pub fn json(&self) -> Json {
        Json::Obj(vec![
            ("host", Json::str(&self.host)),
            ("pid", Json::opt_num(self.pid.map(i64::from))),
            ("user", Json::opt_str(self.user.as_deref())),
            ("command", Json::opt_str(self.command.as_deref())),
            ("since_ms", Json::opt_num(self.since_ms)),
        ])
    }
}

/// A pause: who paused a lock (or every lock under a prefix), why, since and until when. While
/// it is in force no new run or `acquire` takes the lock; a pause with an end lapses by itself
/// and its record is kept [`PAUSE_KEPT`] longer, so that `check` can tell a pause that ran out
/// without anyone resuming it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pause {
    pub host: String,
    pub pid: Option<u32>,
    pub user: Option<String>,
    pub reason: Option<String>,
    /// Server time (ms) when it was paused.
    pub since_ms: Option<i64>,
    /// Server time (ms) when the pause ends by itself; `None`: until resumed.
    pub until_ms: Option<i64>,
    /// The pause of every lock under the prefix (`pause --all`), not of this lock alone.
    pub all: bool,
}

/// How long a pause record outlives the end of its pause.
pub const PAUSE_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The pause record's fields.
#[cfg(test)]
const PAUSE_FIELDS: [&str; 6] = ["host", "pid", "user", "reason", "since", "until"];

impl Pause {
    /// The fields `pause` writes (the script adds since and until).
    pub fn identity(holder: &Holder, reason: Option<&str>) -> Vec<(&'static str, String)> {
        let mut out = vec![("host", holder.host.clone())];
        if let Some(pid) = holder.pid {
            out.push(("pid", pid.to_string()));
        }
        if let Some(user) = &holder.user {
            out.push(("user", user.clone()));
        }
        if let Some(reason) = reason.filter(|r| !r.is_empty()) {
            out.push(("reason", truncate(reason, 256)));
        }
        out
    }

    /// Reads a pause hash; `None` when it has no `since` (no record).
    pub fn decode(fields: &Fields, all: bool) -> Option<Pause> {
        Some(Pause {
            host: text(fields, "host").unwrap_or_default(),
            pid: num(fields, "pid").and_then(|p| u32::try_from(p).ok()),
            user: text(fields, "user"),
            reason: text(fields, "reason"),
            since_ms: Some(num(fields, "since")?),
            until_ms: num(fields, "until").filter(|u| *u > 0),
            all,
        })
    }

    /// Reads the acquire script's pause brief: host, pid, user, reason, since, until, scope.
    pub fn decode_brief(values: Vec<Option<String>>) -> Option<Pause> {
        let mut fields: Vec<(String, String)> = PAUSE_BRIEF
            .iter()
            .zip(values.iter().cloned())
            .filter_map(|(name, v)| v.map(|v| ((*name).to_string(), v)))
            .collect();
        fields.sort();
        let all = values.get(PAUSE_BRIEF.len()).cloned().flatten().as_deref() == Some("all");
        Pause::decode(&fields, all)
    }

    /// Whether it is in force at server time `now_ms`.
    pub fn in_force(&self, now_ms: i64) -> bool {
        self.until_ms.is_none_or(|u| u > now_ms)
    }

    /// "paused by web-1 (pid 4, user bob) since 2026-…: deploy; until 2026-… (in 9m)".
    pub fn describe(&self, now_ms: i64) -> String {
        let mut out = if self.all {
            "paused (with every lock under its prefix) by ".to_string()
        } else {
            "paused by ".to_string()
        };
        let host = if self.host.is_empty() {
            "an unknown host"
        } else {
            &self.host
        };
        out.push_str(&who(
            host,
            self.pid.map(i64::from),
            self.user.as_deref(),
            None,
        ));
        if let Some(since) = self.since_ms {
            out.push_str(&format!(" since {}", rfc3339(since)));
        }
        match &self.reason {
            Some(reason) => out.push_str(&format!(": {reason:?}")),
            None => out.push_str(" (no reason given)"),
        }
        match self.until_ms {
            Some(until) if until > now_ms => out.push_str(&format!(
                ", until {} (in {})",
                rfc3339(until),
                fmt(Duration::from_millis(
                    ((until - now_ms) / 1000 * 1000) as u64
                ))
            )),
            Some(until) => {
                out.push_str(&format!(", LAPSED at {} without a resume", rfc3339(until)));
            }
            None => out.push_str(", until resumed"),
        }
        out
    }

    pub fn json(&self, now_ms: i64) -> Json {
        Json::Obj(vec![
            ("scope", Json::str(if self.all { "prefix" } else { "key" })),
            ("in_force", Json::Bool(self.in_force(now_ms))),
            ("host", Json::str(&self.host)),
            ("pid", Json::opt_num(self.pid.map(i64::from))),
            ("user", Json::opt_str(self.user.as_deref())),
            ("reason", Json::opt_str(self.reason.as_deref())),
            ("since_ms", Json::opt_num(self.since_ms)),
            ("until_ms", Json::opt_num(self.until_ms)),
        ])
    }
}

/// The pause fields the acquire script's refusal lists, in its HMGET's order (then the scope).
pub const PAUSE_BRIEF: [&str; 6] = ["host", "pid", "user", "reason", "since", "until"];

/// Milliseconds since the epoch as RFC 3339, to the second.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A holder of a shared or slotted lock (`--shared`, `--slots N`), as the holders hash keeps it:
/// one value per token, the slot (empty when shared), fence, start (server ms) and lease length
/// (ms) and then who holds it as [`Waiter::who`] writes it, separated by the ASCII unit
/// separator. Its lease deadline is its score in the leases sorted set (see `keys.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sharer {
    pub slot: Option<u32>,
    pub fence: Option<i64>,
    pub started_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub host: String,
    pub pid: Option<u32>,
    pub user: Option<String>,
    pub command: Option<String>,
    /// When its lease ends unless renewed (server ms); known to `status`, not to `release`.
    pub deadline_ms: Option<i64>,
    /// Its token; known to `status`, shown only with `--show-token`.
    pub token: Option<String>,
}

impl Sharer {
    pub fn decode(value: &str) -> Sharer {
        let mut parts = value.splitn(8, SEPARATOR);
        let mut next = || parts.next().filter(|p| !p.is_empty()).map(str::to_string);
        Sharer {
            slot: next().and_then(|v| v.parse().ok()),
            fence: next().and_then(|v| v.parse().ok()),
            started_ms: next().and_then(|v| v.parse().ok()),
            ttl_ms: next().and_then(|v| v.parse().ok()),
            host: next().unwrap_or_default(),
            pid: next().and_then(|v| v.parse().ok()),
            user: next(),
            command: next(),
            deadline_ms: None,
            token: None,
        }
    }

    /// "slot 2: web-3 (pid 12, user bob), fence 7".
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(slot) = self.slot {
            out.push_str(&format!("slot {slot}: "));
        }
        out.push_str(&who(
            &self.host,
            self.pid.map(i64::from),
            self.user.as_deref(),
            None,
        ));
        if let Some(f) = self.fence {
            out.push_str(&format!(", fence {f}"));
        }
        out
    }

    /// One entry of `status --json`'s `holders`; ages against `now_ms`.
    pub fn json(&self, now_ms: i64, show_token: bool) -> Json {
        let mut fields = vec![
            ("slot", Json::opt_num(self.slot.map(i64::from))),
            ("host", Json::str(&self.host)),
            ("pid", Json::opt_num(self.pid.map(i64::from))),
            ("user", Json::opt_str(self.user.as_deref())),
            ("command", Json::opt_str(self.command.as_deref())),
            ("started_ms", Json::opt_num(self.started_ms)),
            ("ttl_ms", Json::opt_num(self.ttl_ms)),
            ("fence", Json::opt_num(self.fence)),
            ("deadline_ms", Json::opt_num(self.deadline_ms)),
            ("age_ms", Json::opt_num(self.started_ms.map(|s| now_ms - s))),
            (
                "ttl_left_ms",
                Json::opt_num(self.deadline_ms.map(|d| (d - now_ms).max(0))),
            ),
        ];
        if show_token {
            fields.push(("token", Json::opt_str(self.token.as_deref())));
        }
        Json::Obj(fields)
    }
}

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
            other => Outcome::Other(other.to_string()),
        }
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
}

/// The last-run record's fields.
#[cfg(test)]
const LAST_RUN_FIELDS: [&str; 11] = [
    "once_per",
    "outcome",
    "exit",
    "host",
    "pid",
    "user",
    "cmd",
    "started",
    "ended",
    "duration_ms",
    "fence",
];

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
        }
    }

    /// The hash as the release script stores it.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("outcome", self.outcome.as_str().to_string())];
        let nums = [
            ("exit", self.exit),
            ("pid", self.pid),
            ("started", self.started_ms),
            ("ended", self.ended_ms),
            ("duration_ms", self.duration_ms),
            ("fence", self.fence),
            ("once_per", self.once_per_ms),
        ];
        let texts = [
            ("host", &self.host),
            ("user", &self.user),
            ("cmd", &self.command),
        ];
        out.extend(
            nums.into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v.to_string()))),
        );
        out.extend(
            texts
                .into_iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (k, v.clone()))),
        );
        out
    }

    /// Reads a last-run hash; `None` when it has no outcome (no record).
    pub fn decode(fields: &Fields) -> Option<LastRun> {
        Some(LastRun {
            outcome: Outcome::parse(get(fields, "outcome")?),
            exit: num(fields, "exit"),
            host: text(fields, "host"),
            pid: num(fields, "pid"),
            user: text(fields, "user"),
            command: text(fields, "cmd"),
            started_ms: num(fields, "started"),
            ended_ms: num(fields, "ended"),
            duration_ms: num(fields, "duration_ms"),
            fence: num(fields, "fence"),
            once_per_ms: num(fields, "once_per"),
        })
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

/// How often runs of a lock ran, were refused, lost their lease, failed or were forced out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub runs: i64,
    pub busy: i64,
    pub lost: i64,
    pub failed: i64,
    pub forced: i64,
    /// Server time (ms) when a run last ended ok (kept beside the counters: the last-run
    /// record is overwritten by the next run, whatever its outcome).
    pub last_ok_ms: Option<i64>,
    /// Runs skipped by `--once-per`: their window had run already.
    pub skipped: i64,
}

/// The counters' fields (the scripts increment them by these names).
pub const COUNTER_FIELDS: [&str; 6] = ["runs", "busy", "lost", "failed", "forced", "skipped"];
/// The last successful run's end, in the counters' hash.
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
            last_ok_ms: num(fields, LAST_OK),
            skipped: n("skipped"),
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

/// What a lock is, as `status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockState {
    Held,
    Free,
    /// The key holds another type of value: it is no lock.
    WrongType,
    /// A quorum cannot tell: too few nodes answered to decide.
    Unknown,
}

impl LockState {
    /// A key's state from its Redis TYPE.
    pub fn of_type(key_type: &str) -> LockState {
        match key_type {
            "string" => LockState::Held,
            "none" => LockState::Free,
            _ => LockState::WrongType,
        }
    }

    /// The spelling in `status --json`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Held => "held",
            LockState::Free => "free",
            LockState::WrongType => "wrong_type",
            LockState::Unknown => "unknown",
        }
    }
}

/// A value that looks like a credential, as the records show it instead.
pub const REDACTED: &str = "***";

/// The command as the records keep it, without what looks like a credential (records live for
/// 30 days and `status` shows them to read-only users):
///
/// * the value of an assignment or `--flag=value` whose name looks secret
///   (`PGPASSWORD=x`, `--api-key=x`);
/// * the word after a flag whose name looks secret (`--password x`, `--token x`);
/// * the user information of a URL (`redis://user:pass@host` → `redis://***@host`).
///
/// A name looks secret when it contains PASSWORD, PASSWD, PASSPHRASE, SECRET, TOKEN, KEY,
/// CREDENTIAL or AUTH, or has PASS or PWD as a part of its own (`MYSQL_PWD`, `--pass`), in any
/// case. Quoted values are redacted whole. Anything else is kept as written: a password passed
/// positionally (`mysql -pX`, `redis-cli -a X`) cannot be told from other arguments; use
/// `--label` for such commands.
pub fn redact(command: &str) -> String {
    let bytes = command.as_bytes();
    let mut out = String::with_capacity(command.len());
    let mut i = 0;
    let mut hide_next = false;
    while i < bytes.len() {
        if is_break(bytes[i]) && !(hide_next && is_quote(bytes[i])) {
            out.push(bytes[i] as char);
            i += 1;
            continue;
        }
        if hide_next {
            out.push_str(REDACTED);
            i = value_end(bytes, i);
            hide_next = false;
            continue;
        }
        let end = (i..bytes.len())
            .find(|&j| is_break(bytes[j]))
            .unwrap_or(bytes.len());
        let token = &command[i..end];
        let name_end = token
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            .unwrap_or(token.len());
        let name = &token[..name_end];
        let secret = looks_secret(name.trim_start_matches('-'));
        if secret && token[name_end..].starts_with('=') {
            out.push_str(&token[..=name_end]);
            out.push_str(REDACTED);
            i = value_end(bytes, i + name_end + 1);
        } else {
            out.push_str(&hide_userinfo(token));
            hide_next = secret && name.starts_with('-') && name_end == token.len();
            i = end;
        }
    }
    out
}

fn is_quote(b: u8) -> bool {
    b == b'\'' || b == b'"'
}

/// Whitespace, a shell separator or a quote: where a word of the command ends.
fn is_break(b: u8) -> bool {
    b.is_ascii_whitespace() || b";&|()".contains(&b) || is_quote(b)
}

/// Where a value starting at `start` ends: after its closing quote when it is quoted, else at
/// the next break.
fn value_end(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(&q) if is_quote(q) => bytes[start + 1..]
            .iter()
            .position(|&b| b == q)
            .map_or(bytes.len(), |at| start + at + 2),
        _ => (start..bytes.len())
            .find(|&j| is_break(bytes[j]))
            .unwrap_or(bytes.len()),
    }
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.is_empty() || upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    const INSIDE: [&str; 8] = [
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "TOKEN",
        "KEY",
        "CREDENTIAL",
        "AUTH",
    ];
    INSIDE.iter().any(|w| upper.contains(w))
        || upper
            .split(['_', '-', '.'])
            .any(|part| part == "PASS" || part == "PWD")
}

/// `scheme://user:pass@host/...` → `scheme://***@host/...`, for every URL in `word`.
fn hide_userinfo(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| "/?#'\" ".contains(c))
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(user_end) => {
                out.push_str(REDACTED);
                out.push_str(&tail[user_end..authority_end]);
            }
            None => out.push_str(&tail[..authority_end]),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The name of the user this process runs as: from the password database file (a static
/// binary cannot ask NSS, so users known only to LDAP or SSSD are not found there), else
/// `$USER` or `$LOGNAME`, else `uid N`.
pub fn user_name() -> String {
    // SAFETY: getuid cannot fail and touches no memory of ours.
    let uid = unsafe { libc::getuid() };
    read_small("/etc/passwd")
        .and_then(|passwd| passwd_name(&passwd, uid))
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// A file of at most 64 KiB, read without a size probe (open, read, close: this is on every
/// run's start-up path); `None` when it cannot be read or is larger. The buffer grows from 4 KiB
/// as needed and is never zeroed first: zeroing 64 KiB would fault in every page of it per run.
fn read_small(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    const MAX: usize = 64 * 1024;
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::with_capacity(4096);
    file.take(MAX as u64 + 1).read_to_end(&mut buf).ok()?;
    (buf.len() <= MAX).then_some(buf)
}

/// The first name with this uid in a passwd(5) file (`name:password:uid:gid:…`).
fn passwd_name(passwd: &[u8], uid: libc::uid_t) -> Option<String> {
    passwd.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (!name.is_empty()
            && !name.starts_with(b"+")
            && std::str::from_utf8(id).ok()?.parse() == Ok(uid))
        .then(|| String::from_utf8_lossy(name).into_owned())
    })
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_password_file_names_the_user() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\n+nis::7::::\ncron:x:1001:1001::/home/cron:/bin/sh\n\nbroken\nalias:x:1001:5::/:/bin/sh\n";
        assert_eq!(passwd_name(passwd, 0).as_deref(), Some("root"));
        assert_eq!(passwd_name(passwd, 1001).as_deref(), Some("cron"));
        assert_eq!(passwd_name(passwd, 7), None);
        assert_eq!(passwd_name(passwd, 4242), None);
    }

    #[test]
    fn holder_descriptions_name_the_holder() {
        let holder = Holder::decode(&pairs(&[
            ("host", "web-1"),
            ("pid", "42"),
            ("user", "bob"),
            ("started", "18000"),
            ("fence", "7"),
        ]))
        .unwrap();
        assert_eq!(
            Holder::describe(Some(&holder), Some(200_000)),
            "held by web-1 (pid 42, user bob, fence 7) for 3m 2s"
        );
        assert_eq!(
            Holder::describe(Some(&holder), None),
            "held by web-1 (pid 42, user bob, fence 7)"
        );
        assert!(Holder::describe(None, None).contains("no holder record"));
        assert_eq!(Holder::decode(&pairs(&[("pid", "1")])), None);
    }

    #[test]
    fn a_waiter_reads_back_what_it_wrote() {
        let holder = Holder::current("sh -c 'a\u{1f}b'", None);
        let stored = format!("1234\u{1f}{}", Waiter::who(&holder));
        let waiter = Waiter::decode(&stored);
        assert_eq!(waiter.since_ms, Some(1234));
        assert_eq!(waiter.host, holder.host);
        assert_eq!(waiter.pid, holder.pid);
        assert_eq!(waiter.user, holder.user);
        assert_eq!(waiter.command, holder.command);
    }

    #[test]
    fn a_last_run_reads_back_what_it_wrote() {
        let holder = Holder {
            host: "h".into(),
            pid: Some(9),
            user: Some("u".into()),
            command: Some("c".into()),
            ..Holder::default()
        };
        let run = LastRun::new(
            Outcome::LeaseLost,
            76,
            &holder,
            1_000,
            Duration::from_millis(250),
            3,
        );
        let written: Vec<(String, String)> = run
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(LastRun::decode(&written), Some(run));
        assert!(
            written
                .iter()
                .all(|(k, _)| LAST_RUN_FIELDS.contains(&k.as_str()))
        );
    }

    #[test]
    fn records_from_foreign_writers_decode_leniently() {
        let counters = Counters::decode(&pairs(&[("runs", "3"), ("busy", "x")]));
        assert_eq!((counters.runs, counters.busy), (3, 0));
        let run = LastRun::decode(&pairs(&[("outcome", "odd"), ("exit", "-")])).unwrap();
        assert_eq!(run.outcome, Outcome::Other("odd".into()));
        assert_eq!(run.exit, None);
    }

    /// Every field a script writes or reads by name is one this module knows.
    #[test]
    fn the_scripts_name_only_known_fields() {
        for (name, source) in crate::scripts::ALL {
            for line in source.lines().filter(|l| !l.trim_start().starts_with("--")) {
                let Some(call) = ["'HSET'", "'HMGET'", "'HINCRBY'"]
                    .iter()
                    .find_map(|c| line.find(c))
                else {
                    continue;
                };
                for quoted in line[call..].split('\'').skip(1).step_by(2) {
                    if quoted.chars().all(|c| c.is_ascii_uppercase()) {
                        continue; // the command itself
                    }
                    assert!(
                        HOLDER_FIELDS.contains(&quoted)
                            || quoted == "shape"
                            || LAST_RUN_FIELDS.contains(&quoted)
                            || COUNTER_FIELDS.contains(&quoted)
                            || quoted == LAST_OK
                            || PAUSE_FIELDS.contains(&quoted)
                            || ONCE_FIELDS.contains(&quoted),
                        "{name}.lua names field {quoted:?}"
                    );
                }
            }
        }
    }

    /// The scripts that answer with a holder's brief list the fields in [`BRIEF`]'s order.
    #[test]
    fn brief_replies_list_the_fields_in_order() {
        let expected = format!("'HMGET', KEYS[3], '{}'", BRIEF.join("', '"));
        let force = expected.replace("KEYS[3]", "KEYS[2]");
        for (name, source) in crate::scripts::ALL {
            let wanted = match *name {
                "acquire" => &expected,
                "force_release" => &force,
                _ => continue,
            };
            assert!(
                source.lines().any(|l| l.contains(wanted.as_str())),
                "{name}.lua"
            );
        }
        let pause = format!("'HMGET', key, '{}'", PAUSE_BRIEF.join("', '"));
        assert!(crate::scripts::ACQUIRE.contains(&pause), "acquire.lua");
    }

    #[test]
    fn states_spell_as_in_the_json_document() {
        assert_eq!(LockState::of_type("string").as_str(), "held");
        assert_eq!(LockState::of_type("none").as_str(), "free");
        assert_eq!(LockState::of_type("hash").as_str(), "wrong_type");
        assert_eq!(LockState::Unknown.as_str(), "unknown");
    }

    #[test]
    fn secrets_are_redacted_and_everything_else_kept() {
        for (command, recorded) in [
            ("PGPASSWORD=hunter2 psql -h db", "PGPASSWORD=*** psql -h db"),
            ("psql --password hunter2 -h db", "psql --password *** -h db"),
            ("tool --api-key=abc --keep=1", "tool --api-key=*** --keep=1"),
            ("tool --token 'a b' next", "tool --token *** next"),
            ("tool --token=\"a b\" next", "tool --token=*** next"),
            ("X=1 MYSQL_PWD='s e' mysql", "X=1 MYSQL_PWD=*** mysql"),
            (
                "export AWS_SECRET_ACCESS_KEY=k; aws s3 ls",
                "export AWS_SECRET_ACCESS_KEY=***; aws s3 ls",
            ),
            (
                "curl https://u:p@example.com/x?q=1",
                "curl https://***@example.com/x?q=1",
            ),
            (
                "redis-cli -u redis://:pw@h:6379 ping",
                "redis-cli -u redis://***@h:6379 ping",
            ),
            ("sh -c 'DB_PASS=x run'", "sh -c 'DB_PASS=*** run'"),
            ("cd $PWD && make PWD=/x", "cd $PWD && make PWD=/x"),
            (
                "backup --dir /srv https://example.com/a",
                "backup --dir /srv https://example.com/a",
            ),
        ] {
            assert_eq!(redact(command), recorded, "{command}");
        }
    }
}
