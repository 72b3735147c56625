//! `redlock log`: the locks' audit log, oldest first.
//!
//! Every acquire, busy refusal, skipped run (`--once-per`), release, lost lease, forced
//! release, pause and resume is appended by the script that already runs for it to a capped
//! list per lock, `{L}:redlock:audit`, in the lock's hash slot (see `lock/scripts/audit.lua`): the
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
//! Read-only (`LRANGE`, `LINDEX` and `inspect.rs`'s reads), so a `+@read` user can read the
//! log. The logs of several keys are merged by time. `--follow` then asks each key's log
//! for what came after the newest entry it had, every [`FOLLOW_EVERY`](follow::FOLLOW_EVERY) (one `LINDEX` when
//! nothing did, a pipeline of them per 256 logs; when something did, the list's last 64
//! entries, and the whole list only when those do not reach back to what it had), until
//! SIGINT or SIGTERM (exit 0: the operator asked it to stop); keys that get a log later are
//! not picked up by a `--follow --all` already running. Past [`FOLLOW_SWEEP`](follow::FOLLOW_SWEEP) logs, a poll
//! asks the logs with entries in the last minute and the next 1024 of the others in turn
//! (`follow::Sweep`): following every lock of a large deployment costs the shared server a bounded
//! number of commands per poll, and a quiet lock's first new entry shows within one sweep.
//! With a quorum every node keeps its own log; `log` reads the first node that answers.
//!
//! `--all` over many locks, in bounded memory: the logs are found by SCAN (each lock once,
//! `keys::Seen`) and read [`LOGS_AT_ONCE`](read::LOGS_AT_ONCE) locks per round
//! trip. A merge by time cannot print its first entry before it has read every log, so the
//! entries, as the lines to print, go to an external merge sort (`spill.rs`): up to
//! [`SORT_IN_MEMORY`](read::SORT_IN_MEMORY) bytes are sorted in memory; past that each such run goes to an anonymous
//! temporary file in `$TMPDIR`, and the runs are merged 64 at a time. So redlock's memory is
//! bounded whatever the number of locks: 8 MiB of lines, 64 read buffers of 64 KiB while
//! merging, one round trip's replies (32 lists of at most 1023 entries), and 8 bytes per lock to read each once. The disk holds
//! at most the output, once or, past 64 runs (512 MiB), once per level of merging. Entries of
//! the same millisecond come by key; one lock's keep their order. Nothing is printed until
//! every log is read, so a failure prints nothing, as before. With `--all`, a lock whose log or
//! state cannot be read (an ACL denial, a record of another type or layout) is left out rather
//! than ending the reading: the other logs are printed, each such lock is named on stderr in
//! the words `status` uses, and the first one's status is the exit status, as `status --all`
//! lists such a lock as unknown and exits with its status. `--follow` then keeps, per log
//! it follows, its keys and its newest entry (a few hundred bytes a lock): following 100,000
//! locks takes that memory and, every 250 ms, 1024 `LINDEX` (4 round trips) and one for each
//! lock with entries in the last minute; a quiet lock is asked every 25 s.

use anyhow::{Context as _, Result};

use crate::Context;
use crate::cli::LogArgs;
use crate::lock::keys;
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::signals::Signals;

mod ends;
mod entry;
mod follow;
mod read;
mod timeline;

use read::Reading;

/// One lock's log: its key and the list it is kept in.
#[derive(Clone)]
struct Log {
    lock: String,
    list: String,
    /// The lock's keys, whose holders are read with the log (none for the prefix-wide log,
    /// which has no takes).
    keys: Option<Box<keys::Keys>>,
}

/// When the most recent take among `raw` (the lock's last log entries, oldest first, read
/// after `holders`) lapsed, as `redlock log` infers it (see `ends.rs`): the time of the later
/// take that could not have been made while it held, or, for a take whose fence no holder has
/// in `holders` and no run took the lock after, the take's own time (its lapse is not
/// recorded). `None` when no take in `raw` lapsed. Takes with a fence above `holders`' were
/// written after the read, and are not judged by it.
pub(crate) fn last_lapse_ms(
    k: &keys::Keys,
    raw: Vec<String>,
    holders: &crate::lock::inspect::Inspection,
) -> Option<i64> {
    let entries = entry::list_entries(raw, &Log::of(k));
    let read_fence = holders.fence.unwrap_or(i64::MAX);
    let before_read = entries
        .iter()
        .position(|e| {
            e.get("event") == Some("acquired")
                && e.get("fence")
                    .and_then(|f| f.parse::<i64>().ok())
                    .is_some_and(|f| f > read_fence)
        })
        .unwrap_or(entries.len());
    let mut ends = ends::Ends::default();
    let mut inferred: Vec<i64> = ends
        .through(entries, before_read)
        .iter()
        .filter(|e| e.inferred())
        .map(|e| e.ms)
        .collect();
    inferred.extend(ends.lapsed(holders, 0).iter().map(|e| e.ms));
    inferred.into_iter().max()
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
        .map(|d| (crate::commands::status::now_ms() - d.as_millis() as i64).max(0));
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
    let Some(read::Read {
        sorted,
        followed,
        unread,
    }) = read
    else {
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
    // `--all`: each lock it could not read is named once, in the words `status` uses, and the
    // first one's status is the exit status (as `status --all`'s), after `--follow` too (which
    // leaves a log it can no longer read the same way): what was shown is not every log.
    let mut exit = Exit::Success;
    for e in &unread {
        let status = crate::report::error::classify(e);
        log::ending("unreadable", &crate::report::error::render(e), &[], status);
        if exit == Exit::Success {
            exit = status;
        }
    }
    let Some(signals) = signals else {
        return Ok(exit);
    };
    let followed = follow::follow(
        &mut nodes,
        &signals,
        followed,
        &ctx.prefix,
        args.json,
        args.all,
    )?;
    Ok(if exit == Exit::Success {
        followed
    } else {
        exit
    })
}
