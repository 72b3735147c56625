//! What operators do to a lock from outside a run: pause and resume it, force its release, and
//! the audit-log entries written outside a script.

use std::time::Duration;

use anyhow::{Context, Result};
use redis::{ConnectionLike, Value};

use super::ending;
use super::keys::{Keys, RECORD_TTL};
use super::lua::{Lua, lua};
use super::record::Holder;

/// How many entries an audit log keeps, and for how long after its last entry
/// (`scripts/audit.lua` says the same).
pub const AUDIT_MAX_ENTRIES: usize = 1000;

pub const AUDIT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Adds to `pipe` the commands that append one entry to an audit log, as `audit.lua` does, for
/// what is logged outside a script (a `--wait` that ran out). The age trim is
/// left to the next scripted entry (it needs Redis 6.2, and a pipeline cannot skip one error).
pub fn audit_entry(
    pipe: &mut redis::Pipeline,
    list: &str,
    event: &str,
    fields: &[(&'static str, String)],
) {
    // This host's clock: a pipeline cannot put the server's into the entry.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut entry = format!("{now}\x1f{event}");
    let body = crate::lock::record::audit_pairs(fields);
    if !body.is_empty() {
        entry.push('\x1f');
        entry.push_str(&body);
    }
    pipe.rpush(list, entry)
        .ignore()
        .ltrim(list, -(AUDIT_MAX_ENTRIES as isize), -1)
        .ignore()
        .pexpire(list, AUDIT_MAX_AGE.as_millis() as i64)
        .ignore();
}

static PAUSE: Lua = lua!(crate::lock::scripts::PAUSE);

/// Stores a pause record at `record` (a lock's, or the prefix-wide one) for `span` (`None`:
/// until resumed). Returns the server's (since, until) in ms; until 0: until resumed. A
/// refusal (an ACL, an audit log of another type) is asked before anything is written
/// (`scripts/ahead.lua`): an error leaves no pause.
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
        .arg(crate::lock::record::PAUSE_KEPT.as_millis() as u64)
        .arg(crate::lock::record::audit_pairs(who));
    for (name, value) in who {
        call.arg(*name).arg(value);
    }
    call.invoke(con)
        .with_context(|| format!("cannot pause {record}"))
}

static RESUME: Lua = lua!(crate::lock::scripts::RESUME);
static RESUME_EACH: Lua = lua!(crate::lock::scripts::RESUME_EACH);
static RESUME_ALL: Lua = lua!(crate::lock::scripts::RESUME_ALL);

/// The resume script's call for one lock: `wake`, wake its first waiter (when the lock is
/// free) even if it had no pause of its own, because the prefix-wide one was lifted.
fn resume_call<'a>(
    script: &'a Lua,
    keys: &Keys,
    who: &[(&'static str, String)],
    wake: bool,
) -> super::lua::Invocation<'a> {
    let mut call = ending(script, keys);
    call.key(&keys.paused)
        .arg(&keys.channel)
        .arg(crate::lock::record::audit_pairs(who))
        .arg(if wake { "1" } else { "0" });
    call
}

/// Lifts a lock's own pause, waking its first waiter when the lock is free (and it had one,
/// or `wake`: see [`resume_call`]). `Ok(true)` when there was a pause record. A refusal (an
/// ACL, an audit log of another type) is asked before anything is written
/// (`scripts/ahead.lua`): an error leaves the pause as it was.
pub fn resume(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    who: &[(&'static str, String)],
    wake: bool,
) -> Result<bool> {
    let removed: i64 = resume_call(&RESUME, keys, who, wake)
        .invoke(con)
        .with_context(|| format!("cannot resume {}", keys.lock))?;
    Ok(removed == 1)
}

/// [`resume`] on each of `locks` in one round trip (on a cluster, they must share a slot),
/// with `wake` as [`resume_call`] takes it: each lock's answer, in order.
pub fn resume_each(
    con: &mut dyn ConnectionLike,
    locks: &[Keys],
    who: &[(&'static str, String)],
    wake: bool,
) -> Result<Vec<Result<bool>>> {
    let calls: Vec<_> = locks
        .iter()
        .map(|k| resume_call(&RESUME_EACH, k, who, wake))
        .collect();
    // A `Value`, for the reason `resume_all` gives.
    let reply: Value = super::lua::Invocation::each(&RESUME_EACH, &calls)
        .invoke(con)
        .context("cannot resume")?;
    let Value::Array(replies) = reply else {
        anyhow::bail!("cannot resume: the server answered {reply:?}");
    };
    Ok(locks
        .iter()
        .zip(replies)
        .map(|(k, reply)| match reply {
            Value::ServerError(e) => Err(anyhow::Error::new(redis::RedisError::from(e))
                .context(format!("cannot resume {}", k.lock))),
            v => Ok(redis::from_redis_value_ref::<i64>(&v).unwrap_or(0) == 1),
        })
        .collect())
}

/// Lifts the pause of every lock under a prefix: deletes the prefix-wide record and logs it in
/// the prefix-wide audit log. `Ok(true)` when there was one; an error changed nothing.
pub fn resume_all(
    con: &mut dyn ConnectionLike,
    record: &str,
    log: &str,
    who: &[(&'static str, String)],
) -> Result<bool> {
    // Read as a `Value`, as the run path reads its replies: a reply type of its own would be
    // one more copy of `invoke`, which changes how the compiler lays out the run's (whose
    // functions link/startup-symbols.txt lists).
    let removed: Value = RESUME_ALL
        .key(record)
        .key(log)
        .arg(crate::lock::record::audit_pairs(who))
        .invoke(con)
        .with_context(|| format!("cannot resume {record}"))?;
    Ok(redis::from_redis_value_ref::<i64>(&removed).unwrap_or(0) == 1)
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

/// Whether anything `release --force` deletes is there: the lock key, or shared leases. Read
/// before and after a forced release the server refused half way (the script deletes the lock
/// before it writes the counters and the audit log, and a server keeps what a script did
/// before a command failed).
pub fn force_left(con: &mut dyn ConnectionLike, keys: &Keys) -> Result<bool> {
    let (lock, leases): (bool, bool) = redis::pipe()
        .exists(&keys.lock)
        .exists(&keys.leases)
        .query(con)?;
    Ok(lock || leases)
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
            holder: (!token.is_empty()).then(|| Holder::from_reply(reply.get(1))),
            sharers: sharers
                .iter()
                .map(|s| crate::lock::record::Sharer::decode(s))
                .collect(),
        }
    }))
}
