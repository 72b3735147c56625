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
//! Every take is shown with exactly one end (`ends.rs`): a lease that lapsed, which no script
//! logs, gets an inferred `expired` end, found from a later take that could not have been made
//! while it held, or from the lock's holders, read (`inspect.rs`'s reading) in the same round
//! trip as its log, after its newest entry; a run's `lost` after its take ended is `noticed`.
//!
//! Read-only (`LRANGE`, `LINDEX` and `inspect.rs`'s reads), so a `+@read` user can read the log. The logs of several keys are merged by time. `--follow` then asks each key's log
//! for what came after the newest entry it had, every [`FOLLOW_EVERY`] (one `LINDEX` when
//! nothing did, a pipeline of them per 256 logs; when something did, the list's last 64
//! entries, and the whole list only when those do not reach back to what it had), until
//! SIGINT or SIGTERM (exit 0: the operator asked it to stop); keys that get a log later are
//! not picked up by a `--follow --all` already running. Past [`FOLLOW_SWEEP`] logs, a poll
//! asks the logs with entries in the last minute and the next 1024 of the others in turn
//! ([`Sweep`]): following every lock of a large deployment costs the shared server a bounded
//! number of commands per poll, and a quiet lock's first new entry shows within one sweep.
//! With a quorum every node keeps its own log; `log` reads the first node that answers.
//!
//! `--all` over many locks, in bounded memory: the logs are found by SCAN (each lock once,
//! `keys::Seen`) and read [`LOGS_AT_ONCE`] locks per round
//! trip. A merge by time cannot print its first entry before it has read every log, so the
//! entries, as the lines to print, go to an external merge sort (`spill.rs`): up to
//! [`SORT_IN_MEMORY`] bytes are sorted in memory; past that each such run goes to an anonymous
//! temporary file in `$TMPDIR`, and the runs are merged 64 at a time. So redlock's memory is
//! bounded whatever the number of locks: 8 MiB of lines, 64 read buffers of 64 KiB while
//! merging, one round trip's replies (32 lists of at most 1023 entries), and 8 bytes per lock to read each once. The disk holds
//! at most the output, once or, past 64 runs (512 MiB), once per level of merging. Entries of
//! the same millisecond come by key; one lock's keep their order. Nothing is printed until
//! every log is read, so a failure prints nothing, as before. `--follow` then keeps, per log
//! it follows, its keys and its newest entry (a few hundred bytes a lock): following 100,000
//! locks takes that memory and, every 250 ms, 1024 `LINDEX` (4 round trips) and one for each
//! lock with entries in the last minute; a quiet lock is asked every 25 s.

use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use redis::Value;

use super::spill::{TimeSort, Timed};
use crate::Context;
use crate::cli::LogArgs;
use crate::lock::inspect::{self, Inspection};
use crate::lock::keys;
use crate::redis::server::Conn;
use crate::report::exit::Exit;
use crate::report::log::{self, json_str};
use crate::supervise::signals::{self, Event, Signals};

mod ends;
mod timeline;

use ends::Ends;

/// How often `--follow` asks for new entries.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// How many polls of `--follow` go by between two reads of the holders of the locks whose log
/// has a take without an end (see `ends.rs`): a lapse shows within a second, and a lock held
/// for hours costs the server one reading of its state a second, not four.
const LAPSE_POLLS: u32 = 4;

/// How far behind this host's clock a shared lease's deadline must be for `log` to count it
/// as lapsed: the deadline is on the server's clock, and a host whose clock runs ahead of it
/// must not end a live lease.
const LAPSE_SKEW_MS: i64 = 2_000;

/// One entry of one lock's log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The lock's Redis key (prefix included); empty for the prefix-wide log (`pause --all`).
    lock: String,
    /// The stream ID: the server's clock (ms) and a sequence number.
    ms: i64,
    seq: i64,
    fields: Vec<(String, String)>,
    /// The entry as the list holds it (`None` for an end the reader inferred): how
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

    /// `MS-SEQ`; an inferred end's is `expired-FENCE` (see `ends.rs`).
    fn id(&self) -> String {
        if self.inferred() {
            return format!("expired-{}", self.get("fence").unwrap_or("?"));
        }
        format!("{}-{}", self.ms, self.seq)
    }

    /// Whether the reader inferred it (an `expired` end), rather than a script writing it.
    fn inferred(&self) -> bool {
        self.get("inferred") == Some("true")
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
                _ if name == "inferred" => out.push_str("true"),
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

/// One lock's log: its key and the list it is kept in.
#[derive(Clone)]
struct Log {
    lock: String,
    list: String,
    /// The lock's keys, whose holders are read with the log (none for the prefix-wide log,
    /// which has no takes).
    keys: Option<Box<keys::Keys>>,
}

impl Log {
    fn of(k: &keys::Keys) -> Log {
        Log {
            lock: k.lock.clone(),
            list: k.log.clone(),
            keys: Some(Box::new(k.clone())),
        }
    }
}

pub fn log(ctx: &Context, args: LogArgs) -> Result<Exit> {
    if args.timeline {
        return timeline::timeline(ctx, &args);
    }
    let named = ctx.keys(&args.keys)?;
    // Signals are blocked before anything runs, so a follow ends at the next poll, not at once
    // mid-print.
    let signals = args.follow.then(Signals::block);
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let named: Vec<Log> = named.iter().map(Log::of).collect();
    let from_ms = args
        .since
        .map(|d| (super::status::now_ms() - d.as_millis() as i64).max(0));
    let reading = Reading {
        prefix: &ctx.prefix,
        all: args.all,
        named: &named,
        from_ms,
        json: args.json,
        follow: args.follow,
    };
    // The first node that answers: a quorum's nodes keep their own logs.
    let mut first_error = None;
    let mut read = None;
    for i in 0..nodes.len() {
        match nodes.on(i, |con| reading.read(con)) {
            Ok(r) => {
                read = Some(r);
                break;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let Some((sorted, followed)) = read else {
        return Err(first_error.expect("at least one node"));
    };
    let mut out = String::new();
    sorted.drain(&mut |line| {
        out.push_str(line);
        out.push('\n');
        if out.len() >= 64 * 1024 {
            log::stdout(&out).context("cannot print the log")?;
            out.clear();
        }
        Ok(())
    })?;
    log::stdout(&out).context("cannot print the log")?;
    let Some(signals) = signals else {
        return Ok(Exit::Success);
    };
    // From here on: what came after the newest entry of each list.
    let mut logs = Vec::with_capacity(followed.len());
    let mut last = Vec::with_capacity(followed.len());
    let mut ends = Vec::with_capacity(followed.len());
    for (log, newest, its_ends) in followed {
        logs.push(log);
        last.push(newest);
        ends.push(its_ends);
    }
    let mut sweep = Sweep::new(logs.len());
    let mut polls: u32 = 0;
    loop {
        match signals.wait(Some(FOLLOW_EVERY)) {
            Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => continue,
            Event::Signal(_) => return Ok(Exit::Success),
            _ => {}
        }
        let due = sweep.due(Instant::now());
        // The holders of the due logs with a take without an end, every few polls.
        polls = polls.wrapping_add(1);
        let check: Vec<bool> = if polls.is_multiple_of(LAPSE_POLLS) {
            ends.iter().map(Ends::any_open).collect()
        } else {
            vec![false; logs.len()]
        };
        // Node by node, as the first read: a quorum's other nodes are asked only when the
        // first fails. A node's connection that failed is made anew on its next use, so when
        // none answers (a connection idle since the last failover may have been closed), each
        // is asked once more before the follow ends with the first node's error.
        let mut fresh = None;
        let mut first_error = None;
        'ask: for _ in 0..2 {
            for i in 0..nodes.len() {
                match nodes.on(i, |con| read_after(con, &logs, &last, &due, &check)) {
                    Ok(read) => {
                        fresh = Some(read);
                        break 'ask;
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        let Some((fresh, holders)) = fresh else {
            return Err(first_error.expect("at least one node"));
        };
        // Where each log now ends, in the list's order: a release's entry is stamped with
        // when its run ended, which may sort before an entry written just ahead of it.
        let now = Instant::now();
        for (i, entry) in &fresh {
            last[*i].clone_from(&entry.raw);
            sweep.heard(*i, now);
        }
        // Each log's new entries go through its takes' ends: the takes known before this
        // poll were written before its holders were read, and its new entries, read after
        // them, hold every end written before.
        let mut news: std::collections::BTreeMap<usize, (Vec<Entry>, Option<Inspection>)> =
            std::collections::BTreeMap::new();
        for (i, entry) in fresh {
            news.entry(i).or_default().0.push(entry);
        }
        for (i, read) in holders {
            news.entry(i).or_default().1 = Some(read);
        }
        let now_ms = super::status::now_ms();
        let mut shown = Vec::new();
        for (i, (entries, holders)) in news {
            if holders.is_some() {
                ends[i].before_read();
            }
            shown.extend(ends[i].through(entries, 0));
            if let Some(holders) = holders {
                shown.extend(ends[i].lapsed(&holders, now_ms));
            }
        }
        shown.sort_by_key(|e| (e.ms, e.seq));
        for entry in shown {
            print(&entry, &ctx.prefix, args.json)?;
        }
    }
}

/// How many logs `--follow` asks per [`FOLLOW_EVERY`] besides those with recent entries: the
/// server's bill of following many locks. Up to this many logs, each is asked every time.
const FOLLOW_SWEEP: usize = 1024;

/// A followed log with an entry this recent is asked every [`FOLLOW_EVERY`].
const FOLLOW_HOT: Duration = Duration::from_secs(60);

/// Which logs `--follow` asks at each poll: every log when there are at most
/// [`FOLLOW_SWEEP`]; past that, the logs that had an entry within [`FOLLOW_HOT`], and the next
/// [`FOLLOW_SWEEP`] of the others in turn, so a quiet log is asked once per sweep of them all
/// (25 s for 100,000 logs) and the server answers at most [`FOLLOW_SWEEP`] `LINDEX` per poll
/// for the quiet ones, however many locks there are.
struct Sweep {
    len: usize,
    /// Where the next poll's turn starts.
    next: usize,
    /// The logs that had an entry lately, and when.
    hot: Vec<(usize, Instant)>,
}

impl Sweep {
    fn new(len: usize) -> Sweep {
        Sweep {
            len,
            next: 0,
            hot: Vec::new(),
        }
    }

    /// The logs to ask now, each once, in order.
    fn due(&mut self, now: Instant) -> Vec<usize> {
        if self.len <= FOLLOW_SWEEP {
            return (0..self.len).collect();
        }
        self.hot
            .retain(|(_, at)| now.saturating_duration_since(*at) < FOLLOW_HOT);
        let mut due: Vec<usize> = (0..FOLLOW_SWEEP)
            .map(|k| (self.next + k) % self.len)
            .collect();
        self.next = (self.next + FOLLOW_SWEEP) % self.len;
        due.extend(self.hot.iter().map(|(i, _)| *i));
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Log `i` had a new entry at `now`.
    fn heard(&mut self, i: usize, now: Instant) {
        if self.len <= FOLLOW_SWEEP {
            return;
        }
        match self.hot.iter_mut().find(|(h, _)| *h == i) {
            Some((_, at)) => *at = now,
            None => self.hot.push((i, now)),
        }
    }
}

/// How many locks' logs are read in one round trip (a cluster reads one lock's at a time).
const LOGS_AT_ONCE: usize = 32;

/// How many entries' worth of lines `log` sorts in memory before it puts them in a temporary
/// file and merges (see the module doc).
const SORT_IN_MEMORY: usize = 8 * 1024 * 1024;

/// A log `--follow` follows, its list's newest entry when it was last read, and its takes'
/// ends so far.
type Followed = (Log, Option<String>, Ends);

/// What `log` reads before it prints.
struct Reading<'a> {
    prefix: &'a str,
    all: bool,
    named: &'a [Log],
    from_ms: Option<i64>,
    json: bool,
    /// Whether to keep each log's newest entry, for `--follow`.
    follow: bool,
}

impl Reading<'_> {
    /// Every entry of the logs (since `from_ms`), as the lines to print, put in order; and,
    /// for `--follow`, each log with its list's newest entry.
    fn read(&self, con: &mut Conn) -> Result<(TimeSort, Vec<Followed>)> {
        let mut sorted = TimeSort::new(SORT_IN_MEMORY);
        let mut followed = Vec::new();
        let mut take = |con: &mut Conn, logs: &[Log]| -> Result<()> {
            for (log, read) in logs.iter().zip(read_logs(con, logs)?) {
                let since = |e: &Entry| self.from_ms.is_none_or(|from| e.ms >= from);
                for entry in read.list.into_iter().filter(since) {
                    let line = if self.json {
                        entry.json()
                    } else {
                        entry.text(self.prefix)
                    };
                    sorted.push(Timed {
                        ms: entry.ms,
                        seq: entry.seq,
                        key: entry.lock,
                        line,
                    });
                }
                sorted.boundary()?;
                if self.follow {
                    followed.push((log.clone(), read.newest, read.ends));
                }
            }
            Ok(())
        };
        if !self.all {
            for logs in self.named.chunks(LOGS_AT_ONCE) {
                take(con, logs)?;
            }
            return Ok((sorted, followed));
        }
        let mut seen = keys::Seen::new();
        let mut scan = keys::Scan::new(self.prefix, crate::lock::scripts::AUDIT);
        while !scan.done() {
            let page: Vec<Log> = scan
                .page(con)?
                .iter()
                .filter(|k| seen.first(&k.lock))
                .map(Log::of)
                .collect();
            for logs in page.chunks(LOGS_AT_ONCE) {
                take(con, logs)?;
            }
        }
        take(
            con,
            &[Log {
                lock: String::new(),
                list: keys::prefix_log_key(self.prefix),
                keys: None,
            }],
        )?;
        Ok((sorted, followed))
    }
}

/// The first node's answer that is not an error (a quorum's nodes keep their own logs).
fn print(entry: &Entry, prefix: &str, json: bool) -> Result<()> {
    let line = if json {
        entry.json()
    } else {
        entry.text(prefix)
    };
    log::stdout(&format!("{line}\n")).context("cannot print the log")
}

/// One log as [`read_logs`] read it.
struct LogRead {
    /// The list's entries, with the ends the reader infers put in (see `ends.rs`).
    list: Vec<Entry>,
    /// The list's newest entry, for `--follow`.
    newest: Option<String>,
    /// Its takes' ends so far, for `--follow`.
    ends: Ends,
}

/// Every entry of each of `logs`, in one round trip (on a cluster, one per command): the
/// list's newest entry, the lock's holders (`inspect.rs`'s reading), then the list (whole), in
/// that order: a take at or before the
/// newest entry read first was written before the holders were read, so a fence missing from
/// them lapsed unless the list, read after, ends it (see `ends.rs`). A lock whose holders
/// cannot be read ends the reading with that error.
fn read_logs(con: &mut Conn, logs: &[Log]) -> Result<Vec<LogRead>> {
    let now = super::status::now_ms();
    let mut out = Vec::with_capacity(logs.len());
    if let Conn::Cluster(_) = con {
        // A cluster routes a pipeline by its first key; the logs lie in different slots: one
        // command at a time.
        for log in logs {
            let context = || format!("cannot read the log of {}", log.lock);
            let mut marker: Vec<String> = redis::cmd("LRANGE")
                .arg(&log.list)
                .arg(-1)
                .arg(-1)
                .query(con)
                .with_context(context)?;
            let holders = match &log.keys {
                Some(k) => inspect::inspect(con, std::slice::from_ref(k), now - LAPSE_SKEW_MS)
                    .ok()
                    .and_then(|mut r| r.pop())
                    .map(of_this_layout)
                    .transpose()?
                    .flatten(),
                None => None,
            };
            let list: Vec<String> = redis::cmd("LRANGE")
                .arg(&log.list)
                .arg(0)
                .arg(-1)
                .query(con)
                .with_context(context)?;
            out.push(settle(log, marker.pop(), holders, list, now));
        }
        return Ok(out);
    }
    let mut pipe = redis::pipe();
    for log in logs {
        // LRANGE rather than LINDEX: `--follow`'s polls are the LINDEX a server sees from
        // `log`, one per followed log, which its operators may count.
        pipe.cmd("LRANGE").arg(&log.list).arg(-1).arg(-1);
        if let Some(k) = &log.keys {
            inspect::queue_reads(&mut pipe, k, false);
        }
        pipe.cmd("LRANGE").arg(&log.list).arg(0).arg(-1);
    }
    pipe.ignore_errors();
    let replies: Vec<Value> = pipe.query(con).context("cannot read the logs")?;
    let asked: usize = logs
        .iter()
        .map(|l| 2 + if l.keys.is_some() { inspect::READS } else { 0 })
        .sum();
    if replies.len() != asked {
        anyhow::bail!("unexpected reply from the server");
    }
    let mut at = 0;
    for log in logs {
        let context = || format!("cannot read the log of {}", log.lock);
        let reply = |i: usize| match &replies[i] {
            Value::ServerError(e) => Err(redis::RedisError::from(e.clone())).with_context(context),
            reply => Ok(reply),
        };
        let mut marker: Vec<String> = redis::from_redis_value_ref(reply(at)?)
            .map_err(redis::RedisError::from)
            .with_context(context)?;
        at += 1;
        let holders = match &log.keys {
            Some(k) => {
                let holders = inspect::decode(
                    &replies[at..at + inspect::READS],
                    k,
                    false,
                    now - LAPSE_SKEW_MS,
                );
                at += inspect::READS;
                of_this_layout(holders)?
            }
            None => None,
        };
        let list: Vec<String> = redis::from_redis_value_ref(reply(at)?)
            .map_err(redis::RedisError::from)
            .with_context(context)?;
        at += 1;
        out.push(settle(log, marker.pop(), holders, list, now));
    }
    Ok(out)
}

/// A lock's holders as the log reads them: a lock that could not be read (an ACL denial, a
/// record of another type or layout) ends the reading with its status, as it ends every
/// reader's: the log is not shown without the ends that reading would infer.
fn of_this_layout(reading: inspect::Reading) -> Result<Option<Inspection>> {
    reading.map(Some).map_err(|u| u.error())
}

/// One log's replies as [`LogRead`]: `marker` is the list's newest entry read before
/// `holders`, so the entries up to it were written before those were read.
fn settle(
    log: &Log,
    marker: Option<String>,
    holders: Option<Inspection>,
    raw: Vec<String>,
    now: i64,
) -> LogRead {
    let newest = raw.last().cloned();
    let entries = list_entries(raw, log);
    let before_read = marker
        .and_then(|m| entries.iter().rposition(|e| e.raw.as_ref() == Some(&m)))
        .map_or(0, |at| at + 1);
    let mut ends = Ends::default();
    let mut list = ends.through(entries, before_read);
    if let Some(holders) = holders {
        list.extend(ends.lapsed(&holders, now));
    }
    LogRead { list, newest, ends }
}

/// What a poll of `--follow` read: each log's new entries (with the index of their log), and
/// the holders of the locks it checked, read before those entries.
type Polled = (Vec<(usize, Entry)>, Vec<(usize, Inspection)>);

/// The entries of the `due` logs' lists after the one `last` names for each (all of them when
/// that is not in the list any more, or is `None`), with the index of their log; and, for the
/// due logs `check` names, the lock's holders, read just before. One `LINDEX` per log when
/// nothing was added (and `inspect.rs`'s reading of a checked lock), `LOGS_AT_ONCE * 8` logs
/// per round trip (one per round trip on a cluster). A lock whose holders cannot be read is
/// left unchecked.
fn read_after(
    con: &mut Conn,
    logs: &[Log],
    last: &[Option<String>],
    due: &[usize],
    check: &[bool],
) -> Result<Polled> {
    let cluster = matches!(con, Conn::Cluster(_));
    let at_once = if cluster { 1 } else { LOGS_AT_ONCE * 8 };
    let now = super::status::now_ms();
    let mut out = Vec::new();
    let mut held = Vec::new();
    for chunk in due.chunks(at_once) {
        let mut pipe = redis::pipe();
        let keys_of = |i: usize| logs[i].keys.as_deref().filter(|_| check[i]);
        for &i in chunk {
            if let Some(k) = keys_of(i) {
                inspect::queue_reads(&mut pipe, k, cluster);
            }
            pipe.cmd("LINDEX").arg(&logs[i].list).arg(-1);
        }
        pipe.ignore_errors();
        let replies: Vec<Value> = pipe.query(con).context("cannot read the logs")?;
        let mut newest = Vec::with_capacity(chunk.len());
        let mut at = 0;
        for &i in chunk {
            if let Some(k) = keys_of(i) {
                let Some(replies) = replies.get(at..at + inspect::READS) else {
                    anyhow::bail!("unexpected reply from the server");
                };
                if let Ok(holders) = inspect::decode(replies, k, cluster, now - LAPSE_SKEW_MS) {
                    held.push((i, holders));
                }
                at += inspect::READS;
            }
            let Some(reply) = replies.get(at) else {
                anyhow::bail!("unexpected reply from the server");
            };
            newest.push(reply.clone());
            at += 1;
        }
        for (&i, newest) in chunk.iter().zip(&newest) {
            let (log, seen) = (&logs[i], &last[i]);
            let newest: Option<String> = match newest {
                Value::ServerError(e) => Err(redis::RedisError::from(e.clone())),
                other => redis::from_redis_value_ref(other).map_err(redis::RedisError::from),
            }
            .with_context(|| format!("cannot read the log of {}", log.lock))?;
            if newest.is_none() || newest == *seen {
                continue;
            }
            out.extend(
                read_new(con, log, seen.as_deref())?
                    .into_iter()
                    .map(|e| (i, e)),
            );
        }
    }
    Ok((out, held))
}

/// How many of a list's newest entries `--follow` reads when it has news: the entries after
/// the one it saw last are almost always among them, and a log holds up to 1023.
const FOLLOW_TAIL: usize = 64;

/// The entries of `log` after `seen` (all of them when it is `None` or gone from the list).
/// The list's last [`FOLLOW_TAIL`] entries are read first, the whole list only when they do
/// not hold all that is needed: `seen`, each new release's take (whose user and command it is
/// shown with), and the entries of a new entry's millisecond (which number its id).
fn read_new(con: &mut Conn, log: &Log, seen: Option<&str>) -> Result<Vec<Entry>> {
    if let Some(seen) = seen {
        let raw: Vec<String> = redis::cmd("LRANGE")
            .arg(&log.list)
            .arg(-(FOLLOW_TAIL as i64))
            .arg(-1)
            .query(con)
            .with_context(|| format!("cannot read the log of {}", log.lock))?;
        let whole = raw.len() < FOLLOW_TAIL;
        if let Some(at) = raw.iter().rposition(|r| r == seen) {
            let entries = list_entries(raw, log);
            let new = &entries[at + 1..];
            let first_ms = entries.first().map(|e| e.ms);
            let enough = whole
                || (new.iter().all(|e| Some(e.ms) != first_ms)
                    && new.iter().all(|e| {
                        !matches!(e.get("event"), Some("released" | "lost"))
                            || e.get("fence").is_none()
                            || take_of(&entries, e).is_some()
                    }));
            if enough {
                return Ok(entries.into_iter().skip(at + 1).collect());
            }
        } else if whole {
            gap(log);
            return Ok(list_entries(raw, log));
        }
    }
    let entries = read_list(con, log)?;
    let found = seen.map(|seen| entries.iter().rposition(|e| e.raw.as_deref() == Some(seen)));
    if found == Some(None) {
        gap(log);
    }
    let start = found.flatten().map_or(0, |at| at + 1);
    Ok(entries.into_iter().skip(start).collect())
}

/// Says that the entry `--follow` last showed of `log` is gone from it: more entries came
/// since the last look than the list keeps (1000), or the list was deleted. Entries between
/// it and what follows may be missing, which is said rather than left unannounced.
fn gap(log: &Log) {
    let whose = if log.lock.is_empty() {
        "the prefix-wide log".to_string()
    } else {
        format!("the log of {}", log.lock)
    };
    log::warn(
        "log_gap",
        &format!(
            "the entry last shown is gone from {whose} (trimmed after more entries than it \
             keeps, or deleted): entries between it and what follows may be missing"
        ),
        &[],
    );
}

/// `LRANGE list 0 -1`, as entries; a missing list is an empty log.
fn read_list(con: &mut Conn, log: &Log) -> Result<Vec<Entry>> {
    let raw: Vec<String> = redis::cmd("LRANGE")
        .arg(&log.list)
        .arg(0)
        .arg(-1)
        .query(con)
        .with_context(|| format!("cannot read the log of {}", log.lock))?;
    Ok(list_entries(raw, log))
}

/// A list's entries. A release's entry gets the user and the command of the take it ends (see
/// [`take_of`]), when that take is in the list, and is never put before it.
fn list_entries(raw: Vec<String>, log: &Log) -> Vec<Entry> {
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
fn take_of<'a>(before: &'a [Entry], release: &Entry) -> Option<&'a Entry> {
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
const TAKE_SKEW_MS: i64 = 10_000;

/// What separates an entry's parts in the list (`scripts/audit.lua`).
const SEPARATOR: char = '\u{1f}';

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_asks_every_log_in_turn_and_a_log_with_news_every_time() {
        let now = Instant::now();
        let mut few = Sweep::new(10);
        assert_eq!(few.due(now), (0..10).collect::<Vec<_>>());
        let mut many = Sweep::new(2500);
        let first = many.due(now);
        assert_eq!(first, (0..1024).collect::<Vec<_>>());
        many.heard(7, now);
        let second = many.due(now);
        assert_eq!(second.len(), 1025);
        assert!(second.contains(&7) && second.contains(&1024) && second.contains(&2047));
        // The third turn wraps around to the start.
        let third = many.due(now);
        assert!(third.contains(&2499) && third.contains(&0) && third.contains(&7));
        assert_eq!(third.len(), 1024, "7 is in the turn already: asked once");
        // A log quiet for a minute is asked only in its turn again.
        let later = now + FOLLOW_HOT;
        let fourth = many.due(later);
        assert!(!fourth.contains(&7), "{:?}", &fourth[..3]);
        assert_eq!(fourth.len(), 1024);
    }

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
