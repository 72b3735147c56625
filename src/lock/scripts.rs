//! The Lua scripts redlock runs, as sources, and the names of the keys they touch.
//!
//! Every command a script calls runs with the caller's ACL permissions, so the commands in these
//! sources are part of what a least-privilege user must be granted. [`commands`] reads them
//! from the sources, so that what depends on them (doctor's ACL rules, the guide's ACL recipes,
//! checked by tests) follows a script that starts calling something new.
//!
//! Each companion key of a lock `L` is named `{L}:redlock:NAME` (or `L:redlock:NAME` when L has
//! a hash tag of its own); [`COMPANIONS`] are the NAMEs.

use std::collections::BTreeSet;

/// The common run's path first (acquire.lua), then the functions only the rest needs and the
/// rest (acquire_rest.lua): a script defines its functions anew on every call, and each costs the
/// server, so the common run returns before it reaches them. The release is laid out alike.
pub const ACQUIRE: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/acquire.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/acquire_held.lua"),
    include_str!("scripts/taking.lua"),
    include_str!("scripts/queue.lua"),
    include_str!("scripts/shapes.lua"),
    include_str!("scripts/paused.lua"),
    include_str!("scripts/acquire_rest.lua")
);
pub const EXTEND: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/shapes.lua"),
    include_str!("scripts/extend.lua")
);
/// `live_head(now)` and `wake(channel)`, shared by the scripts that use the waiters' queue (Lua
/// scripts cannot load one another, so it is put in front of each).
#[cfg(test)]
const QUEUE_PRELUDE: &str = include_str!("scripts/queue.lua");
/// The shared holders' bookkeeping (`sharers_live`, `sharers_expire`, `sharer`, `free_slot`),
/// put in front of the scripts that take, renew, end or read a shared hold.
#[cfg(test)]
const SHAPES_PRELUDE: &str = include_str!("scripts/shapes.lua");
/// `audit(stream, event, ...)`: appends to a lock's audit log, put in front of the scripts that
/// write it.
#[cfg(test)]
const AUDIT_PRELUDE: &str = include_str!("scripts/audit.lua");
/// `holder_read(…)`, `holder_with(…)` and `holder_update(…)`: the holder record, put in front
/// of the scripts that read or change one (after audit.lua, for `LAYOUT`).
#[cfg(test)]
const HOLDER_PRELUDE: &str = include_str!("scripts/holder.lua");
/// `write_holder(…)` and `new_fence(…)`, put in front of the acquire scripts.
#[cfg(test)]
const TAKING_PRELUDE: &str = include_str!("scripts/taking.lua");
/// `paused(key, now)`, put in front of what the acquire scripts do when the lock is not simply
/// free.
#[cfg(test)]
const PAUSED_PRELUDE: &str = include_str!("scripts/paused.lua");
pub const RELEASE: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/release.lua"),
    include_str!("scripts/queue.lua"),
    include_str!("scripts/shapes.lua"),
    include_str!("scripts/release_rest.lua"),
    include_str!("scripts/release_record.lua")
);
pub const FORCE_RELEASE: &str = concat!(
    include_str!("scripts/queue.lua"),
    include_str!("scripts/audit.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/force_release.lua")
);
pub const RAISE_FENCE: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/raise_fence.lua")
);
pub const HEAL: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/heal.lua")
);
pub const HELD: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/shapes.lua"),
    include_str!("scripts/held.lua")
);
pub const LEAVE: &str = concat!(
    include_str!("scripts/queue.lua"),
    include_str!("scripts/leave.lua")
);
pub const PAUSE: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/ahead.lua"),
    include_str!("scripts/pause.lua")
);
pub const RESUME: &str = concat!(
    include_str!("scripts/queue.lua"),
    include_str!("scripts/audit.lua"),
    include_str!("scripts/ahead.lua"),
    include_str!("scripts/resume.lua")
);
pub const RESUME_ALL: &str = concat!(
    include_str!("scripts/audit.lua"),
    include_str!("scripts/ahead.lua"),
    include_str!("scripts/resume_all.lua")
);
/// `ahead(log, calls)`: asks before a pause or a resume writes anything whether the server
/// would refuse one of its commands half way (ahead.lua).
#[cfg(test)]
const AHEAD_PRELUDE: &str = include_str!("scripts/ahead.lua");

/// The queue's functions (queue.lua) for one lock of several, whose keys `queue_for` is given:
/// queue.lua reads its lock's keys from KEYS, which this makes the function's own.
macro_rules! queue_for {
    () => {
        concat!(
            "local function queue_for(KEYS)\n",
            include_str!("scripts/queue.lua"),
            "return {live_head = live_head, notice = notice, lapse_at = lapse_at, NEAR = QUEUE_NEAR, LIFE = QUEUE_LIFE, \
             FAR_LIFE = QUEUE_FAR_LIFE, KEPT = QUEUE_KEPT}\nend\n"
        )
    };
}
/// Several locks taken at once, all or none (`--key A --key B`).
pub const ACQUIRE_ALL: &str = concat!(
    include_str!("scripts/shapes.lua"),
    include_str!("scripts/audit.lua"),
    include_str!("scripts/holder.lua"),
    include_str!("scripts/taking.lua"),
    include_str!("scripts/paused.lua"),
    queue_for!(),
    include_str!("scripts/acquire_all.lua")
);
/// A script that acts on one lock, made to act on each of several in one call: its text
/// becomes the body of `one(KEYS, ARGV)`, and `each.lua` calls it once per lock.
macro_rules! each {
    ($name:literal, $($part:literal),+) => {
        concat!(
            "-- ", $name, "_each: ", $name, " on each of several locks (see each.lua)\n",
            "local function one(KEYS, ARGV)\n",
            $(include_str!(concat!("scripts/", $part, ".lua")),)+
            "end\n",
            include_str!("scripts/each.lua")
        )
    };
}
pub const RELEASE_EACH: &str = each!(
    "release",
    "audit",
    "release",
    "queue",
    "shapes",
    "release_rest",
    "release_record"
);
pub const EXTEND_EACH: &str = each!("extend", "audit", "holder", "shapes", "extend");
pub const LEAVE_EACH: &str = each!("leave", "queue", "leave");
pub const HELD_EACH: &str = each!("held", "audit", "holder", "shapes", "held");
pub const HEAL_EACH: &str = each!("heal", "audit", "heal");
pub const RAISE_FENCE_EACH: &str = each!("raise_fence", "audit", "holder", "raise_fence");
pub const RESUME_EACH: &str = each!("resume", "queue", "audit", "ahead", "resume");

/// Every script, by name.
pub const ALL: &[(&str, &str)] = &[
    ("acquire", ACQUIRE),
    ("extend", EXTEND),
    ("release", RELEASE),
    ("force_release", FORCE_RELEASE),
    ("raise_fence", RAISE_FENCE),
    ("heal", HEAL),
    ("held", HELD),
    ("leave", LEAVE),
    ("pause", PAUSE),
    ("resume", RESUME),
    ("resume_all", RESUME_ALL),
    ("acquire_all", ACQUIRE_ALL),
    ("release_each", RELEASE_EACH),
    ("extend_each", EXTEND_EACH),
    ("leave_each", LEAVE_EACH),
    ("held_each", HELD_EACH),
    ("heal_each", HEAL_EACH),
    ("raise_fence_each", RAISE_FENCE_EACH),
    ("resume_each", RESUME_EACH),
];

/// The fence counter: it only grows while it lives, and lives as long as the records (30 days)
/// after the last take; a fence is at least the server's clock in µs, so one handed out after
/// the counter expired is above every earlier one.
pub const FENCE: &str = "fence";
/// The holder record (a hash), which expires with the lock.
pub const HOLDER: &str = "holder";
/// The lock's record (a hash): the counters, when a run last ended ok, and the last finished
/// run, 30 days after its last write.
pub const STATS: &str = "stats";
/// The waiters' queue (a sorted set: ticket -> arrival).
pub const QUEUE: &str = "queue";
/// When each waiter's entry lapses unless it refreshes it (a sorted set: ticket -> deadline).
pub const ALIVE: &str = "alive";
/// Who each waiter is (a hash: ticket -> since, host, pid, user, command).
pub const WAITERS: &str = "waiters";
/// The pause record (a hash: who paused the lock, why, since and until when). The pause of
/// every lock under a prefix is the pause record of the empty key under it, `{PREFIX}:redlock:paused`
/// (no lock can have an empty key).
pub const PAUSED: &str = "paused";
/// The leases of a shared or slotted lock's holders (a sorted set: token -> lease deadline, ms).
pub const LEASES: &str = "leases";
/// Who holds a shared or slotted lock, and its shape (a hash: token -> the holder, `shape` ->
/// `shared` or the number of slots).
pub const HOLDERS: &str = "holders";
/// The `--once-per` record: which window of the server's clock was taken, by whom, and how that
/// run ended (a hash, expiring twice the window's length after the window was taken).
pub const ONCE: &str = "once";
/// The audit log (a list of entries `MS\x1fEVENT\x1fname=value…`: acquires, busy refusals,
/// skips, releases, lost leases, forced releases, pauses and resumes; its last 1000 entries, at
/// most 1023 between trims, of 30 days; see `audit.lua`). Pauses and resumes of every lock
/// under a prefix go to the empty key's, `{PREFIX}:redlock:audit`.
pub const AUDIT: &str = "audit";
/// The stop lists of a lock's holders, `STOP:FENCE` each (a list: who asked the holder with
/// that fence to stop; `--replace`), expiring with the holder's lease.
pub const STOP: &str = "stop";
/// The channel a release publishes on (not a key: nothing is stored under it).
pub const RELEASED: &str = "released";
/// Every companion key's NAME.
pub const COMPANIONS: [&str; 11] = [
    FENCE, HOLDER, STATS, QUEUE, ALIVE, WAITERS, PAUSED, LEASES, HOLDERS, ONCE, AUDIT,
];

/// The SCAN MATCH pattern of every lock's fence counter: the companion that lives longest is
/// how `status --all` finds the locks.
pub const FENCE_PATTERN: &str = "*:redlock:fence";

/// The Redis commands the scripts call, upper case, each once.
pub fn commands() -> BTreeSet<String> {
    ALL.iter()
        .flat_map(|(_, source)| commands_in(source))
        .collect()
}

/// The commands one script calls: the first argument of each `redis.call(...)` and
/// `redis.pcall(...)`, outside comments.
fn commands_in(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("--").next().unwrap_or("");
        for call in ["redis.call(", "redis.pcall("] {
            for (at, _) in code.match_indices(call) {
                let rest = code[at + call.len()..].trim_start();
                let Some(quote) = rest.chars().next().filter(|c| matches!(c, '\'' | '"')) else {
                    continue;
                };
                if let Some(name) = rest[1..].split(quote).next() {
                    found.insert(name.to_uppercase());
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    /// The queue's figures are written twice, in queue.lua and in lock/mod.rs; they agree.
    #[test]
    fn the_queue_figures_agree() {
        use crate::lock::{QUEUE_ENTRY_LIFE, QUEUE_FAR_REFRESH, QUEUE_NEAR, QUEUE_REFRESH};
        let line = QUEUE_PRELUDE
            .lines()
            .find(|l| l.starts_with("local QUEUE_NEAR, QUEUE_LIFE, QUEUE_FAR_LIFE = "))
            .expect("queue.lua names its figures");
        let figures: Vec<u64> = line
            .split('=')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect();
        assert_eq!(
            figures,
            [
                QUEUE_NEAR as u64,
                QUEUE_ENTRY_LIFE.as_millis() as u64,
                10 * QUEUE_ENTRY_LIFE.as_millis() as u64
            ]
        );
        assert_eq!(QUEUE_FAR_REFRESH, 10 * QUEUE_REFRESH);
        assert!(QUEUE_PRELUDE.contains(&format!(
            "local QUEUE_KEPT = '{}'",
            20 * QUEUE_ENTRY_LIFE.as_millis()
        )));
    }

    use super::*;
    use crate::lock::keys::Keys;

    /// The records' retention is written twice in audit.lua (RETAIN, and in audit, which uses
    /// no upvalue), and is keys.rs's RECORD_TTL.
    #[test]
    fn the_retention_agrees() {
        let ms = crate::lock::keys::RECORD_TTL.as_millis();
        assert!(AUDIT_PRELUDE.contains(&format!("local RETAIN = '{ms}'\n")));
        assert!(AUDIT_PRELUDE.contains(&format!("redis.call('PEXPIRE', list, '{ms}')")));
    }

    #[test]
    fn the_commands_are_read_from_calls_and_pcalls_outside_comments() {
        let source = "-- redis.call('FLUSHALL') is never sent\n\
                      local a = redis.call('get', KEYS[1])\n\
                      local b = redis.pcall( \"HMGET\", KEYS[2], 'x') -- redis.call('KEYS')\n\
                      redis.call('SET', KEYS[1], a) redis.call('GET', KEYS[1])";
        let found: Vec<String> = commands_in(source).into_iter().collect();
        assert_eq!(found, ["GET", "HMGET", "SET"]);
    }

    #[test]
    fn the_scripts_call_these_commands() {
        let found: Vec<String> = commands().into_iter().collect();
        assert_eq!(
            found,
            [
                "DEL",
                "EXISTS",
                "GET",
                "HDEL",
                "HINCRBY",
                "HMGET",
                "HSET",
                "HSETNX",
                "LINDEX",
                "LPOP",
                "LPUSH",
                "LTRIM",
                "PEXPIRE",
                "PTTL",
                "PUBLISH",
                "RPUSH",
                "SET",
                "TIME",
                "ZADD",
                "ZCARD",
                "ZRANGE",
                "ZRANGEBYSCORE",
                "ZRANK",
                "ZREM",
                "ZSCORE"
            ]
        );
    }

    #[test]
    fn every_script_starts_with_what_it_is() {
        let preludes = [
            QUEUE_PRELUDE,
            SHAPES_PRELUDE,
            AUDIT_PRELUDE,
            HOLDER_PRELUDE,
            TAKING_PRELUDE,
            PAUSED_PRELUDE,
            AHEAD_PRELUDE,
            queue_for!(),
        ];
        for (name, source) in ALL {
            let mut own = *source;
            while let Some(rest) = preludes.iter().find_map(|p| own.strip_prefix(p)) {
                own = rest;
            }
            assert!(own.starts_with(&format!("-- {name}")), "{name}");
        }
    }

    #[test]
    fn the_companions_are_the_ones_a_lock_has() {
        for key in ["report:daily", "jobs:{report}:daily"] {
            let keys = Keys::new("prod:", key).unwrap();
            let companions = [&keys.fence, &keys.holder, &keys.stats];
            for (name, companion) in COMPANIONS.iter().zip(companions) {
                assert!(
                    companion.ends_with(&format!(":redlock:{name}")),
                    "{companion}"
                );
            }
            // Every name a lock has in Redis: the lock, the companions, the release channel and
            // the prefix-wide pause record.
            let names = format!("{keys:?}").matches(":redlock:").count();
            assert_eq!(names, COMPANIONS.len() + 2, "{keys:?}");
            assert!(glob_tail_matches(FENCE_PATTERN, &keys.fence));
        }
        assert_eq!(FENCE_PATTERN, format!("*:redlock:{FENCE}"));
    }

    /// `*SUFFIX` against a key.
    fn glob_tail_matches(pattern: &str, key: &str) -> bool {
        pattern
            .strip_prefix('*')
            .is_some_and(|suffix| key.ends_with(suffix))
    }
}
