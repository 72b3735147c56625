//! The lock protocol: the token, and the scripts that acquire, extend and release a lock, each
//! one round trip. Knows nothing about processes or time beyond TTLs; key names are `keys.rs`,
//! the records the scripts keep are `record.rs`.
//!
//! Each operation is one script, run by SHA (EVALSHA) with the redis crate's fallback to
//! SCRIPT LOAD when the server's script cache was flushed: one round trip to acquire, one to
//! extend, one to release.

pub mod heartbeat;
pub mod inspect;
pub mod keys;
pub mod lua;
pub mod nested;
pub mod nodes;
pub mod record;
pub mod scripts;
pub mod wait;

use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use redis::{ConnectionLike, RedisError, Value};

use crate::lock::keys::{Keys, RECORD_TTL};
use crate::lock::lua::{Invocation, Lua, lua};
use crate::lock::record::{Holder, LastRun, Pause};
use crate::redis::server::Conn;
use crate::redis::wire::Wire;

/// A lock token: a UUID v4 (122 random bits from the OS source), unique to one acquisition.
///
/// The bytes come straight from getrandom(2): in a static binary the uuid crate's generator
/// cannot find the libc wrapper and falls back to opening /dev/random and /dev/urandom.
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                // getrandom(2) exists since Linux 3.17; without it there is no safe token.
                return Err(err).context("cannot read random bytes for the lock token");
            }
        }
    }
    Ok(uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string())
}

// The scripts need Redis >= 5 (effects replication, so TIME may precede writes). Each inner
// call costs the server a few microseconds on every run, so they do only what the data layout
// needs.

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

/// Compare-and-pexpire: renews only our own lease, and the holder record with it.
static EXTEND: Lua = lua!(crate::lock::scripts::EXTEND);

/// Compare-and-delete (or, with `--hold-at-least`, compare-and-pexpire) plus the run's record.
/// Publishes on the release channel only when the key was deleted, so waiters wake exactly when
/// the lock is free. The record is written even when the lock was no longer ours: a lost lease
/// is exactly what `status` must be able to show. `pcall` because a key of another type is
/// simply not ours.
static RELEASE: Lua = lua!(crate::lock::scripts::RELEASE);

/// How a lock is held: by one holder (the lock key, a plain string), by any number of shared
/// holders, or by up to N holders, each in its own slot. The shapes exclude one another: an
/// exclusive holder excludes every shared one and the other way round, and two slot counts
/// (or slots and shared) cannot share a key (78).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    #[default]
    Exclusive,
    Shared,
    /// Two or more slots (one slot is the exclusive lock).
    Slots(u32),
}

impl Shape {
    /// The shape `--shared` / `--slots N` ask for. `--slots 1` is the exclusive lock;
    /// `--slots 0` is a usage error (64).
    pub fn from_flags(shared: bool, slots: Option<u32>) -> Result<Shape> {
        match (shared, slots) {
            (_, Some(0)) => Err(crate::report::error::usage(
                "--slots must be at least 1 (it is how many holders may run at once)",
            )),
            (_, Some(1)) => Ok(Shape::Exclusive),
            (_, Some(n)) => Ok(Shape::Slots(n)),
            (true, None) => Ok(Shape::Shared),
            (false, None) => Ok(Shape::Exclusive),
        }
    }

    /// As the scripts spell it: '' (exclusive), 'shared', or the number of slots.
    pub fn as_arg(self) -> String {
        match self {
            Shape::Exclusive => String::new(),
            Shape::Shared => "shared".to_string(),
            Shape::Slots(n) => n.to_string(),
        }
    }

    /// The shape the holders hash records (`shared` or N); `None` for anything else.
    pub fn from_stored(stored: &str) -> Option<Shape> {
        match stored {
            "shared" => Some(Shape::Shared),
            n => n.parse().ok().filter(|n| *n >= 2).map(Shape::Slots),
        }
    }

    /// "exclusive", "shared", "3 slots".
    pub fn describe(self) -> String {
        match self {
            Shape::Exclusive => "exclusive".to_string(),
            Shape::Shared => "shared".to_string(),
            Shape::Slots(n) => format!("{n} slots"),
        }
    }

    /// The spelling in `status --json` (`"shape"`).
    pub fn kind(self) -> &'static str {
        match self {
            Shape::Exclusive => "exclusive",
            Shape::Shared => "shared",
            Shape::Slots(_) => "slots",
        }
    }
}

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
    },
    Busy(Busy),
    /// `--once-per`: this window of the server's clock was already taken by another run.
    Skipped(Ran),
    /// The key is held with another shape than the one asked for (slots with another count,
    /// or slots and shared).
    Mismatch(Shape),
}

/// `--once-per D`: one run per window of the server's clock (see acquire.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Once {
    pub every: Duration,
    /// `--retry-failed`: a run whose window's first run failed may run in the same window.
    pub retry_failed: bool,
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
}

impl Busy {
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

/// One holder's claim on a lock: who asks, for which key, for how long, in which shape. Every
/// script call on behalf of a holder takes it whole.
#[derive(Clone, Copy)]
pub struct Claim<'a> {
    pub keys: &'a Keys,
    pub token: &'a str,
    pub ttl: Duration,
    pub holder: &'a Holder,
    pub shape: Shape,
    /// `--once-per`: the window this run must be the first of.
    pub once: Option<Once>,
}

/// Whether a refusal is counted in the lock's `busy` counter: once per run or `acquire` that
/// ends busy, so the attempts of a wait are not counted one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Count,
    Uncounted,
}

/// How long a waiter's queue entry lives without a refresh; a waiter refreshes it at every
/// attempt, at least every [`QUEUE_REFRESH`]. A killed or cut-off waiter is skipped after at
/// most this long.
pub const QUEUE_ENTRY_LIFE: Duration = Duration::from_millis(1500);
/// How often a waiter refreshes its queue entry (and tries again) when nothing wakes it.
pub const QUEUE_REFRESH: Duration = Duration::from_millis(500);
/// The lease a waiter that heads the queue is granted until it confirms the grant (at most its
/// TTL): a grant the server makes while the waiter cannot act on it (its host died, it was
/// frozen) holds the queue up for this long, not for a whole TTL. A dead head delays the next
/// waiter by at most this and one [`QUEUE_REFRESH`].
pub const PROVISIONAL: Duration = Duration::from_secs(1);

/// A waiter's place in the key's queue (`--wait`).
#[derive(Clone, Copy)]
pub struct Queueing<'a> {
    /// Names the waiter in the queue (random, not the lock token: it appears in channel names).
    pub ticket: &'a str,
    /// The waiter's arrival, µs since the epoch: a quorum's nodes must order waiters alike.
    /// `None`: the server's clock when the waiter first joins.
    pub arrival_us: Option<i64>,
}

/// One acquire attempt; a waiter (`queue`) that is refused joins the key's queue, or refreshes
/// its entry there.
///
/// `cluster`: the connection is a Redis Cluster's, where the prefix-wide pause record can be
/// read only when it shares the lock's slot ([`Keys::pause_all_for`]).
/// The acquire script's keys and arguments for one attempt.
fn acquire_call(
    claim: &Claim,
    refusal: Refusal,
    queue: Option<&Queueing>,
    cluster: bool,
) -> (Vec<String>, Vec<String>) {
    let Claim {
        keys,
        token,
        ttl,
        holder,
        shape,
        once,
    } = *claim;
    let names = vec![
        keys.lock.clone(),
        keys.fence.clone(),
        keys.holder.clone(),
        keys.stats.clone(),
        keys.queue.clone(),
        keys.alive.clone(),
        keys.waiters.clone(),
        keys.leases.clone(),
        keys.holders.clone(),
        keys.paused.clone(),
        keys.pause_all_for(cluster).to_string(),
        keys.once.clone(),
        keys.log.clone(),
    ];
    let mut args = vec![
        token.to_string(),
        ttl.as_millis().to_string(),
        if refusal == Refusal::Count { "1" } else { "0" }.to_string(),
        RECORD_TTL.as_millis().to_string(),
        queue.map_or(String::new(), |q| q.ticket.to_string()),
        queue
            .and_then(|q| q.arrival_us)
            .map_or(String::new(), |a| a.to_string()),
        QUEUE_ENTRY_LIFE.as_millis().to_string(),
        if queue.is_some() || shape != Shape::Exclusive {
            crate::lock::record::Waiter::who(holder)
        } else {
            String::new()
        },
        shape.as_arg(),
        keys.channel.clone(),
        once.map_or(String::new(), |o| o.every.as_millis().to_string()),
        if once.is_some_and(|o| o.retry_failed) {
            "1"
        } else {
            "0"
        }
        .to_string(),
        queue.map_or(String::new(), |_| {
            ttl.min(PROVISIONAL).as_millis().to_string()
        }),
    ];
    for (name, value) in holder.identity() {
        args.push(name.to_string());
        args.push(value);
    }
    (names, args)
}

/// One acquire attempt; a waiter (`queue`) that is refused joins the key's queue, or refreshes
/// its entry there.
pub fn acquire(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    refusal: Refusal,
    queue: Option<&Queueing>,
    cluster: bool,
) -> Result<Acquire> {
    let (names, args) = acquire_call(claim, refusal, queue, cluster);
    let mut call = ACQUIRE.prepare_invoke();
    for name in &names {
        call.key(name);
    }
    for arg in &args {
        call.arg(arg);
    }
    let reply: Vec<Value> = call
        .invoke(con)
        .with_context(|| format!("cannot acquire {}", claim.keys.lock))?;
    Ok(acquire_reply(&reply, queue))
}

/// The name of a waiter's grant list: a release that makes it the head of the queue pushes to
/// it (`wake` in queue.lua), in the lock's hash slot.
pub fn grant_key(keys: &Keys, ticket: &str) -> String {
    format!("{}:{ticket}", keys.queue)
}

/// A waiter's attempt queued behind a blocking pop of its grant list: the server runs the
/// acquire the moment a release pushes to the list (in the same pass as the release), or after
/// `block`, so the waiter wakes once, with the answer ([`grant_reply`]). One server only (not
/// a cluster connection, whose routing cannot keep the two commands together).
pub fn send_after_grant(
    con: &mut Wire,
    claim: &Claim,
    queue: &Queueing,
    block: Duration,
) -> Result<()> {
    let (names, args) = acquire_call(claim, Refusal::Uncounted, Some(queue), false);
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg(ACQUIRE.get_hash()).arg(names.len());
    for name in &names {
        evalsha.arg(name);
    }
    for arg in &args {
        evalsha.arg(arg);
    }
    let mut pipe = redis::pipe();
    pipe.cmd("BLPOP")
        .arg(grant_key(claim.keys, queue.ticket))
        .arg(format!("{:.3}", block.as_secs_f64()))
        .add_command(evalsha);
    con.send_packed_command(&pipe.get_packed_pipeline())
        .with_context(|| format!("cannot acquire {}", claim.keys.lock))
}

/// The answer to [`send_after_grant`]. `Ok(None)`: the server does not know the script (after
/// a restart or SCRIPT FLUSH) and it was loaded; try again. A refused blocking pop (Redis
/// before 6.0 takes no fractional timeout; an ACL without `blpop`) is the server's error,
/// unless the attempt behind it, which ran at once, took the lock.
pub fn grant_reply(con: &mut Wire, claim: &Claim, queue: &Queueing) -> Result<Option<Acquire>> {
    let context = || format!("cannot acquire {}", claim.keys.lock);
    let popped = con.recv_response().with_context(context)?;
    match con.recv_response().with_context(context)? {
        Value::Array(reply) => {
            let attempt = acquire_reply(&reply, Some(queue));
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
                ACQUIRE.load(con)?;
                return Ok(None);
            }
            Err(anyhow::Error::new(e).context(context()))
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
        _ => {}
    }
    Acquire::Busy(Busy {
        pttl_ms: int(1),
        server_now_ms: int(2),
        holder: brief(reply.get(3)),
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
    })
}

/// The holder's brief (record::BRIEF) in a script's reply.
fn brief(value: Option<&Value>) -> Option<Holder> {
    let values = value.and_then(|v| redis::from_redis_value_ref::<Vec<Option<String>>>(v).ok())?;
    Holder::decode_brief(values)
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
        .arg(crate::lock::scripts::RELEASE)
        .cmd("EVALSHA")
        .arg(RELEASE.get_hash())
        .arg(keys.of_an_ending().len())
        .arg(&keys.of_an_ending()[..])
        .arg(token)
        .arg(&keys.channel)
        .arg(0)
        .arg("");
    let _ = single.send_packed_command(&pipe.get_packed_pipeline());
}

/// Counts one busy refusal (for a `--wait` that ran out; the attempts themselves do not count).
pub fn count_busy(con: &mut dyn ConnectionLike, keys: &Keys, holder: &Holder) -> Result<()> {
    let mut pipe = redis::pipe();
    pipe.hincr(&keys.stats, "busy", 1)
        .ignore()
        .pexpire(&keys.stats, RECORD_TTL.as_millis() as i64)
        .ignore();
    audit_entry(&mut pipe, &keys.log, "busy", &holder.identity());
    pipe.query::<()>(con)
        .context("cannot count the busy refusal")
}

/// How many entries an audit log keeps (at least; up to 100 more, as the stream is trimmed a node
/// at a time), and for how long (`scripts/audit.lua` says the same).
pub const AUDIT_MAX_ENTRIES: usize = 1000;
pub const AUDIT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Adds to `pipe` the commands that append one entry to an audit log, as `audit.lua` does, for
/// what is logged outside a script (a `--wait` that ran out, `resume --all`). The age trim is
/// left to the next scripted entry (it needs Redis 6.2, and a pipeline cannot skip one error).
pub fn audit_entry(
    pipe: &mut redis::Pipeline,
    stream: &str,
    event: &str,
    fields: &[(&'static str, String)],
) {
    let mut xadd = redis::cmd("XADD");
    xadd.arg(stream)
        .arg("MAXLEN")
        .arg("~")
        .arg(AUDIT_MAX_ENTRIES)
        .arg("*")
        .arg("event")
        .arg(event);
    for (name, value) in fields {
        xadd.arg(*name).arg(value);
    }
    pipe.add_command(xadd)
        .ignore()
        .pexpire(stream, AUDIT_MAX_AGE.as_millis() as i64)
        .ignore();
}

/// What a renewal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewed {
    /// Ours, and now living at least `ttl` longer (a renewal never shortens it).
    Yes,
    /// The key is gone (expired, released, or lost by the server).
    Missing,
    /// The key holds another token.
    Taken,
}

/// Renews the lease iff `token` still holds it. `confirming`: a waiter confirms its
/// provisional grant (see [`PROVISIONAL`]), which also confirms its `--once-per` window.
pub fn extend(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    ttl: Duration,
    confirming: bool,
) -> Result<Renewed> {
    let mut call = EXTEND.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.holder)
        .key(&keys.leases)
        .key(&keys.holders);
    if confirming {
        call.key(&keys.once);
    }
    let renewed: i64 = call.arg(token).arg(ttl.as_millis() as u64).invoke(con)?;
    Ok(match renewed {
        1 => Renewed::Yes,
        -1 => Renewed::Missing,
        _ => Renewed::Taken,
    })
}

/// What a quorum renewal writes back on a node that lost the key while a majority still holds
/// it: the fence (so the node's counter is raised past it) and the holder record, when known.
#[derive(Clone, Debug, Default)]
pub struct Standing {
    pub fence: Option<i64>,
    pub started_ms: Option<i64>,
    pub holder: Option<Holder>,
}

static HEAL: Lua = lua!(crate::lock::scripts::HEAL);

/// Re-establishes our lock on a node where it is missing. `Ok(false)`: another token took the
/// key there meanwhile.
pub fn heal(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    ttl: Duration,
    standing: &Standing,
) -> Result<bool> {
    let mut call = HEAL.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.fence)
        .key(&keys.holder)
        .arg(token)
        .arg(ttl.as_millis() as u64)
        .arg(standing.fence.map_or(String::new(), |f| f.to_string()));
    if let Some(holder) = &standing.holder {
        for (name, value) in holder.identity() {
            call.arg(name).arg(value);
        }
        if let Some(fence) = standing.fence {
            call.arg("fence").arg(fence);
        }
        if let Some(started) = standing.started_ms {
            call.arg("started").arg(started);
        }
    }
    let healed: i64 = call
        .invoke(con)
        .with_context(|| format!("cannot re-establish {}", keys.lock))?;
    Ok(healed == 1)
}

/// Ends our hold on the lock: deletes it if `token` still holds it (or, with `keep`, leaves it to
/// expire after `keep`), and records the run. `Ok(true)` when the lock was ours.
pub fn release(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    keep: Option<Duration>,
    record: Option<&LastRun>,
) -> Result<bool> {
    let mut call = ending(&RELEASE, keys);
    call.arg(token)
        .arg(&keys.channel)
        .arg(keep.map_or(0, |d| d.as_millis().max(1) as u64));
    match record {
        Some(r) => {
            call.arg(r.outcome.as_str())
                .arg(RECORD_TTL.as_millis() as u64);
            for (name, value) in r.fields() {
                call.arg(name).arg(value);
            }
        }
        None => {
            call.arg("");
        }
    }
    let released: i64 = call
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.lock))?;
    Ok(released == 1)
}

/// An invocation of a script that ends or leaves a hold, with its keys ([`Keys::of_an_ending`]).
fn ending<'a>(script: &'a Lua, keys: &Keys) -> Invocation<'a> {
    let mut call = script.prepare_invoke();
    for key in keys.of_an_ending() {
        call.key(key);
    }
    call
}

/// Takes back what an acquire attempt that did not win a majority took on this node. Unlike
/// a release it wakes nobody: the lock was never held, and a waiter woken by its own undoing
/// would try again at once, holding the node again and again (and keeping a holder from
/// re-establishing the key there).
pub fn undo(con: &mut dyn ConnectionLike, keys: &Keys, token: &str) -> Result<()> {
    ending(&RELEASE, keys)
        .arg(token)
        .arg("")
        .arg(0)
        .arg("")
        .invoke::<i64>(con)
        .with_context(|| format!("cannot undo the attempt on {}", keys.lock))?;
    Ok(())
}

static PAUSE: Lua = lua!(crate::lock::scripts::PAUSE);

/// Stores a pause record at `record` (a lock's, or the prefix-wide one) for `span` (`None`:
/// until resumed). Returns the server's (since, until) in ms; until 0: until resumed.
pub fn pause(
    con: &mut dyn ConnectionLike,
    record: &str,
    log: &str,
    span: Option<Duration>,
    who: &[(&'static str, String)],
) -> Result<(i64, i64)> {
    let mut call = PAUSE.prepare_invoke();
    call.key(record)
        .key(log)
        .arg(span.map_or(0, |d| d.as_millis().max(1) as u64))
        .arg(crate::lock::record::PAUSE_KEPT.as_millis() as u64);
    for (name, value) in who {
        call.arg(*name).arg(value);
    }
    call.invoke(con)
        .with_context(|| format!("cannot pause {record}"))
}

static RESUME: Lua = lua!(crate::lock::scripts::RESUME);

/// Lifts a lock's own pause, waking its first waiter when the lock is free. `Ok(true)` when
/// there was a pause record.
pub fn resume(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    who: &[(&'static str, String)],
) -> Result<bool> {
    let mut call = ending(&RESUME, keys);
    call.key(&keys.paused).arg(&keys.channel);
    for (name, value) in who {
        call.arg(*name).arg(value);
    }
    let removed: i64 = call
        .invoke(con)
        .with_context(|| format!("cannot resume {}", keys.lock))?;
    Ok(removed == 1)
}

static LEAVE: Lua = lua!(crate::lock::scripts::LEAVE);

/// Takes a waiter that gives up out of the key's queue, waking the next one if the lock is free.
pub fn leave(con: &mut dyn ConnectionLike, keys: &Keys, ticket: &str) -> Result<()> {
    ending(&LEAVE, keys)
        .arg(ticket)
        .arg(&keys.channel)
        .invoke::<i64>(con)
        .with_context(|| format!("cannot leave the queue of {}", keys.lock))?;
    Ok(())
}

/// Quorum fencing: raises this node's counter to at least the fence handed out (see nodes.rs),
/// and records that fence in our holder record if we hold the lock here.
static RAISE_FENCE: Lua = lua!(crate::lock::scripts::RAISE_FENCE);

pub fn raise_fence(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    fence: i64,
) -> Result<()> {
    RAISE_FENCE
        .key(&keys.fence)
        .key(&keys.lock)
        .key(&keys.holder)
        .arg(fence)
        .arg(token)
        .invoke::<i64>(con)
        .context("cannot raise the fence counter")?;
    Ok(())
}

/// Deletes the lock whoever holds it (`release --force`). Returns the token and holder record it
/// removed, or `None` when there was no lock. A key of another type is not a lock and is left
/// alone (WRONGTYPE, 78).
static FORCE_RELEASE: Lua = lua!(crate::lock::scripts::FORCE_RELEASE);

/// What `release --force` removed.
#[derive(Debug, Clone)]
pub struct Removed {
    /// The exclusive holder, when there was one. `None` inside: the lock was taken by a client
    /// that keeps no holder record.
    pub holder: Option<Option<Holder>>,
    /// The shared holders (`--shared`, `--slots`) it removed.
    pub sharers: Vec<crate::lock::record::Sharer>,
}

pub fn force_release(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    by: &str,
) -> Result<Option<Removed>> {
    let reply: Option<Vec<Value>> = ending(&FORCE_RELEASE, keys)
        .arg(&keys.channel)
        .arg(RECORD_TTL.as_millis() as u64)
        .arg(by)
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.lock))?;
    Ok(reply.map(|reply| {
        let token = reply
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .unwrap_or_default();
        let sharers: Vec<String> = reply
            .get(2)
            .and_then(|v| redis::from_redis_value_ref(v).ok())
            .unwrap_or_default();
        Removed {
            holder: (!token.is_empty()).then(|| brief(reply.get(1))),
            sharers: sharers
                .iter()
                .map(|s| crate::lock::record::Sharer::decode(s))
                .collect(),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_uuid_v4() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}

static HELD: Lua = lua!(crate::lock::scripts::HELD);

/// The lease a token holds, as one node sees it (see [`held`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub fence: i64,
    /// Server time (ms since the epoch) when the lock was taken.
    pub started_ms: i64,
    /// Server time (ms since the epoch) of the answer.
    pub server_now_ms: i64,
    /// Milliseconds until the lease expires (-1: no expiry).
    pub pttl_ms: i64,
    /// The shape it is held in.
    pub shape: Shape,
}

/// Whether `token` holds the lock on this node, and its lease when it does. Writes nothing.
pub fn held(con: &mut dyn ConnectionLike, keys: &Keys, token: &str) -> Result<Option<Held>> {
    let reply: Vec<Value> = HELD
        .key(&keys.lock)
        .key(&keys.holder)
        .key(&keys.leases)
        .key(&keys.holders)
        .arg(token)
        .invoke(con)
        .with_context(|| format!("cannot read {}", keys.lock))?;
    let int = |i: usize| -> Option<i64> {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref(v).ok())
    };
    if int(0) != Some(1) {
        return Ok(None);
    }
    let shape: String = reply
        .get(5)
        .and_then(|v| redis::from_redis_value_ref(v).ok())
        .unwrap_or_default();
    Ok(Some(Held {
        fence: int(1).unwrap_or(0),
        started_ms: int(2).unwrap_or(0),
        server_now_ms: int(3).unwrap_or(0),
        pttl_ms: int(4).unwrap_or(-1),
        shape: Shape::from_stored(&shape).unwrap_or_default(),
    }))
}
