//! The test harness: a private `redis-server` per test, a builder around the `redlock`
//! binary, and bounded waiting. See each submodule for the rules it keeps.

#![allow(dead_code)] // not every test file uses every helper

pub mod audit;
pub mod certs;
pub mod cluster;
pub mod fleet;
pub mod json;
pub mod monitor;
pub mod netns;
pub mod poll;
pub mod process;
pub mod proxy;
pub mod quorum;
pub mod redis_server;
pub mod redlock;
pub mod scenario;
pub mod sections;
pub mod sentinel;
pub mod server_kind;
pub mod status;
pub mod stress;
pub mod temp;

use std::time::Duration;

pub use certs::Certs;
pub use cluster::RedisCluster;
pub use monitor::Monitor;
pub use poll::{holds_throughout, wait_until};
pub use process::{host_name, wait_until_gone};
pub use quorum::RedisQuorum;
pub use redis_server::{RedisServer, free_port};
pub use redlock::{Outcome, Redlock};
pub use sentinel::RedisSentinel;
pub use status::{lock_status, status_document};
pub use temp::TempDir;

/// Child scripts (for `-c`) the tests share. A child that "holds" blocks in `read` until the
/// test closes redlock's stdin, then exits 0 (`read` itself fails at end of file).
pub mod child {
    /// Prints `ready`, then runs until the test closes redlock's stdin.
    pub const HOLD: &str = "echo ready; read _ || true";

    /// Prints `child PID` and `ready`, then runs until the test closes redlock's stdin.
    pub const HOLD_PRINTING_PID: &str = r#"echo "child $$"; echo ready; read _ || true"#;

    /// Prints its key, token and fence as `name=value` lines.
    pub const PRINT_LOCK_ENV: &str =
        r#"echo "key=$REDLOCK_KEY"; echo "token=$REDLOCK_TOKEN"; echo "fence=$REDLOCK_FENCE""#;

    /// Prints its token and `ready`, then runs until the test closes redlock's stdin.
    pub const HOLD_AND_PRINT_TOKEN: &str =
        r#"echo "token=$REDLOCK_TOKEN"; echo ready; read _ || true"#;
}

/// Words redlock's error line must contain one of (compared case-insensitively), per exit
/// class. Tests check a key word, never whole sentences.
pub mod says {
    pub const BUSY: &[&str] = &["busy", "held"];
    pub const LEASE_LOST: &[&str] = &["lost", "lease"];
    pub const UNAVAILABLE: &[&str] = &[
        "unreachable",
        "connect",
        "refused",
        "timed out",
        "timeout",
        "unavailable",
    ];
    pub const READ_ONLY: &[&str] = &["read-only", "readonly", "read only", "replica"];
    pub const OUT_OF_MEMORY: &[&str] = &["memory", "oom"];
    pub const DENIED: &[&str] = &[
        "auth",
        "password",
        "permission",
        "denied",
        "noperm",
        "wrongpass",
    ];
    pub const WRONG_TYPE: &[&str] = &["wrongtype", "type"];
    pub const NOT_FOUND: &[&str] = &["not found", "no such file"];
    pub const NOT_EXECUTABLE: &[&str] = &["executable", "permission denied"];
}

/// The name of a companion key (`fence`, `holder`, `last`, `stats`, or the `released`
/// channel) of lock key `lock`: `{L}:redlock:NAME`, or `L:redlock:NAME` when `L` already
/// carries a hash tag, so that every companion lands in the lock's hash slot.
pub fn companion_key(lock: &str, name: &str) -> String {
    if has_hash_tag(lock) {
        format!("{lock}:redlock:{name}")
    } else {
        format!("{{{lock}}}:redlock:{name}")
    }
}

/// Redis Cluster's rule: the first `{`, then the first `}` after it, with something between.
fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

/// Checks the fence rule for a first fence: at least the server's clock in microseconds when
/// it was handed out (`server_micros_before`, read just before), and below 2^53 so that JSON
/// readers keep it exact.
#[track_caller]
pub fn expect_fresh_fence(fence: i64, server_micros_before: i64) {
    assert!(
        fence >= server_micros_before && fence < 1 << 53,
        "fence {fence} is not floored by the server's clock ({server_micros_before} µs) or not below 2^53"
    );
}

/// The keys redlock keeps for one lock, as they appear in Redis.
pub struct LockKeys {
    pub lock: String,
    pub fence: String,
    pub holder: String,
    pub released_channel: String,
}

impl LockKeys {
    /// The keys for lock key `lock` (any prefix already prepended).
    pub fn of(lock: &str) -> LockKeys {
        LockKeys {
            lock: lock.to_owned(),
            fence: companion_key(lock, "fence"),
            holder: companion_key(lock, "holder"),
            released_channel: companion_key(lock, "released"),
        }
    }
}

/// Waits until a contender for `lock` has shown up at the server after `script_calls_before`
/// (taken with `RedisServer::script_calls` before the contender was started): it made an
/// acquire attempt, or it subscribed to the lock's release channel.
pub fn wait_for_contender(server: &RedisServer, lock: &str, script_calls_before: u64) {
    let channel = companion_key(lock, "released");
    wait_until(
        &format!("a contender to try for {lock}"),
        Duration::from_secs(10),
        || {
            (server.script_calls() > script_calls_before || server.subscribers(&channel) > 0)
                .then_some(())
        },
    );
}

/// Expects `lock` to hold `token` for the whole of `period`. With a period longer than the
/// TTL this shows the lease is being renewed.
pub fn stays_held(server: &RedisServer, lock: &str, token: &str, period: Duration) {
    holds_throughout(&format!("{lock} to stay held"), period, || {
        match server.get(lock) {
            Some(value) if value == token => Ok(()),
            Some(value) => Err(format!("{lock} now holds {value:?}, not {token:?}")),
            None => Err(format!("{lock} is gone")),
        }
    });
}

/// True for a UUID v4 in its usual lowercase, hyphenated text form.
pub fn is_uuid_v4(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
        && bytes[14] == b'4'
        && matches!(bytes[19], b'8' | b'9' | b'a' | b'b')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companion_keys_wrap_the_lock_key_in_a_hash_tag() {
        assert_eq!(companion_key("job", "fence"), "{job}:redlock:fence");
        assert_eq!(companion_key("a{}b", "fence"), "{a{}b}:redlock:fence");
    }

    #[test]
    fn companion_keys_keep_a_hash_tag_the_lock_key_already_has() {
        assert_eq!(companion_key("a{t}b", "holder"), "a{t}b:redlock:holder");
    }

    #[test]
    fn uuid_v4_is_recognised() {
        assert!(is_uuid_v4("1b4e28ba-2fa1-41d2-883f-0016d3cca427"));
        assert!(!is_uuid_v4("1b4e28ba-2fa1-11d2-883f-0016d3cca427"));
        assert!(!is_uuid_v4("not-a-uuid"));
    }
}
