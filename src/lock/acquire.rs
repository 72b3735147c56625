//! Taking a lock: the acquire script's call, for one attempt or for one that waits on the
//! server behind a waiter's grant list, and what its reply says ([`Acquire`]: taken, [`Busy`],
//! skipped by `--once-per` ([`Ran`]), or held with another shape); undoing an attempt whose
//! answer never came ([`abandon`]).

use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use redis::{ConnectionLike, RedisError, Value};

use super::hold::release;
use super::keys::{Keys, RECORD_TTL};
use super::lua::{Lua, lua};
use super::operator::audit_entry;
use super::record::{Holder, Pause};
use super::refused::give_back_after_error;
use super::replicas::{Ack, explain, is_unacknowledged};
use super::{Claim, PROVISIONAL, Queueing, RELEASE, Refusal, Shape};
use crate::redis::server::Conn;
use crate::redis::wire::Wire;

/// Set-if-absent plus fence and holder record in one round trip. On a busy lock it returns the
/// holder's record instead, and counts the refusal when asked to (only the final attempt of a
/// run counts).
///
/// * `GET` first: on a key of another type it raises WRONGTYPE (78) before anything is
///   written, instead of the key looking busy forever.
/// * The companion keys are written before the lock, so a companion of the wrong type fails
///   the script with the lock untouched, never taken and left behind.
/// * A lock already holding *our* token is ours: an earlier attempt landed but its reply was
///   lost. It is renewed and reported as acquired, with the fence that attempt drew.
static ACQUIRE: Lua = lua!(crate::lock::scripts::ACQUIRE);

/// Several locks at once, all or none (`Keys::also` not empty): see acquire_all.lua.
static ACQUIRE_ALL: Lua = lua!(crate::lock::scripts::ACQUIRE_ALL);

/// The answer to one acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    Acquired {
        fence: i64,
        /// Server time (ms since the epoch) when the lock was taken.
        started_ms: i64,
        /// The slot taken (`--slots N`: 0..N-1, unique among the current holders).
        slot: Option<u32>,
        /// A waiter that headed the queue was granted a [`PROVISIONAL`] lease, which it must
        /// confirm (renew to its TTL) before it may act under it.
        provisional: bool,
        /// The fences of the claim's other locks (`Keys::also`), in order.
        also: Vec<i64>,
    },
    Busy(Busy),
    /// `--once-per`: this window of the server's clock was already taken by another run.
    Skipped(Ran),
    /// The key is held with another shape than the one asked for (slots with another count,
    /// or slots and shared).
    Mismatch(Shape),
    /// `--replace`: a replacer that arrived later superseded this waiting one (who, in words):
    /// the last replacer to arrive is the one that runs.
    Superseded(String),
}

/// The run that took a `--once-per` window, as the window's record has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ran {
    /// Where the window starts on the server's clock (ms since the epoch), and its length.
    pub window_start_ms: i64,
    pub every_ms: i64,
    pub host: String,
    pub pid: Option<i64>,
    pub user: Option<String>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub exit: Option<i64>,
    /// The record's outcome (`ok`, `failed`, …), `running`, or `vanished` (recorded as running
    /// but no longer holding: it died without a release).
    pub outcome: String,
}

impl Ran {
    /// "the window 2026-01-02T11:30:00Z–2026-01-02T12:30:00Z (--once-per 1h): host (pid 12,
    /// user bob) started 2026-01-02T12:00:03Z, ok (exit 0) after 2s".
    pub fn summary(&self) -> String {
        let at = |ms: i64| {
            let t = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
            humantime::format_rfc3339_seconds(t).to_string()
        };
        let who = crate::lock::record::who(&self.host, self.pid, self.user.as_deref(), None);
        let how = match self.outcome.as_str() {
            "running" => "still running".to_string(),
            "vanished" => "it ended without a release (its lease lapsed)".to_string(),
            outcome => {
                let mut how = outcome.to_string();
                if let Some(exit) = self.exit {
                    how.push_str(&format!(" (exit {exit})"));
                }
                if let (Some(s), Some(e)) = (self.started_ms, self.ended_ms) {
                    how.push_str(&format!(
                        " after {}",
                        crate::supervise::lease::fmt(Duration::from_millis(
                            e.saturating_sub(s).max(0) as u64
                        ))
                    ));
                }
                how
            }
        };
        format!(
            "the window {}–{} (--once-per {}): {who} started {}, {how}",
            at(self.window_start_ms),
            at(self.window_start_ms + self.every_ms),
            crate::supervise::lease::fmt(Duration::from_millis(self.every_ms.max(0) as u64)),
            self.started_ms.map_or("at an unknown time".to_string(), at),
        )
    }

    /// "already ran in the window …": why a run of this window is skipped.
    pub fn describe(&self) -> String {
        format!("already ran in {}", self.summary())
    }

    /// `status --json`'s `once` object.
    pub fn json(&self) -> crate::report::json::Json {
        use crate::report::json::Json;
        Json::Obj(vec![
            ("window_start_ms", Json::Num(self.window_start_ms.into())),
            ("every_ms", Json::Num(self.every_ms.into())),
            ("host", Json::str(&self.host)),
            ("pid", Json::opt_num(self.pid)),
            ("user", Json::opt_str(self.user.as_deref())),
            ("started_ms", Json::opt_num(self.started_ms)),
            ("ended_ms", Json::opt_num(self.ended_ms)),
            ("exit", Json::opt_num(self.exit)),
            ("outcome", Json::str(&self.outcome)),
        ])
    }
}

/// Who holds a busy lock, as far as Redis knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Busy {
    /// Milliseconds until the key expires; -1 when it has no expiry, -2 when the key is free
    /// but waiters are queued for it.
    pub pttl_ms: i64,
    pub server_now_ms: i64,
    /// `None`: the lock was taken by a client that keeps no holder record.
    pub holder: Option<Holder>,
    /// Waiters ahead of this one in the key's queue (0 when not waiting).
    pub ahead: usize,
    /// Waiters in the key's queue, this one included.
    pub queued: usize,
    /// The pause in force, when the key is paused (`redlock pause`).
    pub pause: Option<Box<Pause>>,
    /// Shared holders and their shape, when the lock is held that way.
    pub sharers: Option<(Shape, usize)>,
    /// Whether the refused taker is a waiter (then it is one of `queued`).
    pub waiting: bool,
    /// `--max-waiters N`: the queue was full (this many live waiters), and the waiter did not
    /// join it.
    pub full: Option<usize>,
    /// `--replace`: the holder was asked to stop (by this taker or an earlier one).
    pub replacing: bool,
    /// Which lock of a claim over several keys refused (0: the first, `Keys::each`'s order);
    /// the rest of this describes that one.
    pub refused_by: usize,
    /// A waiter for several keys stands at the front of another of them that is free: its
    /// entry there lapses unless it tries again at the front's pace.
    pub hurry: bool,
    /// How long the waiter's queue entry lives from this attempt (the shortest, over several
    /// keys): its next attempt must run well within it. `None` when not queued.
    pub life: Option<Duration>,
}

impl Busy {
    /// The lock that refused, among `keys` and its others.
    pub fn lock<'k>(&self, keys: &'k Keys) -> &'k str {
        keys.each()
            .nth(self.refused_by)
            .map_or(&keys.lock, |k| &k.lock)
    }

    /// Free, but others were queued first.
    pub fn is_queue(&self) -> bool {
        self.pttl_ms == -2
    }

    /// Waiters queued before this taker: those ahead of it when it waits, all of them when
    /// it does not.
    fn others_queued(&self) -> usize {
        if self.waiting {
            self.ahead
        } else {
            self.queued
        }
    }

    /// "held by host (pid 12, user bob, fence 7) for 3m 2s, expires in 25s"; a paused key
    /// names the pause first.
    pub fn describe(&self) -> String {
        if let Some(pause) = &self.pause {
            let mut out = pause.describe(self.server_now_ms);
            if self.pttl_ms != -2 {
                out.push_str("; meanwhile ");
                out.push_str(&self.describe_holder());
            }
            return out;
        }
        self.describe_holder()
    }

    fn describe_holder(&self) -> String {
        if self.is_queue() {
            return format!(
                "free, but {} queued for it",
                match self.queued {
                    1 => "a waiter is".to_string(),
                    n => format!("{n} waiters are"),
                }
            );
        }
        let mut out = match self.sharers {
            // A shared taker is refused by its shape's holders, or by waiters queued first.
            Some((shape, n)) if self.others_queued() > 0 => format!(
                "{}, and {} queued before this one",
                describe_sharers(shape, n),
                match self.others_queued() {
                    1 => "a waiter is".to_string(),
                    n => format!("{n} waiters are"),
                }
            ),
            Some((shape, n)) => describe_sharers(shape, n),
            None => Holder::describe(self.holder.as_ref(), Some(self.server_now_ms)),
        };
        if self.sharers.is_some() && self.pttl_ms >= 0 {
            out.push_str(&format!(
                ", the first lease expires in {}",
                crate::supervise::lease::fmt(Duration::from_millis(self.pttl_ms as u64))
            ));
        } else if self.pttl_ms >= 0 {
            out.push_str(&format!(
                ", expires in {}",
                crate::supervise::lease::fmt(Duration::from_millis(self.pttl_ms as u64))
            ));
        } else {
            out.push_str(", with no expiry");
        }
        out
    }
}

/// "held shared by 3 holders", "held by 2 holders of 3 slots".
pub fn describe_sharers(shape: Shape, n: usize) -> String {
    let holders = if n == 1 {
        "1 holder".to_string()
    } else {
        format!("{n} holders")
    };
    match shape {
        Shape::Slots(slots) => format!("held by {holders} of {slots} slots"),
        _ => format!("held shared by {holders}"),
    }
}

/// One acquire attempt; a waiter (`queue`) that is refused joins the key's queue, or refreshes
/// its entry there.
///
/// `cluster`: the connection is a Redis Cluster's, where the prefix-wide pause record can be
/// read only when it shares the lock's slot ([`Keys::pause_all_for`]).
/// The acquire script's keys and arguments for one attempt.
///
/// `lean`: a plain run (one key, exclusive, no waiting, no window, no replacing) names only the
/// keys acquire.lua's common paths touch; the script replies [`AGAIN`] when it needs the rest.
fn acquire_call(
    claim: &Claim,
    refusal: Refusal,
    queue: Option<&Queueing>,
    cluster: bool,
    lean: bool,
) -> (Vec<String>, Vec<String>) {
    let Claim {
        keys,
        token,
        ttl,
        holder,
        shape,
        once,
    } = *claim;
    let count = if refusal == Refusal::Count { "1" } else { "0" };
    let ticket = queue.map_or(String::new(), |q| q.ticket.to_string());
    let arrival = queue
        .and_then(|q| q.arrival_us)
        .map_or(String::new(), |a| a.to_string());
    let waiting = if queue.is_some() || shape != Shape::Exclusive {
        crate::lock::record::Waiter::who(holder)
    } else {
        String::new()
    };
    // A waiter's first attempt takes a free lock outright; a later one only provisionally.
    let grant = match queue {
        Some(q) if q.later.is_some() => ttl.min(PROVISIONAL).as_millis().to_string(),
        _ => String::new(),
    };
    let sent_ms = queue
        .and_then(|q| q.later.flatten())
        .map_or(String::new(), |ms| ms.to_string());
    if !keys.also.is_empty() {
        // acquire_all.lua: every lock's keys, the number of locks, and each release channel.
        let mut names = Vec::new();
        for each in keys.each() {
            names.extend(each.of_an_acquire(cluster));
        }
        let mut args = vec![
            token.to_string(),
            ttl.as_millis().to_string(),
            count.to_string(),
            String::new(),
            ticket,
            arrival,
            waiting,
            String::new(),
            (keys.also.len() + 1).to_string(),
            String::new(),
            "0".to_string(),
            grant,
            holder.audit(),
            String::new(),
            sent_ms,
        ];
        args.extend(keys.each().map(|k| k.channel.clone()));
        return (names, args);
    }
    // acquire.lua: a run that neither waits, shares, runs once per window nor replaces sends
    // only what every run needs (each key and argument a script is given costs the server).
    let replacer = queue.and_then(|q| q.replace);
    let rare = queue.is_some() || shape != Shape::Exclusive || once.is_some();
    let mut names = if lean && !rare {
        lean_names(keys, cluster)
    } else {
        keys.of_an_acquire(cluster)
    };
    let mut args = vec![
        token.to_string(),
        ttl.as_millis().to_string(),
        count.to_string(),
        holder.audit(),
    ];
    if holder.irreplaceable || rare {
        args.push(if holder.irreplaceable { "no" } else { "" }.to_string());
    }
    if rare {
        args.extend([
            ticket,
            arrival,
            waiting,
            shape.as_arg(),
            once.map_or(String::new(), |o| o.every.as_millis().to_string()),
            if once.is_some_and(|o| o.retry_failed) {
                "1"
            } else {
                "0"
            }
            .to_string(),
            grant,
            queue
                .and_then(|q| q.max_waiters)
                .map_or(String::new(), |n| n.to_string()),
            replacer.map_or(String::new(), str::to_string),
            sent_ms,
        ]);
        if once.is_some() || replacer.is_some() {
            let waits = replacer.is_some() && queue.is_some_and(|q| q.waits);
            args.push(if waits { "1" } else { "" }.to_string());
        }
    }
    if once.is_some() || replacer.is_some() {
        names.push(keys.once.clone());
        names.push(keys.stop_lists());
    }
    if once.is_some() {
        for (name, value) in holder.identity() {
            args.push(name.to_string());
            args.push(value);
        }
        if holder.irreplaceable {
            args.push("replace".to_string());
            args.push("no".to_string());
        }
    }
    (names, args)
}

/// The keys a plain run's acquire names (a lean call, see acquire.lua): those its common paths
/// touch, the audit log last.
fn lean_names(keys: &Keys, cluster: bool) -> Vec<String> {
    vec![
        keys.lock.clone(),
        keys.fence.clone(),
        keys.holder.clone(),
        keys.stats.clone(),
        keys.queue.clone(),
        keys.leases.clone(),
        keys.paused.clone(),
        keys.pause_all_for(cluster).to_string(),
        keys.log.clone(),
    ]
}

/// acquire.lua's reply to a lean call that found more than its common paths serve (a queue, a
/// pause, a shared holder, the lock already ours): the attempt is sent again with every key.
const AGAIN: i64 = -4;

/// The script for a claim's keys: one lock, or several at once.
fn script_for(keys: &Keys) -> &'static Lua {
    if keys.also.is_empty() {
        &ACQUIRE
    } else {
        &ACQUIRE_ALL
    }
}

/// One acquire attempt; a waiter (`queue`) that is refused joins the key's queue, or refreshes
/// its entry there. With `ack` (`--replicas`), WAIT follows the script in the same round trip,
/// and a grant too few replicas acknowledged is given back ([`acknowledged`]).
pub fn acquire(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    refusal: Refusal,
    queue: Option<&Queueing>,
    cluster: bool,
    ack: Option<Ack>,
) -> Result<Acquire> {
    acquire_with(con, claim, refusal, queue, cluster, ack, true)
}

/// [`acquire`], lean or with every key.
fn acquire_with(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    refusal: Refusal,
    queue: Option<&Queueing>,
    cluster: bool,
    ack: Option<Ack>,
    lean: bool,
) -> Result<Acquire> {
    let (names, args) = acquire_call(claim, refusal, queue, cluster, lean);
    let lean = lean && names.len() < claim.keys.of_an_acquire(cluster).len();
    let again = |reply: &[Value]| {
        lean && reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<i64>(v).ok())
            == Some(AGAIN)
    };
    let mut call = script_for(claim.keys).prepare_invoke();
    for name in &names {
        call.key(name);
    }
    for arg in &args {
        call.arg(arg);
    }
    let context = || format!("cannot acquire {}", claim.keys.lock);
    let Some(ack) = ack else {
        return match call.invoke::<Vec<Value>>(con) {
            Ok(reply) if again(&reply) => {
                acquire_with(con, claim, refusal, queue, cluster, None, false)
            }
            Ok(reply) => Ok(acquire_reply(&reply, queue)),
            Err(e) => {
                let err = anyhow::Error::new(e).context(context());
                Err(give_back_after_error(con, claim, err))
            }
        };
    };
    match call.invoke_then::<Vec<Value>>(con, &ack.command()) {
        Ok((reply, _)) if again(&reply) => {
            acquire_with(con, claim, refusal, queue, cluster, Some(ack), false)
        }
        Ok((reply, waited)) => {
            acknowledged(con, claim, acquire_reply(&reply, queue), ack.check(waited))
        }
        // Through a cluster, a refused WAIT is the error of the script too, which may have
        // taken the lock: given back, whatever the refusal was.
        Err(e) => {
            let err = anyhow::Error::new(e).context(context());
            Err(give_back_after_error(con, claim, err))
        }
    }
}

/// An attempt's answer once WAIT has answered too (`--replicas`): a grant too few replicas
/// acknowledged (or that WAIT was refused for) is given back on the same connection, and the
/// attempt fails with why; any other answer stands, unless WAIT was refused.
fn acknowledged(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    attempt: Acquire,
    waited: Result<()>,
) -> Result<Acquire> {
    let Err(e) = waited else {
        return Ok(attempt);
    };
    if !matches!(attempt, Acquire::Acquired { .. }) {
        if is_unacknowledged(&e) {
            return Ok(attempt);
        }
        return Err(e.context(format!("cannot acquire {}", claim.keys.lock)));
    }
    let e = explain(e, con, claim.keys);
    let given_back = match release(con, claim.keys, claim.token, None, None) {
        Ok(_) => "given back",
        Err(_) => "not given back (it expires by itself)",
    };
    Err(e.context(format!(
        "{} was granted, but the grant does not count; {given_back}",
        claim.keys.lock
    )))
}

/// The name of a waiter's grant list: a release that makes it the head of the queue pushes to
/// it (`wake` in queue.lua), in the lock's hash slot.
pub fn grant_key(keys: &Keys, ticket: &str) -> String {
    format!("{}:{ticket}", keys.queue)
}

/// A waiter for several keys waits on the grant lists of them all: a release of any may make
/// it the head of every queue.
fn grant_keys(keys: &Keys, ticket: &str) -> Vec<String> {
    keys.each().map(|k| grant_key(k, ticket)).collect()
}

/// A waiter's attempt queued behind a blocking pop of its grant list: the server runs the
/// acquire the moment a release pushes to the list (in the same pass as the release), or after
/// `block`, so the waiter wakes once, with the answer ([`grant_reply`]). One server only (not
/// a cluster connection, whose routing cannot keep the two commands together). With `ack`
/// (`--replicas`), WAIT follows the attempt.
pub fn send_after_grant(
    con: &mut Wire,
    claim: &Claim,
    queue: &Queueing,
    block: Duration,
    ack: Option<Ack>,
) -> Result<()> {
    let (names, args) = acquire_call(claim, Refusal::Uncounted, Some(queue), false, false);
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha
        .arg(script_for(claim.keys).get_hash())
        .arg(names.len());
    for name in &names {
        evalsha.arg(name);
    }
    for arg in &args {
        evalsha.arg(arg);
    }
    let mut pipe = redis::pipe();
    pipe.cmd("BLPOP")
        .arg(grant_keys(claim.keys, queue.ticket))
        .arg(format!("{:.3}", block.as_secs_f64()))
        .add_command(evalsha);
    if let Some(ack) = ack {
        pipe.add_command(ack.command());
    }
    con.send_packed_command(&pipe.get_packed_pipeline())
        .with_context(|| format!("cannot acquire {}", claim.keys.lock))
}

/// The answer to [`send_after_grant`]. `Ok(None)`: the server does not know the script (after
/// a restart or SCRIPT FLUSH) and it was loaded; try again. A refused blocking pop (Redis
/// before 6.0 takes no fractional timeout; an ACL without `blpop`) is the server's error,
/// unless the attempt behind it, which ran at once, took the lock. With `ack`, WAIT's answer is
/// read too, and a grant too few replicas acknowledged is given back (see [`acquire`]).
pub fn grant_reply(
    con: &mut Wire,
    claim: &Claim,
    queue: &Queueing,
    ack: Option<Ack>,
) -> Result<Option<Acquire>> {
    let context = || format!("cannot acquire {}", claim.keys.lock);
    let popped = con.recv_response().with_context(context)?;
    let attempt = con.recv_response().with_context(context)?;
    let waited = match ack {
        Some(ack) => Some((
            ack,
            match con.recv_response().with_context(context)? {
                Value::ServerError(e) => Err(RedisError::from(e)),
                value => Ok(value),
            },
        )),
        None => None,
    };
    match attempt {
        Value::Array(reply) => {
            let attempt = acquire_reply(&reply, Some(queue));
            let attempt = match waited {
                Some((ack, waited)) => acknowledged(con, claim, attempt, ack.check(waited))?,
                None => attempt,
            };
            match popped {
                Value::ServerError(e) if matches!(attempt, Acquire::Busy(_)) => {
                    Err(anyhow::Error::new(RedisError::from(e)).context(context()))
                }
                _ => Ok(Some(attempt)),
            }
        }
        Value::ServerError(e) => {
            let e = RedisError::from(e);
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) {
                script_for(claim.keys).load(con)?;
                return Ok(None);
            }
            Err(give_back_after_error(
                con,
                claim,
                anyhow::Error::new(e).context(context()),
            ))
        }
        other => Err(anyhow!("unexpected reply to the acquire: {other:?}").context(context())),
    }
}

/// What the acquire script's reply says.
fn acquire_reply(reply: &[Value], queue: Option<&Queueing>) -> Acquire {
    let int = |i: usize| -> i64 {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref::<i64>(v).ok())
            .unwrap_or(0)
    };
    let text = |i: usize| -> String {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .unwrap_or_default()
    };
    match int(0) {
        1 => {
            return Acquire::Acquired {
                fence: int(1),
                started_ms: int(2),
                slot: u32::try_from(int(3)).ok(),
                provisional: int(4) == 1,
                also: (5..reply.len()).map(int).collect(),
            };
        }
        -2 => {
            let opt_int = |i: usize| text(i).parse::<i64>().ok();
            let opt_text = |i: usize| Some(text(i)).filter(|t| !t.is_empty());
            return Acquire::Skipped(Ran {
                window_start_ms: int(1),
                every_ms: int(2),
                host: text(3),
                pid: opt_int(4),
                user: opt_text(5),
                started_ms: opt_int(6),
                ended_ms: opt_int(7),
                exit: opt_int(8),
                outcome: text(9),
            });
        }
        -1 => {
            return Acquire::Mismatch(Shape::from_stored(&text(1)).unwrap_or_default());
        }
        -3 => return Acquire::Superseded(text(1)),
        _ => {}
    }
    Acquire::Busy(Busy {
        pttl_ms: int(1),
        server_now_ms: int(2),
        holder: Holder::from_reply(reply.get(3)),
        ahead: usize::try_from(int(4)).unwrap_or(0),
        queued: usize::try_from(int(5)).unwrap_or(0),
        pause: reply
            .get(8)
            .and_then(|v| redis::from_redis_value_ref::<Vec<Option<String>>>(v).ok())
            .and_then(Pause::decode_brief)
            .map(Box::new),
        sharers: Shape::from_stored(&text(6))
            .map(|shape| (shape, usize::try_from(int(7)).unwrap_or(0))),
        waiting: queue.is_some(),
        full: usize::try_from(int(9)).ok().filter(|n| *n > 0),
        replacing: int(10) == 1,
        // acquire_all.lua only (several keys).
        refused_by: usize::try_from(int(11) - 1).unwrap_or(0),
        hurry: int(12) == 1,
        life: Some(Duration::from_millis(u64::try_from(int(13)).unwrap_or(0)))
            .filter(|life| !life.is_zero()),
    })
}

/// After an acquire whose answer never came (a timeout, a broken connection): the server may
/// still run it (a stalled server runs what is queued when it resumes) and leave a lock held by
/// nobody for the whole TTL. So the compare-and-delete for our token is written onto the *same*
/// connection, behind the acquire, and not waited for: a server runs one connection's commands
/// in order, so if the acquire ever runs, the release runs right after it. `SCRIPT LOAD` goes
/// first, because the release must not depend on the server's script cache. On a cluster
/// connection the bytes cannot be placed behind the acquire; a bounded ordinary release is
/// tried instead, which undoes an acquire that has already run.
pub fn abandon(con: &mut Conn, keys: &Keys, token: &str) {
    match con {
        Conn::Single(single) => abandon_single(single, keys, token),
        Conn::Cluster(_) => {
            let _ = release(con, keys, token, None, None);
        }
    }
}

/// [`abandon`] on a connection to one server.
pub fn abandon_single(single: &mut Wire, keys: &Keys, token: &str) {
    let mut pipe = redis::pipe();
    pipe.cmd("SCRIPT")
        .arg("LOAD")
        .arg(crate::lock::scripts::RELEASE);
    for keys in keys.each() {
        pipe.cmd("EVALSHA")
            .arg(RELEASE.get_hash())
            .arg(keys.of_an_ending().len())
            .arg(&keys.of_an_ending()[..])
            .arg(token)
            .arg(0)
            .arg("");
        // If the acquire ran, the audit log ends its take.
        for value in crate::lock::record::GivenBack::Unused.release_args() {
            pipe.arg(value);
        }
    }
    let _ = single.send_packed_command(&pipe.get_packed_pipeline());
}

/// Counts one busy refusal (for a `--wait` that ran out; the attempts themselves do not count).
pub fn count_busy(con: &mut dyn ConnectionLike, keys: &Keys, holder: &Holder) -> Result<()> {
    let mut pipe = redis::pipe();
    for keys in keys.each() {
        pipe.hincr(&keys.stats, "busy", 1)
            .ignore()
            .pexpire(&keys.stats, RECORD_TTL.as_millis() as i64)
            .ignore();
        audit_entry(&mut pipe, &keys.log, "busy", &holder.identity());
    }
    pipe.query::<()>(con)
        .context("cannot count the busy refusal")
}
