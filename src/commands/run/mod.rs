//! `redlock run`: check, connect, take, run, release, one phase each:
//!
//! 1. [`Plan::check`]: everything the operator typed is checked before Redis is contacted.
//! 2. Connect. A nested run (its key held by the run it is inside, `lock::nested`) becomes its
//!    command under that run's lease instead.
//! 3. [`hold::take`]: acquire, waiting in the key's queue with `--wait`, while the command's
//!    room and the keeper are prepared. Busy, skipped (`--once-per`) or interrupted ends the
//!    run here, holding nothing.
//! 4. [`hold::Hold::run`]: arm the keeper, spawn, and supervise (`supervisor.rs`) until every
//!    process of the command's tree is gone. Every way this goes — the command never started
//!    (a signal, no keeper, a grant too late, a spawn failure) or it ran and ended — is an
//!    [`hold::Ending`].
//! 5. [`hold::Hold::release`]: the one release, which records how the run ended.
//! 6. [`hold::Ending::verdict`]: the exit status, or the error line.
//!
//! The lock is released only after every process of the tree is gone, so nothing runs
//! unlocked; the keeper (`supervise::keeper`) kills the tree at the kill point whenever the
//! supervisor cannot. The timeline is drawn in `supervise/lease.rs`; the whole argument is in
//! docs/design.md, "Safety: nothing escapes the lease".
//!
//! `--max-runtime D` adds a [`crate::supervise::lease::Limit`], counted from when the winning
//! acquire was sent (where the lease is counted from too): the same stop (SIGTERM to the tree
//! at `term_at`, SIGKILL at `kill_at`, release once it is empty), then exit 124 and a "timed
//! out" record. The lease is acquired and renewed for no longer than reaches `lease_end`, so
//! its own kill point never comes before the limit's; a lost lease still wins (76).

mod hold;
mod supervisor;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use anyhow::Result;

use self::hold::Took;
use crate::Context;
use crate::cli::RunArgs;
use crate::lock::keys::Keys;
use crate::lock::nodes::Nodes;
use crate::lock::record::Holder;
use crate::lock::{self, Shape, nested};
use crate::redis::server::Server;
use crate::report::error::{render, usage};
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::child;
use crate::supervise::lease::{self, Lease, Moment};
use crate::supervise::signals::Signals;

/// The longest `--once-per` window: its record lives twice as long.
const MAX_ONCE_PER: Duration = Duration::from_secs(366 * 24 * 3600);

/// `--once-per D [--retry-failed]`, checked: D from 1s to 366 days, and one server, a Cluster
/// or Sentinel, because a majority vote cannot keep one window's record: a run that reached a
/// majority other than the first run's could take the window again.
fn once_per(ctx: &Context, args: &RunArgs) -> Result<Option<lock::Once>> {
    let Some(every) = args.once_per else {
        if args.retry_failed {
            return Err(usage("--retry-failed needs --once-per"));
        }
        return Ok(None);
    };
    if every < Duration::from_secs(1) || every > MAX_ONCE_PER {
        return Err(usage(format!(
            "--once-per {} is out of range: a window is from 1s to 366d long",
            lease::fmt(every)
        )));
    }
    if ctx.servers.len() > 1 {
        return Err(usage(
            "--once-per cannot be used with several --url (a quorum): a majority vote does not \
             keep one record per window; use one server, a Cluster or Sentinel",
        ));
    }
    Ok(Some(lock::Once {
        every,
        retry_failed: args.retry_failed,
    }))
}

/// `--max-waiters N`, checked: it limits a queue, so it needs `--wait` (longer than 0s, which
/// is not to wait); and at least 1, since a run that may never queue is a run without `--wait`
/// (say that instead).
fn max_waiters(args: &RunArgs) -> Result<Option<u32>> {
    match (args.max_waiters, args.wait) {
        (None, _) => Ok(None),
        (Some(_), None) => Err(usage(format!(
            "{} needs --wait (it limits how many runs wait for the key)",
            crate::cli::named("max-waiters")
        ))),
        (Some(_), Some(wait)) if wait.is_zero() => Err(usage(format!(
            "{} needs --wait longer than 0s: --wait {} does not wait, so no queue is joined",
            crate::cli::named("max-waiters"),
            lease::fmt(wait)
        ))),
        (Some(0), Some(_)) => Err(usage(format!(
            "{} must be at least 1 (a run that must not queue is a run without --wait)",
            crate::cli::named("max-waiters")
        ))),
        (Some(n), Some(_)) => Ok(Some(n)),
    }
}

/// Several keys (`--key A --key B …`) are taken in the exclusive shape only, and not with
/// `--once-per`, `--metrics-file`, `--max-waiters` or `--replace`: a window's record, a metrics
/// file, a bounded queue and a stop request belong to one key, and shared or slotted holds of
/// several keys at once are not built (64; docs/design.md, "Several keys"). A run over several
/// keys is never asked to stop by a replacer of one of them (it records `replace=no`).
fn several_keys(keys: &Keys, shape: Shape, args: &RunArgs) -> Result<()> {
    if keys.also.is_empty() {
        return Ok(());
    }
    let flag = if shape != Shape::Exclusive {
        Some(if args.shared { "--shared" } else { "--slots" })
    } else if args.once_per.is_some() {
        Some("--once-per")
    } else if args.max_waiters.is_some() {
        Some("--max-waiters")
    } else if args.replace {
        Some("--replace")
    } else {
        None
    };
    match flag {
        Some(flag) => Err(usage(format!(
            "{flag} takes one --key; several keys are taken exclusively, all or none"
        ))),
        None => Ok(()),
    }
}

pub fn run(ctx: &Context, mut args: RunArgs) -> Result<Exit> {
    let Some(path) = args.metrics_file.take() else {
        return run_locked(ctx, args);
    };
    if args.key.len() > 1 {
        return Err(usage(
            "--metrics-file takes one --key; several keys are taken exclusively, all or none",
        ));
    }
    let key = args.key.first().cloned().unwrap_or_default();
    let result = run_locked(ctx, args);
    // After the release, so the file shows the run's own record; a bad command line contacted
    // nothing and writes nothing. The file is the run's by-product: failing to write it is a
    // warning, and the exit status stays the run's.
    if !matches!(&result, Err(e) if crate::report::error::classify(e) == Exit::Usage) {
        let written = Keys::new(&ctx.prefix, &key).and_then(|keys| {
            let mut nodes = ctx.nodes(ctx.timeout);
            nodes.connect()?;
            super::metrics::write_file(&mut nodes, &keys, &path)
        });
        if let Err(e) = written {
            log::warn(
                "metrics_file",
                &format!("--metrics-file not written: {}", render(&e)),
                &[],
            );
        }
    }
    result
}

fn run_locked(ctx: &Context, args: RunArgs) -> Result<Exit> {
    let plan = Plan::check(ctx, args)?;
    let signals = Signals::block();
    let started = Moment::now();
    let mut nodes = ctx
        .nodes(node_timeout(ctx, plan.lease.ttl))
        .with_replicas(plan.args.replicas);
    nodes.connect()?;
    // Inside a run that holds this key: become the command, under that run's lease.
    if nested::confirm(&mut nodes, &plan.keys, plan.shape)?.is_some() {
        drop(nodes);
        return Err(nested::exec(&plan.argv));
    }
    child::become_subreaper();
    log_connected(&nodes, started);
    let token = lock::new_token()?;
    let mut holder = Holder::current(&plan.display, plan.args.label.as_deref());
    // A run over several keys listens on no stop list: a replacer of one key does not ask it.
    holder.irreplaceable = plan.args.no_replace || !plan.keys.also.is_empty();
    // A first lease cut to cover --max-runtime is never renewed (see Lease::first_ttl).
    holder.no_renewal = plan.first_ttl < plan.lease.ttl;
    holder.replicas = Some(plan.args.replicas).filter(|n| *n > 0);
    let mut hold = match hold::take(ctx, &mut nodes, &plan, &token, &holder, &signals, started)? {
        Took::Held(hold) => hold,
        Took::Refused(exit) => return Ok(exit),
    };
    // From here the lock is held, and every way the run goes ends in this one release.
    let ending = hold.run(ctx, &signals);
    let released = hold.release(&mut nodes, &ending);
    ending.verdict(&plan.keys, released)
}

/// Everything the operator typed, checked before Redis is contacted (a bad value is 64).
pub struct Plan {
    pub args: RunArgs,
    pub lease: Lease,
    /// The first acquire's TTL: under `--max-runtime`, no longer than the run can last.
    pub first_ttl: Duration,
    pub keys: Keys,
    pub shape: Shape,
    pub once: Option<lock::Once>,
    /// `--max-waiters N` (with `--wait`).
    pub max_waiters: Option<u32>,
    /// The words exec'd, as given (any bytes but NUL).
    pub argv: Vec<OsString>,
    /// The command as the records show it (secrets redacted).
    pub display: String,
}

impl Plan {
    fn check(ctx: &Context, args: RunArgs) -> Result<Plan> {
        let lease = Lease::new(args.ttl, args.kill_after)?;
        if args.max_runtime.is_some_and(|d| d.is_zero()) {
            return Err(usage(
                "--max-runtime must be greater than 0 (it is how long the command may run)",
            ));
        }
        let first_ttl = lease.first_ttl(args.max_runtime);
        let keys = Keys::all(&ctx.prefix, &args.key, ctx.is_cluster(), "--key")?;
        let shape = ctx.shape(args.shared, args.slots)?;
        let once = once_per(ctx, &args)?;
        let max_waiters = max_waiters(&args)?;
        crate::cli::check_label(args.label.as_deref())?;
        if args.replace && args.no_replace {
            return Err(usage(
                "--replace cannot be used with --no-replace: a run either asks the holder to \
                 stop or refuses to be stopped",
            ));
        }
        // A quorum's holders listen on no stop list, and a request written on some nodes only
        // would stop a holder that a majority still grants: refused rather than half-kept.
        if args.replace && ctx.servers.len() > 1 {
            return Err(usage(
                "--replace cannot be used with several --url (a quorum); use one server, a \
                 Cluster or Sentinel",
            ));
        }
        several_keys(&keys, shape, &args)?;
        ctx.replicas(args.replicas)?;
        let argv = command_line(&args)?;
        if let Some(hold) = args.hold_at_least
            && hold > lease::MAX_TTL
        {
            return Err(usage(format!(
                "--hold-at-least {} is longer than 24h{}",
                lease::fmt(hold),
                lease::months_hint(hold)
            )));
        }
        let display = crate::lock::record::redact(&display_command(&argv, args.shell.is_some()));
        Ok(Plan {
            args,
            lease,
            first_ttl,
            keys,
            shape,
            once,
            max_waiters,
            argv,
            display,
        })
    }
}

/// With `-v`: which servers, and how long connecting took.
fn log_connected(nodes: &Nodes, started: Moment) {
    if !log::enabled(log::Level::Info) {
        return;
    }
    let names: Vec<&str> = nodes.servers().map(Server::name).collect();
    log::info(
        "connected",
        &format!(
            "connected to {} in {} ms",
            names.join(", "),
            started.elapsed().as_millis()
        ),
        &[("servers", names.len().into())],
    );
}

/// Per-node timeout: the configured one for a single server; for a quorum, far below the TTL
/// (a tenth of it, at least 50 ms), so a dead node cannot eat the lease.
fn node_timeout(ctx: &Context, ttl: Duration) -> Duration {
    if ctx.servers.len() > 1 {
        (ttl / 10).clamp(
            Duration::from_millis(50),
            ctx.timeout.max(Duration::from_millis(50)),
        )
    } else {
        ctx.timeout
    }
}

/// `-c 'cmd'` → `sh -c cmd`; otherwise the words after `--`. Their bytes are passed on as they
/// are: a file name or a cron line need not be UTF-8.
fn command_line(args: &RunArgs) -> Result<Vec<OsString>> {
    match (&args.shell, args.command.is_empty()) {
        (Some(_), false) => Err(usage(
            "give the command either with -c 'SHELL COMMAND' or after --, not both",
        )),
        (Some(shell), true) if shell.to_string_lossy().trim().is_empty() => {
            Err(usage("-c is empty"))
        }
        (Some(shell), true) => Ok(vec!["/bin/sh".into(), "-c".into(), shell.clone()]),
        (None, true) => Err(usage(
            "missing command: give it after -- (redlock run --key K --ttl 30s -- CMD ARGS) or with -c",
        )),
        (None, false) if args.command[0].is_empty() => Err(usage("the command is empty")),
        (None, false) => Ok(args.command.clone()),
    }
}

/// The command as the records show it: `-c`'s text, or the words as a shell would read them,
/// each redacted before it is quoted (so that a secret is hidden whole whatever it holds: a
/// quote, bytes that are not UTF-8). A word that is not UTF-8 is written `$'…'` with its other
/// bytes as `\xNN` (bash, zsh and ksh read it back as the same bytes); `-c`'s text keeps a
/// U+FFFD in place of each such byte.
fn display_command(argv: &[OsString], shell: bool) -> String {
    if shell {
        return argv[2].to_string_lossy().into_owned();
    }
    crate::lock::record::redact_words(argv)
        .iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One word as a shell reads it back (see [`display_command`]).
fn shell_word(word: &std::ffi::OsStr) -> String {
    let Some(a) = word.to_str() else {
        let mut out = String::from("$'");
        for chunk in word.as_bytes().utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\'' | '\\' => {
                        out.push('\\');
                        out.push(c);
                    }
                    c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
                    c => out.push(c),
                }
            }
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        out.push('\'');
        return out;
    };
    if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$\\".contains(c)) {
        format!("'{}'", a.replace('\'', "'\\''"))
    } else {
        a.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_display_as_a_shell_would_read_them() {
        let argv: Vec<OsString> = ["echo", "a b", "it's"].iter().map(OsString::from).collect();
        assert_eq!(display_command(&argv, false), "echo 'a b' 'it'\\''s'");
        use std::os::unix::ffi::OsStringExt;
        let odd = vec![
            OsString::from("printf"),
            OsString::from_vec(b"caf\xe9 'x'\\\x01".to_vec()),
        ];
        assert_eq!(
            display_command(&odd, false),
            "printf $'caf\\xe9 \\'x\\'\\\\\\x01'"
        );
    }

    /// What Plan::check records: each word redacted whole before quoting, whatever it holds.
    #[test]
    fn secrets_are_hidden_whole_whatever_they_hold() {
        use std::os::unix::ffi::OsStringExt;
        let recorded =
            |words: Vec<OsString>| crate::lock::record::redact(&display_command(&words, false));
        let argv: Vec<OsString> = [
            "true",
            "--password",
            "abc'defSECRET123",
            "--db-password=x'ySECRET",
            "PGPASSWORD=q'SECRETq",
            "postgres://u:p'SECRET@h/db",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            recorded(argv),
            "true --password *** --db-password=*** PGPASSWORD=*** postgres://***@h/db"
        );
        let odd = vec![
            OsString::from("true"),
            OsString::from("--password"),
            OsString::from_vec(b"zz\xffzz'SECRET".to_vec()),
            OsString::from_vec(b"--token=\xff'SECRET".to_vec()),
            OsString::from_vec(b"https://u:\xff'SECRET@h".to_vec()),
        ];
        assert_eq!(
            recorded(odd),
            "true --password *** --token=*** https://***@h"
        );
        // A word that is a script is read as shell text.
        let script: Vec<OsString> = ["sh", "-c", "psql --password \"a'b SECRET\" -h db"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(recorded(script), "sh -c 'psql --password *** -h db'");
    }
}
