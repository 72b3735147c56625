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
//! hashes are plain data that a foreign client may have written. What is not lenient is the
//! layout's version ([`LAYOUT`]): records a later, incompatible layout wrote are refused with
//! [`Exit::Config`](crate::report::exit::Exit) (78), never read as if they were this one's.

use std::time::Duration;

use crate::report::json::Json;
use crate::report::text::shown;
use crate::supervise::lease::fmt;

mod pause;
mod run;
mod who;

#[cfg(test)]
use self::pause::{PAUSE_BRIEF, PAUSE_FIELDS};
pub use self::pause::{PAUSE_KEPT, Pause, rfc3339};
#[cfg(test)]
use self::run::{COUNTER_FIELDS, LAST_OK, LAST_RUN_FIELDS, ONCE_FIELDS};
pub use self::run::{Counters, GivenBack, LastRun, Outcome};
#[cfg(test)]
use self::who::passwd_name;
use self::who::truncate;
pub use self::who::{hostname, redact, redact_words, user_name};

/// Field/value pairs as the audit log writes them: `name=value`, separated by the ASCII unit
/// separator (which no value holds: the command and the reason have it replaced).
pub fn audit_pairs(pairs: &[(&'static str, String)]) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        if !out.is_empty() {
            out.push(SEPARATOR);
        }
        out.push_str(name);
        out.push('=');
        out.extend(value.chars().map(|c| if c == SEPARATOR { ' ' } else { c }));
    }
    out
}

/// The version of the data layout this redlock writes and reads (docs/design.md, "Data in
/// Redis"): every 1.x reads layout 1's keys. The holder record and the lock's record carry it
/// as their field [`LAYOUT_FIELD`]; a record without the field is read as layout 1 (the
/// counters a refusal or a forced release creates have none). The scripts carry it too
/// (`LAYOUT` in audit.lua) and refuse another layout's records with an error reply `LAYOUT`
/// (78).
pub const LAYOUT: &str = "1";
/// The field of the holder record and of the lock's record that names their layout.
pub const LAYOUT_FIELD: &str = "v";

/// The error for a record of another layout, worded once: the status is 78 (the server holds
/// data this redlock cannot work with), and what to do.
pub fn layout_error(version: &str, record: &str) -> anyhow::Error {
    crate::report::error::fail(
        crate::report::exit::Exit::Config,
        format!(
            "{record} is in data layout {version:?}, written by another redlock; this redlock \
             ({}) reads layout {LAYOUT} only and changed nothing: use the redlock that wrote it",
            env!("CARGO_PKG_VERSION")
        ),
    )
}

/// Whether a script refused records of another data layout (its error reply `LAYOUT …`): an
/// acquire refused so took no lock and joined no queue on that server (the scripts check the
/// records before they take or queue).
pub fn is_layout(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<redis::RedisError>()
            .is_some_and(|e| e.code() == Some("LAYOUT"))
            || cause.to_string().starts_with("LAYOUT")
    })
}

/// A hash as Redis returns it (HGETALL): field/value pairs.
pub type Fields = [(String, String)];

/// A record kept as text (the holder record, an audit entry's body): name=value pairs
/// separated by 0x1F, as field/value pairs (a value may hold '='; the first one named wins).
pub fn record_fields(record: &str) -> Vec<(String, String)> {
    record
        .split(SEPARATOR)
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

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
        user.map(|u| format!("user {}", shown(u))),
        fence.map(|f| format!("fence {f}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let host = shown(host);
    if details.is_empty() {
        host.into_owned()
    } else {
        format!("{host} ({})", details.join(", "))
    }
}

/// Who holds a lock: the holder record, which lives and expires with the lock.
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
    /// `--no-replace` (and every `redlock acquire`): `--replace` does not ask it to stop. The
    /// record says `replace=no`.
    pub irreplaceable: bool,
    /// Who asked this holder to stop (`--replace`), as the replacer's redlock named itself:
    /// "web-2 (pid 4242, user deploy)". The record says `stop=…` until the holder is gone.
    pub stop_asked_by: Option<String>,
    /// No redlock renews this lease: `redlock acquire`'s (a script's `extend` may), or a run's
    /// whose first lease already covers its `--max-runtime`. Its `who` says `renew=no`, so
    /// that readers do not count a renewal it never meant to make as missed.
    pub no_renewal: bool,
    /// `--replicas N` (N ≥ 1): each of this holder's renewals counts once N replicas
    /// acknowledged it, which decides the faults its lock survives (`lock::replicas::guarantee`).
    /// Kept in `who` as `replicas=N`; absent without `--replicas`.
    pub replicas: Option<u32>,
}

/// The holder record's fields (holder.lua), the identity's besides; the scripts may name no
/// others.
#[cfg(test)]
const HOLDER_FIELDS: [&str; 9] = [
    LAYOUT_FIELD,
    "started",
    "ttl",
    "fence",
    "renewed",
    "finished",
    "replace",
    "stop",
    "ticket",
];

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
        if let Some(n) = self.replicas.filter(|n| *n > 0) {
            out.push(("replicas", n.to_string()));
        }
        out
    }

    /// The holder record's fields but its layout, lease and renewal (heal.lua writes the
    /// record with those, see holder.lua): started, fence, the identity, replace=no.
    pub fn record_fields(&self, started_ms: Option<i64>, fence: Option<i64>) -> String {
        let mut pairs = Vec::new();
        if let Some(started) = started_ms {
            pairs.push(("started", started.to_string()));
        }
        if let Some(fence) = fence {
            pairs.push(("fence", fence.to_string()));
        }
        pairs.extend(self.identity());
        if self.no_renewal {
            pairs.push(("renew", "no".to_string()));
        }
        if self.irreplaceable {
            pairs.push(("replace", "no".to_string()));
        }
        audit_pairs(&pairs)
    }

    /// Who this is, as the audit log writes it: `host=…\x1fpid=…\x1fuser=…\x1fcmd=…`, and
    /// `renew=no` for a holder no redlock renews (the holder record's `who` is this text).
    pub fn audit(&self) -> String {
        let mut pairs = self.identity();
        if self.no_renewal {
            pairs.push(("renew", "no".to_string()));
        }
        audit_pairs(&pairs)
    }

    /// Reads a holder record (holder.lua: `v=1`, then name=value pairs separated by 0x1F, the
    /// identity's among them, as the audit log writes it); `None` when it names no host (not
    /// one of ours). Until its first renewal a holder was last renewed when it started.
    pub fn decode(record: &str) -> Option<Holder> {
        let fields = record_fields(record);
        let fields = &fields[..];
        Some(Holder {
            host: text(fields, "host")?,
            pid: num(fields, "pid").and_then(|p| u32::try_from(p).ok()),
            user: text(fields, "user"),
            command: text(fields, "cmd"),
            started_ms: num(fields, "started"),
            renewed_ms: num(fields, "renewed").or_else(|| num(fields, "started")),
            ttl_ms: num(fields, "ttl"),
            fence: num(fields, "fence"),
            finished: get(fields, "finished") == Some("1"),
            irreplaceable: get(fields, "replace") == Some("no"),
            stop_asked_by: text(fields, "stop"),
            no_renewal: get(fields, "renew") == Some("no"),
            replicas: num(fields, "replicas")
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0),
        })
    }

    /// The holder record in a script's reply (false when there is none).
    pub fn from_reply(value: Option<&redis::Value>) -> Option<Holder> {
        let record = value.and_then(|v| redis::from_redis_value_ref::<String>(v).ok())?;
        Holder::decode(&record)
    }

    /// "held by host (pid 12, user bob, fence 7) for 3m 2s"; the age only when the server's
    /// clock is known; ", asked to stop by web-2 (pid 4, user deploy)" after it while a
    /// replacer's request is pending.
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
        if let Some(by) = &h.stop_asked_by {
            who.push_str(&format!(", asked to stop by {}", shown(by)));
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
            (
                "stop_asked_by",
                Json::opt_str(self.stop_asked_by.as_deref()),
            ),
            ("replicas", Json::opt_num(self.replicas.map(i64::from))),
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

pub const SEPARATOR: char = '\u{1f}';

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
    /// Its command has ended; its hold is kept until its lease ends by `--hold-at-least`
    /// (the holders hash has a [`Sharer::finished_field`] for it).
    pub finished: bool,
}

impl Sharer {
    /// The holders hash's field that says a holder's command ended while its hold is kept
    /// (`--hold-at-least`): its token followed by `:finished` (the release script writes it).
    pub fn finished_field(token: &str) -> String {
        format!("{token}:finished")
    }

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
            finished: false,
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
            ("finished", Json::Bool(self.finished)),
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
        let holder = Holder::decode(
            "v=1\u{1f}started=18000\u{1f}fence=7\u{1f}host=web-1\u{1f}pid=42\u{1f}user=bob",
        )
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
        assert_eq!(Holder::decode("v=1\u{1f}pid=1"), None);
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
        // What release.lua writes of the run it is given.
        let [outcome, _ended, last, host, cmd, _audit, _by] = run.release_args();
        let written: Vec<(String, String)> = [
            ("last", format!("{outcome}\u{1f}{last}")),
            ("host", host),
            ("cmd", cmd),
        ]
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
        let run = LastRun::decode(&pairs(&[("last", "odd\u{1f}-")])).unwrap();
        assert_eq!(run.outcome, Outcome::Other("odd".into()));
        assert_eq!(run.exit, None);
    }

    /// Every field a script writes or reads by name is one this module knows.
    #[test]
    fn the_scripts_name_only_known_fields() {
        for (name, source) in crate::lock::scripts::ALL {
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
                    if quoted
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '%' || c == 'd')
                    {
                        continue; // a number, or the format that writes one
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

    /// The scripts that answer with a pause's brief list the fields in [`PAUSE_BRIEF`]'s order.
    #[test]
    fn pause_briefs_list_the_fields_in_order() {
        let pause = format!("'HMGET', key, '{}'", PAUSE_BRIEF.join("', '"));
        assert!(
            crate::lock::scripts::ACQUIRE.contains(&pause),
            "acquire.lua"
        );
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

    /// Shell text (`run -c`, a word that is a script): a quoted value is hidden whole, the
    /// quotes it holds (`'\''`, `"'"`, `\"`) included, and so is a URL's user information.
    #[test]
    fn quoted_secrets_are_hidden_whole() {
        for (command, recorded) in [
            (
                r#"true --password "abc'defSECRET123" "--db-password=x'ySECRET" PGPASSWORD="q'SECRETq" 'postgres://u:p'"'"'SECRET@h/db'"#,
                r#"true --password *** "--db-password=***" PGPASSWORD=*** 'postgres://***@h/db'"#,
            ),
            (
                r"true --password 'abc'\''defSECRET123' '--db-password=x'\''ySECRET' 'PGPASSWORD=q'\''SECRETq' 'postgres://u:p'\''SECRET@h/db'",
                r"true --password *** '--db-password=***' 'PGPASSWORD=***' 'postgres://***@h/db'",
            ),
            (
                r"true --password $'zz\xffzzSECRET' next",
                "true --password *** next",
            ),
            (
                r"sh -c 'psql --password '\''a SECRET'\'' -h db'",
                "sh -c 'psql --password *** -h db'",
            ),
            (
                r"sh -c 'psql --password abc'\''SECRET -h db'",
                "sh -c 'psql --password *** -h db'",
            ),
            (
                r#"sh -c "psql --password \"a SECRET\" -h db""#,
                r#"sh -c "psql --password *** -h db""#,
            ),
            (
                r#"sh -c "PGPASSWORD='a SECRET' psql""#,
                r#"sh -c "PGPASSWORD=*** psql""#,
            ),
            (r"x --token=a\ SECRET y", "x --token=*** y"),
            (
                r"sh -c 'curl https://u:p'\''SECRET@h/x' && echo ok",
                r"sh -c 'curl https://***@h/x' && echo ok",
            ),
        ] {
            assert_eq!(redact(command), recorded, "{command}");
        }
    }
}
