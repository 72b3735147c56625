//! Reading a lock's state for `status`, `metrics`, `check` and `pause --drain`: the lock, its fence and its records, with plain read
//! commands only (`+@read` is enough), one round trip per batch of keys.

use anyhow::{Context, Result};
use redis::Value;

use crate::keys::Keys;
use crate::record::{Counters, Holder, LastRun, LockState, Pause, Waiter};
use crate::server::Conn;

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

/// Reads the lock and its companions for every key in one round trip. MGET (not GET) so that a
/// key of another type reads as nil; TYPE tells the two apart. A companion key of the wrong
/// type reads as empty rather than failing the whole pipeline.
pub fn inspect(con: &mut Conn, keys: &[Keys]) -> Result<Vec<Inspection>> {
    let cluster = matches!(con, Conn::Cluster(_));
    // A cluster routes a pipeline by its first key: one pipeline per lock (one slot each).
    if let Conn::Cluster(_) = con
        && keys.len() > 1
    {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.extend(inspect(con, std::slice::from_ref(k))?);
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
            .arg(k.pause_all_for(cluster));
    }
    pipe.ignore_errors();
    let replies: Vec<Value> = pipe.query(con).context("cannot read the lock state")?;
    let mut out = Vec::with_capacity(keys.len());
    for (chunk, k) in replies.chunks(10).zip(keys) {
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
        out.push(Inspection {
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
        });
    }
    Ok(out)
}
