//! The checks of how the server is set up, in the order they print: version, role,
//! maxmemory-policy, persistence, latency and clock (`mod.rs` says what each looks for and
//! why). Each reports one line; a refusal to answer is a warning naming the ACL
//! rule that would let doctor see, never a failure.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use redis::RedisResult;

use super::permissions::{User, is_denied};
use super::{Report, answered};
use crate::lock::replicas::{Replication, guarantee};
use crate::redis::server::Conn;
use crate::report::exit::Exit;

/// The scripts need effects replication, the default from Redis 5 on.
const REQUIRED_VERSION: (u32, u32) = (5, 0);
/// Older servers no longer get fixes upstream.
const MAINTAINED_VERSION: (u32, u32) = (6, 2);
const PINGS: usize = 10;
const SLOW_ROUND_TRIP: Duration = Duration::from_millis(10);
const CLOCK_SAMPLES: usize = 5;
const CLOCK_TOLERANCE: Duration = Duration::from_millis(500);

/// INFO, parsed; the server's refusal is kept for the checks to report.
pub(super) fn info(con: &mut Conn) -> Result<Info> {
    Ok(answered(redis::cmd("INFO").query::<String>(con))?.map(|text| parse_info(&text)))
}

fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

pub(super) type Info = RedisResult<HashMap<String, String>>;

fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

pub(super) fn check_version(info: &Info, user: &User, report: &mut Report) {
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
    } else if let Some(valkey) = info.get("valkey_version") {
        // Valkey gives its own version beside the Redis one it is compatible with (7.2.4).
        report.ok(CHECK, format!("Valkey {valkey}"));
    } else {
        report.ok(CHECK, format!("Redis {text}"));
    }
}

/// Reports the role; true when the server is a replica.
pub(super) fn check_role(info: &Info, user: &User, report: &mut Report) -> bool {
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

/// Through Sentinel, redlock asks the master it is sent to for its `ROLE`, so as not to take
/// or read a lock on a replica that a sentinel has not yet seen demoted; a user without `ROLE`
/// skips that check.
pub(super) fn check_role_command(con: &mut Conn, user: &User, report: &mut Report) -> Result<()> {
    const CHECK: &str = "sentinel role check";
    match answered(redis::cmd("ROLE").query::<redis::Value>(con))? {
        Ok(_) => report.ok(CHECK, "ROLE allowed: the master named is checked".into()),
        Err(err) => {
            let (text, fix) = user.could_not("ROLE", &err, "+role");
            report.warn(
                CHECK,
                format!(
                    "{text}: a master that Sentinel named but that was demoted since is not \
                     detected before use (its writes are refused; its reads may be stale)"
                ),
                fix,
            );
        }
    }
    Ok(())
}

/// The replicas that matter for a lock: replication is asynchronous, so a failover can lose
/// a lock just taken or renewed unless runs wait for replicas (`--replicas N`, read from
/// `REDLOCK_REPLICAS` too). Without `--replicas`, a primary with replicas is a warning naming
/// it; with it, `WAIT N` is asked (it answers at once on a connection that wrote nothing yet:
/// how many replicas are in sync), and fewer than N, or a refusal, is the failure every
/// acquire would end with. A replica that is not online or lags is a warning. A quorum's node
/// is only described: `--replicas` is refused there.
pub(super) fn check_replication(
    con: &mut Conn,
    info: &Info,
    quorum: bool,
    replicas: u32,
    timeout: Duration,
    user: &User,
    report: &mut Report,
) -> Result<()> {
    const CHECK: &str = "replication";
    let info = match info {
        Ok(info) => info,
        Err(err) => {
            let (text, fix) = user.could_not("INFO", err, "+info");
            report.warn(CHECK, text, fix);
            return Ok(());
        }
    };
    let r = Replication::from_fields(info.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if !r.is_master() {
        // The role check has said what is wrong.
        return Ok(());
    }
    let lagging: Vec<&str> = r
        .replicas
        .iter()
        .filter(|x| x.state != "online" || x.lag_s.is_some_and(|lag| lag > 1))
        .map(|x| x.address.as_str())
        .collect();
    if replicas == 0 {
        if quorum {
            // `--replicas` is refused there: a node that fails over and loses the key is
            // re-established by the next renewal, as one restarted.
            report.ok(
                CHECK,
                format!(
                    "{} (a quorum node that fails over is healed like one restarted)",
                    r.describe()
                ),
            );
        } else if r.replicas.is_empty() {
            report.ok(CHECK, "no replica (nothing to fail over to)".into());
        } else {
            report.warn(
                CHECK,
                format!(
                    "{}: replication is asynchronous, so a failover can lose a lock just taken \
                     or renewed, and a second holder can start",
                    r.describe()
                ),
                format!(
                    "run with --replicas {n} (REDLOCK_REPLICAS={n}, every replica): a grant and \
                     each renewal then count only once every replica acknowledged them, which \
                     keeps the lock through a failover and every partition (and makes it \
                     unavailable while a replica is away); --replicas 1 keeps it through a \
                     master crash, not a partition that leaves a replica with the old master",
                    n = r.replicas.len().max(1)
                ),
            );
        }
        return Ok(());
    }
    let ack = crate::lock::replicas::Ack {
        replicas,
        timeout: (timeout / 2).max(Duration::from_millis(1)),
    };
    match answered(ack.command().query::<i64>(con))? {
        Err(err) if is_denied(&err) => report.fail(
            Exit::Permission,
            CHECK,
            format!(
                "--replicas {replicas} needs WAIT, and user {} may not run it",
                user.0
            ),
            user.grant("+wait"),
        ),
        Err(err) => report.fail(
            Exit::Config,
            CHECK,
            format!(
                "--replicas {replicas} needs WAIT, and the server refused it: {}",
                super::describe(&err)
            ),
            "run without --replicas on a server that does not offer WAIT (a failover can then \
             lose a lock), or use one that does"
                .into(),
        ),
        Ok(acked) if acked < i64::from(replicas) => report.fail(
            Exit::Unavailable,
            CHECK,
            format!(
                "--replicas {replicas}, but only {} ({}): every acquire would be given back and \
                 exit 69",
                acknowledge(acked),
                r.describe()
            ),
            "bring the replicas back (or add them), or lower --replicas".into(),
        ),
        Ok(acked) if !lagging.is_empty() => report.warn(
            CHECK,
            format!(
                "--replicas {replicas}: {}, but {} lag or are not in sync ({}); {}",
                acknowledge(acked),
                lagging.join(", "),
                r.describe(),
                guarantee(replicas, r.replicas.len())
            ),
            "check the replicas' links to the primary: a lagging replica delays every acquire \
             and renewal"
                .into(),
        ),
        Ok(acked) => report.ok(
            CHECK,
            format!(
                "--replicas {replicas}: {} ({}); {}",
                acknowledge(acked),
                r.describe(),
                guarantee(replicas, r.replicas.len())
            ),
        ),
    }
    Ok(())
}

/// "1 replica acknowledges", "2 replicas acknowledge".
fn acknowledge(acked: i64) -> String {
    let n = acked.max(0) as usize;
    let verb = if n == 1 {
        "acknowledges"
    } else {
        "acknowledge"
    };
    format!("{} {verb}", super::plural(n, "replica"))
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

pub(super) fn check_maxmemory(
    con: &mut Conn,
    info: &Info,
    user: &User,
    report: &mut Report,
) -> Result<()> {
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

pub(super) fn check_persistence(
    con: &mut Conn,
    info: &Info,
    user: &User,
    report: &mut Report,
) -> Result<()> {
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

pub(super) fn check_latency(con: &mut Conn, user: &User, report: &mut Report) -> Result<()> {
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

pub(super) fn check_clock(con: &mut Conn, user: &User, report: &mut Report) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert_eq!(parse_version("7.0.15"), Some((7, 0, 15)));
        assert_eq!(parse_version("6.2"), Some((6, 2, 0)));
        assert_eq!(parse_version("x"), None);
        assert!((4, 0) < REQUIRED_VERSION && (6, 0) < MAINTAINED_VERSION);
    }

    #[test]
    fn durations_print_with_sensible_precision() {
        assert_eq!(millis(Duration::from_micros(123)), "0.12ms");
        assert_eq!(millis(Duration::from_micros(14_300)), "14.3ms");
        assert_eq!(millis(Duration::from_millis(2500)), "2.5s");
    }
}
