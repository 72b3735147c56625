//! `redlock extend`: renew a lock taken with `redlock acquire`, only if TOKEN still holds it.
//! 0 renewed, 1 not the holder (free, expired, or someone else's).

use std::time::Instant;

use anyhow::Result;

use crate::Context;
use crate::cli::ExtendArgs;
use crate::lock::keys::Keys;
use crate::lock::nodes::Renewal;
use crate::lock::{self, Standing};
use crate::report::error::{is_server_reply, is_wrong_type, not_a_lock, render};
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::lease;

pub fn extend(ctx: &Context, args: ExtendArgs) -> Result<Exit> {
    lease::check_ttl(args.ttl)?;
    let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster(), "--key")?;
    lock::token_given(Some(&args.token))?;
    let replicas = ctx.replicas(args.replicas)?;
    let mut nodes = ctx.nodes(ctx.timeout).with_replicas(replicas);
    nodes.connect()?;
    let since = Instant::now();
    let renewed = match nodes.extend(&keys, &args.token, args.ttl, &Standing::default(), false) {
        Renewal::Confirmed => true,
        // A refusal (NOPERM, WRONGTYPE, READONLY) is reported by its class, not as "not the
        // holder".
        Renewal::Lost {
            refusal: Some(e), ..
        }
        | Renewal::Failed(e) => {
            // The script moves the expiry before it writes the holder record, and a server
            // keeps what a script did before a command failed: on one server (and no replicas
            // to count), a renewal that took effect is read back and said, with a warning.
            if !nodes.is_quorum()
                && replicas == 0
                && is_server_reply(&e)
                && matches!(
                    nodes.on(0, |c| lock::renewed_anyway(
                        c,
                        &keys,
                        &args.token,
                        args.ttl,
                        since
                    )),
                    Ok(true)
                )
            {
                log::warn(
                    "renewal_unrecorded",
                    &format!(
                        "renewed {} for {}, but the renewal's records were not all written: {}",
                        keys.names(),
                        lease::fmt(args.ttl),
                        render(&e)
                    ),
                    &[("key", keys.lock.as_str().into())],
                );
                return Ok(Exit::Success);
            }
            let doing = format!("cannot extend {}", keys.names());
            return Err(match is_wrong_type(&e) {
                true => not_a_lock(e, &doing, !keys.also.is_empty()),
                false => e.context(doing),
            });
        }
        Renewal::Lost { refusal: None, .. } | Renewal::Replaced(_) => false,
    };
    if renewed {
        log::info(
            "renewed",
            &format!("renewed {} for {}", keys.names(), lease::fmt(args.ttl)),
            &[],
        );
        Ok(Exit::Success)
    } else {
        log::warn(
            "not_holder",
            &format!(
                "{} is not held by this token (expired, released or taken); not renewed",
                keys.names()
            ),
            &[],
        );
        Ok(Exit::No)
    }
}
