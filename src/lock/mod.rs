//! The lock: its protocol on Redis, and holding it over time.
//!
//! The protocol is one script call per operation, each one round trip, run by SHA (EVALSHA)
//! with the redis crate's fallback to SCRIPT LOAD when the server's script cache was flushed:
//! [`acquire`] (taking it, one attempt or one that waits on the server), [`hold`] (renewing,
//! healing a quorum node, releasing, undoing, leaving the queue, asking whether a token holds
//! it) and [`operator`] (pause, resume, forced release). This file has the vocabulary they
//! share: the token, the [`Shape`] of a hold, the [`Claim`] every call on behalf of a holder
//! takes, and the queue's constants.
//!
//! Around the protocol: `keys` (where a lock lives), `record` (the records beside it, as
//! types), `scripts` and `lua` (the scripts' text and how they are run), `nodes` (one server
//! or a quorum of them), `inspect` (reading a lock's whole state), `wait` (the fair queue),
//! `heartbeat` (the renewal thread) and `nested` (a run inside a run of the same key). Nothing
//! here knows about processes beyond the heartbeat's kill point, which it moves through
//! `supervise::keeper`.

mod acquire;
pub mod heartbeat;
mod hold;
pub mod inspect;
pub mod keys;
pub mod lua;
pub mod nested;
pub mod nodes;
mod operator;
pub mod record;
mod refused;
pub mod replicas;
pub mod scripts;
pub mod wait;

pub use self::acquire::{
    Acquire, Busy, Ran, abandon, abandon_single, acquire, count_busy, describe_sharers,
    grant_reply, send_after_grant,
};
pub use self::hold::{
    Held, Renewed, Standing, extend, give_back, give_back_unverified, heal, held, leave,
    raise_fence, release, release_unverified, renewed_anyway, undo,
};
pub use self::operator::{
    Removed, force_left, force_release, pause, resume, resume_all, resume_each,
};

use std::time::Duration;

use anyhow::{Context, Result};

use crate::lock::keys::Keys;
use crate::lock::lua::{Invocation, Lua, lua};
use crate::lock::record::Holder;

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

/// Compare-and-delete (or, with `--hold-at-least`, compare-and-pexpire) plus the run's record.
/// Publishes on the release channel only when the key was deleted, so waiters wake exactly when
/// the lock is free. The record is written even when the lock was no longer ours: a lost lease
/// is exactly what `status` must be able to show. `pcall` because a key of another type is
/// simply not ours.
pub(super) static RELEASE: Lua = lua!(crate::lock::scripts::RELEASE);

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

/// `--once-per D`: one run per window of the server's clock (see acquire.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Once {
    pub every: Duration,
    /// `--retry-failed`: a run whose window's first run failed may run in the same window.
    pub retry_failed: bool,
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

/// How long the entry of a waiter at the front of a free lock's queue lives without a refresh
/// (queue.lua's QUEUE_LIFE): a waiter that died there is skipped after at most this long. Where
/// the lock is held or paused, or further back, an entry lives ten times as long.
#[cfg(test)]
pub const QUEUE_ENTRY_LIFE: Duration = Duration::from_millis(1500);
/// How often a waiter at the front of a free lock's queue tries again when nothing wakes it.
pub const QUEUE_REFRESH: Duration = Duration::from_millis(500);
/// How many waiters make the front of the queue (queue.lua's QUEUE_NEAR): put on notice when the
/// lock comes free, the pace of their attempts skips a dead head within two seconds.
pub const QUEUE_NEAR: usize = 3;
/// How often a waiter tries again (and refreshes its entry) while the lock is held or paused, or
/// it is not at the front, when nothing wakes it: ten times less often than at the front.
pub const QUEUE_FAR_REFRESH: Duration = Duration::from_secs(5);
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
    /// `--max-waiters N`: join only while fewer than N live entries are queued (a waiter
    /// already queued keeps its place).
    pub max_waiters: Option<u32>,
    /// `--replace`: ask the exclusive holder to stop, as this (who asks, in words).
    pub replace: Option<&'a str>,
    /// The run waits with `--wait` (a replacer without it waits only for a holder it asked).
    pub waits: bool,
    /// `None` for the waiter's first attempt, which takes a free lock outright. A later one
    /// (the waiter queued) is granted the lock only provisionally, and carries when it was
    /// sent on the server's clock as the waiter reckons it (`Some(None)`: not known), from
    /// which its entry's life counts (queue.lua, `lapse_at`).
    pub later: Option<Option<i64>>,
}

/// An invocation of a script that ends or leaves a hold, with its keys ([`Keys::of_an_ending`]).
pub(super) fn ending<'a>(script: &'a Lua, keys: &Keys) -> Invocation<'a> {
    let mut call = script.prepare_invoke();
    for key in keys.of_an_ending() {
        call.key(key);
    }
    call
}

/// A `--token` that names a holder: an empty one names none (a lock a foreign client set to the
/// empty string would be its to end), and is refused before anything connects (64).
pub fn token_given(token: Option<&str>) -> anyhow::Result<()> {
    match token {
        Some(t) if t.trim().is_empty() => Err(crate::report::error::usage(
            "--token is empty: give the token `redlock acquire` printed",
        )),
        _ => Ok(()),
    }
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
