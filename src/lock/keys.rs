//! Where a lock lives in Redis: the key names, and finding the locks under a prefix.
//!
//! Data layout (a promise to users and to other clients; see "Data in Redis" in docs/design.md):
//!
//! * The lock key `L = PREFIX + KEY` is a plain string holding the token, with a PX expiry. Any
//!   `SET L token NX PX` client in another language interoperates with it.
//! * Companion keys share L's hash slot, so every script touches one slot and works on Redis
//!   Cluster. Without a hash tag in L they are `{L}:redlock:NAME`; when L already has one they
//!   are `L:redlock:NAME`, keeping L's tag. NAME is `fence` (a counter that only grows while it
//!   lives), `holder` (a string: who holds the lock, expires with it; see `scripts/holder.lua`),
//!   `holder:queued` (the waiters' mark: a waiter queued behind the hold), `stats` (hash: the
//!   counters and the last finished run) and `audit` (a list: the audit log; see
//!   `scripts/audit.lua`); `fence`, `stats` and `audit` expire [`RECORD_TTL`] after their last
//!   write. What the records hold is `record/`. The waiters' queue is `queue`, `alive` and
//!   `waiters`, and each waiter's grant list `queue:TICKET` (see `wait/`); a holder's stop list
//!   is `stop:FENCE` (`--replace`); `paused` (hash: who paused the lock, why, until when; see
//!   `commands/pause.rs`). None of these is a lock: [`Keys::new`] refuses them all.
//! * The layout carries its version: the holder record and the lock's record have the field
//!   `v` (`record::LAYOUT`), and a record of another layout is refused, never misread.
//! * The pause of every lock under a prefix P is the `paused` companion of the empty key under
//!   P: `{P}:redlock:paused` (or `P:redlock:paused` when P has a hash tag). No lock has an empty
//!   key, so it is nobody's lock. On Redis Cluster it lives in another slot than the locks
//!   unless P carries a hash tag, and the acquire script (one slot) cannot read it: there it is
//!   left out ([`Keys::pause_all_for`]) and `pause --all` is refused.
//! * A shared or slotted lock (`--shared`, `--slots N`) leaves L absent: its holders are
//!   `leases` (sorted set: token -> lease deadline, the server's clock in ms; Redis 7.0 cannot
//!   expire one field of a hash) and `holders` (hash: token -> that holder's record, and
//!   `shape` -> `shared` or N), both expiring with the latest lease. The scripts treat an entry
//!   whose deadline has passed as gone. An exclusive taker checks `leases` (one EXISTS when
//!   there is none), so the shapes exclude one another; a foreign `SET NX` client sees only
//!   L, and does not see shared holds.
//! * A release wakes the head of the queue on channel `{L}:redlock:released:TICKET` (same
//!   naming rule) so waiters wake at once instead of polling.
//!
//! Locks are found by their fence counters (SCAN, never KEYS); on a cluster, every master is
//! scanned.

use std::time::Duration;

use anyhow::{Context, Result};
use redis::Value;

use crate::lock::scripts::{
    ALIVE, AUDIT, COMPANIONS, FENCE, HOLDER, HOLDERS, LEASES, ONCE, PAUSED, QUEUE, RELEASED, STATS,
    STOP, WAITERS,
};
use crate::redis::server::Conn;
use crate::report::error::usage;

/// How long the fence counter, the lock's record and the audit log outlive their last write:
/// 30 days and a window of the server's clock (10^8 ms), since a take writes the records'
/// expiry only once per window (`scripts/audit.lua`, RETAIN): each is kept at least 30 days after
/// the lock's last take.
pub const RECORD_TTL: Duration = Duration::from_millis(2_692_000_000);

/// The names one lock uses in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// The key as the user gave it, without the prefix (what the child sees as REDLOCK_KEY).
    pub name: String,
    /// PREFIX + KEY: the lock itself.
    pub lock: String,
    pub fence: String,
    pub holder: String,
    pub stats: String,
    pub queue: String,
    pub alive: String,
    pub waiters: String,
    /// The lock's pause record.
    pub paused: String,
    /// The audit log (a list; see `scripts/audit.lua`).
    pub log: String,
    /// The pause record of every lock under the prefix.
    pub pause_all: String,
    /// A shared or slotted lock's holders' leases and records (see `scripts/shapes.lua`).
    pub leases: String,
    pub holders: String,
    /// The `--once-per` window's record.
    pub once: String,
    /// Where a release wakes waiters: this channel followed by `:TICKET` for the waiter at the
    /// head of the queue (nothing is published on the channel itself).
    pub channel: String,
    /// The other locks of a claim over several keys (`--key A --key B …`, [`Keys::all`]),
    /// taken, renewed and given back with this one, all or none, in each script call; empty
    /// for one key. This one is the first key given.
    pub also: Vec<Keys>,
}

impl Keys {
    /// Builds the names for `key` under `prefix`; rejects (64) a key that is empty, one of
    /// redlock's own companion keys, or one whose braces make it impossible to put the
    /// companion keys in the lock's hash slot. The command line's keys are checked for
    /// emptiness first by [`not_empty`], which names where they came from.
    pub fn new(prefix: &str, key: &str) -> Result<Keys> {
        if key.is_empty() {
            return Err(usage("the key is empty: a lock needs a name"));
        }
        if key.chars().any(char::is_control) {
            return Err(usage(format!("key {key:?} contains control characters")));
        }
        let lock = format!("{prefix}{key}");
        if let Some((owner, name)) = lock_of_companion(&lock) {
            return Err(usage(format!(
                "key {lock:?} is not a lock: it is the {} of lock {owner:?}",
                companion_role(name)
            )));
        }
        let companion = |name: &str| companion_key(&lock, name);
        let fence = companion(FENCE);
        if slot_part(&fence) != slot_part(&lock) {
            return Err(usage(format!(
                "key {lock:?}: its braces do not form a hash tag, so its companion keys cannot share \
                 its Redis Cluster slot; use a key without '{{' '}}' or with one tag like 'jobs:{{report}}'"
            )));
        }
        Ok(Keys {
            name: key.to_string(),
            holder: companion(HOLDER),
            stats: companion(STATS),
            queue: companion(QUEUE),
            alive: companion(ALIVE),
            waiters: companion(WAITERS),
            leases: companion(LEASES),
            holders: companion(HOLDERS),
            once: companion(ONCE),
            channel: companion(RELEASED),
            paused: companion(PAUSED),
            log: companion(AUDIT),
            pause_all: prefix_pause_key(prefix),
            fence,
            lock,
            also: Vec::new(),
        })
    }

    /// The locks of `keys` under `prefix`, the first with the others in [`Keys::also`]:
    /// rejects (64) a key given twice (or two that share their companion keys, like `x` and
    /// `{x}`) and, on a Redis Cluster (`cluster`), keys in different hash slots, since one
    /// script call can take them together only within one slot. `named` is how the command
    /// line gave them (`--key`, or `KEY` for an argument), for the messages.
    pub fn all(prefix: &str, keys: &[String], cluster: bool, named: &str) -> Result<Keys> {
        let Some((first, others)) = keys.split_first() else {
            return Err(usage(format!("{named} is missing")));
        };
        not_empty(keys, named)?;
        let mut all = Keys::new(prefix, first)?;
        for key in others {
            let other = Keys::new(prefix, key)?;
            if all.each().any(|k| k.fence == other.fence) {
                return Err(usage(format!("{named} {key:?} is given twice")));
            }
            if cluster && slot(&other.lock) != slot(&all.lock) {
                return Err(usage(format!(
                    "{named} {first:?} and {named} {key:?} are in different Redis Cluster hash slots, \
                     so they cannot be taken together; give them one hash tag, like \
                     '{{job}}:a' and '{{job}}:b'"
                )));
            }
            all.also.push(other);
        }
        Ok(all)
    }

    /// This lock and the others of its claim ([`Keys::also`]), in the order given.
    pub fn each(&self) -> impl Iterator<Item = &Keys> {
        std::iter::once(self).chain(&self.also)
    }

    /// "lock:a" for one key; "lock:a, lock:b" for several.
    pub fn names(&self) -> String {
        self.each()
            .map(|k| k.lock.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key
/// without one, modulo 16384.
pub fn slot(key: &str) -> u16 {
    let mut crc: u16 = 0;
    for byte in slot_part(key).bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The types the acquire script keeps [`Keys::of_an_acquire`] in, in their order.
pub const ACQUIRE_TYPES: [&str; 12] = [
    "string", "string", "string", "hash", "zset", "zset", "hash", "zset", "hash", "hash", "hash",
    "list",
];

/// Refuses (64) an empty key from the command line, naming how it was given: `--key`, or
/// `KEY` for the argument of `status`, `release`, `pause` and the others.
pub fn not_empty(keys: &[String], named: &str) -> Result<()> {
    if keys.iter().any(String::is_empty) {
        return Err(usage(format!("{named} is empty: name the lock by its key")));
    }
    Ok(())
}

impl Keys {
    /// The keys acquire.lua takes from every run, and acquire_all.lua for each lock (the
    /// `--once-per` window's record and the stop lists follow for a run that needs them).
    pub fn of_an_acquire(&self, cluster: bool) -> Vec<String> {
        vec![
            self.lock.clone(),
            self.fence.clone(),
            self.holder.clone(),
            self.stats.clone(),
            self.queue.clone(),
            self.alive.clone(),
            self.waiters.clone(),
            self.leases.clone(),
            self.holders.clone(),
            self.paused.clone(),
            self.pause_all_for(cluster).to_string(),
            self.log.clone(),
        ]
    }

    /// The keys of every script that ends or leaves a hold (release, undo, leave, force a
    /// release), in the order their KEYS list them: lock, holder record, audit log, the lock's
    /// record (counters and last run), queue, queue liveness, waiters, shared leases, shared
    /// holders, the `--once-per` window's record. A release leaves the last out unless the run
    /// may have one (each key a script names costs the server).
    pub fn of_an_ending(&self) -> [&str; 10] {
        [
            &self.lock,
            &self.holder,
            &self.log,
            &self.stats,
            &self.queue,
            &self.alive,
            &self.waiters,
            &self.leases,
            &self.holders,
            &self.once,
        ]
    }
}

impl Keys {
    /// Where the holders' stop lists are (`--replace`): the holder with fence F waits on
    /// `{L}:redlock:stop:F`.
    pub fn stop_lists(&self) -> String {
        companion_key(&self.lock, STOP)
    }

    /// The stop list of the holder with `fence`.
    pub fn stop_list(&self, fence: i64) -> String {
        format!("{}:{fence}", self.stop_lists())
    }
}

impl Keys {
    /// The prefix-wide pause record as a script or a pipeline of this lock may name it: on a
    /// cluster connection, where it does not share the lock's slot, the lock's own pause
    /// record stands in for it (read twice, it changes nothing).
    pub fn pause_all_for(&self, cluster: bool) -> &str {
        if cluster && slot_part(&self.pause_all) != slot_part(&self.lock) {
            &self.paused
        } else {
            &self.pause_all
        }
    }
}

/// The pause record of every lock under `prefix`.
pub fn prefix_pause_key(prefix: &str) -> String {
    companion_key(prefix, PAUSED)
}

/// The audit log of every lock under `prefix` (pauses and resumes of them all).
pub fn prefix_log_key(prefix: &str) -> String {
    companion_key(prefix, AUDIT)
}

/// Whether the prefix-wide pause record shares the locks' slot (the prefix has a hash tag).
pub fn prefix_pause_in_slot(prefix: &str) -> bool {
    hash_tag(prefix).is_some()
}

/// The name of `lock`'s companion NAME: `{L}:redlock:NAME`, or `L:redlock:NAME` when L has a
/// hash tag of its own.
fn companion_key(lock: &str, name: &str) -> String {
    if hash_tag(lock).is_some() {
        format!("{lock}:redlock:{name}")
    } else {
        format!("{{{lock}}}:redlock:{name}")
    }
}

/// The waiters' mark beside the holder record, `HOLDER:queued` (a string: a waiter queued
/// behind the hold; see `scripts/holder.lua`), which the release deletes with the lock.
const QUEUED: &str = "holder:queued";
/// A waiter's grant list, `QUEUE:TICKET` (see `scripts/queue.lua`): one key per waiter.
const GRANT_LIST: &str = "queue:TICKET";
/// A holder's stop list, `STOP:FENCE` (`--replace`): one key per holder.
const STOP_LIST: &str = "stop:FENCE";

/// The lock `key` is a companion of, and which companion it is (a NAME of [`COMPANIONS`], the
/// waiters' mark, or a grant or stop list); `None` for any other key. redlock refuses to treat
/// its own bookkeeping as a lock: `release --force` on a fence counter would restart that
/// lock's fences, and a run of the waiters' mark `{L}:redlock:holder:queued` would have its
/// lock deleted by the next release of L.
pub fn lock_of_companion(key: &str) -> Option<(String, &'static str)> {
    for name in COMPANIONS.into_iter().chain([QUEUED]) {
        if let Some(lock) = owner(key, name) {
            return Some((lock, name));
        }
    }
    // One key per waiter or holder: NAME:SUFFIX, the suffix not empty.
    for (name, kind) in [(QUEUE, GRANT_LIST), (STOP, STOP_LIST)] {
        let marker = format!(":redlock:{name}:");
        for (at, _) in key.match_indices(&marker) {
            let end = at + marker.len() - 1;
            if end + 1 < key.len()
                && let Some(lock) = owner(&key[..end], name)
            {
                return Some((lock, kind));
            }
        }
    }
    None
}

/// The lock whose companion NAME `key` is, if it is one.
fn owner(key: &str, name: &str) -> Option<String> {
    let base = key.strip_suffix(&format!(":redlock:{name}"))?;
    let untagged = base.strip_prefix('{').and_then(|b| b.strip_suffix('}'));
    [untagged, Some(base)]
        .into_iter()
        .flatten()
        .find(|lock| !lock.is_empty() && companion_key(lock, name) == key)
        .map(str::to_string)
}

/// What a companion is, in words ("the ROLE of lock L").
fn companion_role(name: &str) -> &'static str {
    match name {
        FENCE => "fence counter",
        HOLDER => "holder record",
        QUEUED => "waiters' mark",
        QUEUE | ALIVE | WAITERS => "waiters' queue",
        GRANT_LIST => "grant list of a waiter",
        STOP_LIST => "stop list",
        PAUSED => "pause record",
        LEASES | HOLDERS => "shared holders' record",
        ONCE => "once-per window record",
        STATS => "counters and last-run record",
        AUDIT => "audit log",
        _ => "bookkeeping",
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

/// Every lock under `prefix` that has a companion NAME, found by SCAN, never KEYS (SCAN does
/// not block the server), sorted by key. `FENCE` finds every lock redlock created; `PAUSED`
/// every paused one, created or not. For the commands that need them all at once (`pause`);
/// the listings (`status`, `metrics`, `log`) go through [`Scan`] a page at a time.
pub fn scan_companions(con: &mut Conn, prefix: &str, name: &str) -> Result<Vec<Keys>> {
    let mut found = std::collections::BTreeMap::new();
    let mut scan = Scan::new(prefix, name);
    while !scan.done() {
        for keys in scan.page(con)? {
            found.insert(keys.lock.clone(), keys);
        }
    }
    Ok(found.into_values().collect())
}

/// How many locks a listing reads, prints and forgets at a time: what it holds in memory.
pub const BATCH: usize = 1000;

/// A SCAN for the locks under a prefix that have a companion NAME, one page (one SCAN call)
/// at a time; on a cluster, every master in turn. A page may repeat a lock an earlier page
/// gave (SCAN does when the keyspace shrinks meanwhile): [`Seen`] drops repeats.
pub struct Scan {
    prefix: String,
    name: String,
    pattern: String,
    /// A cluster's masters still to scan, the current one first; `None` until the first page
    /// (and on one server).
    masters: Option<Vec<(String, u16)>>,
    cursor: u64,
    done: bool,
}

impl Scan {
    pub fn new(prefix: &str, name: &str) -> Scan {
        Scan {
            prefix: prefix.to_string(),
            name: name.to_string(),
            pattern: format!("*:redlock:{name}"),
            masters: None,
            cursor: 0,
            done: false,
        }
    }

    /// Whether the last page has been read.
    pub fn done(&self) -> bool {
        self.done
    }

    /// The next SCAN call's locks (maybe none: SCAN may return an empty page before the end).
    pub fn page(&mut self, con: &mut Conn) -> Result<Vec<Keys>> {
        if self.done {
            return Ok(Vec::new());
        }
        let (next, batch): (u64, Vec<String>) = if let Conn::Cluster(cluster) = con {
            // Every master holds its own part of the keyspace: SCAN each of them.
            if self.masters.is_none() {
                self.masters = Some(masters(cluster)?);
            }
            let masters = self.masters.as_mut().expect("listed above");
            let Some((host, port)) = masters.last().cloned() else {
                self.done = true;
                return Ok(Vec::new());
            };
            let route = redis::cluster_routing::RoutingInfo::SingleNode(
                redis::cluster_routing::SingleNodeRoutingInfo::ByAddress { host, port },
            );
            let reply = cluster
                .route_command(&scan_cmd(&self.pattern, self.cursor), route)
                .context("cannot list the locks (SCAN)")?;
            let (next, batch) = redis::from_redis_value(reply)?;
            if next == 0 {
                masters.pop();
                self.done = masters.is_empty();
            }
            (next, batch)
        } else {
            let (next, batch) = scan_cmd(&self.pattern, self.cursor)
                .query(con)
                .context("cannot list the locks (SCAN)")?;
            self.done = next == 0;
            (next, batch)
        };
        self.cursor = next;
        Ok(batch
            .iter()
            .filter_map(|companion| keys_of_companion(&self.prefix, &self.name, companion))
            .collect())
    }
}

/// A cluster's masters (CLUSTER SLOTS), each once, the one to scan first last.
fn masters(
    cluster: &mut redis::cluster::ClusterConnection<crate::redis::node::Node>,
) -> Result<Vec<(String, u16)>> {
    let slots: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(cluster)
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
    Ok(masters.into_iter().rev().collect())
}

/// The locks a listing has given out, so that each is given once: SCAN may repeat a key, and
/// the nodes of a quorum (or a cluster's masters during a slot migration) list the same lock.
/// Kept as 64-bit fingerprints of the lock's key, 8 bytes a lock (under 2 MB for 100,000
/// locks, where the locks' records would take hundreds), hashed with a key drawn for each
/// process: two locks of one listing share a fingerprint with a chance of about n²/2⁶⁵
/// (3·10⁻¹⁰ for 100,000 locks).
pub struct Seen {
    hasher: std::hash::RandomState,
    fingerprints: std::collections::HashSet<u64>,
}

impl Seen {
    pub fn new() -> Seen {
        Seen {
            hasher: std::hash::RandomState::new(),
            fingerprints: std::collections::HashSet::new(),
        }
    }

    /// Whether `lock` is given out for the first time (and remembers it).
    pub fn first(&mut self, lock: &str) -> bool {
        use std::hash::BuildHasher as _;
        self.fingerprints.insert(self.hasher.hash_one(lock))
    }
}

fn scan_cmd(pattern: &str, cursor: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(1000);
    cmd
}

/// The lock whose companion NAME is `companion`, if it lies under `prefix`.
fn keys_of_companion(prefix: &str, name: &str, companion: &str) -> Option<Keys> {
    let (lock, found) = lock_of_companion(companion)?;
    let key = lock.strip_prefix(prefix).filter(|_| found == name)?;
    Keys::new(prefix, key).ok()
}

#[cfg(test)]
fn keys_of_fence(prefix: &str, fence_key: &str) -> Option<Keys> {
    keys_of_companion(prefix, FENCE, fence_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // CLUSTER KEYSLOT's answers.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("{}x"), slot("{}x"));
    }

    #[test]
    fn several_keys_are_checked_before_anything_is_sent() {
        let all = |keys: &[&str], cluster| {
            let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
            Keys::all("p:", &keys, cluster, "--key")
        };
        let ok = all(&["a", "b"], false).unwrap();
        assert_eq!(ok.names(), "p:a, p:b");
        assert!(all(&["a", "a"], false).is_err());
        let shared = ["x".to_owned(), "{x}".to_owned()];
        assert!(
            Keys::all("", &shared, false, "--key").is_err(),
            "they share companions"
        );
        assert!(all(&["a", "b"], true).is_err());
        assert!(all(&["{j}:a", "{j}:b"], true).is_ok());
    }

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
                crate::report::error::classify(&err),
                crate::report::exit::Exit::Usage,
                "{key}"
            );
        }
        // An unmatched `{` is not a tag; wrapping the whole key keeps the slot.
        assert!(Keys::new("", "a{b").is_ok());
    }

    #[test]
    fn companion_keys_are_not_locks() {
        for lock in ["x", "prod:report:daily", "jobs:{r}:x"] {
            let keys = Keys::new("", lock).unwrap();
            for companion in [&keys.fence, &keys.holder, &keys.stats] {
                assert_eq!(
                    lock_of_companion(companion).map(|(l, _)| l).as_deref(),
                    Some(lock)
                );
                let err = Keys::new("", companion).unwrap_err();
                assert_eq!(
                    crate::report::error::classify(&err),
                    crate::report::exit::Exit::Usage,
                    "{companion}"
                );
                assert!(err.to_string().contains("is not a lock"), "{err}");
            }
        }
        // Names that merely look alike are locks.
        for lock in [
            "x:redlock:fence",
            "{x}:redlock:other",
            "{}:redlock:fence",
            "a{b}:redlock",
        ] {
            assert_eq!(lock_of_companion(lock), None, "{lock}");
        }
    }

    #[test]
    fn every_companion_is_refused_with_its_role() {
        for lock in ["k", "prod:report:daily", "jobs:{r}:x"] {
            let keys = Keys::new("", lock).unwrap();
            let cases = [
                (keys.fence.clone(), "the fence counter"),
                (keys.holder.clone(), "the holder record"),
                (format!("{}:queued", keys.holder), "the waiters' mark"),
                (keys.stats.clone(), "the counters and last-run record"),
                (keys.queue.clone(), "the waiters' queue"),
                (keys.alive.clone(), "the waiters' queue"),
                (keys.waiters.clone(), "the waiters' queue"),
                (format!("{}:t1:x", keys.queue), "the grant list of a waiter"),
                (keys.stop_list(17), "the stop list"),
                (keys.paused.clone(), "the pause record"),
                (keys.leases.clone(), "the shared holders' record"),
                (keys.holders.clone(), "the shared holders' record"),
                (keys.once.clone(), "the once-per window record"),
                (keys.log.clone(), "the audit log"),
            ];
            for (companion, role) in cases {
                let err = Keys::new("", &companion).unwrap_err().to_string();
                assert_eq!(
                    err,
                    format!("key {companion:?} is not a lock: it is {role} of lock {lock:?}")
                );
            }
        }
        for name in COMPANIONS {
            assert_ne!(companion_role(name), "bookkeeping", "{name}");
        }
        // A list's name without its ticket or fence is no key of redlock's.
        for lock in [
            "{k}:redlock:queue:",
            "{k}:redlock:stop:",
            "{k}:redlock:stop",
        ] {
            assert_eq!(lock_of_companion(lock), None, "{lock}");
        }
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
}
