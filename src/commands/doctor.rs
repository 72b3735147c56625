//! `redlock doctor`: checks the configured server(s) for the hazards that break locks silently.
//! With a quorum, every node is checked in turn, each under a `server URL` header line.
//!
//! Each check prints one line on stdout, `ok`, `warn` or `fail`, then the check's name, what was
//! found and, unless it is ok, the fix. The checks, in the order they print:
//!
//! * **version** (INFO): before 5.0 the scripts cannot run, since they need effects replication
//!   (`fail`); before 6.2 the server is past upstream maintenance (`warn`).
//! * **role** (INFO): a replica is a `fail`: locks must be taken on the primary.
//! * **maxmemory-policy** (CONFIG GET): anything but `noeviction` lets Redis evict a lock that is
//!   still in use (`warn`). A user who may not run CONFIG GET gets a warning naming the ACL.
//! * **persistence** (INFO, CONFIG GET): neither AOF nor RDB means a restart forgets every lock;
//!   RDB alone forgets those taken since the last snapshot (`warn`). AOF without
//!   `appendfsync always` is ok, with a note.
//! * **latency**: the median of 10 PINGs; above 10 ms every acquire and renewal pays it (`warn`).
//! * **clock**: TIME against this host's clock, corrected by half the round trip. Leases never
//!   use it, but `status` computes holder ages from both clocks: above 500 ms it is a `warn`.
//! * **permissions**: a real probe lock, `PREFIX + "redlock:doctor:" + random id` with a 2 s TTL,
//!   goes through what `run` and `status` do — acquire, a refused second contender (which
//!   counts), extend, the status read pipeline, release with a run record — through the same
//!   `lock.rs` functions, plus one short SCAN and a SUBSCRIBE to its release channel. When the
//!   server refuses one of them for want of a permission, every command, key pattern and
//!   channel pattern redlock uses is tried directly on the probe's keys, so the `fail` line can
//!   name exactly what to grant (inside a script Redis 7 does not say which command was
//!   denied). A refused SUBSCRIBE is only a `warn`: waiters then fall back to polling.
//!
//! Invariant: doctor changes nothing on the server but its probe's own keys, and deletes all of
//! them (the fence counter included, which would otherwise live forever and show up in
//! `status --all`) before it returns, on every path where the server still answers.
//!
//! Exit status: 0 when every check is ok, 1 (`Exit::No`) with warnings only. A failed check ends
//! with the class `run` would end with for the same hazard — 77 for a missing permission, 69 for
//! a replica or a server that refuses writes, 78 for a server too old for the scripts — the
//! first failure printed deciding. Not reaching the server (69) or a rejected password (77)
//! are errors, as for every command.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use redis::{RedisError, RedisResult};

use crate::Context;
use crate::error::{classify_redis, redis_errors};
use crate::exit::Exit;
use crate::inspect;
use crate::keys::Keys;
use crate::lock::{self, Acquire, Claim, Refusal};
use crate::log;
use crate::record::{Holder, LastRun, Outcome};
use crate::server::{Conn, Server};

/// The scripts need effects replication, the default from Redis 5 on.
const REQUIRED_VERSION: (u32, u32) = (5, 0);
/// Older servers no longer get fixes upstream.
const MAINTAINED_VERSION: (u32, u32) = (6, 2);
const PINGS: usize = 10;
const SLOW_ROUND_TRIP: Duration = Duration::from_millis(10);
const CLOCK_SAMPLES: usize = 5;
const CLOCK_TOLERANCE: Duration = Duration::from_millis(500);
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
    }
}

pub fn doctor(ctx: &Context) -> Result<Exit> {
    let mut report = Report::default();
    if let [server] = ctx.servers.as_slice() {
        check_server(ctx, server, &mut report)?;
        return Ok(report.finish());
    }
    // A quorum: every node is checked, under a header line of its own; a node that cannot be
    // reached is a failed check, not the end of the report.
    for server in &ctx.servers {
        let _ = log::stdout(&format!("server {}\n", server.name()));
        if let Err(e) = check_server(ctx, server, &mut report) {
            report.fail(
                crate::error::classify(&e),
                "connection",
                crate::error::render(&e),
                "a quorum keeps working with a minority of nodes down; bring this one back".into(),
            );
        }
    }
    Ok(report.finish())
}

fn check_server(ctx: &Context, server: &Server, report: &mut Report) -> Result<()> {
    let mut con = Conn::Single(server.connect_direct(ctx.timeout)?);
    let user = whoami(&mut con, server)?;
    let info =
        answered(redis::cmd("INFO").query::<String>(&mut con))?.map(|text| parse_info(&text));

    check_version(&info, &user, report);
    let replica = check_role(&info, &user, report);
    check_maxmemory(&mut con, &info, &user, report)?;
    check_persistence(&mut con, &info, &user, report)?;
    check_latency(&mut con, &user, report)?;
    check_clock(&mut con, &user, report)?;
    if replica {
        report.add(
            Verdict::Warn,
            "permissions",
            "not checked: a replica refuses the probe lock's writes".into(),
            Some("run redlock doctor against the primary".into()),
        );
    } else {
        check_permissions(ctx, server, &mut con, &user, report)?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Ok,
    Warn,
    /// A failed check, and the exit status it stands for.
    Fail(Exit),
}

#[derive(Default)]
struct Report {
    warnings: usize,
    failures: Vec<(&'static str, Exit)>,
}

impl Report {
    /// Prints one finding at once, so a check that hangs shows how far doctor got.
    fn add(&mut self, verdict: Verdict, check: &'static str, text: String, fix: Option<String>) {
        let label = match verdict {
            Verdict::Ok => "ok",
            Verdict::Warn => {
                self.warnings += 1;
                "warn"
            }
            Verdict::Fail(exit) => {
                self.failures.push((check, exit));
                "fail"
            }
        };
        let _ = log::stdout(&format!("{}\n", line(label, check, &text, fix.as_deref())));
    }

    fn ok(&mut self, check: &'static str, text: String) {
        self.add(Verdict::Ok, check, text, None);
    }

    fn warn(&mut self, check: &'static str, text: String, fix: String) {
        self.add(Verdict::Warn, check, text, Some(fix));
    }

    fn fail(&mut self, exit: Exit, check: &'static str, text: String, fix: String) {
        self.add(Verdict::Fail(exit), check, text, Some(fix));
    }

    /// The exit status, with the one stderr line every non-zero status comes with.
    fn finish(self) -> Exit {
        if let Some(&(check, exit)) = self.failures.first() {
            log::error(
                "doctor_failed",
                &format!(
                    "{} and {}: this server is not safe for locks yet; see the fix on each \
                     line above (the first failure, {check}, sets the exit status)",
                    plural(self.failures.len(), "failure"),
                    plural(self.warnings, "warning")
                ),
                &[("exit", exit.code().into())],
            );
            exit
        } else if self.warnings > 0 {
            log::warn(
                "doctor_warned",
                &format!(
                    "{}; see the fix on each line above",
                    plural(self.warnings, "warning")
                ),
                &[("exit", Exit::No.code().into())],
            );
            Exit::No
        } else {
            Exit::Success
        }
    }
}

fn line(label: &str, check: &str, text: &str, fix: Option<&str>) -> String {
    match fix {
        Some(fix) => format!("{label:<4} {check}: {text}; fix: {fix}"),
        None => format!("{label:<4} {check}: {text}"),
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A server's answer, refusal included; only a failure to get an answer at all (the server
/// went away, timed out) ends doctor, as an error classified by `main`.
fn answered<T>(result: RedisResult<T>) -> Result<RedisResult<T>> {
    match result {
        Err(err) if err.code().is_none() => {
            Err(anyhow::Error::new(err).context("the server stopped answering"))
        }
        other => Ok(other),
    }
}

/// The same for the `lock.rs` functions, whose errors carry context around the Redis error.
fn answered_lock<T>(result: Result<T>) -> Result<Result<T, RedisError>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(err) => match server_reply(&err) {
            Some(reply) => Ok(Err(reply.clone())),
            None => Err(err),
        },
    }
}

fn server_reply(err: &anyhow::Error) -> Option<&RedisError> {
    redis_errors(err).find(|e| e.code().is_some())
}

/// Whether the server refused for want of an ACL permission. Inside a script, Redis 7 says so
/// in an `ERR` reply ("The user executing the script can't ...") rather than with NOPERM.
fn is_denied(err: &RedisError) -> bool {
    let text = err.to_string();
    err.code() == Some("NOPERM")
        || text.contains("NOPERM")
        || text.contains("no permissions")
        || text.contains("user executing the script can't")
}

/// The error as one line, without the redis crate's "An error was signalled by the server"
/// wrapping when there is a plain detail.
fn describe(err: &RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => err.to_string(),
    }
}

/// Who we are, for the ACL SETUSER lines; `USER` when neither the server nor the URL says.
struct User(String);

impl User {
    /// `ACL SETUSER name RULES`.
    fn grant(&self, rules: &str) -> String {
        format!("ACL SETUSER {} {rules}", self.0)
    }

    fn could_not(&self, command: &str, err: &RedisError, grant: &str) -> (String, String) {
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
fn whoami(con: &mut Conn, server: &Server) -> Result<User> {
    let name = answered(redis::cmd("ACL").arg("WHOAMI").query::<String>(con))?;
    Ok(User(name.unwrap_or_else(|_| user_in_url(server.name()))))
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

fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

type Info = RedisResult<HashMap<String, String>>;

fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

fn check_version(info: &Info, user: &User, report: &mut Report) {
    const CHECK: &str = "version";
    let info = match info {
        Ok(info) => info,
        Err(err) => {
            let (text, fix) = user.could_not("INFO", err, "+info");
            return report.warn(CHECK, text, fix);
        }
    };
    let Some(text) = info.get("redis_version") else {
        return report.warn(
            CHECK,
            "could not be checked: INFO has no redis_version".into(),
            "make sure --url names a Redis server".into(),
        );
    };
    let Some((major, minor, _)) = parse_version(text) else {
        return report.warn(
            CHECK,
            format!("could not be checked: unreadable redis_version {text:?}"),
            "make sure --url names a Redis server".into(),
        );
    };
    if (major, minor) < REQUIRED_VERSION {
        report.fail(
            Exit::Config,
            CHECK,
            format!(
                "Redis {text} cannot run redlock's scripts, which need effects replication \
                 (Redis 5.0 or later)"
            ),
            "upgrade the server to Redis 6.2 or later".into(),
        );
    } else if (major, minor) < MAINTAINED_VERSION {
        report.warn(
            CHECK,
            format!("Redis {text} is past the end of upstream maintenance"),
            "upgrade the server to Redis 6.2 or later".into(),
        );
    } else {
        report.ok(CHECK, format!("Redis {text}"));
    }
}

/// Reports the role; true when the server is a replica.
fn check_role(info: &Info, user: &User, report: &mut Report) -> bool {
    const CHECK: &str = "role";
    let info = match info {
        Ok(info) => info,
        Err(err) => {
            let (text, fix) = user.could_not("INFO", err, "+info");
            report.warn(CHECK, text, fix);
            return false;
        }
    };
    match info.get("role").map(String::as_str) {
        Some("master") => {
            report.ok(CHECK, "primary".into());
            false
        }
        Some(role @ ("slave" | "replica")) => {
            let of = match (info.get("master_host"), info.get("master_port")) {
                (Some(host), Some(port)) => format!(" of {host}:{port}"),
                _ => String::new(),
            };
            report.fail(
                Exit::Unavailable,
                CHECK,
                format!(
                    "this server is a replica{of} (role:{role}): it refuses the writes a lock \
                     needs, and locks must be taken on the primary"
                ),
                "point --url (REDLOCK_URL) at the primary".into(),
            );
            true
        }
        other => {
            report.warn(
                CHECK,
                format!(
                    "could not be checked: INFO reports role {:?}",
                    other.unwrap_or("")
                ),
                "make sure --url names a Redis primary".into(),
            );
            false
        }
    }
}

/// One configuration parameter: `Ok(None)` when the server does not know it.
fn config_get(con: &mut Conn, name: &str) -> Result<RedisResult<Option<String>>> {
    let reply = answered(
        redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query::<HashMap<String, String>>(con),
    )?;
    Ok(reply.map(|mut pairs| pairs.remove(name)))
}

fn check_maxmemory(con: &mut Conn, info: &Info, user: &User, report: &mut Report) -> Result<()> {
    const CHECK: &str = "maxmemory-policy";
    match config_get(con, "maxmemory-policy")? {
        Err(err) => {
            let (text, mut fix) = user.could_not("CONFIG GET", &err, "+config|get");
            fix.push_str(", or make sure with the server's administrator that it is noeviction");
            report.warn(CHECK, text, fix);
        }
        Ok(None) => report.warn(
            CHECK,
            "could not be checked: the server does not report it".into(),
            "make sure with the server's administrator that it is noeviction".into(),
        ),
        Ok(Some(policy)) if policy == "noeviction" => report.ok(CHECK, policy),
        Ok(Some(policy)) => {
            let unlimited =
                matches!(&info, Ok(info) if info.get("maxmemory").is_some_and(|m| m == "0"));
            let now = if unlimited {
                " (no maxmemory limit is set yet; the first limit set starts the evictions)"
            } else {
                ""
            };
            report.warn(
                CHECK,
                format!(
                    "{policy}: under memory pressure Redis may evict a lock key while its holder \
                     still runs, and a second holder then takes it{now}"
                ),
                "CONFIG SET maxmemory-policy noeviction, and set it in redis.conf too".into(),
            );
        }
    }
    Ok(())
}

fn check_persistence(con: &mut Conn, info: &Info, user: &User, report: &mut Report) -> Result<()> {
    const CHECK: &str = "persistence";
    const RESTART_FIX: &str = "set appendonly yes (with appendfsync always) in redis.conf, or keep \
        a restarted server away from clients for longer than your longest TTL";
    let info = match info {
        Ok(info) => info,
        Err(err) => {
            let (text, fix) = user.could_not("INFO", err, "+info");
            report.warn(CHECK, text, fix);
            return Ok(());
        }
    };
    let aof = info.get("aof_enabled").map(String::as_str) == Some("1");
    if aof {
        match config_get(con, "appendfsync")? {
            Ok(Some(fsync)) if fsync == "always" => {
                report.ok(CHECK, "AOF with appendfsync always".into());
            }
            Ok(Some(fsync)) => report.ok(
                CHECK,
                format!(
                    "AOF with appendfsync {fsync} (note: a crash of the server's machine can \
                     forget the locks taken in its last second; appendfsync always closes that \
                     gap at some cost in write latency)"
                ),
            ),
            Ok(None) | Err(_) => report.ok(
                CHECK,
                "AOF (appendfsync could not be read; with anything but always, a crash can \
                 forget the locks taken in the last second)"
                    .into(),
            ),
        }
        return Ok(());
    }
    match config_get(con, "save")? {
        Ok(Some(save)) if save.trim().is_empty() => report.warn(
            CHECK,
            "neither AOF nor RDB snapshots are on: a restart forgets every lock, and a second \
             holder can start while the first still runs"
                .into(),
            RESTART_FIX.into(),
        ),
        Ok(Some(save)) => report.warn(
            CHECK,
            format!(
                "RDB snapshots only (save {save}): a restart forgets the locks taken since the \
                 last snapshot, and a second holder can start while the first still runs"
            ),
            RESTART_FIX.into(),
        ),
        Ok(None) | Err(_) => report.warn(
            CHECK,
            format!(
                "AOF is off, and whether RDB snapshots are on could not be read (user {} may not \
                 run CONFIG GET save): without persistence a restart forgets every lock",
                user.0
            ),
            format!(
                "{RESTART_FIX}; {} lets doctor see it",
                user.grant("+config|get")
            ),
        ),
    }
    Ok(())
}

fn check_latency(con: &mut Conn, user: &User, report: &mut Report) -> Result<()> {
    const CHECK: &str = "latency";
    let mut rtts = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let sent = Instant::now();
        if let Err(err) = answered(redis::cmd("PING").query::<String>(con))? {
            let (text, fix) = user.could_not("PING", &err, "+ping");
            report.warn(CHECK, text, fix);
            return Ok(());
        }
        rtts.push(sent.elapsed());
    }
    rtts.sort();
    let median = (rtts[PINGS / 2 - 1] + rtts[PINGS / 2]) / 2;
    let figures = format!(
        "median round trip {} over {PINGS} PINGs (slowest {})",
        millis(median),
        millis(rtts[PINGS - 1])
    );
    if median > SLOW_ROUND_TRIP {
        report.warn(
            CHECK,
            format!(
                "{figures}: every acquire and renewal pays it, and a renewal must finish well \
                 within a third of the TTL"
            ),
            "run redlock close to the server, and use TTLs of many seconds".into(),
        );
    } else {
        report.ok(CHECK, figures);
    }
    Ok(())
}

fn check_clock(con: &mut Conn, user: &User, report: &mut Report) -> Result<()> {
    const CHECK: &str = "clock";
    // The sample with the shortest round trip bounds the error best.
    let mut best: Option<(Duration, i128)> = None;
    for _ in 0..CLOCK_SAMPLES {
        let local = SystemTime::now();
        let sent = Instant::now();
        let reply = answered(redis::cmd("TIME").query::<(u64, u64)>(con))?;
        let rtt = sent.elapsed();
        let (secs, micros) = match reply {
            Ok(time) => time,
            Err(err) => {
                let (text, fix) = user.could_not("TIME", &err, "+time");
                report.warn(CHECK, text, fix);
                return Ok(());
            }
        };
        let server_us = i128::from(secs) * 1_000_000 + i128::from(micros);
        let local_us = micros_since_epoch(local + rtt / 2);
        let offset = server_us - local_us;
        if best.is_none_or(|(shortest, _)| rtt < shortest) {
            best = Some((rtt, offset));
        }
    }
    let Some((rtt, offset_us)) = best else {
        return Ok(());
    };
    let offset = Duration::from_micros(offset_us.unsigned_abs() as u64);
    let text = if offset < Duration::from_millis(1) {
        format!(
            "this host's clock and the server's agree within 1ms (round trip {})",
            millis(rtt)
        )
    } else {
        let side = if offset_us > 0 { "ahead of" } else { "behind" };
        format!(
            "the server's clock is {} {side} this host's (round trip {})",
            millis(offset),
            millis(rtt)
        )
    };
    if offset > CLOCK_TOLERANCE {
        report.warn(
            CHECK,
            format!(
                "{text}: leases do not depend on it, but the holder ages and renewal times \
                 status shows are off by as much"
            ),
            "synchronise both clocks with NTP (chrony, systemd-timesyncd)".into(),
        );
    } else {
        report.ok(CHECK, text);
    }
    Ok(())
}

fn micros_since_epoch(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i128,
        Err(before) => -(before.duration().as_micros() as i128),
    }
}

/// `0.12ms`, `14.3ms`, `2.5s`.
fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2}ms")
    } else if ms < 1000.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
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

fn check_permissions(
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
    let cleanup = answered(
        redis::cmd("DEL")
            .arg(&keys.lock)
            .arg(&keys.fence)
            .arg(&keys.holder)
            .arg(&keys.last)
            .arg(&keys.stats)
            .query::<i64>(con),
    );
    let (probe, subscribed) = result?;
    let missing = missing.transpose()?;

    if probe.denied.is_empty() && probe.refused.is_empty() && probe.odd.is_empty() {
        report.ok(
            CHECK,
            format!(
                "user {} can acquire, extend and release a lock under prefix {:?}, be refused \
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
        for key in [
            &keys.fence,
            &keys.last,
            &keys.stats,
            &keys.holder,
            &keys.lock,
        ] {
            let exists = answered(redis::cmd("EXISTS").arg(key).query::<i64>(con))?;
            let maybe_left = match exists {
                Ok(n) => n > 0,
                // Keys this user may not even read were never written by it.
                Err(err) => {
                    !(is_denied(&err)
                        && what_is_missing(&err, "EXISTS", Need::Run) == Missing::Keys)
                }
            };
            if maybe_left {
                left.push(key.as_str());
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
    let holder = Holder::current("redlock doctor");
    let sent = Instant::now();
    let acquired = match probe.step(
        "acquire",
        lock::acquire(con, &claim(keys, token, &holder), Refusal::Uncounted),
    )? {
        Some(Acquire::Acquired { fence, started_ms }) => Some((fence, started_ms)),
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
            lock::acquire(con, &claim(keys, &contender, &holder), Refusal::Count),
        )? {
            Some(Acquire::Acquired { .. }) => probe.odd.push(format!(
                "a second contender also acquired {}: the first holder's key vanished",
                keys.lock
            )),
            Some(Acquire::Busy(_)) | None => {}
        }
        probe.step("count busy", lock::count_busy(con, keys))?;
        if probe.step("extend", lock::extend(con, keys, token, PROBE_TTL))? == Some(false) {
            probe.odd.push(format!(
                "{} was gone before its {} TTL ran out (evicted?)",
                keys.lock,
                crate::lease::fmt(PROBE_TTL)
            ));
        }
    }
    if let Some(inspection) =
        probe.step("status", inspect::inspect(con, std::slice::from_ref(keys)))?
        && acquired.is_some()
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
            lock::release(con, keys, token, None, Some(&record)),
        )? == Some(false)
        {
            probe
                .odd
                .push(format!("{} was gone before release (evicted?)", keys.lock));
        }
    }
    let scan = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("*:redlock:fence")
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
    let tries: [(Need, &str, Vec<&str>); 18] = [
        // An unknown SHA: NOSCRIPT when EVALSHA is allowed, NOPERM when not.
        (
            Need::Run,
            "EVALSHA",
            vec!["0000000000000000000000000000000000000000", "0"],
        ),
        (Need::Run, "SCRIPT", vec!["LOAD", "return 1"]),
        (Need::Run, "TIME", vec![]),
        (
            Need::Run,
            "SET",
            vec![&keys.lock, "doctor", "NX", "PX", &ms],
        ),
        (Need::Run, "GET", vec![&keys.lock]),
        (Need::Both, "PTTL", vec![&keys.lock]),
        (Need::Run, "EXISTS", vec![&keys.holder]),
        (Need::Run, "INCR", vec![&keys.fence]),
        (Need::Run, "HSET", vec![&keys.holder, "doctor", "1"]),
        (Need::Run, "HMGET", vec![&keys.holder, "doctor"]),
        (Need::Run, "HINCRBY", vec![&keys.stats, "doctor", "1"]),
        (Need::Run, "PEXPIRE", vec![&keys.holder, &ms]),
        (Need::Run, "PUBLISH", vec![&keys.channel, "doctor"]),
        (Need::Status, "TYPE", vec![&keys.lock]),
        (Need::Status, "MGET", vec![&keys.lock, &keys.fence]),
        (Need::Status, "HGETALL", vec![&keys.holder]),
        (
            Need::Status,
            "SCAN",
            vec!["0", "MATCH", "*:redlock:fence", "COUNT", "10"],
        ),
        // Last: it also removes what the others created.
        (
            Need::Run,
            "DEL",
            vec![
                &keys.lock,
                &keys.fence,
                &keys.holder,
                &keys.last,
                &keys.stats,
            ],
        ),
    ];
    let mut missing = Vec::new();
    for (need, name, args) in tries {
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
                    "{RUN_RULES} {STATUS_RULES} {}",
                    key_patterns(prefix)
                ))
            ),
        );
    }
}

/// What `run` sends (the scripts' own commands included) and what `status` reads.
const RUN_RULES: &str = "+evalsha +script|load +time +set +get +pttl +exists +incr +hset +hmget \
    +hincrby +pexpire +del +publish +subscribe";
const STATUS_RULES: &str = "+type +mget +hgetall +scan";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::server_error;

    #[test]
    fn lines_start_with_their_verdict_and_end_with_the_fix() {
        assert_eq!(
            line("warn", "latency", "slow", Some("move")),
            "warn latency: slow; fix: move"
        );
        assert_eq!(line("ok", "role", "primary", None), "ok   role: primary");
    }

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert_eq!(parse_version("7.0.15"), Some((7, 0, 15)));
        assert_eq!(parse_version("6.2"), Some((6, 2, 0)));
        assert_eq!(parse_version("x"), None);
        assert!((4, 0) < REQUIRED_VERSION && (6, 0) < MAINTAINED_VERSION);
    }

    #[test]
    fn refusals_name_what_is_missing() {
        let noperm =
            server_error("NOPERM this user has no permissions to run the 'config|get' command");
        assert!(is_denied(&noperm));
        assert_eq!(
            what_is_missing(&noperm, "CONFIG", Need::Run),
            Missing::Command("config|get".into(), Need::Run)
        );
        let keys = server_error(
            "NOPERM this user has no permissions to access one of the keys used as arguments",
        );
        assert_eq!(what_is_missing(&keys, "GET", Need::Run), Missing::Keys);
        let channels = server_error(
            "NOPERM this user has no permissions to access one of the channels used as arguments",
        );
        assert_eq!(
            what_is_missing(&channels, "PUBLISH", Need::Run),
            Missing::Channels
        );
        let script = server_error(
            "ERR The user executing the script can't run this command or subcommand script: abc",
        );
        assert!(is_denied(&script));
        assert!(!is_denied(&server_error("NOSCRIPT No matching script")));
    }

    #[test]
    fn the_user_comes_from_the_redacted_url() {
        assert_eq!(user_in_url("redis://cron:***@host:6379/0"), "cron");
        assert_eq!(user_in_url("redis://host:6379"), "default");
        assert_eq!(user_in_url("redis://:***@host"), "default");
        assert_eq!(user_in_url("redis://***@host"), "USER");
        assert_eq!(user_in_url("redis+unix:///tmp/r.sock"), "default");
    }

    #[test]
    fn patterns_cover_the_companion_keys_hash_tags() {
        assert_eq!(key_patterns(""), "~*");
        assert_eq!(key_patterns("prod:"), "~prod:* ~{prod:*");
        assert_eq!(channel_patterns("prod:"), "&prod:* &{prod:*");
    }

    #[test]
    fn durations_print_with_sensible_precision() {
        assert_eq!(millis(Duration::from_micros(123)), "0.12ms");
        assert_eq!(millis(Duration::from_micros(14_300)), "14.3ms");
        assert_eq!(millis(Duration::from_millis(2500)), "2.5s");
    }
}
