//! Keeping a lock and giving it back: renewals ([`extend`], and [`heal`] for a quorum node that
//! lost the key), the release with the run's record, undoing an attempt that did not win, a
//! waiter leaving the queue, raising a quorum's fence counters, and whether a token holds the
//! lock ([`held`], for nested runs).

use std::time::Duration;

use anyhow::{Context, Result};
use redis::{ConnectionLike, Value};

use super::keys::{Keys, RECORD_TTL};
use super::lua::{Lua, lua};
use super::record::{Holder, LastRun};
use super::replicas::{Ack, explain, is_unacknowledged};
use super::{RELEASE, Shape, ending};

/// Compare-and-pexpire: renews only our own lease, and the holder record with it.
static EXTEND: Lua = lua!(crate::lock::scripts::EXTEND);

/// What a renewal found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Renewed {
    /// Ours, and now living at least `ttl` longer (a renewal never shortens it).
    Yes,
    /// The key is gone (expired, released, or lost by the server).
    Missing,
    /// The key holds another token.
    Taken,
    /// Ours, but a run asked this holder to stop (`--replace`; who asked): not renewed.
    Stop(String),
}

/// Renews the lease iff `token` still holds it. `confirming`: a waiter confirms its
/// provisional grant (see [`PROVISIONAL`]), which also confirms its `--once-per` window. With
/// `ack` (`--replicas`), WAIT follows in the same round trip, and a renewal too few replicas
/// acknowledged is an error: it renewed the key on the master, but a failover may lose it.
pub fn extend(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    ttl: Duration,
    confirming: bool,
    ack: Option<Ack>,
) -> Result<Renewed> {
    let mut call = EXTEND.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.holder)
        .key(&keys.leases)
        .key(&keys.holders);
    if confirming {
        call.key(&keys.once);
    }
    call.arg(token).arg(ttl.as_millis() as u64);
    let renewed: Value = match ack {
        None => call.invoke(con)?,
        Some(ack) => {
            let (renewed, waited) = call.invoke_then::<Value>(con, &ack.command())?;
            if let Err(e) = ack.check(waited)
                && (renewed == Value::Int(1) || !is_unacknowledged(&e))
            {
                return Err(explain(e, con, keys)
                    .context("the master renewed it, but the renewal does not count"));
            }
            renewed
        }
    };
    Ok(match renewed {
        Value::Int(1) => Renewed::Yes,
        Value::Int(-1) => Renewed::Missing,
        Value::BulkString(by) => Renewed::Stop(String::from_utf8_lossy(&by).into_owned()),
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
        .arg(standing.fence.map_or(String::new(), |f| f.to_string()))
        .arg(RECORD_TTL.as_millis() as u64);
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
            let who = [
                ("host", r.host.clone().unwrap_or_default()),
                ("pid", r.pid.map_or(String::new(), |p| p.to_string())),
            ];
            call.arg(r.outcome.as_str())
                .arg(RECORD_TTL.as_millis() as u64)
                .arg(if r.once_per_ms.is_some() { "1" } else { "" })
                .arg(crate::lock::record::audit_pairs(&who));
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
        .arg(RECORD_TTL.as_millis() as u64)
        .invoke::<i64>(con)
        .context("cannot raise the fence counter")?;
    Ok(())
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
