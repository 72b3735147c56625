//! `redlock pause` and `redlock resume`: maintenance without touching crontabs.
//!
//! A pause is a record beside the lock (`keys.rs`: the `paused` companion, in the lock's slot),
//! or one record for every lock under the prefix (`--all`), which the acquire script reads on
//! every attempt: a paused key refuses new takers in the same round trip that would have taken
//! it, so `run` still sends two commands. Holders are not touched: a pause only stops what
//! starts after it. A waiter (`--wait`) is refused like any taker but keeps its place in the
//! queue, and goes ahead when the pause is lifted (`resume` wakes the head of the queue, and
//! `resume --all` that of every queue under the prefix; a pause that lapses wakes nobody, and
//! its waiters try again within 5 s) unless its wait runs out first: an operator pausing for
//! five minutes expects the waiting jobs to run afterwards, not to be dropped. Nested runs of
//! a held key never reach the acquire script (`nested.rs`), so the outer run's command
//! finishes what it started.
//!
//! `--for D` sets the record's `until`; the script treats a lapsed pause as none, and the record
//! is kept a day longer ([`crate::lock::record::PAUSE_KEPT`]) so that `check` can report a pause that ran out
//! without a resume. Time is the server's.
//!
//! `--drain D` then reads the paused locks (the status pipeline) every 200 ms until none has a
//! running holder of any shape — exclusive, shared or slotted (a hold kept by
//! `--hold-at-least` after its command ended runs nothing; a client that keeps no holder record
//! may, and counts) — printing every holder that still runs whenever that changes: 0 when
//! drained, 75 when holders remain after D. A lock it cannot read is never taken for drained:
//! the read's error ends `--drain` with its status (77 denied, 78 a key of another type, 69).
//! With `--all`, every lock under the prefix is read once, a batch at a time, and only those
//! with a running holder are read again: no other can get one while paused, so a prefix of
//! 100,000 locks costs the server one pass, not one every 200 ms, and redlock memory for the
//! running ones alone. Once those are done, one more pass makes sure: a pause that lapsed
//! (`--for`) or was lifted meanwhile, or a client that does not read pauses, may have started
//! another, which is then waited for in turn.
//!
//! A pause or resume the server refuses changes nothing: its script asks before it writes
//! whether the user may run each command it calls and whether the audit log is a list
//! (`scripts/ahead.lua`). `release` reads back after a refusal half way instead, because
//! "the token no longer holds the lock" says what happened; a pause read back could not tell
//! this pause from an earlier one, and one half made (no audit entry, no record expiry, an
//! earlier pause deleted and none written) is not what was asked for. `resume` reads nothing
//! of the lock but the prefix-wide pause record: it acts on pause records whatever the lock's
//! other records hold (another type, a later layout).
//!
//! On Redis Cluster the prefix-wide record lives in another slot than the locks unless the
//! prefix has a hash tag, and the acquire script can read only the lock's slot: `--all` is
//! refused there (64) rather than accepted and ignored.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::Context;
use crate::cli::{PauseArgs, ResumeArgs};
use crate::lock;
use crate::lock::inspect::Holding;
use crate::lock::keys::{self, Keys};
use crate::lock::nodes::Nodes;
use crate::lock::record::{Holder, Pause, rfc3339};
use crate::lock::scripts::{PAUSED, QUEUE};
use crate::redis::server::Server;
use crate::report::error::usage;
use crate::report::exit::{BUSY, Exit};
use crate::report::log;
use crate::report::text::shown;
use crate::supervise::lease::fmt;

/// How often `--drain` looks again.
const DRAIN_POLL: Duration = Duration::from_millis(200);

pub fn pause(ctx: &Context, args: PauseArgs) -> Result<Exit> {
    if args.span.is_some_and(|d| d.is_zero()) {
        return Err(usage(
            "--for must be greater than 0 (leave it out to pause until resumed)",
        ));
    }
    if args
        .span
        .is_some_and(|d| d > Duration::from_secs(366 * 24 * 3600))
    {
        return Err(usage(
            "--for is longer than a year; leave it out to pause until resumed",
        ));
    }
    if args.all
        && ctx.servers.iter().any(Server::is_cluster)
        && !keys::prefix_pause_in_slot(&ctx.prefix)
    {
        return Err(usage(format!(
            "pause --all is not available on Redis Cluster with prefix {:?}: the prefix-wide \
             pause record would live in another hash slot than the locks, where their acquire \
             script cannot read it; name the keys, or use a prefix with a hash tag such as \
             'jobs:{{nightly}}:'",
            ctx.prefix
        )));
    }
    let keys = ctx.keys(&args.keys)?;
    let mut who = Holder::current("redlock pause", None);
    // This short-lived process is not who to ask; host and user are.
    who.pid = None;
    let fields = Pause::identity(&who, args.reason.as_deref());
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;

    let records: Vec<(String, String, String)> = if args.all {
        vec![(
            keys::prefix_pause_key(&ctx.prefix),
            keys::prefix_log_key(&ctx.prefix),
            format!("every lock under prefix {:?}", ctx.prefix),
        )]
    } else {
        keys.iter()
            .map(|k| (k.paused.clone(), k.log.clone(), k.lock.clone()))
            .collect()
    };
    for (record, log_key, what) in &records {
        let results = nodes.each(|c| lock::pause(c, record, log_key, args.span, &fields));
        let (since, until) = nodes
            .answered(results)?
            .into_iter()
            .find_map(Result::ok)
            .expect("a majority answered");
        let mut line = format!("paused {what} since {}", rfc3339(since));
        if until > 0 {
            line.push_str(&format!(" until {}", rfc3339(until)));
        } else {
            line.push_str(" until resumed");
        }
        if let Some(reason) = &args.reason {
            line.push_str(&format!(": \"{}\"", shown(reason)));
        }
        let _ = log::stdout(&format!("{line}\n"));
    }
    let Some(drain) = args.drain else {
        return Ok(Exit::Success);
    };
    if args.all {
        let running = running_locks(&mut nodes, &ctx.prefix)?;
        self::drain(&mut nodes, running, drain, Some(&ctx.prefix))
    } else {
        self::drain(&mut nodes, keys, drain, None)
    }
}

/// The locks under `prefix` with a running holder, read a batch at a time and kept alone:
/// with every lock paused, no other can get one (a paused key refuses every new taker), so
/// `pause --all --drain` watches only these, however many locks the prefix has.
fn running_locks(nodes: &mut Nodes, prefix: &str) -> Result<Vec<Keys>> {
    let mut running = Vec::new();
    nodes.each_batch_of_locks(prefix, &[crate::lock::scripts::FENCE], |nodes, batch| {
        let read = crate::lock::inspect::readable(super::status::inspect_each(nodes, &batch)?)?;
        running.extend(
            batch
                .into_iter()
                .zip(read)
                .filter(|(_, i)| !i.running().is_empty())
                .map(|(k, _)| k),
        );
        Ok(true)
    })?;
    Ok(running)
}

/// Waits up to `limit` until none of `keys` has a running holder, in any shape. With
/// `all_under` (`--all`), `keys` are the locks that ran when the pause was written, and every
/// lock under that prefix is read again before drained is said: a pause that lapsed or was
/// lifted meanwhile, or a client that does not read pauses, may have started another.
fn drain(
    nodes: &mut Nodes,
    mut keys: Vec<Keys>,
    limit: Duration,
    all_under: Option<&str>,
) -> Result<Exit> {
    let until = Instant::now() + limit;
    let mut shown: Option<Vec<(String, Option<i64>)>> = None;
    loop {
        let now_ms = super::status::now_ms();
        let read = crate::lock::inspect::readable(super::status::inspect_each(nodes, &keys)?)?;
        let running: Vec<(&Keys, Holding)> = keys
            .iter()
            .zip(&read)
            .flat_map(|(k, i)| i.running().into_iter().map(move |h| (k, h)))
            .collect();
        if running.is_empty() {
            if let Some(prefix) = all_under {
                let again = running_locks(nodes, prefix)?;
                if !again.is_empty() {
                    keys = again;
                    continue;
                }
            }
            let _ = log::stdout("drained: no paused lock has a running holder\n");
            return Ok(Exit::Success);
        }
        let who: Vec<String> = running
            .iter()
            .map(|(k, h)| format!("{} {}", k.lock, h.describe(now_ms)))
            .collect();
        let ids: Vec<(String, Option<i64>)> = running
            .iter()
            .map(|(k, h)| (k.lock.clone(), h.fence()))
            .collect();
        if Instant::now() >= until {
            return Ok(log::ending(
                "busy",
                &format!(
                    "not drained after {}: still running: {}; the pause stays",
                    fmt(limit),
                    who.join("; ")
                ),
                &[],
                Exit::Busy(BUSY),
            ));
        }
        if shown.as_ref() != Some(&ids) {
            let _ = log::stdout(&format!(
                "draining: {} still running: {}\n",
                running.len(),
                who.join("; ")
            ));
            shown = Some(ids);
        }
        std::thread::sleep(DRAIN_POLL.min(until.saturating_duration_since(Instant::now())));
    }
}

pub fn resume(ctx: &Context, args: ResumeArgs) -> Result<Exit> {
    let keys = ctx.keys(&args.keys)?;
    let cluster = ctx.servers.iter().any(Server::is_cluster);
    let who = resumer();
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    if args.all {
        let record = keys::prefix_pause_key(&ctx.prefix);
        let log_key = keys::prefix_log_key(&ctx.prefix);
        let results = nodes.each(|c| {
            if cluster && !keys::prefix_pause_in_slot(&ctx.prefix) {
                return Ok(false);
            }
            lock::resume_all(c, &record, &log_key, &who)
        });
        let prefix_wide = nodes
            .answered(results)?
            .into_iter()
            .any(|r| matches!(r, Ok(true)));
        if prefix_wide {
            let _ = log::stdout(&format!(
                "resumed every lock under prefix {:?}\n",
                ctx.prefix
            ));
        }
        // Every lock's own pause; and, when the prefix-wide pause was lifted, every lock with a
        // queue, whose head it held back: woken now rather than at its next attempt.
        let mut locks = nodes.find_locks(&ctx.prefix, PAUSED)?;
        if prefix_wide {
            locks.extend(nodes.find_locks(&ctx.prefix, QUEUE)?);
            locks.sort_by(|a, b| a.lock.cmp(&b.lock));
            locks.dedup_by(|a, b| a.lock == b.lock);
        }
        let resumed = resume_each(&mut nodes, &locks, &who, prefix_wide, cluster)?;
        if !prefix_wide && !resumed {
            log::warn(
                "not_paused",
                &format!("nothing under prefix {:?} was paused", ctx.prefix),
                &[],
            );
            return Ok(Exit::No);
        }
        return Ok(Exit::Success);
    }
    let mut all = true;
    for k in &keys {
        if !resume_each(&mut nodes, std::slice::from_ref(k), &who, false, cluster)? {
            all = false;
            log::warn(
                "not_paused",
                &format!("{} was not paused; nothing to resume", k.lock),
                &[],
            );
        }
    }
    // A key's own pause and the prefix-wide one are independent: say when the latter remains.
    // Only that record is read: resume acts on pause records, whatever the lock's others hold.
    if let Some(p) = prefix_pause(&mut nodes, &keys, cluster) {
        let now_ms = super::status::now_ms();
        for k in &keys {
            log::warn(
                "still_paused",
                &format!(
                    "{} is still {}; `redlock resume --all` lifts that",
                    k.lock,
                    p.describe(now_ms)
                ),
                &[],
            );
        }
    }
    Ok(if all { Exit::Success } else { Exit::No })
}

/// How many locks one call of the resume script lifts or wakes (`resume --all`): a few round
/// trips for a prefix of thousands, each call short enough not to hold the server up.
const RESUME_BATCH: usize = 100;

/// Lifts the own pause of each of `locks` on every node, and wakes the head of its queue when
/// the lock is free and it had one, or `wake` (the prefix-wide pause was lifted): a batch of
/// locks per round trip (on a cluster, of one slot). Prints each lock resumed; whether any
/// was. A lock the server refused ends it with that error, after the others of its batch.
fn resume_each(
    nodes: &mut Nodes,
    locks: &[Keys],
    who: &[(&'static str, String)],
    wake: bool,
    cluster: bool,
) -> Result<bool> {
    let mut batches: std::collections::BTreeMap<u16, Vec<Keys>> = Default::default();
    for k in locks {
        batches
            .entry(if cluster { keys::slot(&k.lock) } else { 0 })
            .or_default()
            .push(k.clone());
    }
    let mut any = false;
    let mut refused = None;
    for batch in batches.values().flat_map(|b| b.chunks(RESUME_BATCH)) {
        let results = nodes.each(|c| {
            if let [one] = batch {
                // One lock, the common `resume KEY`: the plain script.
                return Ok(vec![lock::resume(c, one, who, wake)]);
            }
            lock::resume_each(c, batch, who, wake)
        });
        // Each node's replies, lock by lock; a node that failed as a whole counts against
        // each lock of the batch (its error was already weighed by `answered`).
        let mut per_node: Vec<Result<std::vec::IntoIter<Result<bool>>, String>> = nodes
            .answered(results)?
            .into_iter()
            .map(|r| r.map(Vec::into_iter).map_err(|e| format!("{e:#}")))
            .collect();
        for k in batch {
            let mine: Vec<Result<bool>> = per_node
                .iter_mut()
                .map(|r| match r {
                    Ok(replies) => replies
                        .next()
                        .unwrap_or_else(|| Err(anyhow::anyhow!("no reply for {}", k.lock))),
                    Err(e) => Err(anyhow::anyhow!("{e}")),
                })
                .collect();
            match nodes.answered(mine) {
                Ok(answers) if answers.iter().any(|r| matches!(r, Ok(true))) => {
                    any = true;
                    let _ = log::stdout(&format!("resumed {}\n", k.lock));
                }
                Ok(_) => {}
                Err(e) => {
                    refused.get_or_insert(e);
                }
            }
        }
    }
    match refused {
        Some(e) => Err(e),
        None => Ok(any),
    }
}

/// The prefix-wide pause in force over `keys`, as their pipelines would read it (none on a
/// cluster where it lives in another slot). The warning it makes is a courtesy after the
/// resume: a node that cannot read it is passed over.
fn prefix_pause(nodes: &mut Nodes, keys: &[Keys], cluster: bool) -> Option<Pause> {
    let k = keys.first()?;
    let record = k.pause_all_for(cluster).to_string();
    if record == k.paused {
        return None;
    }
    let now_ms = super::status::now_ms();
    nodes
        .each(|c| {
            let fields: Vec<(String, String)> = redis::cmd("HGETALL").arg(&record).query(c)?;
            Ok(fields)
        })
        .into_iter()
        .flatten()
        .filter_map(|mut fields| {
            fields.sort();
            Pause::decode(&fields, true)
        })
        .find(|p| p.in_force(now_ms))
}

/// Who resumes, for the audit log: host and user (this short-lived process's pid says nothing).
fn resumer() -> Vec<(&'static str, String)> {
    let me = Holder::current("redlock resume", None);
    let mut who = vec![("host", me.host)];
    if let Some(user) = me.user {
        who.push(("user", user));
    }
    who
}
