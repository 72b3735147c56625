//! `redlock release`: end a lock by its token, or force it during an incident.
//!
//! `--token T` is compare-and-delete: it deletes only if T is the holder's token (0), and
//! otherwise leaves the key untouched (1). `--force` deletes whatever holds the lock and says
//! whom it removed; a `redlock run` that held it notices at its next renewal (within ttl/3),
//! stops its command and exits 76. Both publish the release, so waiters start at once.

use anyhow::Result;

use crate::Context;
use crate::cli::ReleaseArgs;
use crate::exit::Exit;
use crate::lock::{self, Keys};
use crate::log;

pub fn release(ctx: &Context, args: ReleaseArgs) -> Result<Exit> {
    let keys = Keys::new(&ctx.prefix, &args.key)?;
    let server = ctx.server()?;
    let mut con = server.connect(ctx.timeout)?;
    if args.force {
        return match lock::force_release(&mut con, &keys)? {
            Some(removed) => {
                // stdout, so a runbook can keep what was removed.
                println!(
                    "removed {}: {} (token {})",
                    keys.lock,
                    removed.holder.describe_holder(),
                    removed.token
                );
                Ok(Exit::Success)
            }
            None => {
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
    if lock::release(&mut con, &keys, &token, None, None)? {
        log::info("released", &format!("released {}", keys.lock), &[]);
        Ok(Exit::Success)
    } else {
        log::warn(
            "not_released",
            &format!(
                "{} is free or held with another token; nothing released",
                keys.lock
            ),
            &[],
        );
        Ok(Exit::No)
    }
}
