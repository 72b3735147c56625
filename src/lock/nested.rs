//! Nested runs: a `redlock run` (or `acquire`) of the same key inside a command that redlock
//! runs goes ahead under the outer lease instead of waiting for itself.
//!
//! The outer run gives its command `REDLOCK_KEY` (the key as given, without the prefix) and
//! `REDLOCK_TOKEN`. A run whose key equals `REDLOCK_KEY` asks the server whether that token holds
//! the lock under *this* run's prefix and server(s): one read-only round trip (a majority's word
//! in a quorum), and the only thing a nested run sends. When it does:
//!
//! * `run` execs its command in place: no second acquisition, no heartbeat, no release, no
//!   record, and the command's exit status (or signal) is the run's, because the process becomes
//!   the command. The outer run's lease, renewals, supervision and options govern it — it is
//!   one of the outer command's processes. The nested run's own `--ttl`, `--wait`,
//!   `--hold-at-least`, `--kill-after`, `--max-runtime` are checked and then have nothing to do.
//! * `acquire` prints the outer token and fence (and, with `--json`, the outer lease).
//!
//! Only a run of the same shape nests inside a hold: an exclusive run inside an exclusive hold,
//! a `--shared` run inside a shared hold, a `--slots N` run inside a hold of N slots (the
//! server's answer says which shape the token holds). An exclusive run inside a shared or
//! slotted hold is a contender like any other: going ahead under the outer lease would run it
//! beside the other shared holders, which an exclusive holder must exclude. So is a shared
//! run inside an exclusive hold, which then waits for the run it is inside (and ends busy when
//! its `--wait` runs out): redlock says so in a warning line before it tries.
//!
//! A token that does not hold the lock (the outer lease was lost, a stale environment, another
//! prefix, another server) is nobody special: the run acquires as any other run would, and
//! finds the key busy, waits for it, or takes it. Only the innermost run's key is in the
//! environment, so a run of the outer key inside a run of a *different* key is not nested; it
//! finds its key busy (or waits for it, for as long as the outer run holds it).
//!
//! A run of several keys (`--key A --key B`) puts them all in `REDLOCK_KEYS`: a run inside
//! it nests when every key it asks for is among them and the token holds each (one round
//! trip); a run that asks for any other key is a contender.

use std::os::unix::process::CommandExt;

use anyhow::Result;

use crate::lock::keys::Keys;
use crate::lock::nodes::Nodes;
use crate::lock::{Held, Shape};
use crate::report::error::fail;
use crate::report::log;

/// The token of the run this process is inside, when that run's keys include every one of
/// `keys` (`REDLOCK_KEY`, or one of the lines of `REDLOCK_KEYS` for a run of several keys).
pub fn outer_token(keys: &Keys) -> Option<String> {
    let key = std::env::var_os("REDLOCK_KEY")?;
    let all = std::env::var_os("REDLOCK_KEYS");
    let outer = |name: &str| {
        key.as_encoded_bytes() == name.as_bytes()
            || all.as_ref().is_some_and(|all| {
                all.as_encoded_bytes()
                    .split(|b| *b == b'\n')
                    .any(|k| k == name.as_bytes())
            })
    };
    if !keys.each().all(|k| outer(&k.name)) {
        return None;
    }
    std::env::var("REDLOCK_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
}

/// The fence of each of `keys`, in order, as the outer run of several keys put them in its
/// command's environment (`REDLOCK_KEYS`, `REDLOCK_FENCES`, one a line); `None` for one key,
/// or when a key or its fence is missing there. A hold's fences do not change while it lasts.
pub fn outer_fences(keys: &Keys) -> Option<Vec<i64>> {
    if keys.also.is_empty() {
        return None;
    }
    let names = std::env::var("REDLOCK_KEYS").ok()?;
    let fences = std::env::var("REDLOCK_FENCES").ok()?;
    let outer: Vec<(&str, &str)> = names.lines().zip(fences.lines()).collect();
    keys.each()
        .map(|k| {
            outer
                .iter()
                .find(|(name, _)| *name == k.name)
                .and_then(|(_, fence)| fence.parse().ok())
        })
        .collect()
}

/// The outer token and its lease when this is a nested run of `shape` whose outer run still
/// holds the lock in that shape; `None` otherwise (then acquire as usual).
pub fn confirm(nodes: &mut Nodes, keys: &Keys, shape: Shape) -> Result<Option<(String, Held)>> {
    let Some(token) = outer_token(keys) else {
        return Ok(None);
    };
    let held = nodes.held(keys, &token)?;
    match held {
        Some(lease) if lease.shape != shape => {
            log::warn(
                "nested_shape",
                &format!(
                    "the run this one is inside holds {} {}, and this run asks for it {}: only \
                     a run of the same shape nests, so this one takes its turn like any other",
                    keys.lock,
                    how(lease.shape),
                    how(shape)
                ),
                &[("key", (&keys.lock).into())],
            );
            return Ok(None);
        }
        Some(lease) => log::info(
            "nested",
            &format!(
                "{} is held by the run this one is inside (fence {}); going ahead under its lease",
                keys.lock, lease.fence
            ),
            &[("key", (&keys.lock).into()), ("fence", lease.fence.into())],
        ),
        None => log::info(
            "nested_stale",
            &format!(
                "REDLOCK_TOKEN does not hold {}; acquiring it like any other run",
                keys.lock
            ),
            &[("key", (&keys.lock).into())],
        ),
    }
    Ok(held.map(|lease| (token, lease)))
}

/// "exclusively", "shared", "in one of 3 slots".
fn how(shape: Shape) -> String {
    match shape {
        Shape::Exclusive => "exclusively".to_string(),
        Shape::Shared => "shared".to_string(),
        Shape::Slots(n) => format!("in one of {n} slots"),
    }
}

/// Becomes the command (a nested run). Returns only when it could not be started: the error
/// exits 127 when it was not found, 126 otherwise, as for any run.
pub fn exec(argv: &[std::ffi::OsString]) -> anyhow::Error {
    // SAFETY: an empty set is a valid mask; SIG_DFL is a valid disposition. The command starts
    // with nothing blocked and SIGPIPE at its default, as a spawned command does.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    fail(
        crate::supervise::child::spawn_failure_exit(&err),
        format!("cannot run {}: {err}", argv[0].to_string_lossy()),
    )
}
