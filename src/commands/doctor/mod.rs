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
//! * **replication** (INFO, WAIT): a primary with replicas, run without `--replicas`, can
//!   lose a lock in a failover (`warn`); with `--replicas N` (`REDLOCK_REPLICAS`), `WAIT N`
//!   must be allowed and answered by N replicas (`fail` otherwise, with the status every
//!   acquire would end with: 77, 78 or 69), and a replica not in sync or lagging is a `warn`.
//! * **latency**: the median of 10 PINGs; above 10 ms every acquire and renewal pays it (`warn`).
//! * **clock**: TIME against this host's clock, corrected by half the round trip. Leases never
//!   use it, but `status` computes holder ages from both clocks: above 500 ms it is a `warn`.
//! * **permissions**: a real probe lock, `PREFIX + "redlock:doctor:" + random id` with a 2 s TTL,
//!   goes through what `run` and `status` do — acquire, a refused second contender (which
//!   counts), extend, the status read pipeline, release with a run record — through the same
//!   `lock.rs` functions, plus the PUBLISH a release wakes a waiter with (the probe has none
//!   queued), one short SCAN and a SUBSCRIBE to its release channel. When the
//!   server refuses one of them for want of a permission, every command, key pattern and
//!   channel pattern redlock uses is tried directly on the probe's keys, so the `fail` line can
//!   name exactly what to grant (inside a script Redis 7 does not say which command was
//!   denied). A refused SUBSCRIBE is only a `warn`: waiters then fall back to polling.
//!
//! Invariant: doctor changes nothing on the server but its probe's own keys, and deletes all of
//! them (the fence counter included, which would otherwise live forever and show up in
//! `status --all`) before it returns, on every path where the server still answers.
//!
//! The checks of the server's set-up are in `checks.rs`, the probe lock and what a refusal says
//! is missing in `permissions/`; this module runs them and keeps the report.
//!
//! Exit status: 0 when every check is ok, 1 (`Exit::No`) with warnings only. A failed check ends
//! with the class `run` would end with for the same hazard — 77 for a missing permission, 69 for
//! a replica or a server that refuses writes, 78 for a server too old for the scripts — the
//! first failure printed deciding. Not reaching the server (69) or a rejected password (77)
//! are errors, as for every command.

use anyhow::Result;
use redis::{RedisError, RedisResult};

use crate::Context;
use crate::cli::DoctorArgs;
use crate::redis::server::{Conn, Server};
use crate::report::error::redis_errors;
use crate::report::exit::Exit;
use crate::report::log;

mod checks;
mod permissions;

pub fn doctor(ctx: &Context, args: &DoctorArgs) -> Result<Exit> {
    let replicas = ctx.replicas(args.replicas)?;
    let mut report = Report::default();
    if let [server] = ctx.servers.as_slice() {
        check_server(ctx, server, replicas, &mut report).map_err(|e| server.explained(e))?;
        return Ok(report.finish());
    }
    // A quorum: every node is checked, under a header line of its own; a node that cannot be
    // reached is a failed check, not the end of the report.
    for server in &ctx.servers {
        let _ = log::stdout(&format!("server {}\n", server.name()));
        if let Err(e) =
            check_server(ctx, server, replicas, &mut report).map_err(|e| server.explained(e))
        {
            report.fail(
                crate::report::error::classify(&e),
                "connection",
                crate::report::error::render(&e),
                "a quorum keeps working with a minority of nodes down; bring this one back".into(),
            );
        }
    }
    Ok(report.finish())
}

fn check_server(ctx: &Context, server: &Server, replicas: u32, report: &mut Report) -> Result<()> {
    let mut con = Conn::Single(server.connect_direct(ctx.timeout)?);
    let user = permissions::whoami(&mut con, server)?;
    let info = checks::info(&mut con)?;

    checks::check_version(&info, &user, report);
    let replica = checks::check_role(&info, &user, report);
    if server.is_sentinel() {
        checks::check_role_command(&mut con, &user, report)?;
    }
    checks::check_maxmemory(&mut con, &info, &user, report)?;
    checks::check_persistence(&mut con, &info, &user, report)?;
    let quorum = ctx.servers.len() > 1;
    checks::check_replication(
        &mut con,
        &info,
        quorum,
        replicas,
        ctx.timeout,
        &user,
        report,
    )?;
    checks::check_latency(&mut con, &user, report)?;
    checks::check_clock(&mut con, &user, report)?;
    if replica {
        report.add(
            Verdict::Warn,
            "permissions",
            "not checked: a replica refuses the probe lock's writes".into(),
            Some("run redlock doctor against the primary".into()),
        );
    } else {
        permissions::check_permissions(ctx, server, &mut con, &user, report)?;
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
/// went away, timed out) ends doctor, as an error classified by `main`, and so does a server
/// that wants a password none was given for: every check would fail alike, and the one line
/// says how to give it (77), as every other command's does.
fn answered<T>(result: RedisResult<T>) -> Result<RedisResult<T>> {
    match result {
        Err(err) if err.code().is_none() => {
            Err(anyhow::Error::new(err).context("the server stopped answering"))
        }
        Err(err)
            if crate::report::reply::meaning(&err)
                == Some(crate::report::reply::Meaning::Unauthenticated) =>
        {
            Err(anyhow::Error::new(err).context("cannot check the server"))
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

/// The error as one line, without the redis crate's "An error was signalled by the server"
/// wrapping when there is a plain detail.
fn describe(err: &RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_start_with_their_verdict_and_end_with_the_fix() {
        assert_eq!(
            line("warn", "latency", "slow", Some("move")),
            "warn latency: slow; fix: move"
        );
        assert_eq!(line("ok", "role", "primary", None), "ok   role: primary");
    }
}
