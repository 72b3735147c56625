//! Reading a lock's state for `status`, `metrics`, `check` and `pause --drain`: the lock, its fence and its records, with plain read
//! commands only (`+@read` is enough), one round trip per batch of keys.

use anyhow::{Context, Result};
use redis::Value;

use crate::lock::Shape;
use crate::lock::keys::Keys;
use crate::lock::record::{Counters, Holder, LastRun, LockState, Pause, Sharer, Waiter};
use crate::redis::server::Conn;

/// Everything Redis knows about one lock.
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    /// The lock key's Redis TYPE: `string` for a lock, `none` when free, anything else is not
    /// a lock.
    pub key_type: String,
    pub token: Option<String>,
    pub pttl_ms: i64,
    pub fence: Option<i64>,
    /// The holder record, as stored; it may outlive its lock (see [`Inspection::holder`]).
    pub holder_record: Option<Holder>,
    pub last: Option<LastRun>,
    pub counters: Counters,
    /// The waiters, first in line first.
    pub queue: Vec<Waiter>,
    /// The lock's own pause record (in force or lapsed), then the prefix-wide one.
    pub pauses: Vec<Pause>,
    /// A shared or slotted lock's shape, while it has holders.
    pub shape: Option<Shape>,
    /// Its holders whose lease has not ended (by this host's clock), by slot, then by fence.
    pub sharers: Vec<Sharer>,
    /// How long until the last shared lease ends.
    pub sharers_pttl_ms: i64,
    /// The `--once-per` window's record: who took the current (or last) window, and how it went.
    pub once: Option<crate::lock::Ran>,
}

impl Inspection {
    /// An empty inspection, for a key no node could describe.
    pub fn nothing() -> Inspection {
        Inspection {
            key_type: "none".into(),
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

    /// The holder, while the lock is held. A holder record outliving its lock (the key was
    /// deleted by someone else) is stale and not shown.
    pub fn holder(&self) -> Option<&Holder> {
        self.holder_record
            .as_ref()
            .filter(|_| self.state() == LockState::Held)
    }
}

/// The waiters in queue order, from the queue's tickets and the waiters hash.
fn queue_of(tickets: &Value, who: &[(String, String)]) -> Vec<Waiter> {
    let tickets: Vec<String> = redis::from_redis_value_ref(tickets).unwrap_or_default();
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
/// is its `shape` field. An entry whose deadline has passed by `now_ms` is gone (the scripts
/// remove such entries when they next run).
fn sharers_of(leases: &Value, holders: &[(String, String)], now_ms: i64) -> Vec<Sharer> {
    let leases: Vec<(String, f64)> = redis::from_redis_value_ref(leases).unwrap_or_default();
    let mut sharers: Vec<Sharer> = leases
        .into_iter()
        .filter(|(_, deadline)| *deadline as i64 > now_ms)
        .map(|(token, deadline)| {
            let mut sharer = holders
                .iter()
                .find(|(t, _)| *t == token)
                .map_or_else(Sharer::default, |(_, value)| Sharer::decode(value));
            sharer.deadline_ms = Some(deadline as i64);
            sharer.token = Some(token);
            sharer
        })
        .collect();
    sharers.sort_by_key(|s| (s.slot, s.fence));
    sharers
}

/// Reads the lock and its companions for every key in one round trip. MGET (not GET) so that a
/// key of another type reads as nil; TYPE tells the two apart. A companion key of the wrong
/// type reads as empty rather than failing the whole pipeline.
pub fn inspect(con: &mut Conn, keys: &[Keys], now_ms: i64) -> Result<Vec<Inspection>> {
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
        pipe.cmd("TYPE")
            .arg(&k.lock)
            .cmd("MGET")
            .arg(&k.lock)
            .arg(&k.fence)
            .cmd("PTTL")
            .arg(&k.lock)
            .cmd("HGETALL")
            .arg(&k.holder)
            .cmd("HGETALL")
            .arg(&k.last)
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
    pipe.ignore_errors();
    let replies: Vec<Value> = pipe.query(con).context("cannot read the lock state")?;
    let mut out = Vec::with_capacity(keys.len());
    for (chunk, k) in replies.chunks(13).zip(keys) {
        let [
            key_type,
            values,
            pttl,
            holder,
            last,
            stats,
            queue,
            waiters,
            paused,
            pause_all,
            leases,
            holders,
            once,
        ] = chunk
        else {
            anyhow::bail!("unexpected reply from the server");
        };
        // Errors on the lock key itself (NOPERM, say) are the answer, with their class.
        for v in [key_type, values, pttl] {
            if let Value::ServerError(e) = v {
                return Err(redis::RedisError::from(e.clone()))
                    .context("cannot read the lock state");
            }
        }
        let key_type: String = redis::from_redis_value_ref(key_type)?;
        let (token, fence): (Option<String>, Option<String>) = redis::from_redis_value_ref(values)?;
        let pairs = |v: &Value| -> Result<Vec<(String, String)>> {
            if let Value::ServerError(_) = v {
                return Ok(Vec::new());
            }
            let mut pairs: Vec<(String, String)> = redis::from_redis_value_ref(v)?;
            pairs.sort();
            Ok(pairs)
        };
        let holders = pairs(holders)?;
        let sharers = sharers_of(leases, &holders, now_ms);
        let shape = holders
            .iter()
            .find(|(field, _)| field == "shape")
            .and_then(|(_, v)| Shape::from_stored(v))
            .filter(|_| !sharers.is_empty());
        let once = once_of(&pairs(once)?, token.as_deref(), &sharers);
        out.push(Inspection {
            once,
            token: if key_type == "string" { token } else { None },
            key_type,
            pttl_ms: redis::from_redis_value_ref(pttl)?,
            fence: fence.and_then(|f| f.parse().ok()),
            holder_record: Holder::decode(&pairs(holder)?),
            last: LastRun::decode(&pairs(last)?),
            counters: Counters::decode(&pairs(stats)?),
            queue: queue_of(queue, &pairs(waiters)?),
            pauses: [
                Pause::decode(&pairs(paused)?, false),
                Some(pause_all)
                    .filter(|_| k.pause_all_for(cluster) != k.paused)
                    .and_then(|v| Pause::decode(&pairs(v).ok()?, true)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            sharers_pttl_ms: sharers
                .iter()
                .filter_map(|s| s.deadline_ms)
                .max()
                .map_or(-2, |d| (d - now_ms).max(0)),
            shape,
            sharers,
        });
    }
    Ok(out)
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
