//! `redlock acquire`: take a lock for a shell script that holds it across several steps.
//!
//! The first line of stdout is the token (keep it for `extend` and `release --token`); the
//! fence follows on the second line, and with `--slots N` the slot (0..N-1) on a third. With
//! `--shared` or `--slots N` the hold is one of several (see `lock::Shape`). With `--json`,
//! stdout is one object instead:
//! `{"key", "redis_key", "token", "fence", "ttl_ms", "acquired_ms", "deadline_ms"}` (and
//! `"slot"` with `--slots`), where
//! `acquired_ms` is the server's clock when the lock was taken and `deadline_ms` when it expires
//! unless extended. Nothing renews the lease: the script calls `redlock extend` (the lock
//! expires by itself if the script dies). The holder record names the calling process.
//! Busy → 75 (counted once, however long `--wait` waited); a signal while waiting → 128+N.
//! Inside a `run` of the same key whose lease still holds, it prints that run's token and
//! fence, and with `--json` its lease (`ttl_ms` is then what is left of it): see `nested.rs`.

use anyhow::{Context as _, Result};

use crate::Context;
use crate::cli::AcquireArgs;
use crate::lock::keys::Keys;
use crate::lock::record::Holder;
use crate::lock::wait::{self, Request, Taken};
use crate::lock::{self, Claim};
use crate::report::exit::{BUSY, Exit};
use crate::report::json::Json;
use crate::report::log;
use crate::supervise::lease;
use crate::supervise::signals::Signals;

pub fn acquire(ctx: &Context, args: AcquireArgs) -> Result<Exit> {
    lease::check_ttl(args.ttl)?;
    crate::cli::check_label(args.label.as_deref())?;
    let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster(), "--key")?;
    let shape = ctx.shape(args.shared, args.slots)?;
    if !keys.also.is_empty() && shape != lock::Shape::Exclusive {
        return Err(crate::report::error::usage(format!(
            "{} takes one --key; several keys are taken exclusively, all or none",
            if args.shared { "--shared" } else { "--slots" }
        )));
    }
    let replicas = ctx.replicas(args.replicas)?;
    let signals = Signals::block();
    let mut nodes = ctx.nodes(ctx.timeout).with_replicas(replicas);
    nodes.connect()?;
    // Inside a run that holds this key: that run's token is the answer.
    if let Some((token, lease)) = crate::lock::nested::confirm(&mut nodes, &keys, shape)? {
        let left = lease.pttl_ms.max(0);
        let fences = crate::lock::nested::outer_fences(&keys).unwrap_or_else(|| vec![lease.fence]);
        let text = lease_text(
            &keys,
            &token,
            &fences,
            std::env::var("REDLOCK_SLOT")
                .ok()
                .and_then(|s| s.parse().ok()),
            lease.started_ms,
            left,
            lease.server_now_ms + left,
            args.json,
        );
        log::stdout(&text).context("cannot print the token")?;
        return Ok(Exit::Success);
    }
    let token = lock::new_token()?;
    let mut holder = calling_process(args.label.as_deref());
    holder.replicas = Some(replicas).filter(|n| *n > 0);
    let request = Request {
        claim: Claim {
            keys: &keys,
            token: &token,
            ttl: args.ttl,
            holder: &holder,
            shape,
            once: None,
        },
        wait: args.wait,
        max_waiters: None,
        replace: None,
        timeout: ctx.timeout,
    };
    match wait::take(&mut nodes, &request, &signals, &mut || {})? {
        Taken::Acquired {
            fence,
            also,
            started_ms,
            slot,
            ..
        } => {
            let fences: Vec<i64> = std::iter::once(fence).chain(also).collect();
            // `--slots 1` is the exclusive lock, whose one slot is 0.
            let slot = slot.or(args.slots.map(|_| 0));
            let ttl_ms = args.ttl.as_millis() as i64;
            let deadline_ms = started_ms + ttl_ms;
            let text = lease_text(
                &keys,
                &token,
                &fences,
                slot,
                started_ms,
                ttl_ms,
                deadline_ms,
                args.json,
            );
            // A token nobody received is a lock nobody can release: give it back.
            if let Err(e) = log::stdout(&text) {
                let _ = nodes.release(&keys, &token, None, None, None);
                return Err(anyhow::Error::new(e).context("cannot print the token; lock released"));
            }
            Ok(Exit::Success)
        }
        Taken::Busy(busy) => Ok(log::ending(
            "busy",
            &format!("{} is {}", busy.lock(&keys), busy.describe()),
            &[("key", (&keys.lock).into())],
            Exit::Busy(BUSY),
        )),
        // Not asked for by `acquire` (no --once-per, no --replace); as busy if a server says so
        // anyway.
        Taken::Superseded(by) => Ok(log::ending(
            "busy",
            &format!("{}: superseded by {by}", keys.lock),
            &[("key", (&keys.lock).into())],
            Exit::Busy(BUSY),
        )),
        Taken::Skipped(ran) => Ok(log::ending(
            "skipped",
            &format!("{}: {}", keys.lock, ran.describe()),
            &[("key", (&keys.lock).into())],
            Exit::Busy(BUSY),
        )),
        Taken::Interrupted(sig) => Ok(wait::interrupted(sig, &keys)),
    }
}

/// What `acquire` prints: the token, the fence and the slot (when there is one), or one JSON
/// object. Several keys: every key's fence on the second line, in order, separated by spaces;
/// in JSON, `keys`, `redis_keys` and `fences` too (`key`, `redis_key`, `fence`: the first).
#[allow(clippy::too_many_arguments)]
fn lease_text(
    keys: &Keys,
    token: &str,
    fences: &[i64],
    slot: Option<u32>,
    acquired_ms: i64,
    ttl_ms: i64,
    deadline_ms: i64,
    json: bool,
) -> String {
    let fence = fences.first().copied().unwrap_or(0);
    if !json {
        if fences.len() > 1 {
            let all: Vec<String> = fences.iter().map(i64::to_string).collect();
            return format!("{token}\n{}\n", all.join(" "));
        }
        return match slot {
            Some(slot) => format!("{token}\n{fence}\n{slot}\n"),
            None => format!("{token}\n{fence}\n"),
        };
    }
    let mut fields = vec![
        ("key", Json::str(&keys.name)),
        ("redis_key", Json::str(&keys.lock)),
        ("token", Json::str(token)),
        ("fence", Json::Num(fence.into())),
        ("ttl_ms", Json::Num(ttl_ms.into())),
        ("acquired_ms", Json::Num(acquired_ms.into())),
        ("deadline_ms", Json::Num(deadline_ms.into())),
    ];
    if let Some(slot) = slot {
        fields.push(("slot", Json::Num(slot.into())));
    }
    if !keys.also.is_empty() {
        fields.push((
            "keys",
            Json::Arr(keys.each().map(|k| Json::str(&k.name)).collect()),
        ));
        fields.push((
            "redis_keys",
            Json::Arr(keys.each().map(|k| Json::str(&k.lock)).collect()),
        ));
        fields.push((
            "fences",
            Json::Arr(fences.iter().map(|f| Json::Num((*f).into())).collect()),
        ));
    }
    let doc = Json::Obj(fields);
    format!("{}\n", doc.render())
}

/// The script that called `redlock acquire` is the holder, not this short-lived process.
fn calling_process(label: Option<&str>) -> Holder {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    let command = std::fs::read(format!("/proc/{ppid}/cmdline"))
        .ok()
        .map(|raw| {
            // Redacted word by word: a secret is hidden whole whatever it holds.
            let words: Vec<&std::ffi::OsStr> = raw
                .split(|&b| b == 0)
                .filter(|part| !part.is_empty())
                .map(std::os::unix::ffi::OsStrExt::from_bytes)
                .collect();
            crate::lock::record::redact_words(&words)
                .iter()
                .map(|word| word.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "redlock acquire".to_string());
    let mut holder = Holder::current(&command, label);
    holder.pid = Some(ppid as u32);
    // No redlock supervises what a script does under this lock: nothing could stop it when
    // asked, so `--replace` does not ask.
    holder.irreplaceable = true;
    // Nor does any redlock renew its lease: the script may `extend` when it likes.
    holder.no_renewal = true;
    holder
}
