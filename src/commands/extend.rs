//! `redlock extend`: renew a lock taken with `redlock acquire`, only if TOKEN still holds it.
//! 0 renewed, 1 not the holder (free, expired, or someone else's).

use anyhow::Result;

use crate::Context;
use crate::cli::ExtendArgs;
use crate::lock::Standing;
use crate::lock::keys::Keys;
use crate::lock::nodes::Renewal;
use crate::report::error::not_a_lock;
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::lease;

pub fn extend(ctx: &Context, args: ExtendArgs) -> Result<Exit> {
    lease::check_ttl(args.ttl)?;
    let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster())?;
    let replicas = ctx.replicas(args.replicas)?;
    let mut nodes = ctx.nodes(ctx.timeout).with_replicas(replicas);
    nodes.connect()?;
    let renewed = match nodes.extend(&keys, &args.token, args.ttl, &Standing::default(), false) {
        Renewal::Confirmed => true,
        // A refusal (NOPERM, WRONGTYPE, READONLY) is reported by its class, not as "not the
        // holder".
        Renewal::Lost {
            refusal: Some(e), ..
        }
        | Renewal::Failed(e) => {
            let doing = format!("cannot extend {}", keys.names());
            return Err(not_a_lock(e, &doing, !keys.also.is_empty()));
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
