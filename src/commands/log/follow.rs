//! `log --follow`: after the first read, what came after the newest entry of each followed
//! log, every [`FOLLOW_EVERY`], with the lapses the holders show, until SIGINT or SIGTERM.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use redis::Value;

use super::Log;
use super::ends::Ends;
use super::entry::{Entry, list_entries, print, take_of};
use super::read::{Followed, LAPSE_SKEW_MS, LOGS_AT_ONCE};
use crate::lock::inspect::{self, Inspection};
use crate::lock::nodes::Nodes;
use crate::redis::server::Conn;
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::signals::{self, Event, Signals};

/// How often `--follow` asks for new entries.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// How many polls of `--follow` go by between two reads of the holders of the locks whose log
/// has a take without an end (see `ends.rs`): a lapse shows within a second, and a lock held
/// for hours costs the server one reading of its state a second, not four.
const LAPSE_POLLS: u32 = 4;

/// Follows `followed` until a signal ends it (exit 0). With `all` (`--all`), a log the server
/// refuses to read from then on (an ACL changed, a key of another type) is named once and no
/// longer followed, the others are, and the exit status is its error's; a named log's
/// refusal ends the follow with its error.
pub(super) fn follow(
    nodes: &mut Nodes,
    signals: &Signals,
    followed: Vec<Followed>,
    prefix: &str,
    json: bool,
    all: bool,
) -> Result<Exit> {
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
    // The logs no longer followed (`--all`), and the status the first of them decided.
    let mut dropped = vec![false; logs.len()];
    let mut exit = Exit::Success;
    loop {
        match signals.wait(Some(FOLLOW_EVERY)) {
            Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => continue,
            Event::Signal(_) => return Ok(exit),
            _ => {}
        }
        let mut due = sweep.due(Instant::now());
        due.retain(|&i| !dropped[i]);
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
                match nodes.on(i, |con| read_after(con, &logs, &last, &due, &check, all)) {
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
        let Some((fresh, holders, refused)) = fresh else {
            return Err(first_error.expect("at least one node"));
        };
        for (i, e) in refused {
            dropped[i] = true;
            let status = crate::report::error::classify(&e);
            log::ending("unreadable", &crate::report::error::render(&e), &[], status);
            if exit == Exit::Success {
                exit = status;
            }
        }
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
        let now_ms = crate::commands::status::now_ms();
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
            print(&entry, prefix, json)?;
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

/// What a poll of `--follow` read: each log's new entries (with the index of their log), the
/// holders of the locks it checked, read before those entries, and (`--all`) the logs the
/// server refused to read, with its error.
type Polled = (
    Vec<(usize, Entry)>,
    Vec<(usize, Inspection)>,
    Vec<(usize, anyhow::Error)>,
);

/// The entries of the `due` logs' lists after the one `last` names for each (all of them when
/// that is not in the list any more, or is `None`), with the index of their log; and, for the
/// due logs `check` names, the lock's holders, read just before. One `LINDEX` per log when
/// nothing was added (and `inspect.rs`'s reading of a checked lock), `LOGS_AT_ONCE * 8` logs
/// per round trip (one per round trip on a cluster). A lock whose holders cannot be read is
/// left unchecked. With `all`, a log the server refuses to read is returned with its error
/// rather than ending the poll.
fn read_after(
    con: &mut Conn,
    logs: &[Log],
    last: &[Option<String>],
    due: &[usize],
    check: &[bool],
    all: bool,
) -> Result<Polled> {
    let cluster = matches!(con, Conn::Cluster(_));
    let at_once = if cluster { 1 } else { LOGS_AT_ONCE * 8 };
    let now = crate::commands::status::now_ms();
    let mut out = Vec::new();
    let mut held = Vec::new();
    let mut refused = Vec::new();
    // A refusal of one log, under `--all`, is that log's; anything else (the server's own
    // trouble) ends the poll, as without `--all`.
    let mut one = |i: usize, e: anyhow::Error| -> Result<()> {
        if all && super::read::about_the_lock(&e) {
            refused.push((i, e));
            Ok(())
        } else {
            Err(e)
        }
    };
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
            let newest: Option<String> = match match newest {
                Value::ServerError(e) => Err(redis::RedisError::from(e.clone())),
                other => redis::from_redis_value_ref(other).map_err(redis::RedisError::from),
            }
            .with_context(|| format!("cannot read the log of {}", log.lock))
            {
                Ok(newest) => newest,
                Err(e) => {
                    one(i, e)?;
                    continue;
                }
            };
            if newest.is_none() || newest == *seen {
                continue;
            }
            match read_new(con, log, seen.as_deref()) {
                Ok(new) => out.extend(new.into_iter().map(|e| (i, e))),
                Err(e) => one(i, e)?,
            }
        }
    }
    Ok((out, held, refused))
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
}
