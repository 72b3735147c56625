//! The probe lock: what `run` and `status` do, done for real under the prefix, and when the
//! server refuses any of it for want of a permission, which command, key pattern or channel
//! pattern is missing and the `ACL SETUSER` rule that grants it.
//!
//! The commands `run` needs are read from its scripts (`scripts.rs`), not listed here: a script
//! that starts calling a new command changes the rules doctor suggests, and the tests fail until
//! the one-by-one diagnosis tries it and the guide's ACL recipe (docs/guide.md) grants it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use redis::RedisError;

use super::{Report, answered, answered_lock, describe};
use crate::Context;
use crate::lock::inspect;
use crate::lock::keys::Keys;
use crate::lock::record::{GivenBack, Holder, LastRun, Outcome};
use crate::lock::scripts;
use crate::lock::{self, Acquire, Claim, Refusal};
use crate::redis::server::{Conn, Server};
use crate::report::error::classify_redis;
use crate::report::exit::Exit;

/// Long enough for the probe's few round trips, short enough that a probe left behind by a
/// doctor that died mid-way frees itself at once.
const PROBE_TTL: Duration = Duration::from_secs(2);

/// The probe's claim on its key.
fn claim<'a>(keys: &'a Keys, token: &'a str, holder: &'a Holder) -> Claim<'a> {
    Claim {
        keys,
        token,
        ttl: PROBE_TTL,
        holder,
        shape: lock::Shape::Exclusive,
        once: None,
    }
}

/// Every key of a lock: the lock, then each companion ([`scripts::COMPANIONS`]), named the way
/// its fence counter is.
fn every_key(keys: &Keys) -> Vec<String> {
    let stem = keys
        .fence
        .strip_suffix(scripts::FENCE)
        .unwrap_or(&keys.fence);
    std::iter::once(keys.lock.clone())
        .chain(
            scripts::COMPANIONS
                .iter()
                .map(|name| format!("{stem}{name}")),
        )
        .collect()
}

/// Whether the server refused for want of an ACL permission (inside a script, an `ERR` reply
/// whose words differ between servers: `reply::meaning` knows them).
pub(super) fn is_denied(err: &RedisError) -> bool {
    matches!(
        crate::report::reply::meaning(err),
        Some(crate::report::reply::Meaning::AclDenied { .. })
    ) || err.to_string().contains("NOPERM")
}

/// Who we are, for the ACL SETUSER lines; `USER` when neither the server nor the URL says.
pub(super) struct User(pub(super) String);

impl User {
    /// `ACL SETUSER name RULES`.
    pub(super) fn grant(&self, rules: &str) -> String {
        format!("ACL SETUSER {} {rules}", self.0)
    }

    pub(super) fn could_not(
        &self,
        command: &str,
        err: &RedisError,
        grant: &str,
    ) -> (String, String) {
        if is_denied(err) {
            (
                format!(
                    "could not be checked: user {} may not run {command}",
                    self.0
                ),
                self.grant(grant),
            )
        } else {
            (
                format!("could not be checked: {command} failed: {}", describe(err)),
                "ask the server's administrator, or enable the command for this user".into(),
            )
        }
    }
}

/// ACL WHOAMI; a least-privilege user may not run it, and then the URL tells.
pub(super) fn whoami(con: &mut Conn, server: &Server) -> Result<User> {
    let name = answered(redis::cmd("ACL").arg("WHOAMI").query::<String>(con))?;
    Ok(User(name.unwrap_or_else(|_| {
        server
            .user_beside_password_file()
            .unwrap_or_else(|| user_in_url(server.name()))
    })))
}

/// The user a (redacted) URL authenticates as: `default` when it names none, as Redis does.
fn user_in_url(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let user = match authority.rsplit_once('@') {
        Some((userinfo, _)) => userinfo.split(':').next().unwrap_or(""),
        None => "",
    };
    match user {
        "" => "default".into(),
        // `redis://secret@host` is redacted to `***`: a password, not a user.
        "***" => "USER".into(),
        user => user.into(),
    }
}

/// What the probe lock ran into: refusals by operation, and anything else that went wrong.
#[derive(Default)]
struct Probe {
    denied: Vec<(&'static str, RedisError)>,
    refused: Vec<(&'static str, RedisError)>,
    odd: Vec<String>,
}

impl Probe {
    /// The value, or `None` after recording the server's refusal.
    fn step<T>(&mut self, operation: &'static str, result: Result<T>) -> Result<Option<T>> {
        match answered_lock(result)? {
            Ok(value) => Ok(Some(value)),
            Err(err) if is_denied(&err) => {
                self.denied.push((operation, err));
                Ok(None)
            }
            Err(err) => {
                self.refused.push((operation, err));
                Ok(None)
            }
        }
    }
}

pub(super) fn check_permissions(
    ctx: &Context,
    server: &Server,
    con: &mut Conn,
    user: &User,
    report: &mut Report,
) -> Result<()> {
    const CHECK: &str = "permissions";
    let id: String = lock::new_token()?
        .replace('-', "")
        .chars()
        .take(16)
        .collect();
    let keys = Keys::new(&ctx.prefix, &format!("redlock:doctor:{id}"))?;
    let token = lock::new_token()?;
    let result = probe(ctx, server, con, &keys, &token);
    // Before the cleanup: trying the commands one by one writes the probe's keys too.
    let missing = match &result {
        Ok((probe, _)) if !probe.denied.is_empty() => Some(diagnose(con, &keys)),
        _ => None,
    };
    // Whatever happened, the probe's keys go; a partial script run may have left some.
    let cleanup = answered(redis::cmd("DEL").arg(every_key(&keys)).query::<i64>(con));
    let (probe, subscribed) = result?;
    let missing = missing.transpose()?;

    if probe.denied.is_empty() && probe.refused.is_empty() && probe.odd.is_empty() {
        report.ok(
            CHECK,
            format!(
                "user {} can acquire, extend and release a lock (by token and by force too) under \
                 prefix {:?}, be refused \
                 as a contender, read its status and SCAN (probe {})",
                user.0, ctx.prefix, keys.lock
            ),
        );
    }
    if let Some(missing) = missing {
        report_denied(report, user, &ctx.prefix, &probe.denied, &missing);
    }
    for (operation, err) in &probe.refused {
        report.fail(
            classify_redis(err),
            "lock probe",
            format!("{operation} was refused: {}", describe(err)),
            "see the error; redlock run would fail the same way".into(),
        );
    }
    for text in &probe.odd {
        report.fail(
            Exit::Config,
            "lock probe",
            text.clone(),
            "make sure nothing else writes or evicts keys under the prefix".into(),
        );
    }
    if let Some(err) = subscribed {
        let grant = if is_denied(&err) {
            match what_is_missing(&err, "SUBSCRIBE", Need::Run) {
                Missing::Channels => user.grant(&channel_patterns(&ctx.prefix)),
                _ => user.grant("+subscribe"),
            }
        } else {
            "see the error".into()
        };
        report.warn(
            "subscribe",
            format!(
                "SUBSCRIBE to the release channel was refused ({}): run --wait and acquire \
                 --wait cannot be woken by a release and fall back to polling",
                describe(&err)
            ),
            grant,
        );
    }
    if let Err(err) = cleanup? {
        // A user who may not delete may not have written either: say only what is really left.
        let mut left = Vec::new();
        for key in every_key(&keys) {
            let exists = answered(redis::cmd("EXISTS").arg(&key).query::<i64>(con))?;
            let maybe_left = match exists {
                Ok(n) => n > 0,
                // Keys this user may not even read were never written by it.
                Err(err) => {
                    !(is_denied(&err)
                        && what_is_missing(&err, "EXISTS", Need::Run) == Missing::Keys)
                }
            };
            if maybe_left {
                left.push(key);
            }
        }
        if !left.is_empty() {
            report.warn(
                "lock probe",
                format!(
                    "the probe's keys could not be deleted ({}); {} may be left, the fence \
                     counter without expiry",
                    describe(&err),
                    left.join(", ")
                ),
                format!("DEL {} as a user who may", left.join(" ")),
            );
        }
    }
    Ok(())
}

/// Runs the probe lock through `run`'s and `status`'s operations. Returns what went wrong, and
/// the refused SUBSCRIBE if it was.
fn probe(
    ctx: &Context,
    server: &Server,
    con: &mut Conn,
    keys: &Keys,
    token: &str,
) -> Result<(Probe, Option<RedisError>)> {
    let mut probe = Probe::default();
    let cluster = matches!(con, Conn::Cluster(_));
    let holder = Holder::current("redlock doctor", None);
    // The probe's holds, each by a token of its own.
    let acquire = |con: &mut Conn, token: &str| {
        lock::acquire(
            con,
            &claim(keys, token, &holder),
            Refusal::Uncounted,
            None,
            cluster,
            None,
        )
    };
    let sent = Instant::now();
    let acquired = match probe.step("acquire", acquire(con, token))? {
        Some(Acquire::Acquired {
            fence, started_ms, ..
        }) => Some((fence, started_ms)),
        Some(Acquire::Mismatch(_) | Acquire::Skipped(_) | Acquire::Superseded(_)) => None,
        Some(Acquire::Busy(busy)) => {
            probe.odd.push(format!(
                "the fresh probe key {} was already {}",
                keys.lock,
                busy.describe()
            ));
            None
        }
        None => None,
    };
    if acquired.is_some() {
        let contender = lock::new_token()?;
        match probe.step(
            "acquire (busy)",
            lock::acquire(
                con,
                &claim(keys, &contender, &holder),
                Refusal::Count,
                None,
                cluster,
                None,
            ),
        )? {
            Some(Acquire::Acquired { .. }) => probe.odd.push(format!(
                "a second contender also acquired {}: the first holder's key vanished",
                keys.lock
            )),
            Some(
                Acquire::Busy(_)
                | Acquire::Mismatch(_)
                | Acquire::Skipped(_)
                | Acquire::Superseded(_),
            )
            | None => {}
        }
        probe.step("count busy", lock::count_busy(con, keys, &holder))?;
        if probe
            .step(
                "extend",
                lock::extend(con, keys, token, PROBE_TTL, false, None),
            )?
            .is_some_and(|r| r != lock::Renewed::Yes)
        {
            probe.odd.push(format!(
                "{} was gone before its {} TTL ran out (evicted?)",
                keys.lock,
                crate::supervise::lease::fmt(PROBE_TTL)
            ));
        }
    }
    if let Some(inspection) = probe.step(
        "status",
        inspect::inspect(con, std::slice::from_ref(keys), 0).and_then(inspect::readable),
    )? && acquired.is_some()
        && let Some(i) = inspection.first()
        && (i.key_type != "string" || i.token.as_deref() != Some(token))
    {
        probe.odd.push(format!(
            "status read {} as a {} that is not the probe's",
            keys.lock, i.key_type
        ));
    }
    if let Some((fence, started_ms)) = acquired {
        let record = LastRun::new(Outcome::Ok, 0, &holder, started_ms, sent.elapsed(), fence);
        if probe.step(
            "release",
            lock::release_unverified(con, keys, token, None, Some(&record)),
        )? == Some(false)
        {
            probe
                .odd
                .push(format!("{} was gone before release (evicted?)", keys.lock));
        }
        // `release --token` and `release --force` end a hold with scripts of their own, which
        // read records a run's release does not: each is tried on a hold of its own.
        let by_token = lock::new_token()?;
        if let Some(Acquire::Acquired { .. }) =
            probe.step("acquire (again)", acquire(con, &by_token))?
        {
            probe.step(
                "release --token",
                lock::give_back_unverified(con, keys, &by_token, GivenBack::ByToken),
            )?;
        }
        let forced = lock::new_token()?;
        if let Some(Acquire::Acquired { .. }) =
            probe.step("acquire (again)", acquire(con, &forced))?
        {
            probe.step(
                "release --force",
                lock::force_release(con, keys, "redlock doctor"),
            )?;
        }
    }
    // A release wakes the head of the queue on its own channel; with nobody queued (the probe's
    // case) it publishes nothing, so the permission is asked for directly.
    let wake = redis::cmd("PUBLISH")
        .arg(format!("{}:{token}", keys.channel))
        .arg("doctor")
        .query::<i64>(con)
        .context("cannot wake a waiter (PUBLISH)");
    probe.step("wake a waiter", wake)?;
    let scan = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg(scripts::FENCE_PATTERN)
        .arg("COUNT")
        .arg(10)
        .query::<(u64, Vec<String>)>(con)
        .context("cannot list the locks (SCAN)");
    probe.step("status --all (SCAN)", scan)?;

    // A plain SUBSCRIBE on a connection of its own, dropped afterwards: the redis crate's
    // `PubSub::subscribe` reports success even when the server refuses.
    let mut subscriber = server.connect_direct(ctx.timeout)?;
    let subscribed = answered(
        redis::cmd("SUBSCRIBE")
            .arg(&keys.channel)
            .query::<redis::Value>(&mut subscriber),
    )?
    .err();
    Ok((probe, subscribed))
}

/// Who needs a permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    Run,
    Status,
    Both,
}

/// Something the user may not do.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Missing {
    Command(String, Need),
    Keys,
    Channels,
}

/// Every command redlock sends, tried one by one on the probe's keys (which no one else uses),
/// so that a refusal names what is missing. Inside a script Redis only says that *a* command was
/// denied.
fn diagnose(con: &mut Conn, keys: &Keys) -> Result<Vec<Missing>> {
    let ms = PROBE_TTL.as_millis().to_string();
    let every = every_key(keys);
    let mut missing = Vec::new();
    for (need, name, args) in tries(keys, &every, &ms) {
        let reply = redis::cmd(name).arg(args).query::<redis::Value>(con);
        let Err(err) = answered(reply)? else {
            continue;
        };
        if !is_denied(&err) {
            continue; // NOSCRIPT and the like: allowed, merely pointless
        }
        let found = what_is_missing(&err, name, need);
        if !missing.contains(&found) {
            missing.push(found);
        }
    }
    Ok(missing)
}

/// What [`diagnose`] sends: each command with arguments it accepts (Redis checks the number of
/// arguments before the permission), on the probe's keys. `every` is [`every_key`], `ms` the
/// probe's TTL. Every command a script calls is here (a test checks it).
fn tries<'a>(
    keys: &'a Keys,
    every: &'a [String],
    ms: &'a str,
) -> Vec<(Need, &'static str, Vec<&'a str>)> {
    let every = every.iter().map(String::as_str).collect();
    vec![
        // An unknown SHA: NOSCRIPT when EVALSHA is allowed, NOPERM when not.
        (
            Need::Run,
            "EVALSHA",
            vec!["0000000000000000000000000000000000000000", "0"],
        ),
        (Need::Run, "SCRIPT", vec!["LOAD", "return 1"]),
        (Need::Run, "TIME", vec![]),
        (Need::Run, "SET", vec![&keys.lock, "doctor", "NX", "PX", ms]),
        (Need::Both, "GET", vec![&keys.holder]),
        (Need::Both, "PTTL", vec![&keys.lock]),
        (Need::Run, "EXISTS", vec![&keys.holder]),
        (Need::Run, "INCR", vec![&keys.fence]),
        (Need::Run, "HSET", vec![&keys.stats, "doctor", "1"]),
        (Need::Run, "HMGET", vec![&keys.stats, "doctor"]),
        (Need::Run, "HINCRBY", vec![&keys.stats, "doctor", "1"]),
        (Need::Run, "PEXPIRE", vec![&keys.holder, ms]),
        (Need::Run, "PUBLISH", vec![&keys.channel, "doctor"]),
        (Need::Run, "ZADD", vec![&keys.queue, "1", "doctor"]),
        (Need::Run, "ZRANGE", vec![&keys.queue, "0", "0"]),
        (Need::Run, "ZRANGEBYSCORE", vec![&keys.alive, "-inf", "0"]),
        (Need::Run, "ZRANK", vec![&keys.queue, "doctor"]),
        (Need::Run, "ZSCORE", vec![&keys.leases, "doctor"]),
        (Need::Run, "ZCARD", vec![&keys.queue]),
        (Need::Run, "ZREM", vec![&keys.queue, "doctor"]),
        (Need::Run, "HSETNX", vec![&keys.waiters, "doctor", "1"]),
        (Need::Run, "HDEL", vec![&keys.waiters, "doctor"]),
        (Need::Run, "LPUSH", vec![&keys.queue, "doctor"]),
        (Need::Run, "BLPOP", vec![&keys.queue, "0.01"]),
        (Need::Run, "RPUSH", vec![&keys.log, "doctor"]),
        (Need::Run, "LTRIM", vec![&keys.log, "-1000", "-1"]),
        (Need::Run, "LINDEX", vec![&keys.log, "0"]),
        (Need::Run, "LPOP", vec![&keys.log]),
        (Need::Status, "TYPE", vec![&keys.lock]),
        (Need::Status, "MGET", vec![&keys.lock, &keys.fence]),
        (Need::Status, "HGETALL", vec![&keys.stats]),
        // `log` and `metrics` read the audit log.
        (Need::Status, "LRANGE", vec![&keys.log, "0", "0"]),
        (
            Need::Status,
            "SCAN",
            vec!["0", "MATCH", scripts::FENCE_PATTERN, "COUNT", "10"],
        ),
        // Last: it also removes what the others created.
        (Need::Run, "DEL", every),
    ]
}

/// Reads Redis's NOPERM text: "no permissions to run the 'publish' command", "... to access one
/// of the keys ...", "... one of the channels ...". `sent` names the command when the wording is
/// new.
fn what_is_missing(err: &RedisError, sent: &str, need: Need) -> Missing {
    let text = err.to_string();
    if let Some(rest) = text.split("run the '").nth(1)
        && let Some(name) = rest.split('\'').next()
    {
        return Missing::Command(name.to_lowercase(), need);
    }
    if text.contains("channel") {
        Missing::Channels
    } else if text.contains("key") {
        Missing::Keys
    } else {
        Missing::Command(sent.to_lowercase(), need)
    }
}

/// `~PREFIX* ~{PREFIX*`: the lock keys and their companions, whose hash tag starts with `{`.
fn key_patterns(prefix: &str) -> String {
    if prefix.is_empty() {
        "~*".into()
    } else {
        format!("~{prefix}* ~{{{prefix}*")
    }
}

fn channel_patterns(prefix: &str) -> String {
    if prefix.is_empty() {
        "&*".into()
    } else {
        format!("&{prefix}* &{{{prefix}*")
    }
}

fn report_denied(
    report: &mut Report,
    user: &User,
    prefix: &str,
    denied: &[(&'static str, RedisError)],
    missing: &[Missing],
) {
    const CHECK: &str = "permissions";
    let operations: Vec<&str> = denied.iter().map(|(op, _)| *op).collect();
    let refused = format!("refused: {}", operations.join(", "));
    let commands = |needs: &[Need]| -> Vec<&str> {
        missing
            .iter()
            .filter_map(|m| match m {
                Missing::Command(name, need) if needs.contains(need) => Some(name.as_str()),
                _ => None,
            })
            .collect()
    };
    for (who, needs) in [
        ("run", [Need::Run, Need::Both]),
        ("status", [Need::Status, Need::Both]),
    ] {
        let names = commands(&needs);
        if names.is_empty() {
            continue;
        }
        let rules: Vec<String> = names.iter().map(|n| format!("+{n}")).collect();
        report.fail(
            Exit::Permission,
            CHECK,
            format!(
                "{who} needs {}, which user {} may not run ({refused})",
                names.join(", "),
                user.0
            ),
            user.grant(&rules.join(" ")),
        );
    }
    if missing.contains(&Missing::Keys) {
        report.fail(
            Exit::Permission,
            CHECK,
            format!(
                "user {} may not access the lock keys under prefix {prefix:?} and their \
                 companions ({refused})",
                user.0
            ),
            user.grant(&key_patterns(prefix)),
        );
    }
    if missing.contains(&Missing::Channels) {
        report.fail(
            Exit::Permission,
            CHECK,
            format!(
                "user {} may not publish on the lock's release channel, which run's release \
                 does to wake waiters ({refused})",
                user.0
            ),
            user.grant(&channel_patterns(prefix)),
        );
    }
    if missing.is_empty() {
        let (operation, err) = &denied[0];
        report.fail(
            Exit::Permission,
            CHECK,
            format!("{operation} was refused: {}", describe(err)),
            format!(
                "grant what the error names, e.g. {}",
                user.grant(&format!(
                    "{} {STATUS_RULES} {}",
                    run_rules(),
                    key_patterns(prefix)
                ))
            ),
        );
    }
}

/// What `run` sends itself besides the commands its scripts call: the scripts by SHA, SCRIPT
/// LOAD when the server's script cache was flushed, and the subscription `--wait` listens on.
const RUN_OWN_RULES: [&str; 4] = ["+evalsha", "+script|load", "+subscribe", "+blpop"];
/// What `status` reads (the lock's state, and `--all`'s SCAN) besides the PTTL `run` needs too,
/// and the audit log `log` and `metrics` read.
const STATUS_RULES: &str = "+type +mget +hgetall +zrange +scan +lrange";

/// The ACL rules `run` needs: its own commands and every command its scripts call, which run
/// with the caller's permissions.
fn run_rules() -> String {
    let scripts = scripts::commands()
        .into_iter()
        .map(|name| format!("+{}", name.to_lowercase()));
    let rules: Vec<String> = RUN_OWN_RULES
        .iter()
        .map(|rule| (*rule).to_owned())
        .chain(scripts)
        .collect();
    rules.join(" ")
}

#[cfg(test)]
mod tests;
