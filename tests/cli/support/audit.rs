//! The audit log's promise, as a check any test (or a generated scenario) can make: every
//! `acquired` in a lock's log has exactly one end after it (`released`, `lost`, `forced`, or
//! the `expired` that `redlock log` infers for a lease that lapsed).
//!
//! The check reads what `redlock log --json` shows: a lapse is an end only there (no script
//! runs when a lease lapses), and a run's own `lost` after its take was forced or lapsed is
//! shown there as `noticed`, not an end. An end belongs to the latest take before it with its
//! fence; failing that (a quorum's node logs the run's fence, the highest of the nodes', at
//! the end), to the latest take before it made by the same host and pid that is not ended yet.
//! An end that belongs to no take (a lease lost on a node that never granted it) breaks
//! nothing. [`audit_entries`] reads the list raw, as the scripts wrote it.

use std::collections::HashMap;

use super::{RedisServer, Redlock, companion_key};

/// The events that end a take, as `redlock log` shows them.
pub const ENDS: [&str; 4] = ["released", "lost", "forced", "expired"];

/// One entry of the list: its time, its event and its fields.
#[derive(Clone, Debug)]
pub struct AuditEntry {
    pub ms: i64,
    pub event: String,
    pub fields: HashMap<String, String>,
    pub raw: String,
}

impl AuditEntry {
    pub fn parse(raw: &str) -> AuditEntry {
        let mut parts = raw.split('\x1f');
        let ms = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        let event = parts.next().unwrap_or("").to_string();
        let fields = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AuditEntry {
            ms,
            event,
            fields,
            raw: raw.to_string(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn is_end(&self) -> bool {
        ENDS.contains(&self.event.as_str())
    }
}

/// A lock's audit log (`lock`: its Redis key, prefix included), oldest first.
pub fn audit_entries(server: &RedisServer, lock: &str) -> Vec<AuditEntry> {
    let raw: Vec<String> = server.query(&["LRANGE", &companion_key(lock, "audit"), "0", "-1"]);
    raw.iter().map(|r| AuditEntry::parse(r)).collect()
}

/// For each take in `entries` (by index), the indices of the ends that belong to it.
pub fn ends_of_takes(entries: &[AuditEntry]) -> Vec<(usize, Vec<usize>)> {
    let mut takes: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.event == "acquired" {
            takes.push((i, Vec::new()));
            continue;
        }
        if !e.is_end() {
            continue;
        }
        let by_fence = e.get("fence").and_then(|fence| {
            takes
                .iter()
                .rposition(|(t, _)| entries[*t].get("fence") == Some(fence))
        });
        let by_who = || {
            let (host, pid) = (e.get("host")?, e.get("pid")?);
            takes.iter().rposition(|(t, ends)| {
                ends.is_empty()
                    && entries[*t].get("host") == Some(host)
                    && entries[*t].get("pid") == Some(pid)
            })
        };
        if let Some(at) = by_fence.or_else(by_who) {
            takes[at].1.push(i);
        }
    }
    takes
}

/// A lock's log as `redlock log --json` shows it (`lock`: its key, as given to redlock),
/// oldest first; each entry's `raw` is its JSON line.
pub fn shown_entries(server: &RedisServer, lock: &str) -> Vec<AuditEntry> {
    let out = Redlock::new(server)
        .args(["log", lock, "--json"])
        .exits_with(0);
    out.stdout
        .lines()
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| out.fail(&format!("{e}: {line}")));
            let object = value.as_object().expect("one object per line");
            let text = |v: &serde_json::Value| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            AuditEntry {
                ms: value["time_ms"].as_i64().expect("time_ms"),
                event: text(&value["event"]),
                fields: object.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
                raw: line.to_string(),
            }
        })
        .collect()
}

/// The takes of a lock's log that do not have exactly one end, as readable lines (empty when
/// the promise holds).
pub fn takes_not_ended_once(server: &RedisServer, lock: &str) -> Vec<String> {
    let entries = shown_entries(server, lock);
    ends_of_takes(&entries)
        .into_iter()
        .filter(|(_, ends)| ends.len() != 1)
        .map(|(take, ends)| {
            let ends: Vec<String> = ends.iter().map(|e| show(&entries[*e])).collect();
            format!("{} has {} ends: {ends:?}", show(&entries[take]), ends.len())
        })
        .collect()
}

/// Panics, with the whole log, unless every `acquired` in the lock's audit log has exactly one
/// end after it.
pub fn expect_every_take_ended(server: &RedisServer, lock: &str) {
    let wrong = takes_not_ended_once(server, lock);
    if !wrong.is_empty() {
        let log: Vec<String> = shown_entries(server, lock).iter().map(show).collect();
        panic!(
            "{lock}: every take must have exactly one end in the audit log:\n  {}\nthe log:\n  {}",
            wrong.join("\n  "),
            log.join("\n  ")
        );
    }
}

/// The number of takes in the lock's log.
pub fn takes(server: &RedisServer, lock: &str) -> usize {
    audit_entries(server, lock)
        .iter()
        .filter(|e| e.event == "acquired")
        .count()
}

fn show(e: &AuditEntry) -> String {
    e.raw.replace('\x1f', " ")
}
