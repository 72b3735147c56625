//! `redlock check`: a health check in the monitoring-plugin convention (Nagios, Icinga,
//! Sensu, Zabbix's and Checkmk's plugin runners): one line on stdout, `REDLOCK STATE - …`, and
//! 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
//!
//! These four statuses are the convention's, not redlock's exit table: `check` never exits 69
//! or 77 (Redis unreachable or denied is UNKNOWN), and a command line it cannot parse still
//! exits 64 (any status above 3 reads as UNKNOWN to a monitoring system).
//!
//! What each state means, per key; the worst key decides:
//!
//! * CRITICAL — a running holder older than `--max-age` (stuck or runaway), of any shape: the
//!   exclusive holder, or each shared or slotted holder, each named; no run ended ok
//!   within `--max-since-success` (the last success is stamped by the release script, and
//!   kept 30 days); a pause whose `--for` ran out without a `resume` (the runs go ahead again,
//!   but nobody said the maintenance is done); the key holds another type of value.
//! * WARNING — a pause in force without an end (forgotten pauses are how jobs silently stop);
//!   a key never run (no last-run record: a typo in the key, or a job that never fired); the
//!   last run did not end ok. With `--max-since-success`, a key never run is CRITICAL instead.
//!   A key whose first run is still going is not "never run" (without `--max-since-success`).
//! * A pause in force with an end, a holder within its age: OK, and said in the line.
//! * UNKNOWN — Redis could not be asked, a quorum cannot tell, or a lock could not be read (an
//!   ACL that denies one of the reads, a companion key of another type): the line says why,
//!   and so does one line on stderr. A lock that could not be read is never "never run".
//!
//! Read-only, one pipeline: a `+@read` user can run it.

use std::time::Duration;

use anyhow::Result;

use crate::Context;
use crate::cli::CheckArgs;
use crate::lock::inspect::Inspection;
use crate::lock::keys::Keys;
use crate::lock::record::{LockState, Outcome};
use crate::report::error::{classify, render};
use crate::report::exit::Exit;
use crate::report::json::Json;
use crate::report::log;
use crate::supervise::lease::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Ok,
    Warning,
    Critical,
    Unknown,
}

impl State {
    fn word(self) -> &'static str {
        match self {
            State::Ok => "OK",
            State::Warning => "WARNING",
            State::Critical => "CRITICAL",
            State::Unknown => "UNKNOWN",
        }
    }

    fn exit(self) -> Exit {
        match self {
            State::Ok => Exit::Success,
            State::Warning => Exit::No,
            State::Critical => Exit::Critical,
            State::Unknown => Exit::Unknown,
        }
    }
}

pub fn check(ctx: &Context, args: CheckArgs) -> Result<Exit> {
    let keys = ctx.keys(&args.keys)?;
    let read = (|| {
        let mut nodes = ctx.nodes(ctx.timeout);
        nodes.connect()?;
        super::status::inspect_each(&mut nodes, &keys)
    })();
    let read = match read {
        Ok(read) => read,
        Err(err) if classify(&err) == Exit::Usage => return Err(err),
        Err(err) => {
            let text = render(&err);
            print(&args, State::Unknown, &text, &[]);
            log::error("unknown", &text, &[("exit", Exit::Unknown.code().into())]);
            return Ok(Exit::Unknown);
        }
    };
    let now_ms = super::status::now_ms();
    let verdicts: Vec<(&Keys, State, Vec<String>)> = keys
        .iter()
        .zip(&read)
        .map(|(k, reading)| {
            let (state, problems) = match reading {
                Ok(i) => judge(i, &args, now_ms),
                Err(unreadable) => (
                    State::Unknown,
                    vec![format!("could not be read: {}", unreadable.why())],
                ),
            };
            (k, state, problems)
        })
        .collect();
    let worst = verdicts
        .iter()
        .map(|(_, s, _)| *s)
        .max()
        .unwrap_or(State::Ok);
    let summary = if worst == State::Ok {
        let notes: Vec<String> = verdicts
            .iter()
            .filter(|(_, _, p)| !p.is_empty())
            .map(|(k, _, p)| format!("{}: {}", k.lock, p.join(", ")))
            .collect();
        let mut line = match keys.len() {
            1 => format!("{} is fine", keys[0].lock),
            n => format!("{n} locks are fine"),
        };
        if !notes.is_empty() {
            line.push_str(&format!(" ({})", notes.join("; ")));
        }
        line
    } else {
        verdicts
            .iter()
            .filter(|(_, s, _)| *s != State::Ok)
            .map(|(k, _, p)| format!("{}: {}", k.lock, p.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let per_key: Vec<Json> = verdicts
        .iter()
        .map(|(k, s, p)| {
            Json::Obj(vec![
                ("key", Json::str(&k.name)),
                ("redis_key", Json::str(&k.lock)),
                ("status", Json::str(s.word())),
                ("problems", Json::Arr(p.iter().map(Json::str).collect())),
            ])
        })
        .collect();
    print(&args, worst, &summary, &per_key);
    if let Some(Err(unreadable)) = read.iter().find(|r| r.is_err()) {
        log::error(
            "unknown",
            &unreadable.why(),
            &[("exit", Exit::Unknown.code().into())],
        );
    }
    Ok(worst.exit())
}

/// The one line (or the JSON object) on stdout.
fn print(args: &CheckArgs, state: State, summary: &str, keys: &[Json]) {
    let text = if args.json {
        let doc = Json::Obj(vec![
            ("status", Json::str(state.word())),
            ("code", Json::Num(state.exit().code().into())),
            ("summary", Json::str(summary)),
            ("keys", Json::Arr(keys.to_vec())),
        ]);
        format!("{}\n", doc.render())
    } else {
        // A line break would end the plugin output's first line early.
        format!(
            "REDLOCK {} - {}\n",
            state.word(),
            summary.replace('\n', " ")
        )
    };
    let _ = log::stdout(&text);
}

/// One key's state and what is worth saying about it (problems first, then notes).
fn judge(i: &Inspection, args: &CheckArgs, now_ms: i64) -> (State, Vec<String>) {
    let mut state = State::Ok;
    let mut said = Vec::new();
    let mut raise = |to: State, text: String, said: &mut Vec<String>| {
        state = state.max(to);
        said.push(text);
    };
    if i.state() == LockState::WrongType {
        raise(
            State::Critical,
            format!("not a lock: the key holds a {}", i.key_type),
            &mut said,
        );
        return (state, said);
    }
    let age = |since: i64| {
        fmt(Duration::from_millis(
            ((now_ms - since).max(0) / 1000 * 1000) as u64,
        ))
    };
    let running = i.running();
    for h in &running {
        let held = h
            .started_ms()
            .map(|s| Duration::from_millis((now_ms - s).max(0) as u64));
        match (args.max_age, held) {
            (Some(max), Some(held)) if held > max => raise(
                State::Critical,
                format!("{} (over --max-age {})", h.describe(now_ms), fmt(max)),
                &mut said,
            ),
            _ => said.push(h.describe(now_ms)),
        }
    }
    for pause in &i.pauses {
        match pause.until_ms {
            Some(until) if until <= now_ms => raise(
                State::Critical,
                format!("{} ({} ago)", pause.describe(now_ms), age(until)),
                &mut said,
            ),
            Some(_) => said.push(pause.describe(now_ms)),
            None => raise(State::Warning, pause.describe(now_ms), &mut said),
        }
    }
    // A first run still in progress has no record yet; it is not a key that was never run.
    let first_run = i.last.is_none() && !running.is_empty();
    match (&i.last, args.max_since_success) {
        (None, None) if first_run => said.push("first run in progress".into()),
        (None, Some(max)) => raise(
            State::Critical,
            format!("never run ok (--max-since-success {})", fmt(max)),
            &mut said,
        ),
        (None, None) => raise(State::Warning, "never run".into(), &mut said),
        (Some(last), max) => {
            if last.outcome != Outcome::Ok {
                let mut text = format!("last run {}", last.outcome.as_str());
                if let Some(exit) = last.exit {
                    text.push_str(&format!(" (exit {exit})"));
                }
                if let Some(ended) = last.ended_ms {
                    text.push_str(&format!(" {} ago", age(ended)));
                }
                raise(State::Warning, text, &mut said);
            }
            if let Some(max) = max {
                match i.counters.last_ok_ms {
                    Some(ok) if Duration::from_millis((now_ms - ok).max(0) as u64) <= max => {}
                    Some(ok) => raise(
                        State::Critical,
                        format!(
                            "last success {} ago (over --max-since-success {})",
                            age(ok),
                            fmt(max)
                        ),
                        &mut said,
                    ),
                    None => raise(
                        State::Critical,
                        format!("no run ended ok (--max-since-success {})", fmt(max)),
                        &mut said,
                    ),
                }
            }
        }
    }
    (state, said)
}
