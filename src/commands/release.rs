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
use crate::lock::keys::Keys;
use crate::lock::record::{GivenBack, Holder};
use crate::report::error::not_a_lock;
use crate::report::exit::Exit;
use crate::report::log;

pub fn release(ctx: &Context, args: ReleaseArgs) -> Result<Exit> {
    let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster())?;
    if args.force && !keys.also.is_empty() {
        return Err(crate::report::error::usage(
            "--force takes one KEY, so that each forced release says what it removed",
        ));
    }
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    if args.force {
        let removed = nodes
            .force_release(&keys, &operator())
            .map_err(|e| not_a_lock(e, &format!("cannot release {}", keys.lock), false))?;
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

/// Who forces a release, for the audit log: "host (user NAME)".
fn operator() -> String {
    let me = Holder::current("redlock release --force", None);
    match me.user {
        Some(user) => format!("{} (user {user})", me.host),
        None => me.host,
    }
}
