//! `redlock metrics`: locks' state and counters in the Prometheus text exposition format
//! (version 0.0.4), for node_exporter's textfile collector or a sidecar; and the same text for
//! `run --metrics-file`, written when the run ends.
//!
//! Read-only: the status pipeline (`inspect.rs`), so a `+@read` user can scrape. Every sample
//! has one label, `key`: the lock's Redis key, prefix included, so that the files of several
//! prefixes can sit side by side in one collector directory. Label values are escaped as the
//! format asks (backslash, double quote, newline). Families are grouped, each with its HELP and
//! TYPE lines, in a fixed order. A value the records cannot give (no run yet: no last-run
//! start) leaves that key's sample out rather than inventing a 0 a dashboard would plot;
//! redlock_held, redlock_paused, redlock_pause_lapsed and the counters are always there.
//! `--all` adds one sample of its own, labelled by the prefix rather than a key:
//! `redlock_metrics_timestamp_seconds`, when it read the locks (a file cron stopped refreshing
//! shows as it falling behind). `--all` lists the locks by their fence and by their pause
//! record, so a key paused before it was ever taken (or whose fence expired) is there too.
//!
//! Times are the server's (seconds since the epoch, with milliseconds); ages are taken against
//! this host's clock, as `status` does.
//!
//! Every shape is counted: a lock held by several shared or slotted holders is held
//! (`redlock_held` 1), `redlock_holders` is how many of its holders run a command (any shape;
//! a hold kept by `--hold-at-least` after its command ended counts none, a client that keeps
//! no holder record counts one), `redlock_lease_age_seconds` is its oldest holder's age, and
//! `redlock_ttl_seconds` runs until the last holder's lease ends.
//!
//! The output is complete or absent, as a textfile collector needs it: a lock that could not
//! be read (an ACL that denies one of the reads, a companion key of another type, a record of
//! another data layout) or a key of another type (no lock) prints nothing at all on stdout —
//! never zeros for that lock, nor a file without it that looks whole — and `metrics` exits with
//! the first unreadable lock's status (77 denied, 78 another type or layout, 69), else 78, with
//! one line on stderr naming each such lock. With `--all` too: one such lock under the prefix
//! stops the file's refreshes (its `redlock_metrics_timestamp_seconds` falls behind, which
//! `RedlockMetricsStale` in `deploy/prometheus/` catches) rather than letting its series vanish
//! unnoticed.
//!
//! `--all` reads the locks a batch at a time as SCAN finds them, as `status --all` does, in
//! memory that does not grow with their number. The format wants each family's samples
//! together, and every lock has a sample in most families: each family's samples are kept
//! apart as they are read — in memory up to [`SPILL_AT`] each, past that in an anonymous
//! temporary file in `$TMPDIR` (`spill.rs`) — and printed family by family once every lock
//! is read. So one SCAN and one read per lock, whatever the number of families; the disk
//! holds at most the output (about 1 KB per lock); and nothing is printed unless every batch
//! was read, as before. Within a family the locks come in the order read: by key within each
//! batch of 1,000 (fewer locks: all of them by key).
//!
//! `run --metrics-file`: concurrent runs may share one file. Each run takes an exclusive
//! `flock` on the file's directory (no file is added beside the target), reads the lock,
//! writes a temporary file and renames it over the target while holding it, so the file's
//! snapshots follow one another in the order they were read; and a counter is never written
//! lower than the file already has it (in a quorum, the nodes' counts may differ), so no
//! counter in the file goes backwards, which Prometheus would read as a reset. A run that
//! cannot take the directory's lock within [`FILE_LOCK_WAIT`] (another run frozen while
//! writing) leaves the file alone and warns.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::spill::Spill;
use crate::Context;
use crate::cli::MetricsArgs;
use crate::lock::inspect::{Holding, Inspection, Unreadable};
use crate::lock::keys::{BATCH, Keys};
use crate::lock::nodes::Nodes;
use crate::lock::record::{LastRun, LockState, Outcome};
use crate::report::exit::Exit;
use crate::report::log;

pub fn metrics(ctx: &Context, args: MetricsArgs) -> Result<Exit> {
    let named = ctx.keys(&args.keys)?;
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let now_ms = super::status::now_ms();
    let mut text = Exposition::new(SPILL_AT);
    // The locks that could not be read, and those that are no lock, with why: any of them
    // and nothing is printed (see the module doc).
    let mut unreadable: Vec<Unreadable> = Vec::new();
    let mut wrong_type: Vec<String> = Vec::new();
    let mut add = |nodes: &mut Nodes, batch: &[Keys]| -> Result<bool> {
        let read = super::status::inspect_each(nodes, batch)?;
        let tails = log_tails(nodes, batch);
        for ((k, reading), tail) in batch.iter().zip(read).zip(tails) {
            match reading {
                Ok(_) if !unreadable.is_empty() || !wrong_type.is_empty() => {}
                Ok(i) if i.state() == LockState::WrongType => wrong_type.push(k.lock.clone()),
                Ok(mut i) => {
                    let lapse_ms = tail
                        .clone()
                        .and_then(|t| super::log::last_lapse_ms(k, t, &i));
                    if let Some(lapsed) = tail.as_deref().and_then(|t| lapsed_run(t, &i)) {
                        i.last = Some(lapsed);
                    }
                    text.add(k, &i, lapse_ms, now_ms)?;
                }
                Err(u) => unreadable.push(u),
            }
        }
        Ok(true)
    };
    if args.all {
        nodes.each_batch_of_locks(
            &ctx.prefix,
            &[crate::lock::scripts::FENCE, crate::lock::scripts::PAUSED],
            |nodes, batch| add(nodes, &batch),
        )?;
    } else {
        for batch in named.chunks(BATCH) {
            add(&mut nodes, batch)?;
        }
    }
    if !unreadable.is_empty() || !wrong_type.is_empty() {
        // One line per such lock; the status is the first unreadable lock's, else 78.
        let mut exit = None;
        for u in &unreadable {
            let status = log::ending("unreadable", &u.why(), &[], u.exit());
            exit.get_or_insert(status);
        }
        for lock in &wrong_type {
            let text = format!("{lock} holds another type of value and is no lock");
            let status = log::ending("wrong_type", &text, &[], Exit::Config);
            exit.get_or_insert(status);
        }
        return Ok(exit.expect("a lock named"));
    }
    if args.all {
        text.stamp(&ctx.prefix, now_ms);
    }
    let mut stdout = std::io::stdout().lock();
    text.write_to(&mut stdout)
        .and_then(|()| Ok(stdout.flush()?))
        .context("cannot print the metrics")?;
    Ok(Exit::Success)
}

/// How many of the audit log's last entries [`lapsed_run`] looks through for the last take,
/// and the lapse gauge for the lapses of the key's recent runs.
const LAPSE_TAIL: isize = 64;

/// Each of `batch`'s audit logs' last [`LAPSE_TAIL`] entries, oldest first, in one round trip
/// (over a quorum, the first node's). The log is no part of what `metrics` promises: when it
/// cannot be read, `None` for every key, and nothing is inferred.
fn log_tails(nodes: &mut Nodes, batch: &[Keys]) -> Vec<Option<Vec<String>>> {
    let read = nodes.on(0, |c| {
        let mut pipe = redis::pipe();
        for k in batch {
            pipe.cmd("LRANGE").arg(&k.log).arg(-LAPSE_TAIL).arg(-1);
        }
        Ok(pipe.query::<Vec<Vec<String>>>(c)?)
    });
    match read {
        Ok(tails) if tails.len() == batch.len() => tails.into_iter().map(Some).collect(),
        _ => vec![None; batch.len()],
    }
}

/// The last run of a lock whose lease lapsed under it, as the lock's records cannot say: its
/// holder died (host down, redlock killed with its keeper, a script's `acquire` never
/// released), so no release wrote how it ended. Only when the last take is not over in the
/// records: a fence was issued after the last recorded run's, no holder has it, and the audit
/// log's last [`LAPSE_TAIL`] entries have its `acquired` entry and no end naming it (a hold
/// given back, released by token or forced has one). Its outcome is `lease lost`, its start
/// and end the take's (its lapse is not recorded), who it was the take's; no exit status.
/// `tail` is the log's last entries (see [`log_tails`]).
fn lapsed_run(tail: &[String], i: &Inspection) -> Option<LastRun> {
    let fence = i.fence?;
    let recorded = i.last.as_ref().and_then(|l| l.fence).unwrap_or(0);
    if fence <= recorded || i.holders().iter().any(|h| h.fence() == Some(fence)) {
        return None;
    }
    if i.holders().iter().any(|h| h.fence().is_none()) {
        return None;
    }
    let fence_text = fence.to_string();
    let mut take: Option<(i64, Vec<(String, String)>)> = None;
    for entry in tail {
        let mut parts = entry.split('\u{1f}');
        let ms: i64 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        let event = parts.next().unwrap_or_default();
        let fields: Vec<(String, String)> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let names_it = fields.iter().any(|(n, v)| n == "fence" && *v == fence_text);
        match event {
            "acquired" if names_it => take = Some((ms, fields)),
            "released" | "lost" | "forced" if names_it => return None,
            _ => {}
        }
    }
    let (ms, fields) = take?;
    let get = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    Some(LastRun {
        outcome: Outcome::LeaseLost,
        exit: None,
        host: get("host"),
        pid: get("pid").and_then(|p| p.parse().ok()),
        user: get("user"),
        command: get("cmd"),
        started_ms: Some(ms),
        ended_ms: Some(ms),
        duration_ms: None,
        fence: Some(fence),
        once_per_ms: None,
        replaced_by: None,
        shared: false,
        also_fences: Vec::new(),
    })
}

/// How long a run waits for another run writing a metrics file in the same directory.
pub const FILE_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Writes `keys`' metrics to `path` atomically: a temporary file in the same directory
/// (`.NAME.tmp.PID`), flushed, then renamed over `path`, so a collector never reads half a
/// file. Used by `run --metrics-file` after the release. The read and the rename happen under
/// the directory's lock, and no counter is written below the file's (see the module doc).
pub fn write_file(nodes: &mut Nodes, keys: &Keys, path: &Path) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // The rename would put a regular file in place of a device, a FIFO or a directory
    // (/dev/stdout, /dev/null): that is never what the flag asked for.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.file_type().is_file()
    {
        anyhow::bail!(
            "cannot write {}: it is no regular file (the metrics file is replaced by a rename)",
            path.display()
        );
    }
    let _locked = lock_dir(dir)?;
    let read = crate::lock::inspect::readable(super::status::inspect_each(
        nodes,
        std::slice::from_ref(keys),
    )?)?;
    let lapses: Vec<Option<i64>> = log_tails(nodes, std::slice::from_ref(keys))
        .into_iter()
        .zip(&read)
        .map(|(tail, i)| tail.and_then(|t| super::log::last_lapse_ms(keys, t, i)))
        .collect();
    let mut text = render(
        std::slice::from_ref(keys),
        &read,
        &lapses,
        super::status::now_ms(),
    );
    if let Some(before) = read_before(path) {
        text = no_counter_lower(&text, &before);
    }
    let tmp = path.with_file_name(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

/// The most of an existing metrics file [`write_file`] reads: a key's file is a few KB.
const BEFORE_LIMIT: u64 = 4 * 1024 * 1024;

/// The metrics file's current text, to keep its counters from going back: only a regular file
/// (a FIFO or a device such as /dev/stdout or /dev/full would block or never end), opened
/// without blocking, of at most [`BEFORE_LIMIT`] bytes. A larger one is no file of ours: a
/// warning, and the file is written anew.
fn read_before(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if !std::fs::metadata(path).ok()?.file_type().is_file() {
        return None;
    }
    // O_NONBLOCK: a FIFO put in the file's place since the check does not block the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut before = String::new();
    file.take(BEFORE_LIMIT + 1)
        .read_to_string(&mut before)
        .ok()?;
    if before.len() as u64 > BEFORE_LIMIT {
        log::warn(
            "metrics_file_large",
            &format!(
                "{} is larger than {} MiB and no metrics file: it is written anew, its counters not kept",
                path.display(),
                BEFORE_LIMIT / 1024 / 1024
            ),
            &[],
        );
        return None;
    }
    Some(before)
}

/// An exclusive `flock` on a directory, held until dropped (the descriptor's close releases
/// it). Waits at most [`FILE_LOCK_WAIT`] for another holder.
fn lock_dir(dir: &Path) -> Result<std::fs::File> {
    let file =
        std::fs::File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    let until = Instant::now() + FILE_LOCK_WAIT;
    loop {
        // SAFETY: flock(2) on a descriptor this function owns; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("cannot lock {}", dir.display()));
        }
        if Instant::now() >= until {
            anyhow::bail!(
                "another run has been writing a metrics file in {} for {}",
                dir.display(),
                crate::supervise::lease::fmt(FILE_LOCK_WAIT)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `text` with each counter sample raised to the value `before` (the file's current text)
/// has for the same series, when that is higher.
fn no_counter_lower(text: &str, before: &str) -> String {
    let counters: Vec<&str> = FAMILIES
        .iter()
        .filter(|f| f.kind == "counter")
        .map(|f| f.name)
        .collect();
    let is_counter = |series: &str| counters.contains(&series.split('{').next().unwrap_or(""));
    let old: Vec<(&str, f64)> = before
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| is_counter(series))
        .filter_map(|(series, v)| v.parse().ok().map(|v| (series, v)))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.rsplit_once(' ') {
            Some((series, v)) if !line.starts_with('#') && is_counter(series) => {
                let new: f64 = v.parse().unwrap_or(0.0);
                let kept = old
                    .iter()
                    .find(|(s, _)| *s == series)
                    .map_or(new, |(_, o)| o.max(new));
                out.push_str(&format!("{series} {kept}\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// One metric family: name, type, help, and a sample per key when the key has a value.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&Inspection, i64) -> Option<f64>,
}

const OUTCOMES: [Outcome; 6] = [
    Outcome::Ok,
    Outcome::Failed,
    Outcome::Killed,
    Outcome::LeaseLost,
    Outcome::TimedOut,
    Outcome::Replaced,
];

fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

const FAMILIES: &[Family] = &[
    Family {
        name: "redlock_held",
        kind: "gauge",
        help: "1 when the lock is held, else 0.",
        value: |i, _| Some(f64::from(u8::from(i.state() == LockState::Held))),
    },
    Family {
        name: "redlock_holders",
        kind: "gauge",
        help: "Commands running under the lock, in any shape (exclusive: 0 or 1; shared or slotted: how many holders run; a hold kept by --hold-at-least after its command ended counts none).",
        value: |i, _| Some(i.running().len() as f64),
    },
    Family {
        name: "redlock_lease_age_seconds",
        kind: "gauge",
        help: "How long the oldest current holder has held the lock (left out when free).",
        value: |i, now| i.oldest_start_ms().map(|s| seconds((now - s).max(0))),
    },
    Family {
        name: "redlock_lease_renewal_age_seconds",
        kind: "gauge",
        help: "How long since the running holder whose renewal is the most overdue against its --ttl last renewed its lease, or took the lock when it has not renewed yet (left out when no command runs under the lock, and for holds no redlock renews: acquire, or a lease covering --max-runtime).",
        value: |i, now| stalest_renewal(i, now).map(|(age, _)| seconds(age)),
    },
    Family {
        name: "redlock_lease_length_seconds",
        kind: "gauge",
        help: "The lease length (--ttl) of that same holder: a run renews every third of it (left out when no command runs under the lock).",
        value: |i, now| stalest_renewal(i, now).map(|(_, ttl)| seconds(ttl)),
    },
    Family {
        name: "redlock_ttl_seconds",
        kind: "gauge",
        help: "Time left before the lock frees itself unless renewed: until the last holder's lease ends (0 when free, -1 without expiry).",
        value: |i, _| {
            Some(match i.state() {
                LockState::Held => i.ttl_left_ms().map_or(-1.0, seconds),
                _ => 0.0,
            })
        },
    },
    Family {
        name: "redlock_fence",
        kind: "gauge",
        help: "The last fencing token handed out for the lock.",
        value: |i, _| i.fence.map(|f| f as f64),
    },
    Family {
        name: "redlock_queue_length",
        kind: "gauge",
        help: "Runs waiting for the lock (--wait).",
        value: |i, _| Some(i.queue.len() as f64),
    },
    Family {
        name: "redlock_paused",
        kind: "gauge",
        help: "1 while a pause (redlock pause) refuses new runs of the lock, else 0.",
        value: |i, now| Some(f64::from(u8::from(i.pause(now).is_some()))),
    },
    Family {
        name: "redlock_pause_lapsed",
        kind: "gauge",
        help: "1 when a pause's --for ran out without a resume (the runs go ahead again, but nobody said the work is done; for a day, or until resume), else 0.",
        value: |i, now| Some(f64::from(u8::from(pause_lapsed(i, now)))),
    },
    Family {
        name: "redlock_pause_end_timestamp_seconds",
        kind: "gauge",
        help: "When the pause in force ends by itself (its --for; server time); left out when no pause is in force or it has no end.",
        value: |i, now| i.pause(now).and_then(|p| p.until_ms).map(seconds),
    },
    Family {
        name: "redlock_last_run_start_timestamp_seconds",
        kind: "gauge",
        help: "When the last finished run took the lock (server time).",
        value: |i, _| i.last.as_ref().and_then(|l| l.started_ms).map(seconds),
    },
    Family {
        name: "redlock_last_run_end_timestamp_seconds",
        kind: "gauge",
        help: "When the last finished run ended (server time); for a run whose lease lapsed under it, when it took the lock. Of several files for one key, the one with the latest end has the key's last run.",
        value: |i, _| i.last.as_ref().and_then(|l| l.ended_ms).map(seconds),
    },
    Family {
        name: "redlock_last_run_duration_seconds",
        kind: "gauge",
        help: "How long the last finished run held the lock.",
        value: |i, _| i.last.as_ref().and_then(|l| l.duration_ms).map(seconds),
    },
    Family {
        name: "redlock_last_run_exit_status",
        kind: "gauge",
        help: "The exit status of the last finished run's command.",
        value: |i, _| i.last.as_ref().and_then(|l| l.exit).map(|e| e as f64),
    },
    Family {
        name: "redlock_last_success_timestamp_seconds",
        kind: "gauge",
        help: "When a run of the lock last ended ok (server time).",
        value: |i, _| i.counters.last_ok_ms.map(seconds),
    },
    Family {
        name: "redlock_runs_total",
        kind: "counter",
        help: "Runs that took the lock and ended.",
        value: |i, _| Some(i.counters.runs as f64),
    },
    Family {
        name: "redlock_busy_total",
        kind: "counter",
        help: "Runs and acquires refused because the lock was busy or paused.",
        value: |i, _| Some(i.counters.busy as f64),
    },
    Family {
        name: "redlock_lease_lost_total",
        kind: "counter",
        help: "Runs that lost their lease.",
        value: |i, _| Some(i.counters.lost as f64),
    },
    Family {
        name: "redlock_failed_total",
        kind: "counter",
        help: "Runs whose command failed, was killed or timed out.",
        value: |i, _| Some(i.counters.failed as f64),
    },
    Family {
        name: "redlock_forced_releases_total",
        kind: "counter",
        help: "Times the lock was removed with release --force.",
        value: |i, _| Some(i.counters.forced as f64),
    },
    Family {
        name: "redlock_replaced_total",
        kind: "counter",
        help: "Runs stopped because another run asked with --replace.",
        value: |i, _| Some(i.counters.replaced as f64),
    },
];

/// Of the holders whose command runs, the one whose renewal is the most overdue against its
/// own lease (a run renews every third of its `--ttl`): how long since its last renewal (since
/// it took the lock when it has not renewed yet) and its lease length, in ms. A shared or
/// slotted holder's last renewal is its deadline less its lease. `None` when no running holder
/// has a recorded lease (a foreign client's key).
fn stalest_renewal(i: &Inspection, now_ms: i64) -> Option<(i64, i64)> {
    i.running()
        .into_iter()
        .filter_map(|h| {
            let (renewed, ttl) = match h {
                // A lease no redlock renews misses no renewal (see Holder::no_renewal).
                Holding::Exclusive(h) => {
                    let h = h.filter(|h| !h.no_renewal)?;
                    (h.renewed_ms.or(h.started_ms)?, h.ttl_ms?)
                }
                Holding::Shared(s) => {
                    let ttl = s.ttl_ms?;
                    (s.deadline_ms.map(|d| d - ttl).or(s.started_ms)?, ttl)
                }
            };
            (ttl > 0).then_some(((now_ms - renewed).max(0), ttl))
        })
        .max_by(|a, b| (a.0 as f64 / a.1 as f64).total_cmp(&(b.0 as f64 / b.1 as f64)))
}

/// Whether a pause of the lock (its own or its prefix's) ran out without a resume, and no
/// pause is in force: its record is kept [`crate::lock::record::PAUSE_KEPT`] after its end,
/// and a resume removes it.
fn pause_lapsed(i: &Inspection, now_ms: i64) -> bool {
    i.pause(now_ms).is_none()
        && i.pauses
            .iter()
            .any(|p| p.until_ms.is_some_and(|until| until <= now_ms))
}

/// How much of one family's samples `metrics` keeps in memory before it puts them in a
/// temporary file (see `spill.rs`): a few thousand locks' worth.
const SPILL_AT: usize = 256 * 1024;

/// `metrics --all`'s own sample: when it read the prefix's locks.
const STAMP: &str = "redlock_metrics_timestamp_seconds";

/// The families in the order they are printed: [`FAMILIES`], with the last run's outcome
/// (a sample per outcome) after its exit status.
const OUTCOME_AFTER: &str = "redlock_last_run_exit_status";

/// The time of the key's last inferred lapse, printed after the lease-lost counter: a run whose
/// holder died (killed with its keeper, its host down) writes no end, so the counter never
/// counts it, and a later run's outcome replaces its own.
const LAPSE: &str = "redlock_last_lapse_timestamp_seconds";
const LAPSE_AFTER: &str = "redlock_lease_lost_total";
const LAPSE_HELP: &str = "When a run's lease last lapsed under it without its release (its holder died), as `redlock log` infers it from the key's last 64 audit entries: when a later run took the lock, or, when none did, when the lapsed run took it (server time). Left out when none of those entries shows a lapse.";

/// An exposition being built, a lock at a time: each family's samples, kept apart until the
/// end, when each family is printed whole after its HELP and TYPE lines (as the format asks).
struct Exposition {
    /// One per family, in the order printed.
    samples: Vec<Spill>,
    /// `metrics --all`'s `redlock_metrics_timestamp_seconds` sample, printed last.
    stamp: Option<String>,
}

impl Exposition {
    /// Each family keeps up to `spill_at` bytes in memory.
    fn new(spill_at: usize) -> Exposition {
        Exposition {
            samples: (0..FAMILIES.len() + 2)
                .map(|_| Spill::new(spill_at))
                .collect(),
            stamp: None,
        }
    }

    /// `k`'s samples, from its inspection and the time of its last inferred lapse.
    fn add(&mut self, k: &Keys, i: &Inspection, lapse_ms: Option<i64>, now_ms: i64) -> Result<()> {
        let label = format!("key=\"{}\"", escape(&k.lock));
        let mut slots = self.samples.iter_mut();
        for f in FAMILIES {
            let spill = slots.next().expect("a slot per family");
            if let Some(v) = (f.value)(i, now_ms) {
                spill.push(&format!("{}{{{label}}} {v}\n", f.name))?;
            }
            if f.name == LAPSE_AFTER {
                let spill = slots.next().expect("a slot for the lapse");
                if let Some(ms) = lapse_ms {
                    spill.push(&format!("{LAPSE}{{{label}}} {}\n", seconds(ms)))?;
                }
            }
            if f.name != OUTCOME_AFTER {
                continue;
            }
            let spill = slots.next().expect("a slot for the outcomes");
            let Some(last) = &i.last else { continue };
            for outcome in &OUTCOMES {
                let v = u8::from(&last.outcome == outcome);
                spill.push(&format!(
                    "redlock_last_run_outcome{{{label},outcome=\"{}\"}} {v}\n",
                    outcome.as_str()
                ))?;
            }
            if let Outcome::Other(other) = &last.outcome {
                spill.push(&format!(
                    "redlock_last_run_outcome{{{label},outcome=\"{}\"}} 1\n",
                    escape(other)
                ))?;
            }
        }
        Ok(())
    }

    /// `metrics --all` read every lock under `prefix` at `now_ms` (this host's clock): a file
    /// that cron no longer refreshes (Redis down, and `&& mv` kept the old file) shows as this
    /// sample falling behind. Its one label is the prefix: files of several prefixes, or of
    /// several hosts, each have their own.
    fn stamp(&mut self, prefix: &str, now_ms: i64) {
        self.stamp = Some(format!(
            "# HELP {STAMP} When `metrics --all` read the locks under this prefix (this host's clock): it stops moving when the file is no longer refreshed.\n\
             # TYPE {STAMP} gauge\n\
             {STAMP}{{prefix=\"{}\"}} {}\n",
            escape(prefix),
            seconds(now_ms)
        ));
    }

    /// The text: every family, each with its HELP and TYPE lines, then its samples.
    fn write_to(self, out: &mut impl Write) -> Result<()> {
        let mut slots = self.samples.into_iter();
        let mut family = |name: &str, kind: &str, help: &str| -> Result<()> {
            out.write_all(format!("# HELP {name} {help}\n# TYPE {name} {kind}\n").as_bytes())?;
            slots.next().expect("a slot per family").write_to(out)
        };
        for f in FAMILIES {
            family(f.name, f.kind, f.help)?;
            if f.name == LAPSE_AFTER {
                family(LAPSE, "gauge", LAPSE_HELP)?;
            }
            if f.name == OUTCOME_AFTER {
                family(
                    "redlock_last_run_outcome",
                    "gauge",
                    "How the last finished run ended: 1 for its outcome, 0 for the others.",
                )?;
            }
        }
        if let Some(stamp) = &self.stamp {
            out.write_all(stamp.as_bytes())?;
        }
        Ok(())
    }
}

/// The exposition text for `keys` (with their inspections and their last lapses, in the same
/// order), in memory.
pub fn render(keys: &[Keys], read: &[Inspection], lapses: &[Option<i64>], now_ms: i64) -> String {
    let mut text = Exposition::new(usize::MAX);
    let mut out = Vec::new();
    for ((k, i), lapse_ms) in keys.iter().zip(read).zip(lapses) {
        text.add(k, i, *lapse_ms, now_ms)
            .expect("an exposition in memory is not written to a file");
    }
    text.write_to(&mut out)
        .expect("an exposition in memory is not written to a file");
    String::from_utf8(out).expect("the exposition is text")
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape("plain:key"), "plain:key");
    }

    #[test]
    fn counters_are_never_written_below_the_file_and_gauges_follow_the_read() {
        let before = "# TYPE redlock_runs_total counter\n\
                      redlock_runs_total{key=\"job\"} 7\n\
                      redlock_busy_total{key=\"job\"} 1\n\
                      redlock_held{key=\"job\"} 1\n\
                      redlock_runs_total{key=\"other\"} 50\n";
        let read = "# TYPE redlock_runs_total counter\n\
                    redlock_runs_total{key=\"job\"} 6\n\
                    redlock_busy_total{key=\"job\"} 2\n\
                    redlock_held{key=\"job\"} 0\n";
        assert_eq!(
            no_counter_lower(read, before),
            "# TYPE redlock_runs_total counter\n\
             redlock_runs_total{key=\"job\"} 7\n\
             redlock_busy_total{key=\"job\"} 2\n\
             redlock_held{key=\"job\"} 0\n"
        );
        assert_eq!(no_counter_lower(read, ""), read);
    }

    #[test]
    fn a_free_lock_without_records_has_the_always_present_samples_only() {
        let keys = [Keys::new("p:", "job").unwrap()];
        let text = render(&keys, &[Inspection::nothing()], &[None], 0);
        assert!(text.contains("redlock_held{key=\"p:job\"} 0\n"), "{text}");
        assert!(
            text.contains("redlock_runs_total{key=\"p:job\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("redlock_lease_age_seconds{"), "{text}");
        assert!(!text.contains("redlock_last_run_outcome{"), "{text}");
    }
}
