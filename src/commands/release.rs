//! `redlock release`: end a lock by its token, or force it during an incident.
//!
//! `--token T` is compare-and-delete: it deletes only if T is the holder's token (0), and
//! otherwise leaves the key untouched (1). `--force` deletes whatever holds the lock and says
//! whom it removed (every holder of a shared or slotted lock, one line each; `--token T` ends
//! only T's hold); a `redlock run` that held it notices at its next renewal (within ttl/3),
//! stops its command and exits 76. Both publish the release, so waiters start at once.

use anyhow::Result;

use crate::Context;
use crate::cli::ReleaseArgs;
use crate::lock;
use crate::lock::keys::Keys;
use crate::lock::nodes::Nodes;
use crate::lock::record::{GivenBack, Holder};
use crate::report::error::{is_server_reply, not_a_lock, render};
use crate::report::exit::Exit;
use crate::report::log;

pub fn release(ctx: &Context, args: ReleaseArgs) -> Result<Exit> {
    let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster(), "KEY")?;
    lock::token_given(args.token.as_deref())?;
    if args.force && !keys.also.is_empty() {
        return Err(crate::report::error::usage(
            "--force takes one KEY, so that each forced release says what it removed",
        ));
    }
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    if args.force {
        // One server: what was there is read first, so that a forced release the server
        // refused after its delete can be told from one that found nothing (`forced_anyway`).
        let single = !nodes.is_quorum();
        let there = single && matches!(nodes.on(0, |c| lock::force_left(c, &keys)), Ok(true));
        let removed = match nodes.force_release(&keys, &operator()) {
            Ok(removed) => removed,
            Err(e) if there && forced_anyway(&mut nodes, &keys, &e) => return Ok(Exit::Success),
            Err(e) => {
                return Err(not_a_lock(
                    e,
                    &format!("cannot release {}", keys.lock),
                    false,
                ));
            }
        };
        let quorum = nodes.is_quorum();
        let mut any = false;
        for (node, removed) in &removed {
            let Some(removed) = removed else { continue };
            any = true;
            // stdout, so a runbook can keep what was removed.
            let on = if quorum {
                format!(" on {node}")
            } else {
                String::new()
            };
            // The token stays hidden: it is shown only with --show-token or by acquire.
            if let Some(holder) = &removed.holder {
                let _ = log::stdout(&format!(
                    "removed {}{on}: {}\n",
                    keys.lock,
                    Holder::describe(holder.as_ref(), None)
                ));
            }
            for sharer in &removed.sharers {
                let shape = if sharer.slot.is_some() {
                    ""
                } else {
                    "shared holder "
                };
                let _ = log::stdout(&format!(
                    "removed {}{on}: {shape}{}\n",
                    keys.lock,
                    sharer.describe()
                ));
            }
        }
        return match any {
            true => Ok(Exit::Success),
            false => {
                log::warn(
                    "not_held",
                    &format!("{} is not held; nothing removed", keys.lock),
                    &[],
                );
                Ok(Exit::No)
            }
        };
    }
    let token = args.token.unwrap_or_default();
    if nodes.hand_back(&keys, &token, GivenBack::ByToken)? {
        log::info("released", &format!("released {}", keys.names()), &[]);
        Ok(Exit::Success)
    } else {
        // Several keys: each is released where the token holds it, so some may have been.
        let what = if keys.also.is_empty() {
            format!(
                "{} is free or held with another token; nothing released",
                keys.lock
            )
        } else {
            format!(
                "not every one of {} was held with this token; those that were are released",
                keys.names()
            )
        };
        log::warn("not_released", &what, &[]);
        Ok(Exit::No)
    }
}

/// A forced release the server refused half way (an ACL lacking a command its record-keeping
/// needs, after the delete): when nothing is left of the lock, it was removed, which is said
/// in a warning naming what failed; whom it removed is not known (the script's reply is lost).
/// Otherwise, or when the read is refused too, the error stands.
fn forced_anyway(nodes: &mut Nodes, keys: &Keys, err: &anyhow::Error) -> bool {
    if !is_server_reply(err) || !matches!(nodes.on(0, |c| lock::force_left(c, keys)), Ok(false)) {
        return false;
    }
    log::warn(
        "release_unrecorded",
        &format!(
            "removed {} (nothing holds it any more), but the release's records were not all \
             written: {}",
            keys.lock,
            render(err)
        ),
        &[("key", keys.lock.as_str().into())],
    );
    true
}

/// Who forces a release, for the audit log: "host (user NAME)".
fn operator() -> String {
    let me = Holder::current("redlock release --force", None);
    match me.user {
        Some(user) => format!("{} (user {user})", me.host),
        None => me.host,
    }
}
