//! `redlock log`: the locks' audit log, oldest first.
//!
//! Every acquire, busy refusal, skipped run (`--once-per`), release, lost lease, forced
//! release, pause and resume is appended by the script that already runs for it to a capped
//! list per lock, `{L}:redlock:audit`, in the lock's hash slot (see `scripts/audit.lua`): the
//! `run` path sends no extra command. An entry starts with the server's clock when it was
//! written (ms) and the event, then what applies as name=value pairs: who (host, pid, user),
//! fence, exit status, outcome, duration, reason, until, command. A release's entry names the
//! run by its host, pid and fence; its user and command are read from the take it ends, when
//! that is still in the log. An entry's id is its time and its place among the entries of the
//! same millisecond.
//!
//! An earlier version kept the log as a stream, `{L}:redlock:log`: it is read too, merged by
//! time, until it expires.
//!
//! Read-only (`LRANGE`, `LINDEX`, and `XRANGE` for the older logs), so a `+@read` user can read
//! the log. The logs of several keys are merged by time. `--follow` then asks every key's log
//! for what came after the last entry shown, every [`FOLLOW_EVERY`] (one `LINDEX` when nothing
//! did), until SIGINT or SIGTERM (exit 0: the operator asked it to stop); keys that get a log
//! later are not picked up by a `--follow --all` already running. With a quorum every node
//! keeps its own log; `log` reads the first node that answers.

use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use redis::Value;

use crate::Context;
use crate::cli::LogArgs;
use crate::lock::keys;
use crate::redis::server::Conn;
use crate::report::exit::Exit;
use crate::report::log::{self, json_str};
use crate::supervise::signals::{self, Event, Signals};

/// How often `--follow` asks for new entries.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// One entry of one lock's log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The lock's Redis key (prefix included); empty for the prefix-wide log (`pause --all`).
    lock: String,
    /// The stream ID: the server's clock (ms) and a sequence number.
    ms: i64,
    seq: i64,
    fields: Vec<(String, String)>,
    /// The entry as the list holds it (`None` for an earlier version's stream entry): how
    /// `--follow` knows where it left off.
    raw: Option<String>,
}

impl Entry {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn id(&self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }

    /// `2026-01-02T03:00:01.234Z  report:daily  released  web-2 (pid 42, user report), fence 7,
    /// ok (exit 0) after 12s: ./report.sh`
    fn text(&self, prefix: &str) -> String {
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
        if let Some(by) = self.get("by") {
            line.push_str(&format!(", by {by}"));
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
        line
    }

    /// One JSON object: key, id, time_ms, time, then the entry's fields in their order
    /// (numbers for the numeric ones: pid, fence, exit, duration_ms, until, started, ended, slot).
    fn json(&self) -> String {
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
                _ => json_str(&mut out, value),
            }
        }
        out.push('}');
        out
    }
}

/// The fields written as JSON numbers (when they hold one).
const NUMERIC: [&str; 8] = [
    "pid",
    "fence",
    "exit",
    "duration_ms",
    "until",
    "started",
    "ended",
    "slot",
];

/// RFC 3339 in UTC with milliseconds.
fn time_text(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// One lock's log: its key, the list it is kept in now, and the stream an earlier version kept.
#[derive(Clone)]
struct Log {
    lock: String,
    list: String,
    stream: String,
}

pub fn log(ctx: &Context, args: LogArgs) -> Result<Exit> {
    let named = ctx.keys(&args.keys)?;
    // Signals are blocked before anything runs, so a follow ends at the next poll, not at once
    // mid-print.
    let signals = args.follow.then(Signals::block);
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let of = |k: &keys::Keys| Log {
        lock: k.lock.clone(),
        list: k.log.clone(),
        stream: k.old_log.clone(),
    };
    let mut logs: Vec<Log> = named.iter().map(of).collect();
    let since = args.since;
    let found = nodes.each(|con| {
        if args.all {
            let mut locks = keys::scan_companions(con, &ctx.prefix, crate::lock::scripts::AUDIT)?;
            for k in keys::scan_companions(con, &ctx.prefix, crate::lock::scripts::LOG)? {
                if !locks.iter().any(|l| l.lock == k.lock) {
                    locks.push(k);
                }
            }
            let mut all: Vec<Log> = locks.iter().map(of).collect();
            all.push(Log {
                lock: String::new(),
                list: keys::prefix_log_key(&ctx.prefix),
                stream: keys::prefix_old_log_key(&ctx.prefix),
            });
            let entries = read_all(con, &all, since)?;
            Ok((all, entries))
        } else {
            Ok((Vec::new(), read_all(con, &logs, since)?))
        }
    });
    let (found_logs, entries) = first_answer(found)?;
    if args.all {
        logs = found_logs;
    }
    for entry in &entries {
        print(entry, &ctx.prefix, args.json)?;
    }
    let Some(signals) = signals else {
        return Ok(Exit::Success);
    };
    // From here on: what came after the last entry of each list.
    let mut last: Vec<Option<String>> = logs
        .iter()
        .map(|log| {
            entries
                .iter()
                .rev()
                .find(|e| e.lock == log.lock && e.raw.is_some())
                .and_then(|e| e.raw.clone())
        })
        .collect();
    loop {
        match signals.wait(Some(FOLLOW_EVERY)) {
            Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => continue,
            Event::Signal(_) => return Ok(Exit::Success),
            _ => {}
        }
        let fresh = nodes.each(|con| {
            let mut out = Vec::new();
            for (log, seen) in logs.iter().zip(&last) {
                out.extend(read_after(con, log, seen.as_deref())?);
            }
            Ok(out)
        });
        let mut fresh = first_answer(fresh)?;
        fresh.sort_by_key(|e| (e.ms, e.seq));
        for entry in fresh {
            print(&entry, &ctx.prefix, args.json)?;
            if let Some(i) = logs.iter().position(|log| log.lock == entry.lock) {
                last[i].clone_from(&entry.raw);
            }
        }
    }
}

/// The first node's answer that is not an error (a quorum's nodes keep their own logs).
fn first_answer<T>(results: Vec<Result<T>>) -> Result<T> {
    let mut first_error = None;
    for r in results {
        match r {
            Ok(v) => return Ok(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.expect("at least one node"))
}

fn print(entry: &Entry, prefix: &str, json: bool) -> Result<()> {
    let line = if json {
        entry.json()
    } else {
        entry.text(prefix)
    };
    log::stdout(&format!("{line}\n")).context("cannot print the log")
}

/// Every entry of `logs` since `since` ago (by this host's clock, so that a read-only user,
/// without `TIME`, can ask), merged oldest first.
fn read_all(con: &mut Conn, logs: &[Log], since: Option<Duration>) -> Result<Vec<Entry>> {
    let from_ms = since.map(|d| (super::status::now_ms() - d.as_millis() as i64).max(0));
    let mut all = Vec::new();
    for log in logs {
        all.extend(read_stream(con, log, from_ms)?);
        all.extend(
            read_list(con, log, 0)?
                .into_iter()
                .filter(|e| from_ms.is_none_or(|from| e.ms >= from)),
        );
    }
    all.sort_by_key(|e| (e.ms, e.seq));
    Ok(all)
}

/// The entries of `log`'s list after the one written `seen` (all of them when `seen` is not
/// in the list any more, or is `None`). One `LINDEX` when nothing was added.
fn read_after(con: &mut Conn, log: &Log, seen: Option<&str>) -> Result<Vec<Entry>> {
    let context = || format!("cannot read the log of {}", log.lock);
    if let Some(seen) = seen {
        let newest: Option<String> = redis::cmd("LINDEX")
            .arg(&log.list)
            .arg(-1)
            .query(con)
            .with_context(context)?;
        if newest.as_deref() == Some(seen) {
            return Ok(Vec::new());
        }
    }
    let entries = read_list(con, log, 0)?;
    let start = seen
        .and_then(|seen| entries.iter().rposition(|e| e.raw.as_deref() == Some(seen)))
        .map_or(0, |at| at + 1);
    Ok(entries.into_iter().skip(start).collect())
}

/// `LRANGE list FROM -1`, as entries; a missing list is an empty log. A release's entry gets
/// the user and the command of the take it ends (by fence), when that take is in the list.
fn read_list(con: &mut Conn, log: &Log, from: isize) -> Result<Vec<Entry>> {
    let raw: Vec<String> = redis::cmd("LRANGE")
        .arg(&log.list)
        .arg(from)
        .arg(-1)
        .query(con)
        .with_context(|| format!("cannot read the log of {}", log.lock))?;
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
        let seq = out.iter().rev().take_while(|e| e.ms == ms).count() as i64;
        let mut entry = Entry {
            lock: log.lock.clone(),
            ms,
            seq,
            fields,
            raw: Some(line),
        };
        if matches!(entry.get("event"), Some("released" | "lost"))
            && let Some(fence) = entry.get("fence").map(str::to_string)
            && let Some(take) = out
                .iter()
                .rev()
                .find(|e| e.get("event") == Some("acquired") && e.get("fence") == Some(&fence))
        {
            let filled: Vec<(String, String)> = ["user", "cmd"]
                .iter()
                .filter(|name| entry.get(name).is_none())
                .filter_map(|name| Some((name.to_string(), take.get(name)?.to_string())))
                .collect();
            entry.fields.extend(filled);
        }
        out.push(entry);
    }
    Ok(out)
}

/// `XRANGE stream FROM +` of an earlier version's log; a missing stream is an empty log.
fn read_stream(con: &mut Conn, log: &Log, from_ms: Option<i64>) -> Result<Vec<Entry>> {
    let start = from_ms.map_or("-".to_string(), |ms| ms.to_string());
    let reply: Value = redis::cmd("XRANGE")
        .arg(&log.stream)
        .arg(start)
        .arg("+")
        .query(con)
        .with_context(|| format!("cannot read the log of {}", log.lock))?;
    let Value::Array(items) = reply else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Ok((id, pairs)) = redis::from_redis_value::<(String, Vec<String>)>(item) else {
            continue;
        };
        let (ms, seq) = id.split_once('-').unwrap_or((&id, "0"));
        let fields = pairs
            .chunks(2)
            .filter_map(|p| Some((p.first()?.clone(), p.get(1)?.clone())))
            .collect();
        out.push(Entry {
            lock: log.lock.clone(),
            ms: ms.parse().unwrap_or(0),
            seq: seq.parse().unwrap_or(0),
            fields,
            raw: None,
        });
    }
    Ok(out)
}

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
}
