//! What `log` reads before it prints: every entry of the logs asked (or of every lock under
//! the prefix), in bounded memory, with the ends the reader infers (see the parent module).

use anyhow::{Context as _, Result};
use redis::Value;

use super::Log;
use super::ends::Ends;
use super::entry::{Entry, list_entries};
use crate::commands::spill::{TimeSort, Timed};
use crate::lock::inspect::{self, Inspection};
use crate::lock::keys;
use crate::redis::server::Conn;
use crate::report::exit::Exit;

/// How far behind this host's clock a shared lease's deadline must be for `log` to count it
/// as lapsed: the deadline is on the server's clock, and a host whose clock runs ahead of it
/// must not end a live lease.
pub(super) const LAPSE_SKEW_MS: i64 = 2_000;

/// How many locks' logs are read in one round trip (a cluster reads one lock's at a time).
pub(super) const LOGS_AT_ONCE: usize = 32;

/// How many entries' worth of lines `log` sorts in memory before it puts them in a temporary
/// file and merges (see the module doc).
const SORT_IN_MEMORY: usize = 8 * 1024 * 1024;

/// A log `--follow` follows, its list's newest entry when it was last read, and its takes'
/// ends so far.
pub(super) type Followed = (Log, Option<String>, Ends);

/// What `log` read before it prints: the lines in order, the logs `--follow` follows, and
/// (with `--all`) each lock whose log or state could not be read, with why.
pub(super) struct Read {
    pub(super) sorted: TimeSort,
    pub(super) followed: Vec<Followed>,
    pub(super) unread: Vec<anyhow::Error>,
}

/// What `log` reads before it prints.
pub(super) struct Reading<'a> {
    pub(super) prefix: &'a str,
    pub(super) all: bool,
    pub(super) named: &'a [Log],
    pub(super) from_ms: Option<i64>,
    pub(super) json: bool,
    /// Whether to keep each log's newest entry, for `--follow`.
    pub(super) follow: bool,
}

impl Reading<'_> {
    /// Every entry of the logs (since `from_ms`), as the lines to print, put in order; and,
    /// for `--follow`, each log with its list's newest entry. A named log that cannot be read
    /// ends the reading with its error; with `--all`, a lock whose log or state cannot be read
    /// (an ACL denial, a record of another type or layout) is left out and kept in
    /// [`Read::unread`], so that one such lock does not hide every other lock's log. A failure
    /// to ask the server ends the reading either way.
    pub(super) fn read(&self, con: &mut Conn) -> Result<Read> {
        let mut sorted = TimeSort::new(SORT_IN_MEMORY);
        let mut followed = Vec::new();
        let mut unread = Vec::new();
        let mut take = |con: &mut Conn, logs: &[Log]| -> Result<()> {
            for (log, read) in logs.iter().zip(read_logs(con, logs)?) {
                let read = match read {
                    Ok(read) => read,
                    Err(e) if self.all && about_the_lock(&e) => {
                        unread.push(e);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
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
            return Ok(Read {
                sorted,
                followed,
                unread,
            });
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
        Ok(Read {
            sorted,
            followed,
            unread,
        })
    }
}

/// One log as [`read_logs`] read it.
pub(super) struct LogRead {
    /// The list's entries, with the ends the reader infers put in (see `ends.rs`).
    pub(super) list: Vec<Entry>,
    /// The list's newest entry, for `--follow`.
    pub(super) newest: Option<String>,
    /// Its takes' ends so far, for `--follow`.
    pub(super) ends: Ends,
}

/// Every entry of each of `logs`, in one round trip (on a cluster, one per command): the
/// list's newest entry, the lock's holders (`inspect.rs`'s reading), then the list (whole), in
/// that order: a take at or before the
/// newest entry read first was written before the holders were read, so a fence missing from
/// them lapsed unless the list, read after, ends it (see `ends.rs`). A log the server refused
/// to read, or whose lock's holders cannot be read, is that log's error (the others are still
/// read); a failure of the round trip itself is the error.
pub(super) fn read_logs(con: &mut Conn, logs: &[Log]) -> Result<Vec<Result<LogRead>>> {
    let now = crate::commands::status::now_ms();
    let mut out = Vec::with_capacity(logs.len());
    if let Conn::Cluster(_) = con {
        // A cluster routes a pipeline by its first key; the logs lie in different slots: one
        // command at a time.
        for log in logs {
            let context = || format!("cannot read the log of {}", log.lock);
            // The server refused this log: its error (the others are still read); a failure
            // to ask, or a server that cannot answer now, is the reading's.
            let lrange = |con: &mut Conn, from: i64| -> Result<Result<Vec<String>>> {
                match redis::cmd("LRANGE")
                    .arg(&log.list)
                    .arg(from)
                    .arg(-1)
                    .query(con)
                    .with_context(context)
                {
                    Err(e) if !about_the_lock(&e) => Err(e),
                    read => Ok(read),
                }
            };
            let mut marker = match lrange(con, -1)? {
                Ok(marker) => marker,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            let holders = match &log.keys {
                Some(k) => inspect::inspect(con, std::slice::from_ref(k), now - LAPSE_SKEW_MS)
                    .ok()
                    .and_then(|mut r| r.pop())
                    .map(of_this_layout)
                    .transpose(),
                None => Ok(None),
            };
            let holders = match holders {
                Ok(holders) => holders.flatten(),
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            let list = match lrange(con, 0)? {
                Ok(list) => list,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            out.push(Ok(settle(log, marker.pop(), holders, list, now)));
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
        let reads = if log.keys.is_some() {
            inspect::READS
        } else {
            0
        };
        let (first, state, whole) = (at, at + 1, at + 1 + reads);
        at += 2 + reads;
        let context = || format!("cannot read the log of {}", log.lock);
        let reply = |i: usize| -> Result<Vec<String>> {
            match &replies[i] {
                Value::ServerError(e) => {
                    Err(redis::RedisError::from(e.clone())).with_context(context)
                }
                reply => redis::from_redis_value_ref(reply)
                    .map_err(redis::RedisError::from)
                    .with_context(context),
            }
        };
        let one = || -> Result<LogRead> {
            let mut marker = reply(first)?;
            let holders = match &log.keys {
                Some(k) => of_this_layout(inspect::decode(
                    &replies[state..whole],
                    k,
                    false,
                    now - LAPSE_SKEW_MS,
                ))?,
                None => None,
            };
            let list = reply(whole)?;
            Ok(settle(log, marker.pop(), holders, list, now))
        };
        out.push(one());
    }
    Ok(out)
}

/// Whether an error reading one log is that lock's own — an ACL denial (77), a key of another
/// type or a record of another layout (78) — rather than the server's (unreachable, loading,
/// out of memory: 69), which no other log would escape.
pub(super) fn about_the_lock(e: &anyhow::Error) -> bool {
    matches!(
        crate::report::error::classify(e),
        Exit::Permission | Exit::Config
    )
}

/// A lock's holders as the log reads them: a lock that could not be read (an ACL denial, a
/// record of another type or layout) is that log's error, with its status, as it is every
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
