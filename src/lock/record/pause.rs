//! A pause record ([`Pause`]): who paused a lock (or every lock under a prefix), why, and until
//! when.

use std::time::Duration;

use super::who::truncate;
use super::{Fields, Holder, num, text, who};
use crate::report::json::Json;
use crate::report::text::shown;
use crate::supervise::lease::fmt;

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
pub(super) const PAUSE_FIELDS: [&str; 6] = ["host", "pid", "user", "reason", "since", "until"];

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
            Some(reason) => out.push_str(&format!(": \"{}\"", shown(reason))),
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
