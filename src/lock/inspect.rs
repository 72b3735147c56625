//! Reading a lock's state: the one reading behind every reader that shows or judges a lock —
//! `status`, `metrics`, `check`, `pause --drain` (and doctor's probe). It reads the lock, its
//! fence and its records with plain read commands only (`+@read` is enough), one round trip per
//! batch of keys, into an [`Inspection`].
//!
//! An [`Inspection`] knows every shape a lock is held in: the exclusive holder (the lock key and
//! its holder record) and the shared or slotted holders (`leases` and `holders`), and also the
//! queue, the pauses and the `--once-per` window. Readers ask it questions that cover every
//! shape — [`Inspection::holders`], [`Inspection::running`], [`Inspection::oldest_start_ms`],
//! [`Inspection::ttl_left_ms`], [`Inspection::shape`] — rather than looking at the exclusive
//! holder's record alone; the fields that describe one shape only are private for that reason.
//! What several holders mean for a reader is decided here once: a lock is held while any holder
//! is; its holders that run are those whose command has not ended (a hold kept by
//! `--hold-at-least` after its command ended runs nothing; a client that keeps no holder record
//! is counted as running, since nothing says it ended); its age is its oldest holder's; its
//! lease ends when the last holder's does.
//!
//! A read that failed is never an empty answer: an error on any of a lock's keys (an ACL
//! denial, a companion key of another type) makes that lock [`Unreadable`], with the server's
//! error, so that no reader reports "free", "never run" or zero counters for a lock it could
//! not read. The busy message and the nested-run confirmation are answered by the scripts
//! themselves in the round trip that takes or confirms a hold (`lock::Busy`, `lock::Held`,
//! both with the hold's [`Shape`]); no extra read is made on the run path.

use std::time::Duration;

use anyhow::{Context, Result};
use redis::{RedisError, Value};

use crate::lock::Shape;
use crate::lock::keys::Keys;
use crate::lock::record::{
    Counters, Holder, LAYOUT, LAYOUT_FIELD, LastRun, LockState, Pause, SEPARATOR, Sharer, Waiter,
};
use crate::redis::server::Conn;
use crate::report::exit::Exit;
use crate::supervise::lease::fmt;

/// Everything Redis knows about one lock.
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    /// The lock key's Redis TYPE: `string` for a lock, `none` when free, anything else is not
    /// a lock.
    pub key_type: String,
    pub token: Option<String>,
    /// The lock key's own PTTL: the exclusive lease (see [`Inspection::ttl_left_ms`]).
    pttl_ms: i64,
    pub fence: Option<i64>,
    /// The holder record, as stored; it may outlive its lock (see [`Inspection::holder`]).
    holder_record: Option<Holder>,
    pub last: Option<LastRun>,
    pub counters: Counters,
    /// The waiters, first in line first.
    pub queue: Vec<Waiter>,
    /// The lock's own pause record (in force or lapsed), then the prefix-wide one.
    pub pauses: Vec<Pause>,
    /// A shared or slotted lock's shape, while it has holders.
    shared_shape: Option<Shape>,
    /// Its holders whose lease has not ended (by this host's clock), by slot, then by fence.
    sharers: Vec<Sharer>,
    /// This host's clock when the lock was read (ms since the epoch).
    now_ms: i64,
    /// The `--once-per` window's record: who took the current (or last) window, and how it went.
    pub once: Option<crate::lock::Ran>,
}

/// What one read of a lock gave: its state, or why it could not be read.
pub type Reading = std::result::Result<Inspection, Unreadable>;

/// A lock that could not be read: which of its keys the server refused, and its error.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub key: String,
    pub error: RedisError,
    /// The record's layout, when it is one this redlock does not read (`error` is then not
    /// the cause).
    pub layout: Option<String>,
}

impl Unreadable {
    /// The error, as a command that cannot go on reports it.
    pub fn error(&self) -> anyhow::Error {
        if let Some(version) = &self.layout {
            return crate::lock::record::layout_error(version, &self.key);
        }
        anyhow::Error::new(self.error.clone()).context(format!("cannot read {}", self.key))
    }

    /// Its exit status: 77 for an ACL denial, 78 for a key of another type or a record of
    /// another layout, 69 otherwise.
    pub fn exit(&self) -> Exit {
        if self.layout.is_some() {
            return Exit::Config;
        }
        crate::report::error::classify_redis(&self.error)
    }

    /// The line that says why.
    pub fn why(&self) -> String {
        crate::report::error::render(&self.error())
    }
}

/// The inspections, or the error of the first lock that could not be read: for the readers
/// that cannot go on without every lock.
pub fn readable(readings: Vec<Reading>) -> Result<Vec<Inspection>> {
    readings
        .into_iter()
        .map(|r| r.map_err(|u| u.error()))
        .collect()
}

/// One holder of a lock, whatever its shape: what readers count, age and name.
#[derive(Clone, Copy, Debug)]
pub enum Holding<'a> {
    /// The exclusive holder (the lock key); `None`: a client that keeps no holder record.
    Exclusive(Option<&'a Holder>),
    /// A shared or slotted holder.
    Shared(&'a Sharer),
}

impl Holding<'_> {
    /// Server time (ms) when it took the lock, when recorded.
    pub fn started_ms(self) -> Option<i64> {
        match self {
            Holding::Exclusive(h) => h.and_then(|h| h.started_ms),
            Holding::Shared(s) => s.started_ms,
        }
    }

    pub fn fence(self) -> Option<i64> {
        match self {
            Holding::Exclusive(h) => h.and_then(|h| h.fence),
            Holding::Shared(s) => s.fence,
        }
    }

    /// Whether its command still runs: not when the hold is only kept by `--hold-at-least`
    /// after the command ended. A holder without a record may run: it counts as running.
    pub fn running(self) -> bool {
        match self {
            Holding::Exclusive(h) => !h.is_some_and(|h| h.finished),
            Holding::Shared(s) => !s.finished,
        }
    }

    /// "held by web-1 (pid 12, user bob, fence 7) for 3m 2s", "held shared by web-2 (pid 4,
    /// user bob, fence 8) for 1s", "held in slot 2 by web-3 (…)"; the age against `now_ms`.
    pub fn describe(self, now_ms: i64) -> String {
        match self {
            Holding::Exclusive(h) => Holder::describe(h, Some(now_ms)),
            Holding::Shared(s) => {
                let who = crate::lock::record::who(
                    &s.host,
                    s.pid.map(i64::from),
                    s.user.as_deref(),
                    s.fence,
                );
                let mut out = match s.slot {
                    Some(slot) => format!("held in slot {slot} by {who}"),
                    None => format!("held shared by {who}"),
                };
                if let Some(started) = s.started_ms {
                    let age = (now_ms - started).max(0) as u64;
                    out.push_str(&format!(
                        " for {}",
                        fmt(Duration::from_millis(age / 1000 * 1000))
                    ));
                }
                out
            }
        }
    }
}

impl Inspection {
    /// An empty inspection, for a key no node could describe.
    pub fn nothing() -> Inspection {
        Inspection {
            key_type: "none".into(),
            pttl_ms: -2,
            ..Inspection::default()
        }
    }

    pub fn state(&self) -> LockState {
        if self.key_type == "none" && !self.sharers.is_empty() {
            return LockState::Held;
        }
        LockState::of_type(&self.key_type)
    }

    /// The pause in force at server time `now_ms`, the lock's own first.
    pub fn pause(&self, now_ms: i64) -> Option<&Pause> {
        self.pauses.iter().find(|p| p.in_force(now_ms))
    }

    /// The exclusive holder's record, while the lock is held. A holder record outliving its
    /// lock (the key was deleted by someone else) is stale and not shown.
    pub fn holder(&self) -> Option<&Holder> {
        self.holder_record
            .as_ref()
            .filter(|_| self.key_type == "string")
    }

    /// The shared or slotted holders whose lease has not ended, by slot, then by fence.
    pub fn sharers(&self) -> &[Sharer] {
        &self.sharers
    }

    /// Every holder of the lock, in any shape: the exclusive one (the lock key), then the
    /// shared or slotted ones. Empty when the lock is free.
    pub fn holders(&self) -> Vec<Holding<'_>> {
        let exclusive = (self.key_type == "string").then(|| Holding::Exclusive(self.holder()));
        exclusive
            .into_iter()
            .chain(self.sharers.iter().map(Holding::Shared))
            .collect()
    }

    /// Whether the holder that took the lock with fence `fence` holds it still, in any shape;
    /// `None` when that cannot be told: a holder whose fence is not recorded (a foreign
    /// client's key) may be anyone.
    pub fn held_with_fence(&self, fence: i64) -> Option<bool> {
        let holders = self.holders();
        if holders.iter().any(|h| h.fence().is_none()) {
            return None;
        }
        Some(holders.iter().any(|h| h.fence() == Some(fence)))
    }

    /// The holders whose command runs (see [`Holding::running`]).
    pub fn running(&self) -> Vec<Holding<'_>> {
        self.holders().into_iter().filter(|h| h.running()).collect()
    }

    /// When the oldest holder took the lock (server ms), when any holder's start is known.
    pub fn oldest_start_ms(&self) -> Option<i64> {
        self.holders()
            .into_iter()
            .filter_map(Holding::started_ms)
            .min()
    }

    /// How the lock is held; `None` when it is not.
    pub fn shape(&self) -> Option<Shape> {
        (self.state() == LockState::Held).then(|| self.shared_shape.unwrap_or_default())
    }

    /// How long until the lock frees itself unless renewed: until the last lease ends, in
    /// milliseconds. `None` when it is free, or held with no expiry (a foreign holder's key).
    pub fn ttl_left_ms(&self) -> Option<i64> {
        if self.state() != LockState::Held {
            return None;
        }
        let shared = self
            .sharers
            .iter()
            .filter_map(|s| s.deadline_ms)
            .max()
            .map(|d| (d - self.now_ms).max(0));
        match (self.key_type == "string", shared) {
            (true, _) if self.pttl_ms < 0 => None,
            (true, shared) => Some(shared.map_or(self.pttl_ms, |s| s.max(self.pttl_ms))),
            (false, shared) => shared,
        }
    }

    /// The lock key's own PTTL on the node that was read (-2: no key, -1: no expiry): what a
    /// quorum's per-node lines show. Readers of the lock's state want [`Self::ttl_left_ms`].
    pub fn key_pttl_ms(&self) -> i64 {
        self.pttl_ms
    }
}

/// The waiters in queue order, from the queue's tickets and the waiters hash.
fn queue_of(tickets: Vec<String>, who: &[(String, String)]) -> Vec<Waiter> {
    tickets
        .iter()
        .map(|ticket| {
            who.iter()
                .find(|(t, _)| t == ticket)
                .map_or_else(Waiter::default, |(_, value)| Waiter::decode(value))
        })
        .collect()
}

/// The live shared holders, from the leases (token, deadline) and the holders hash; the shape
/// is its `shape` field, and a holder whose command ended while its hold is kept
/// (`--hold-at-least`) has a `TOKEN:finished` field. An entry whose deadline has passed by
/// `now_ms` is gone (the scripts remove such entries when they next run).
fn sharers_of(
    leases: Vec<(String, f64)>,
    holders: &[(String, String)],
    now_ms: i64,
) -> Vec<Sharer> {
    let mut sharers: Vec<Sharer> = leases
        .into_iter()
        .filter(|(_, deadline)| *deadline as i64 > now_ms)
        .map(|(token, deadline)| {
            let mut sharer = holders
                .iter()
                .find(|(t, _)| *t == token)
                .map_or_else(Sharer::default, |(_, value)| Sharer::decode(value));
            sharer.deadline_ms = Some(deadline as i64);
            let finished = Sharer::finished_field(&token);
            sharer.finished = holders.iter().any(|(field, _)| *field == finished);
            sharer.token = Some(token);
            sharer
        })
        .collect();
    sharers.sort_by_key(|s| (s.slot, s.fence));
    sharers
}

/// The commands [`inspect`] sends per lock, and the key each one reads.
pub const READS: usize = 11;

/// Reads the lock and its companions for every key in one round trip: one [`Reading`] per key,
/// in order. MGET (not GET) so that a key of another type reads as nil; TYPE tells the two
/// apart. Any error reply on one of a lock's keys makes that lock [`Unreadable`] (the others
/// are still read); a failure of the round trip itself is the error.
pub fn inspect(con: &mut Conn, keys: &[Keys], now_ms: i64) -> Result<Vec<Reading>> {
    let cluster = matches!(con, Conn::Cluster(_));
    // A cluster routes a pipeline by its first key: one pipeline per lock (one slot each).
    if let Conn::Cluster(_) = con
        && keys.len() > 1
    {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.extend(inspect(con, std::slice::from_ref(k), now_ms)?);
        }
        return Ok(out);
    }

    let mut pipe = redis::pipe();
    for k in keys {
        queue_reads(&mut pipe, k, cluster);
    }
    pipe.ignore_errors();
    let replies: Vec<Value> = pipe.query(con).context("cannot read the lock state")?;
    if replies.len() != keys.len() * READS {
        anyhow::bail!("unexpected reply from the server");
    }
    Ok(replies
        .chunks(READS)
        .zip(keys)
        .map(|(chunk, k)| decode(chunk, k, cluster, now_ms))
        .collect())
}

/// Puts the [`READS`] commands that read lock `k` on `pipe`, in the order [`decode`] reads
/// their replies: for a reader that reads a lock's state in the same round trip as something
/// else (`log`, which reads the holders with the audit log). `cluster`: whether `con` is a
/// Cluster's (the prefix-wide pause record is then read where the lock's slot allows).
pub fn queue_reads(pipe: &mut redis::Pipeline, k: &Keys, cluster: bool) {
    pipe.cmd("TYPE")
        .arg(&k.lock)
        .cmd("MGET")
        .arg(&k.lock)
        .arg(&k.fence)
        .arg(&k.holder)
        .cmd("PTTL")
        .arg(&k.lock)
        .cmd("HGETALL")
        .arg(&k.stats)
        .cmd("ZRANGE")
        .arg(&k.queue)
        .arg(0)
        .arg(-1)
        .cmd("HGETALL")
        .arg(&k.waiters)
        .cmd("HGETALL")
        .arg(&k.paused)
        .cmd("HGETALL")
        .arg(k.pause_all_for(cluster))
        .cmd("ZRANGE")
        .arg(&k.leases)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("HGETALL")
        .arg(&k.holders)
        .cmd("HGETALL")
        .arg(&k.once);
}

/// One lock's replies (an error reply as a [`Value::ServerError`]), in the order
/// [`queue_reads`] asks.
pub fn decode(chunk: &[Value], k: &Keys, cluster: bool, now_ms: i64) -> Reading {
    let read: [&str; READS] = [
        &k.lock,
        &k.lock,
        &k.lock,
        &k.stats,
        &k.queue,
        &k.waiters,
        &k.paused,
        k.pause_all_for(cluster),
        &k.leases,
        &k.holders,
        &k.once,
    ];
    let unreadable = |key: &str, error: RedisError| Unreadable {
        key: key.to_string(),
        error,
        layout: None,
    };
    for (value, key) in chunk.iter().zip(read) {
        if let Value::ServerError(e) = value {
            return Err(unreadable(key, RedisError::from(e.clone())));
        }
    }
    // A reply that does not decode (a foreign value the server gave without an error) is not a
    // lock's state either.
    let mut failed: Option<Unreadable> = None;
    let mut field = |i: usize| -> Vec<(String, String)> {
        match redis::from_redis_value_ref::<Vec<(String, String)>>(&chunk[i]) {
            Ok(mut pairs) => {
                pairs.sort();
                pairs
            }
            Err(e) => {
                failed.get_or_insert(unreadable(read[i], e.into()));
                Vec::new()
            }
        }
    };
    let stats = field(3);
    let waiters = field(5);
    let paused = field(6);
    let pause_all = field(7);
    let holders = field(9);
    let once = field(10);
    if let Some(e) = failed {
        return Err(e);
    }
    let value = |i: usize, e: redis::ParsingError| unreadable(read[i], e.into());
    let key_type: String = redis::from_redis_value_ref(&chunk[0]).map_err(|e| value(0, e))?;
    // The holder record reads as none where the key is of another type (MGET).
    let (token, fence, holder): (Option<String>, Option<String>, Option<String>) =
        redis::from_redis_value_ref(&chunk[1]).map_err(|e| value(1, e))?;
    // Records of a layout this redlock does not read are not read as if they were its own: the
    // holder record names its layout first (holder.lua), the lock's record in a field.
    let holder_layout = holder
        .as_deref()
        .and_then(|h| h.strip_prefix("v="))
        .map(|h| h.split(SEPARATOR).next().unwrap_or_default().to_string());
    let stats_layout = stats
        .iter()
        .find(|(f, _)| f == LAYOUT_FIELD)
        .map(|(_, v)| v.clone());
    for (key, version) in [(&k.holder, holder_layout), (&k.stats, stats_layout)] {
        if let Some(version) = version
            && version != LAYOUT
        {
            return Err(Unreadable {
                key: key.to_string(),
                error: RedisError::from(std::io::Error::other("layout")),
                layout: Some(version),
            });
        }
    }
    // Layout 1's fence counter is plain digits; a later layout writes `VERSION:FENCE` there
    // (docs/design.md, "Data layout 1"), which every take already refuses.
    if let Some((version, _)) = fence.as_deref().and_then(|f| f.split_once(':')) {
        return Err(Unreadable {
            key: k.fence.clone(),
            error: RedisError::from(std::io::Error::other("layout")),
            layout: Some(version.to_string()),
        });
    }
    let pttl_ms: i64 = redis::from_redis_value_ref(&chunk[2]).map_err(|e| value(2, e))?;
    let tickets: Vec<String> = redis::from_redis_value_ref(&chunk[4]).map_err(|e| value(4, e))?;
    let leases: Vec<(String, f64)> =
        redis::from_redis_value_ref(&chunk[8]).map_err(|e| value(8, e))?;
    let sharers = sharers_of(leases, &holders, now_ms);
    let shared_shape = holders
        .iter()
        .find(|(field, _)| field == "shape")
        .and_then(|(_, v)| Shape::from_stored(v))
        .filter(|_| !sharers.is_empty());
    let once = once_of(&once, token.as_deref(), &sharers);
    Ok(Inspection {
        once,
        token: if key_type == "string" { token } else { None },
        key_type,
        pttl_ms,
        fence: fence.and_then(|f| f.parse().ok()),
        holder_record: holder.as_deref().and_then(Holder::decode),
        last: LastRun::decode(&stats),
        counters: Counters::decode(&stats),
        queue: queue_of(tickets, &waiters),
        pauses: [
            Pause::decode(&paused, false),
            Some(pause_all)
                .filter(|_| k.pause_all_for(cluster) != k.paused)
                .and_then(|v| Pause::decode(&v, true)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        shared_shape,
        sharers,
        now_ms,
    })
}

/// The `--once-per` window's record, as the acquire script judges it: a run recorded as running
/// that no longer holds the lock (not the lock's token, not among the shared holders) vanished.
fn once_of(
    fields: &[(String, String)],
    token: Option<&str>,
    sharers: &[Sharer],
) -> Option<crate::lock::Ran> {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let num = |name: &str| get(name).and_then(|v| v.parse::<i64>().ok());
    let (window, every) = (num("window")?, num("every")?);
    let mut outcome = get("outcome").unwrap_or("").to_string();
    let owner = get("token");
    if outcome == "running"
        && owner != token
        && !sharers.iter().any(|s| s.token.as_deref() == owner)
    {
        outcome = "vanished".to_string();
    }
    Some(crate::lock::Ran {
        window_start_ms: window * every - every / 2,
        every_ms: every,
        host: get("host").unwrap_or("").to_string(),
        pid: num("pid"),
        user: get("user").map(str::to_string),
        started_ms: num("started"),
        ended_ms: num("ended"),
        exit: num("exit"),
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharer(slot: Option<u32>, started_ms: i64, deadline_ms: i64, finished: bool) -> Sharer {
        Sharer {
            slot,
            started_ms: Some(started_ms),
            deadline_ms: Some(deadline_ms),
            finished,
            ..Sharer::default()
        }
    }

    #[test]
    fn shared_holders_are_held_counted_aged_and_last_until_the_last_lease() {
        let i = Inspection {
            key_type: "none".into(),
            pttl_ms: -2,
            shared_shape: Some(Shape::Slots(3)),
            sharers: vec![
                sharer(Some(0), 1_000, 9_000, false),
                sharer(Some(1), 500, 7_000, true),
                sharer(Some(2), 2_000, 8_000, false),
            ],
            now_ms: 5_000,
            ..Inspection::default()
        };
        assert_eq!(i.state(), LockState::Held);
        assert_eq!(i.shape(), Some(Shape::Slots(3)));
        assert_eq!(i.holders().len(), 3);
        assert_eq!(i.running().len(), 2, "a kept hold runs nothing");
        assert_eq!(i.oldest_start_ms(), Some(500));
        assert_eq!(i.ttl_left_ms(), Some(4_000));
        assert!(i.holder().is_none());
    }

    #[test]
    fn an_exclusive_hold_is_one_holder_with_or_without_a_record() {
        let record = Holder {
            host: "h".into(),
            started_ms: Some(100),
            finished: true,
            ..Holder::default()
        };
        let kept = Inspection {
            key_type: "string".into(),
            pttl_ms: 2_500,
            holder_record: Some(record),
            ..Inspection::default()
        };
        assert_eq!(kept.shape(), Some(Shape::Exclusive));
        assert_eq!(kept.holders().len(), 1);
        assert!(kept.running().is_empty(), "--hold-at-least after the end");
        assert_eq!(kept.ttl_left_ms(), Some(2_500));
        assert_eq!(kept.oldest_start_ms(), Some(100));
        let foreign = Inspection {
            key_type: "string".into(),
            pttl_ms: -1,
            ..Inspection::default()
        };
        assert_eq!(foreign.running().len(), 1, "nothing says it ended");
        assert_eq!(foreign.ttl_left_ms(), None, "no expiry");
        let free = Inspection::nothing();
        assert!(free.holders().is_empty());
        assert_eq!((free.shape(), free.ttl_left_ms()), (None, None));
    }

    #[test]
    fn a_fence_holds_the_lock_while_a_holder_of_any_shape_has_it() {
        let mut shared = sharer(Some(0), 1_000, 9_000, false);
        shared.fence = Some(8);
        let i = Inspection {
            key_type: "none".into(),
            shared_shape: Some(Shape::Slots(2)),
            sharers: vec![shared],
            now_ms: 5_000,
            ..Inspection::default()
        };
        assert_eq!(i.held_with_fence(8), Some(true));
        assert_eq!(i.held_with_fence(7), Some(false));
        let exclusive = Inspection {
            key_type: "string".into(),
            holder_record: Some(Holder {
                fence: Some(7),
                ..Holder::default()
            }),
            ..Inspection::default()
        };
        assert_eq!(exclusive.held_with_fence(7), Some(true));
        assert_eq!(exclusive.held_with_fence(6), Some(false));
        let foreign = Inspection {
            key_type: "string".into(),
            ..Inspection::default()
        };
        assert_eq!(foreign.held_with_fence(7), None, "a key without a record");
        assert_eq!(Inspection::nothing().held_with_fence(7), Some(false));
    }

    #[test]
    fn a_record_left_by_an_earlier_holder_is_not_the_holder() {
        let stale = Inspection {
            key_type: "none".into(),
            holder_record: Some(Holder::default()),
            ..Inspection::nothing()
        };
        assert!(stale.holder().is_none());
        assert!(stale.holders().is_empty());
    }
}
