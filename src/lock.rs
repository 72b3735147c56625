//! The Redis protocol, and nothing else: key names, the token, and the scripts that acquire,
//! extend and release a lock.
//!
//! Data layout (a promise to users and to other clients; see the README's "Data in Redis"):
//!
//! * The lock key `L = PREFIX + KEY` is a plain string holding the token, with a PX expiry. Any
//!   `SET L token NX PX` client in another language interoperates with it.
//! * Companion keys share L's hash slot, so every script touches one slot and works on Redis
//!   Cluster. Without a hash tag in L they are `{L}:redlock:NAME`; when L already has one they
//!   are `L:redlock:NAME`, keeping L's tag. NAME is `fence` (a counter that only grows; the only
//!   key redlock never expires), `holder` (hash: who holds the lock, expires with it), `last`
//!   (hash: the last finished run) and `stats` (hash: counters); `last` and `stats` expire
//!   [`RECORD_TTL`] after their last write.
//! * A release publishes on channel `{L}:redlock:released` (same naming rule) so waiters wake at
//!   once instead of polling.
//!
//! Each operation is one script, run by SHA (EVALSHA) with the redis crate's fallback to
//! SCRIPT LOAD when the server's script cache was flushed: one round trip to acquire, one to
//! extend, one to release.

use std::sync::LazyLock;
use std::time::Duration;

use anyhow::{Context, Result};
use redis::{ConnectionLike, Script, Value};

use crate::server::Conn;

use crate::error::usage;

/// How long the last-run record and the counters outlive their last write.
pub const RECORD_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// The names one lock uses in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// The key as the user gave it, without the prefix (what the child sees as REDLOCK_KEY).
    pub name: String,
    /// PREFIX + KEY: the lock itself.
    pub lock: String,
    pub fence: String,
    pub holder: String,
    pub last: String,
    pub stats: String,
    pub channel: String,
}

impl Keys {
    /// Builds the names for `key` under `prefix`; rejects (64) a key that is empty or whose braces
    /// make it impossible to put the companion keys in the lock's hash slot.
    pub fn new(prefix: &str, key: &str) -> Result<Keys> {
        if key.is_empty() {
            return Err(usage("--key is empty"));
        }
        if key.chars().any(char::is_control) {
            return Err(usage(format!("key {key:?} contains control characters")));
        }
        let lock = format!("{prefix}{key}");
        let base = if hash_tag(&lock).is_some() {
            lock.clone()
        } else {
            format!("{{{lock}}}")
        };
        let companion = |name: &str| format!("{base}:redlock:{name}");
        let fence = companion("fence");
        if slot_part(&fence) != slot_part(&lock) {
            return Err(usage(format!(
                "key {lock:?}: its braces do not form a hash tag, so its companion keys cannot share \
                 its Redis Cluster slot; use a key without '{{' '}}' or with one tag like 'jobs:{{report}}'"
            )));
        }
        Ok(Keys {
            name: key.to_string(),
            holder: companion("holder"),
            last: companion("last"),
            stats: companion("stats"),
            channel: companion("released"),
            fence,
            lock,
        })
    }
}

/// The hash tag of a key, as Redis Cluster defines it: the part between the first `{` and the
/// first `}` after it, when not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let len = key[open + 1..].find('}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// The part of a key that Redis Cluster hashes.
fn slot_part(key: &str) -> &str {
    hash_tag(key).unwrap_or(key)
}

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

/// Who is taking the lock, recorded in the holder hash for `redlock status`.
#[derive(Clone, Debug, Default)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    pub user: String,
    pub command: String,
}

impl Holder {
    pub fn current(command: &str) -> Holder {
        Holder {
            host: hostname(),
            pid: std::process::id(),
            user: std::env::var("USER")
                .or_else(|_| std::env::var("LOGNAME"))
                .unwrap_or_else(|_| {
                    // SAFETY: getuid cannot fail and touches no memory of ours.
                    format!("uid {}", unsafe { libc::getuid() })
                }),
            command: truncate(command, 256),
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
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
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Compare-and-pexpire: renews only our own lease, and the holder record with it.
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));

/// Compare-and-delete (or, with `--hold-at-least`, compare-and-pexpire) plus the run's record.
/// Publishes on the release channel only when the key was deleted, so waiters wake exactly when
/// the lock is free. The record is written even when the lock was no longer ours: a lost lease
/// is exactly what `status` must be able to show. `pcall` because a key of another type is
/// simply not ours.
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));

/// The answer to one acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    Acquired {
        fence: i64,
        /// Server time (ms since the epoch) when the lock was taken.
        started_ms: i64,
    },
    Busy(Busy),
}

/// Who holds a busy lock, as far as Redis knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Busy {
    /// Milliseconds until the key expires; negative when it has no expiry.
    pub pttl_ms: i64,
    pub server_now_ms: i64,
    pub host: Option<String>,
    pub pid: Option<String>,
    pub user: Option<String>,
    pub started_ms: Option<i64>,
    pub fence: Option<String>,
}

impl Busy {
    /// "held by host (pid 12, user bob) for 3m 2s, expires in 25s".
    pub fn describe(&self) -> String {
        let mut out = self.describe_holder();
        if self.pttl_ms >= 0 {
            out.push_str(&format!(
                ", expires in {}",
                crate::lease::fmt(Duration::from_millis(self.pttl_ms as u64))
            ));
        } else {
            out.push_str(", with no expiry");
        }
        out
    }

    /// "held by host (pid 12, user bob, fence 7) for 3m 2s".
    pub fn describe_holder(&self) -> String {
        match &self.host {
            Some(host) => {
                let mut who = format!("held by {host}");
                let details: Vec<String> = [
                    self.pid.as_ref().map(|p| format!("pid {p}")),
                    self.user.as_ref().map(|u| format!("user {u}")),
                    self.fence.as_ref().map(|f| format!("fence {f}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                if !details.is_empty() {
                    who.push_str(&format!(" ({})", details.join(", ")));
                }
                if let Some(started) = self.started_ms
                    && self.server_now_ms > 0
                {
                    let age = (self.server_now_ms - started).max(0) as u64;
                    who.push_str(&format!(
                        " for {}",
                        crate::lease::fmt(Duration::from_millis(age / 1000 * 1000))
                    ));
                }
                who
            }
            None => "held by a client that left no holder record".to_string(),
        }
    }
}

/// One holder's claim on a lock: who asks, for which key, for how long. Every script call on
/// behalf of a holder takes it whole.
#[derive(Clone, Copy)]
pub struct Claim<'a> {
    pub keys: &'a Keys,
    pub token: &'a str,
    pub ttl: Duration,
    pub holder: &'a Holder,
}

/// Whether a refusal is counted in the lock's `busy` counter: once per run or `acquire` that
/// ends busy, so the attempts of a wait are not counted one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Count,
    Uncounted,
}

/// One acquire attempt.
pub fn acquire(con: &mut dyn ConnectionLike, claim: &Claim, refusal: Refusal) -> Result<Acquire> {
    let Claim {
        keys,
        token,
        ttl,
        holder,
    } = *claim;
    let reply: Vec<Value> = ACQUIRE
        .key(&keys.lock)
        .key(&keys.fence)
        .key(&keys.holder)
        .key(&keys.stats)
        .arg(token)
        .arg(ttl.as_millis() as u64)
        .arg(if refusal == Refusal::Count { "1" } else { "0" })
        .arg(RECORD_TTL.as_millis() as u64)
        .arg(&holder.host)
        .arg(holder.pid)
        .arg(&holder.user)
        .arg(&holder.command)
        .invoke(con)
        .with_context(|| format!("cannot acquire {}", keys.lock))?;
    let int = |i: usize| -> i64 {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref::<i64>(v).ok())
            .unwrap_or(0)
    };
    let text = |i: usize| -> Option<String> {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value_ref::<Option<String>>(v).ok())
            .flatten()
    };
    if int(0) == 1 {
        return Ok(Acquire::Acquired {
            fence: int(1),
            started_ms: int(2),
        });
    }
    Ok(Acquire::Busy(Busy {
        pttl_ms: int(1),
        server_now_ms: int(2),
        host: text(3),
        pid: text(4),
        user: text(5),
        started_ms: text(6).and_then(|s| s.parse().ok()),
        fence: text(7),
    }))
}

/// Counts one busy refusal (for a `--wait` that ran out; the attempts themselves do not count).
pub fn count_busy(con: &mut dyn ConnectionLike, keys: &Keys) -> Result<()> {
    redis::pipe()
        .hincr(&keys.stats, "busy", 1)
        .ignore()
        .pexpire(&keys.stats, RECORD_TTL.as_millis() as i64)
        .ignore()
        .query::<()>(con)
        .context("cannot count the busy refusal")
}

/// Renews the lease iff `token` still holds it. `Ok(false)`: the lock is gone or someone else's.
pub fn extend(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    ttl: Duration,
) -> Result<bool> {
    let renewed: i64 = EXTEND
        .key(&keys.lock)
        .key(&keys.holder)
        .arg(token)
        .arg(ttl.as_millis() as u64)
        .invoke(con)?;
    Ok(renewed == 1)
}

/// How a run ended, for the last-run record.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// `ok`, `failed`, `lease lost` or `killed`.
    pub outcome: &'static str,
    pub exit: u8,
    pub holder: Holder,
    pub started_ms: i64,
    pub duration: Duration,
    pub fence: i64,
}

/// Ends our hold on the lock: deletes it if `token` still holds it (or, with `keep`, leaves it to
/// expire after `keep`), and records the run. `Ok(true)` when the lock was ours.
pub fn release(
    con: &mut dyn ConnectionLike,
    keys: &Keys,
    token: &str,
    keep: Option<Duration>,
    record: Option<&RunRecord>,
) -> Result<bool> {
    let mut call = RELEASE.prepare_invoke();
    call.key(&keys.lock)
        .key(&keys.holder)
        .key(&keys.last)
        .key(&keys.stats)
        .arg(token)
        .arg(&keys.channel)
        .arg(keep.map_or(0, |d| d.as_millis().max(1) as u64));
    match record {
        Some(r) => call
            .arg(r.outcome)
            .arg(r.exit)
            .arg(&r.holder.host)
            .arg(r.holder.pid)
            .arg(&r.holder.user)
            .arg(&r.holder.command)
            .arg(r.started_ms)
            .arg(r.duration.as_millis() as u64)
            .arg(r.fence)
            .arg(RECORD_TTL.as_millis() as u64),
        None => call.arg(""),
    };
    let released: i64 = call
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.lock))?;
    Ok(released == 1)
}

/// Quorum fencing: raises this node's counter to at least the fence handed out (see nodes.rs),
/// and records that fence in our holder record if we hold the lock here.
static RAISE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/raise_fence.lua")));

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
static FORCE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/force_release.lua")));

/// What `release --force` removed.
#[derive(Debug, Clone)]
pub struct Removed {
    pub holder: Busy,
}

pub fn force_release(con: &mut dyn ConnectionLike, keys: &Keys) -> Result<Option<Removed>> {
    let reply: Option<Vec<Value>> = FORCE_RELEASE
        .key(&keys.lock)
        .key(&keys.holder)
        .key(&keys.stats)
        .arg(&keys.channel)
        .arg(RECORD_TTL.as_millis() as u64)
        .invoke(con)
        .with_context(|| format!("cannot release {}", keys.lock))?;
    Ok(reply.map(|reply| {
        let text = |i: usize| {
            reply
                .get(i)
                .and_then(|v| redis::from_redis_value_ref::<Option<String>>(v).ok())
                .flatten()
        };
        Removed {
            holder: Busy {
                pttl_ms: 0,
                server_now_ms: 0,
                host: text(1),
                pid: text(2),
                user: text(3),
                started_ms: text(4).and_then(|s| s.parse().ok()),
                fence: text(5),
            },
        }
    }))
}

/// Everything Redis knows about one lock, read with plain read commands (`+@read` is enough).
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    /// `string` for a lock, `none` when free, anything else is not a lock.
    pub key_type: String,
    pub token: Option<String>,
    pub pttl_ms: i64,
    pub fence: Option<i64>,
    pub holder: Vec<(String, String)>,
    pub last: Vec<(String, String)>,
    pub stats: Vec<(String, String)>,
}

impl Inspection {
    pub fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the lock and its companions for every key in one round trip. MGET (not GET) so that a
/// key of another type reads as nil; TYPE tells the two apart. A companion key of the wrong
/// type reads as empty rather than failing the whole pipeline.
pub fn inspect(con: &mut Conn, keys: &[Keys]) -> Result<Vec<Inspection>> {
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
            .arg(&k.stats);
    }
    pipe.ignore_errors();
    let replies: Vec<Value> = pipe.query(con).context("cannot read the lock state")?;
    let mut out = Vec::with_capacity(keys.len());
    for chunk in replies.chunks(6) {
        let [key_type, values, pttl, holder, last, stats] = chunk else {
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
            holder: pairs(holder)?,
            last: pairs(last)?,
            stats: pairs(stats)?,
        });
    }
    Ok(out)
}

/// Every lock redlock has created under `prefix`, found by SCANning for fence counters (the one
/// companion that never expires). Never KEYS: SCAN does not block the server.
pub fn scan_locks(con: &mut Conn, prefix: &str) -> Result<Vec<Keys>> {
    let mut found = std::collections::BTreeMap::new();
    if let Conn::Cluster(cluster) = con {
        // Every master holds its own part of the keyspace: SCAN each of them.
        let slots: Vec<Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut **cluster)
            .context("cannot list the cluster's masters (CLUSTER SLOTS)")?;
        let mut masters = std::collections::BTreeSet::new();
        for range in &slots {
            if let Value::Array(parts) = range
                && let Some(Value::Array(master)) = parts.get(2)
                && let (Some(host), Some(port)) = (master.first(), master.get(1))
            {
                let host: String = redis::from_redis_value_ref(host)?;
                let port: u16 = redis::from_redis_value_ref(port)?;
                masters.insert((host, port));
            }
        }
        for (host, port) in masters {
            let route = redis::cluster_routing::RoutingInfo::SingleNode(
                redis::cluster_routing::SingleNodeRoutingInfo::ByAddress { host, port },
            );
            scan_pages(prefix, &mut found, |cursor| {
                let reply = cluster
                    .route_command(&scan_cmd(cursor), route.clone())
                    .context("cannot list the locks (SCAN)")?;
                Ok(redis::from_redis_value(reply)?)
            })?;
        }
        return Ok(found.into_values().collect());
    }
    scan_pages(prefix, &mut found, |cursor| {
        scan_cmd(cursor)
            .query(con)
            .context("cannot list the locks (SCAN)")
    })?;
    Ok(found.into_values().collect())
}

/// Follows a SCAN cursor to the end, keeping the locks under `prefix`.
fn scan_pages(
    prefix: &str,
    found: &mut std::collections::BTreeMap<String, Keys>,
    mut page: impl FnMut(u64) -> Result<(u64, Vec<String>)>,
) -> Result<()> {
    let mut cursor = 0;
    loop {
        let (next, batch) = page(cursor)?;
        for fence_key in batch {
            if let Some(keys) = keys_of_fence(prefix, &fence_key) {
                found.insert(keys.lock.clone(), keys);
            }
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

fn scan_cmd(cursor: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg("*:redlock:fence")
        .arg("COUNT")
        .arg(1000);
    cmd
}

/// The lock whose fence counter is `fence_key`, if it lies under `prefix`.
fn keys_of_fence(prefix: &str, fence_key: &str) -> Option<Keys> {
    let untagged = fence_key
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix("}:redlock:fence"));
    let tagged = fence_key.strip_suffix(":redlock:fence");
    [untagged, tagged]
        .into_iter()
        .flatten()
        .filter_map(|lock| lock.strip_prefix(prefix))
        .filter_map(|name| Keys::new(prefix, name).ok())
        .find(|keys| keys.fence == fence_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companion_keys_share_the_slot_of_an_untagged_key() {
        let keys = Keys::new("prod:", "report:daily").unwrap();
        assert_eq!(keys.lock, "prod:report:daily");
        assert_eq!(keys.fence, "{prod:report:daily}:redlock:fence");
        assert_eq!(keys.holder, "{prod:report:daily}:redlock:holder");
        assert_eq!(keys.channel, "{prod:report:daily}:redlock:released");
        assert_eq!(keys.name, "report:daily");
    }

    #[test]
    fn a_key_with_a_hash_tag_keeps_it_for_its_companions() {
        let keys = Keys::new("", "jobs:{report}:daily").unwrap();
        assert_eq!(keys.fence, "jobs:{report}:daily:redlock:fence");
        assert_eq!(slot_part(&keys.fence), "report");
    }

    #[test]
    fn braces_that_cannot_share_a_slot_are_rejected() {
        for key in ["a}b", "x{}y{z}", "}{"] {
            let err = Keys::new("", key).unwrap_err();
            assert_eq!(
                crate::error::classify(&err),
                crate::exit::Exit::Usage,
                "{key}"
            );
        }
        // An unmatched `{` is not a tag; wrapping the whole key keeps the slot.
        assert!(Keys::new("", "a{b").is_ok());
    }

    #[test]
    fn empty_keys_are_rejected() {
        assert!(Keys::new("p:", "").is_err());
    }

    #[test]
    fn fence_keys_lead_back_to_their_lock_under_the_prefix_only() {
        for (prefix, key) in [("", "a"), ("prod:", "report:daily"), ("p:", "jobs:{r}:x")] {
            let keys = Keys::new(prefix, key).unwrap();
            assert_eq!(keys_of_fence(prefix, &keys.fence), Some(keys.clone()));
        }
        let prod = Keys::new("prod:", "x").unwrap();
        assert_eq!(keys_of_fence("staging:", &prod.fence), None);
        assert_eq!(keys_of_fence("", "unrelated"), None);
    }

    #[test]
    fn tokens_are_distinct_uuid_v4() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn busy_descriptions_name_the_holder() {
        let busy = Busy {
            pttl_ms: 25_000,
            server_now_ms: 200_000,
            host: Some("web-1".into()),
            pid: Some("42".into()),
            user: Some("bob".into()),
            started_ms: Some(18_000),
            fence: Some("7".into()),
        };
        assert_eq!(
            busy.describe(),
            "held by web-1 (pid 42, user bob, fence 7) for 3m 2s, expires in 25s"
        );
        let foreign = Busy {
            pttl_ms: -1,
            ..Busy::default()
        };
        assert!(foreign.describe().contains("no holder record"));
    }
}
