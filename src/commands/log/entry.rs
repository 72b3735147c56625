//! One entry of a lock's audit log: how the list's entries (and an earlier version's stream's)
//! are read into [`Entry`], which take a release's entry ends, and how an entry is printed, as
//! a line of text or of JSON (`schemas/log.json`).

use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result};

use super::Log;
use crate::report::log::{self, json_str};
use crate::report::text::shown;

/// One entry of one lock's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// The lock's Redis key (prefix included); empty for the prefix-wide log (`pause --all`).
    pub(super) lock: String,
    /// The stream ID: the server's clock (ms) and a sequence number.
    pub(super) ms: i64,
    pub(super) seq: i64,
    pub(super) fields: Vec<(String, String)>,
    /// The entry as the list holds it (`None` for an end the reader inferred): how
    /// `--follow` knows where it left off.
    pub(super) raw: Option<String>,
}

impl Entry {
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// `MS-SEQ`; an inferred end's is `expired-FENCE` (see `ends.rs`).
    pub(super) fn id(&self) -> String {
        if self.inferred() {
            return format!("expired-{}", self.get("fence").unwrap_or("?"));
        }
        format!("{}-{}", self.ms, self.seq)
    }

    /// Whether the reader inferred it (an `expired` end), rather than a script writing it.
    pub(super) fn inferred(&self) -> bool {
        self.get("inferred") == Some("true")
    }

    /// `2026-01-02T03:00:01.234Z  report:daily  released  web-2 (pid 42, user report), fence 7,
    /// ok (exit 0) after 12s: ./report.sh`
    pub(super) fn text(&self, prefix: &str) -> String {
        let key = if self.lock.is_empty() {
            format!("{prefix}* (every key)")
        } else {
            self.lock.clone()
        };
        let who = crate::lock::record::who(
            self.get("host").unwrap_or("?"),
            self.get("pid").and_then(|p| p.parse().ok()),
            self.get("user"),
            None,
        );
        let mut line = format!(
            "{}  {key}  {}  {who}",
            time_text(self.ms),
            self.get("event").unwrap_or("?")
        );
        if let Some(fence) = self.get("fence") {
            line.push_str(&format!(", fence {fence}"));
        }
        match (self.get("slot"), self.get("shape")) {
            (Some(slot), _) => line.push_str(&format!(", slot {slot}")),
            (None, Some("shared")) => line.push_str(", shared"),
            _ => {}
        }
        if let Some(outcome) = self.get("outcome") {
            line.push_str(&format!(", {outcome}"));
            if let Some(exit) = self.get("exit") {
                line.push_str(&format!(" (exit {exit})"));
            }
            if let Some(ms) = self.get("duration_ms").and_then(|d| d.parse::<u64>().ok()) {
                line.push_str(&format!(
                    " after {}",
                    crate::supervise::lease::fmt(Duration::from_millis(ms))
                ));
            }
        }
        if let Some(ms) = self.get("waited_ms").and_then(|d| d.parse::<u64>().ok()) {
            line.push_str(&format!(
                ", after waiting {}",
                crate::supervise::lease::fmt(Duration::from_millis(ms))
            ));
        }
        if let Some(by) = self.get("by") {
            line.push_str(&format!(", by {by}"));
        }
        if self.inferred() {
            line.push_str(", inferred");
        }
        if let Some(reason) = self.get("reason") {
            line.push_str(&format!(", reason: {reason}"));
        }
        if let Some(until) = self.get("until").and_then(|u| u.parse::<i64>().ok()) {
            if until > 0 {
                line.push_str(&format!(", until {}", time_text(until)));
            } else {
                line.push_str(", until resumed");
            }
        }
        if let Some(cmd) = self.get("cmd") {
            line.push_str(&format!(": {cmd}"));
        }
        // Every value here but the time was recorded from a user or a foreign writer: none may
        // break the line or drive the terminal.
        shown(&line).into_owned()
    }

    /// One JSON object: key, id, time_ms, time, then the entry's fields in their order
    /// (numbers for the numeric ones: pid, fence, exit, duration_ms, until, slot, waited_ms).
    pub(super) fn json(&self) -> String {
        let mut out = String::from("{");
        let field = |out: &mut String, name: &str| {
            if out.len() > 1 {
                out.push(',');
            }
            json_str(out, name);
            out.push(':');
        };
        field(&mut out, "key");
        json_str(&mut out, &self.lock);
        field(&mut out, "id");
        json_str(&mut out, &self.id());
        field(&mut out, "time_ms");
        out.push_str(&self.ms.to_string());
        field(&mut out, "time");
        json_str(&mut out, &time_text(self.ms));
        for (name, value) in &self.fields {
            field(&mut out, name);
            match value.parse::<i64>() {
                Ok(n) if NUMERIC.contains(&name.as_str()) => out.push_str(&n.to_string()),
                _ if name == "inferred" => out.push_str("true"),
                _ => json_str(&mut out, value),
            }
        }
        out.push('}');
        out
    }
}

/// The fields written as JSON numbers (when they hold one).
const NUMERIC: [&str; 7] = [
    "pid",
    "fence",
    "exit",
    "duration_ms",
    "until",
    "slot",
    "waited_ms",
];

/// RFC 3339 in UTC with milliseconds.
pub(super) fn time_text(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Prints one entry, as text or JSON.
pub(super) fn print(entry: &Entry, prefix: &str, json: bool) -> Result<()> {
    let line = if json {
        entry.json()
    } else {
        entry.text(prefix)
    };
    log::stdout(&format!("{line}\n")).context("cannot print the log")
}

/// A list's entries. A release's entry gets the user and the command of the take it ends (see
/// [`take_of`]), when that take is in the list, and is never put before it.
pub(super) fn list_entries(raw: Vec<String>, log: &Log) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(raw.len());
    for line in raw {
        let mut parts = line.split(SEPARATOR);
        let ms: i64 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        let event = parts.next().unwrap_or("").to_string();
        let mut fields = vec![("event".to_string(), event)];
        fields.extend(parts.filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        }));
        let mut entry = Entry {
            lock: log.lock.clone(),
            ms,
            seq: 0,
            fields,
            raw: Some(line),
        };
        if matches!(entry.get("event"), Some("released" | "lost"))
            && let Some(take) = take_of(&out, &entry)
        {
            let filled: Vec<(String, String)> = ["user", "cmd"]
                .iter()
                .filter(|name| entry.get(name).is_none())
                .filter_map(|name| Some((name.to_string(), take.get(name)?.to_string())))
                .collect();
            entry.fields.extend(filled);
            // A quorum's run ends at its start (the earliest node's) plus its duration: on a
            // node that took a little later, that can be before the take it logged.
            entry.ms = entry.ms.max(take.ms);
        }
        entry.seq = out.iter().rev().take_while(|e| e.ms == entry.ms).count() as i64;
        out.push(entry);
    }
    out
}

/// The take a release's entry ends, among the entries `before` it: the latest `acquired` with
/// its fence, or else with its host and pid made when the run started (within
/// [`TAKE_SKEW_MS`]: a pid is reused in time). On a quorum each node logs the take with the
/// fence it handed out, and the release with the run's (the highest of them), stamped from the
/// earliest node's start.
pub(super) fn take_of<'a>(before: &'a [Entry], release: &Entry) -> Option<&'a Entry> {
    let takes = || {
        before
            .iter()
            .rev()
            .filter(|e| e.get("event") == Some("acquired"))
    };
    let fence = release.get("fence");
    takes()
        .find(|t| fence.is_some() && t.get("fence") == fence)
        .or_else(|| {
            let (host, pid) = (release.get("host")?, release.get("pid")?);
            let started = release.ms - release.get("duration_ms")?.parse::<i64>().ok()?;
            takes()
                .take_while(|t| t.ms >= started - TAKE_SKEW_MS)
                .find(|t| t.get("host") == Some(host) && t.get("pid") == Some(pid))
        })
}

/// How far apart a quorum's nodes may stamp one run's start (their clocks, and the take
/// reaching each at its own moment) for `log` to match a node's take with the run's release.
pub(super) const TAKE_SKEW_MS: i64 = 10_000;

/// What separates an entry's parts in the list (`scripts/audit.lua`).
const SEPARATOR: char = '\u{1f}';

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fields: &[(&str, &str)]) -> Entry {
        Entry {
            lock: "report".into(),
            ms: 1_767_322_801_234,
            seq: 0,
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            raw: None,
        }
    }

    #[test]
    fn a_release_reads_as_one_line() {
        let e = entry(&[
            ("event", "released"),
            ("host", "web-2"),
            ("pid", "42"),
            ("user", "report"),
            ("fence", "7"),
            ("outcome", "ok"),
            ("exit", "0"),
            ("duration_ms", "12000"),
            ("cmd", "./report.sh"),
        ]);
        assert_eq!(
            e.text(""),
            "2026-01-02T03:00:01.234Z  report  released  web-2 (pid 42, user report), fence 7, \
             ok (exit 0) after 12s: ./report.sh"
        );
    }

    #[test]
    fn a_pause_names_its_reason_and_end() {
        let e = entry(&[
            ("event", "paused"),
            ("host", "ops-1"),
            ("user", "alice"),
            ("reason", "db upgrade"),
            ("until", "0"),
        ]);
        assert_eq!(
            e.text(""),
            "2026-01-02T03:00:01.234Z  report  paused  ops-1 (user alice), reason: db upgrade, \
             until resumed"
        );
    }

    #[test]
    fn a_quorum_nodes_release_gets_its_take_by_host_and_pid_and_follows_it() {
        let log = Log {
            lock: "report".into(),
            list: String::new(),
            keys: None,
        };
        let raw = [
            "1000\u{1f}acquired\u{1f}host=web-1\u{1f}pid=7\u{1f}user=ann\u{1f}fence=5\u{1f}cmd=./a",
            "1005\u{1f}acquired\u{1f}host=web-2\u{1f}pid=9\u{1f}user=bob\u{1f}fence=6\u{1f}cmd=./b",
            "1003\u{1f}released\u{1f}outcome=ok\u{1f}duration_ms=1\u{1f}fence=8\u{1f}host=web-2\u{1f}pid=9",
        ]
        .map(String::from);
        let entries = list_entries(raw.to_vec(), &log);
        let release = &entries[2];
        assert_eq!(release.get("user"), Some("bob"));
        assert_eq!(release.get("cmd"), Some("./b"));
        assert_eq!(
            (release.ms, release.seq),
            (1005, 1),
            "after its take, in its millisecond"
        );
        // The same host and pid long before the run started: another process, its pid reused.
        let reused = [
            raw[0].clone(),
            "90000\u{1f}released\u{1f}outcome=ok\u{1f}duration_ms=5\u{1f}fence=9\u{1f}host=web-1\u{1f}pid=7"
                .to_string(),
        ];
        let later = list_entries(reused.to_vec(), &log);
        assert_eq!(later[1].get("cmd"), None);
        assert_eq!(later[1].ms, 90000);
    }
}
