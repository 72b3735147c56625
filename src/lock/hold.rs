//! Keeping a lock and giving it back: renewals ([`extend`], and [`heal`] for a quorum node that
//! lost the key), the release with the run's record, undoing an attempt that did not win, a
//! waiter leaving the queue, raising a quorum's fence counters, and whether a token holds the
//! lock ([`held`], for nested runs).

use std::time::Duration;

use anyhow::{Context, Result};
use redis::{ConnectionLike, Value};

use super::keys::{Keys, RECORD_TTL};
use super::lua::Invocation;
use super::lua::{Lua, lua};
use super::record::{GivenBack, Holder, LastRun};
use super::replicas::{Ack, explain, is_unacknowledged};
use super::{RELEASE, Shape, ending};

/// Compare-and-pexpire: renews only our own lease, and the holder record with it.
static EXTEND: Lua = lua!(crate::lock::scripts::EXTEND);

// The same scripts for a claim over several keys (`Keys::also`): one call each, per lock
// (scripts/each.lua). A claim over one key pays nothing for them.
static EXTEND_EACH: Lua = lua!(crate::lock::scripts::EXTEND_EACH);
static RELEASE_EACH: Lua = lua!(crate::lock::scripts::RELEASE_EACH);
static HEAL_EACH: Lua = lua!(crate::lock::scripts::HEAL_EACH);
static LEAVE_EACH: Lua = lua!(crate::lock::scripts::LEAVE_EACH);
static RAISE_FENCE_EACH: Lua = lua!(crate::lock::scripts::RAISE_FENCE_EACH);
static HELD_EACH: Lua = lua!(crate::lock::scripts::HELD_EACH);

/// The call for a claim's locks: `one`'s for one key, else one call of `each` that makes
/// `one`'s for every lock (`Keys::each`) in one round trip.
fn per_lock<'a>(
    keys: &Keys,
    each: &'a Lua,
    one: impl Fn(&Keys) -> Invocation<'a>,
) -> Invocation<'a> {
    if keys.also.is_empty() {
        return one(keys);
    }
    let calls: Vec<Invocation> = keys.each().map(one).collect();
    Invocation::each(each, &calls)
}

/// A reply made per lock ([`per_lock`]): the one reply for one key, each lock's in order for
/// several.
fn replies(keys: &Keys, reply: Value) -> Vec<Value> {
    match reply {
        Value::Array(each) if !keys.also.is_empty() => each,
        one => vec![one],
    }
}

fn int(value: &Value) -> i64 {
    redis::from_redis_value_ref(value).unwrap_or(0)
}

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
    let call = per_lock(keys, &EXTEND_EACH, |keys| {
        let mut call = EXTEND.prepare_invoke();
        call.key(&keys.lock)
            .key(&keys.holder)
            .key(&keys.leases)
            .key(&keys.holders);
        if confirming {
            call.key(&keys.once);
        }
        call.arg(token).arg(ttl.as_millis() as u64);
        call
    });
    let reply: Value = match ack {
        None => call.invoke(con)?,
        Some(ack) => {
            let (reply, waited) = call.invoke_then::<Value>(con, &ack.command())?;
            let renewed = replies(keys, reply.clone()).iter().all(|r| int(r) == 1);
            if let Err(e) = ack.check(waited)
                && (renewed || !is_unacknowledged(&e))
            {
                return Err(explain(e, con, keys)
                    .context("the master renewed it, but the renewal does not count"));
            }
            reply
        }
    };
    // Several keys: one lock lost is the lease lost; another's token says more than a gap. A
    // stop request (`--replace`) comes to one key's holder only: several keys never record a
    // replaceable holder.
    let each = replies(keys, reply);
    if let Some(by) = each.iter().find_map(|r| match r {
        Value::BulkString(by) => Some(String::from_utf8_lossy(by).into_owned()),
        _ => None,
    }) {
        return Ok(Renewed::Stop(by));
    }
    let each: Vec<i64> = each.iter().map(int).collect();
    Ok(if each.iter().all(|r| *r == 1) {
        Renewed::Yes
    } else if each.contains(&-1) && !each.contains(&0) {
        Renewed::Missing
    } else {
        Renewed::Taken
    })
}

/// After an extend whose script the server refused half way: whether the renewal happened
/// anyway. The script moves the expiry before it writes the holder record, and a server keeps
/// what a script did before a command failed. Plain reads (which an ACL may refuse too: then
/// the answer is an error): every lock still holds `token` and lives at least `ttl` less the
/// time since `since` (taken before the script was sent), so the renewal took effect. A
/// shared holder's lease is not read back (its deadline is the server's clock, which a
/// client without `time` cannot read): `Ok(false)`.
pub fn renewed_anyway(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    ttl: Duration,
    since: std::time::Instant,
) -> Result<bool> {
    let mut pipe = redis::pipe();
    for keys in keys.each() {
        pipe.get(&keys.lock).pttl(&keys.lock);
    }
    let replies: Vec<Value> = pipe.query(con)?;
    let least = ttl.saturating_sub(since.elapsed()).as_millis() as i64;
    Ok(replies.chunks(2).all(|lock| match lock {
        [Value::BulkString(held), pttl] => held == token.as_bytes() && int(pttl) >= least,
        _ => false,
    }))
}

/// What a quorum renewal writes back on a node that lost the key while a majority still holds
/// it: the fence (so the node's counter is raised past it) and the holder record, when known.
#[derive(Clone, Debug, Default)]
pub struct Standing {
    pub fence: Option<i64>,
    pub started_ms: Option<i64>,
    pub holder: Option<Holder>,
    /// A claim over several keys: the fences of its other locks (`Keys::also`), in order.
    pub also_fences: Vec<i64>,
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
    let fences: Vec<Option<i64>> = std::iter::once(standing.fence)
        .chain(standing.also_fences.iter().copied().map(Some))
        .collect();
    let mut fences = fences.into_iter();
    let fences: Vec<(&Keys, Option<i64>)> =
        keys.each().map(|k| (k, fences.next().flatten())).collect();
    let call = per_lock(keys, &HEAL_EACH, |keys| {
        let fence = fences
            .iter()
            .find(|(k, _)| std::ptr::eq(*k, keys))
            .and_then(|(_, f)| *f);
        let mut call = HEAL.prepare_invoke();
        call.key(&keys.lock)
            .key(&keys.fence)
            .key(&keys.holder)
            .arg(token)
            .arg(ttl.as_millis() as u64)
            .arg(fence.map_or(String::new(), |f| f.to_string()))
            .arg(RECORD_TTL.as_millis() as u64);
        if let Some(holder) = &standing.holder {
            call.arg(holder.record_fields(standing.started_ms, fence));
        }
        call
    });
    let healed: Value = call
        .invoke(con)
        .with_context(|| format!("cannot re-establish {}", keys.names()))?;
    Ok(replies(keys, healed).iter().all(|h| int(h) == 1))
}

/// Ends our hold on the lock: deletes it if `token` still holds it (or, with `keep`, leaves it to
/// expire after `keep`), and records the run; without a run (`None`), the audit log says the
/// grant was given back unused (see [`give_back`]). `Ok(true)` when the lock was ours.
pub fn release(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    keep: Option<Duration>,
    record: Option<&LastRun>,
) -> Result<bool> {
    let result = release_unverified(con, keys, token, keep, record);
    verified(con, keys, token, result)
}

/// [`release`], an error left as it is (`doctor`'s probe reports the refusal itself).
pub fn release_unverified(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    keep: Option<Duration>,
    record: Option<&LastRun>,
) -> Result<bool> {
    match record {
        Some(record) => release_run(con, keys, token, keep, record),
        None => give_back_unverified(con, keys, token, GivenBack::Unused),
    }
}

/// Ends a hold that ran nothing to record: deletes the lock if `token` still holds it, and the
/// audit log ends the take with `why`. `Ok(true)` when the lock was ours.
pub fn give_back(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    why: GivenBack,
) -> Result<bool> {
    let result = give_back_unverified(con, keys, token, why);
    verified(con, keys, token, result)
}

/// [`give_back`], an error left as it is: for a caller that says itself what an error leaves.
pub fn give_back_unverified(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    why: GivenBack,
) -> Result<bool> {
    let call = per_lock(keys, &RELEASE_EACH, |keys| {
        release_call(keys, token, None, End::Back(why))
    });
    let released: Value = call
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.names()))?;
    Ok(replies(keys, released).iter().all(|r| int(r) == 1))
}

/// How a hold ends, for the release script: a run and its record, a hold given back without
/// one, or an acquire attempt taken back ([`undo`]), which wakes nobody.
#[derive(Clone, Copy)]
enum End<'a> {
    Run(&'a LastRun),
    Back(GivenBack),
    Undo,
}

/// [`release`] of a run, with its record.
fn release_run(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    keep: Option<Duration>,
    record: &LastRun,
) -> Result<bool> {
    // Several keys: each lock's record of the run carries that lock's fence.
    let records: Vec<(&Keys, LastRun)> = keys
        .each()
        .enumerate()
        .map(|(i, k)| {
            let record = match i.checked_sub(1) {
                None => record.clone(),
                Some(other) => LastRun {
                    fence: record.also_fences.get(other).copied(),
                    ..record.clone()
                },
            };
            (k, record)
        })
        .collect();
    let call = per_lock(keys, &RELEASE_EACH, |keys| {
        let record = records
            .iter()
            .find(|(k, _)| std::ptr::eq(*k, keys))
            .map_or(record, |(_, r)| r);
        release_call(keys, token, keep, End::Run(record))
    });
    let released: Value = call
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.names()))?;
    // Several keys: the lease was ours only if every lock still was.
    Ok(replies(keys, released).iter().all(|r| int(r) == 1))
}

/// A release whose script the server refused half way. The script deletes the lock before it
/// writes the run's record and the audit entry, and a server keeps what a script did before
/// a command failed: so the lock may be gone although the release is an error. The lock is
/// read (plain reads, which an ACL may refuse too: then the error stands): when `token` no
/// longer holds any of it and nothing else does, the release happened, which is said in a warning naming what failed
/// after it, and the answer is a release (`Ok(true)`). Otherwise the error stands.
fn verified(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    result: Result<bool>,
) -> Result<bool> {
    let Err(err) = result else {
        return result;
    };
    if !crate::report::error::is_server_reply(&err)
        || !matches!(holds(con, keys, token, true), Ok(Holding::Free))
    {
        return Err(err);
    }
    crate::report::log::warn(
        "release_unrecorded",
        &format!(
            "released {} ({} this token), but the release's records were not all written: {}",
            keys.names(),
            if keys.also.is_empty() {
                "it no longer holds"
            } else {
                "none holds any more"
            },
            crate::report::error::render(&err)
        ),
        &[("key", keys.lock.as_str().into())],
    );
    Ok(true)
}

/// What the locks of `keys` hold, as far as `token` is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Holding {
    /// `token` holds one of them (the lock key, or a shared lease).
    Ours,
    /// Another token holds one of them.
    Other,
    /// Nothing holds them.
    Free,
}

/// What the locks of `keys` hold, with `token` in mind: plain reads, only on an error's path.
/// `shared`: the token may hold a shared lease (unknown to a release that knows no run).
pub(super) fn holds(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    shared: bool,
) -> Result<Holding> {
    let mut pipe = redis::pipe();
    for keys in keys.each() {
        pipe.get(&keys.lock);
        if shared {
            pipe.zscore(&keys.leases, token);
        }
    }
    let replies: Vec<Value> = pipe.query(con)?;
    let mut holding = Holding::Free;
    for lock in replies.chunks(if shared { 2 } else { 1 }) {
        match lock {
            [Value::BulkString(held), ..] if held == token.as_bytes() => return Ok(Holding::Ours),
            // A shared lease's score.
            [_, lease] if !matches!(lease, Value::Nil) => return Ok(Holding::Ours),
            [Value::Nil, ..] => {}
            _ => holding = Holding::Other,
        }
    }
    Ok(holding)
}

/// The release script's call for one lock (release.lua): the shared leases only for a run that
/// held one, and the window's record of `--once-per` only for a run that may have one (a
/// release that knows no run names both: an undoing gives its window back); an exclusive
/// run's names none of the queue's keys, which the script names after the holder record in
/// the rare release whose holder record says a waiter queued behind it (each key a script is
/// given costs the server).
fn release_call<'a>(keys: &Keys, token: &str, keep: Option<Duration>, end: End) -> Invocation<'a> {
    let mut call = RELEASE.prepare_invoke();
    let names = keys.of_an_ending();
    let named = match end {
        End::Run(r) if r.once_per_ms.is_none() && r.shared => names.len() - 1,
        End::Run(r) if r.once_per_ms.is_none() => names.len() - 6,
        _ => names.len(),
    };
    for key in &names[..named] {
        call.key(*key);
    }
    call.arg(token);
    if matches!(end, End::Undo) {
        call.arg("");
    } else {
        call.arg(keep.map_or(0, |d| d.as_millis().max(1) as u64));
    }
    match end {
        End::Run(r) => {
            let [args @ .., replaced_by] = r.release_args();
            for value in args {
                call.arg(value);
            }
            if !replaced_by.is_empty() {
                call.arg(replaced_by);
            }
        }
        End::Back(why) => {
            call.arg("");
            for value in why.release_args() {
                call.arg(value);
            }
        }
        End::Undo => {
            call.arg("");
            for value in GivenBack::Unused.release_args() {
                call.arg(value);
            }
        }
    }
    call
}

/// Takes back what an acquire attempt that did not win a majority took on this node. Unlike
/// a release it wakes nobody: the lock was never held, and a waiter woken by its own undoing
/// would try again at once, holding the node again and again (and keeping a holder from
/// re-establishing the key there). A take it undoes is logged as given back.
pub fn undo(con: &mut dyn ConnectionLike, keys: &Keys, token: &str) -> Result<()> {
    per_lock(keys, &RELEASE_EACH, |keys| {
        release_call(keys, token, None, End::Undo)
    })
    .invoke::<Value>(con)
    .with_context(|| format!("cannot undo the attempt on {}", keys.names()))?;
    Ok(())
}

static LEAVE: Lua = lua!(crate::lock::scripts::LEAVE);

/// Takes a waiter that gives up out of the key's queue, waking the next one if the lock is free.
pub fn leave(con: &mut dyn ConnectionLike, keys: &Keys, ticket: &str) -> Result<()> {
    per_lock(keys, &LEAVE_EACH, |keys| {
        let mut call = ending(&LEAVE, keys);
        call.arg(ticket).arg(&keys.channel);
        call
    })
    .invoke::<Value>(con)
    .with_context(|| format!("cannot leave the queue of {}", keys.names()))?;
    Ok(())
}

/// Quorum fencing: raises this node's counter to at least the fence handed out (see
/// `nodes/majority.rs`), and records that fence in our holder record if we hold the lock here.
static RAISE_FENCE: Lua = lua!(crate::lock::scripts::RAISE_FENCE);

pub fn raise_fence(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    fence: i64,
    also: &[i64],
) -> Result<()> {
    let fences: Vec<(&Keys, i64)> = keys
        .each()
        .zip(std::iter::once(fence).chain(also.iter().copied()))
        .collect();
    per_lock(keys, &RAISE_FENCE_EACH, |keys| {
        let fence = fences
            .iter()
            .find(|(k, _)| std::ptr::eq(*k, keys))
            .map_or(0, |(_, f)| *f);
        let mut call = RAISE_FENCE.key(&keys.fence);
        call.key(&keys.lock)
            .key(&keys.holder)
            .arg(fence)
            .arg(token)
            .arg(RECORD_TTL.as_millis() as u64);
        call
    })
    .invoke::<Value>(con)
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
/// Several keys: held only if every lock is, with the first one's fence and the shortest lease.
pub fn held(con: &mut dyn ConnectionLike, keys: &Keys, token: &str) -> Result<Option<Held>> {
    let reply: Value = per_lock(keys, &HELD_EACH, |keys| {
        let mut call = HELD.key(&keys.lock);
        call.key(&keys.holder)
            .key(&keys.leases)
            .key(&keys.holders)
            .arg(token);
        call
    })
    .invoke(con)
    .with_context(|| format!("cannot read {}", keys.names()))?;
    let mut each = replies(keys, reply).into_iter().map(|r| match r {
        Value::Array(r) => held_reply(&r),
        _ => None,
    });
    let first = each.next().flatten();
    each.try_fold(first, |all, one| match (all, one) {
        (Some(all), Some(one)) => Some(Some(Held {
            pttl_ms: all.pttl_ms.min(one.pttl_ms),
            ..all
        })),
        _ => None,
    })
    .flatten()
    .map_or(Ok(None), |held| Ok(Some(held)))
}

/// What held.lua's reply says.
fn held_reply(reply: &[Value]) -> Option<Held> {
    let int = |i: usize| -> Option<i64> {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref(v).ok())
    };
    if int(0) != Some(1) {
        return None;
    }
    let shape: String = reply
        .get(5)
        .and_then(|v| redis::from_redis_value_ref(v).ok())
        .unwrap_or_default();
    Some(Held {
        fence: int(1).unwrap_or(0),
        started_ms: int(2).unwrap_or(0),
        server_now_ms: int(3).unwrap_or(0),
        pttl_ms: int(4).unwrap_or(-1),
        shape: Shape::from_stored(&shape).unwrap_or_default(),
    })
}
