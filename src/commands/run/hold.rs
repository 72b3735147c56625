//! Holding the lock for one run: taking it (the command's room and keeper prepared while the
//! acquire is on the wire), starting and supervising the command under it, and giving it back.
//!
//! Every way a held run goes ends in one [`Ending`], and [`Hold::release`] is the only place
//! the lock is given back: whether the command never started (a signal during the acquire, no
//! keeper, a grant that came too late, a command that cannot be run) or ran and ended, the
//! release and the record it writes follow the same path.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;

use super::Plan;
use super::supervisor::{self, Command, End, describe_status};
use crate::Context;
use crate::cli::Contain;
use crate::lock::heartbeat::Heartbeat;
use crate::lock::nodes::Nodes;
use crate::lock::record::{GivenBack, Holder, LastRun, Outcome};
use crate::lock::wait::{self, Request, Spent, Taken};
use crate::lock::{Claim, Shape, Standing};
use crate::report::error::{fail, is_readonly, is_server_reply, is_timeout, render};
use crate::report::exit::{BUSY, Exit};
use crate::report::log;
use crate::supervise::child::{self, Status};
use crate::supervise::keeper::Keeper;
use crate::supervise::lease::{self, Moment};
use crate::supervise::signals::{self, Event, Signals};
use crate::supervise::tree::Tree;

/// What taking the lock came to.
pub enum Took<'a> {
    Held(Hold<'a>),
    /// Busy, skipped or interrupted: nothing is held, and the run ends with this status (the
    /// line saying why is written).
    Refused(Exit),
}

/// The command's room and its keeper, made before the command is started.
struct Guard {
    tree: &'static Tree,
    keeper: std::io::Result<Keeper>,
}

impl Guard {
    fn prepare(contain: Contain) -> Guard {
        // Leaked: the keeper reads it, and may outlive this function (or redlock).
        let tree: &'static Tree = Box::leak(Box::new(Tree::prepare(contain == Contain::Auto)));
        // Unused (the lock was busy, the wait interrupted), the keeper is never armed and leaves
        // with redlock; the cgroup is free again once both are gone.
        Guard {
            tree,
            keeper: Keeper::start(tree),
        }
    }
}

/// A lock this run holds, from the acquire to the release.
pub struct Hold<'a> {
    plan: &'a Plan,
    token: &'a str,
    holder: &'a Holder,
    fence: i64,
    /// The fences of the other keys (`--key A --key B …`), in order.
    also: Vec<i64>,
    started_ms: i64,
    /// The slot taken (`--slots N`).
    slot: Option<u32>,
    /// When the winning acquire was sent: the lease is counted from here.
    sent: Moment,
    acquired_at: Moment,
    /// Made while the acquire was on the wire (`None`: it was not, and is made before the
    /// start).
    guard: Option<Guard>,
    /// What the wait used; dropped once the command has started.
    spent: Spent,
}

/// Acquires the lock, waiting in the key's queue with `--wait`.
pub fn take<'a>(
    ctx: &Context,
    nodes: &mut Nodes,
    plan: &'a Plan,
    token: &'a str,
    holder: &'a Holder,
    signals: &Signals,
    started: Moment,
) -> Result<Took<'a>> {
    let keys = &plan.keys;
    // Who asks, in a replaced holder's words: "web-2 (pid 4242, user deploy)".
    let replacer = plan.args.replace.then(|| {
        crate::lock::record::who(
            &holder.host,
            holder.pid.map(i64::from),
            holder.user.as_deref(),
            None,
        )
    });
    let request = Request {
        claim: Claim {
            keys,
            token,
            ttl: plan.first_ttl,
            holder,
            shape: plan.shape,
            once: plan.once,
        },
        wait: plan.args.wait,
        max_waiters: plan.max_waiters,
        replace: replacer.as_deref(),
        timeout: ctx.timeout,
    };
    // The command's room and its keeper are made while the acquire is on the wire: local work
    // that would otherwise follow the round trip.
    let mut guard: Option<Guard> = None;
    let contain = plan.args.contain;
    let taken = wait::take(nodes, &request, signals, &mut || {
        guard = Some(Guard::prepare(contain));
    })?;
    let (fence, also, started_ms, slot, sent, spent) = match taken {
        Taken::Acquired {
            fence,
            also,
            started_ms,
            slot,
            sent,
            spent,
        } => (fence, also, started_ms, slot, sent, spent),
        Taken::Busy(busy) => {
            let waited = match (plan.args.wait, busy.full) {
                // The script counts live waiters up to the bound, no further.
                (_, Some(_)) => {
                    let n = plan.max_waiters.unwrap_or(0);
                    let are = if n == 1 { "is" } else { "are" };
                    format!("; the queue is full (--max-waiters {n}: {n} {are} waiting)")
                }
                (Some(w), None) if !w.is_zero() => format!(" (waited {})", lease::fmt(w)),
                _ => String::new(),
            };
            let waited = match (plan.args.replace, busy.replacing) {
                // Kept out of a full queue, it asked nobody.
                (true, false) if busy.full.is_some() => waited,
                (true, false) => format!(
                    "{waited}; --replace does not apply: the holder said --no-replace, took the \
                     lock with `redlock acquire` or another client, or holds it shared, or the \
                     key is paused"
                ),
                (true, true) => format!("{waited}; it was asked to stop, and has not yet"),
                _ => waited,
            };
            let msg = format!(
                "{} is {}{waited}; not running the command",
                busy.lock(keys),
                busy.describe()
            );
            return Ok(Took::Refused(refused(plan, "busy", &msg)));
        }
        Taken::Skipped(ran) => {
            let msg = format!("{}: {}; not running the command", keys.lock, ran.describe());
            return Ok(Took::Refused(refused(plan, "skipped", &msg)));
        }
        Taken::Interrupted(sig) => return Ok(Took::Refused(wait::interrupted(sig, keys))),
        // The last replacer to arrive is the one that runs: a later one took this one's turn.
        Taken::Superseded(by) => {
            return Ok(Took::Refused(log::ending(
                "superseded",
                &format!(
                    "{}: a later --replace ({by}) superseded this one before it ran; not running \
                     the command",
                    keys.lock
                ),
                &[("key", (&keys.lock).into())],
                Exit::Replaced,
            )));
        }
    };
    log::info(
        "acquired",
        &format!(
            "acquired {} after {} ms with fence {fence}{}",
            keys.names(),
            started.elapsed().as_millis(),
            match (plan.shape, slot) {
                (_, Some(slot)) => format!(" in slot {slot}"),
                (Shape::Shared, _) => " (shared)".to_string(),
                _ => String::new(),
            }
        ),
        &[
            ("key", (&keys.lock).into()),
            ("fence", fence.into()),
            ("elapsed_ms", started.elapsed().as_millis().into()),
        ],
    );
    Ok(Took::Held(Hold {
        plan,
        token,
        holder,
        fence,
        also,
        started_ms,
        slot,
        sent,
        acquired_at: Moment::now(),
        guard,
        spent,
    }))
}

/// Says why the run does not go ahead, and returns the busy status (75, or
/// `--conflict-exit-code`; a warning rather than an error when that is 0).
fn refused(plan: &Plan, event: &str, msg: &str) -> Exit {
    let code = plan.args.conflict_exit_code.unwrap_or(BUSY);
    let fields = [("key", (&plan.keys.lock).into())];
    if code == 0 {
        log::warn(event, msg, &fields);
        Exit::Busy(code)
    } else {
        log::ending(event, msg, &fields, Exit::Busy(code))
    }
}

/// How a held run ended, before the release: what the release records and how the run's
/// status is then decided.
pub struct Ending {
    /// Whether the command started (`--hold-at-least` keeps the lock only then).
    ran: bool,
    /// The run's record, for the release to write (`None`: nothing to record).
    record: Option<LastRun>,
    /// The keeper, dismissed; kept until after the release, which demotes it while on the
    /// wire (its real-time priority is not needed to give the lock back).
    keeper: Option<Keeper>,
    verdict: Verdict,
}

enum Verdict {
    /// A signal came during the acquire: the command was not started.
    Signal(libc::c_int),
    /// The command was not started, for this reason (its status is in it).
    NotStarted(anyhow::Error),
    /// The command ran; its tree is gone.
    Ran { end: End, exit: Exit },
}

impl Ending {
    fn not_started(record: Option<LastRun>, keeper: Option<Keeper>, verdict: Verdict) -> Ending {
        Ending {
            ran: false,
            record,
            keeper,
            verdict,
        }
    }

    /// The run's exit status, once the lock was given back (`released`: whether it was still
    /// ours, `None` when the release had no answer).
    pub fn verdict(self, keys: &crate::lock::keys::Keys, released: Option<bool>) -> Result<Exit> {
        let (end, exit) = match self.verdict {
            Verdict::Signal(sig) => {
                return Ok(log::ending(
                    "interrupted",
                    &format!(
                        "{} before the command started; lock released",
                        signals::name(sig)
                    ),
                    &[],
                    Exit::Signal(sig),
                ));
            }
            Verdict::NotStarted(err) => return Err(err),
            Verdict::Ran { end, exit } => (end, exit),
        };
        if let Some(reason) = end.lost {
            return Err(fail(
                Exit::LeaseLost,
                format!(
                    "lease on {} lost: {reason}; the command was stopped ({})",
                    keys.names(),
                    describe_status(end.status)
                ),
            ));
        }
        // The key was gone or someone else's when we came to release it: somewhere since the
        // last confirmed renewal the lease lapsed, and the command was not covered the whole
        // time (the release script recorded the run as "lease lost").
        if released == Some(false) {
            return Err(fail(
                Exit::LeaseLost,
                format!(
                    "lease on {} lost: at the release the key was gone or held by another token, \
                     so another holder may have run alongside the command ({})",
                    keys.names(),
                    describe_status(end.status)
                ),
            ));
        }
        if let Some(by) = &end.replaced {
            return Err(fail(
                Exit::Replaced,
                format!(
                    "{by} replaced this run of {} (--replace): the command was stopped ({}) and \
                     the lock released",
                    keys.lock,
                    describe_status(end.status)
                ),
            ));
        }
        if let Some(d) = end.timed_out {
            return Err(fail(
                Exit::TimedOut,
                format!(
                    "the command timed out after {} (--max-runtime) and {}; every process of it \
                     was stopped before {} was let go",
                    lease::fmt(d),
                    describe_status(end.status),
                    keys.names()
                ),
            ));
        }
        Ok(exit)
    }
}

impl Hold<'_> {
    /// Starts the command under the lock and supervises it until its whole tree is gone.
    /// Releases nothing: that is [`Hold::release`]'s, with the [`Ending`] this returns.
    pub fn run(&mut self, ctx: &Context, signals: &Signals) -> Ending {
        let plan = self.plan;
        // A signal that arrived during the acquire round trip: honour it before starting
        // anything.
        if let Event::Signal(sig) = signals.poll()
            && signals::FORWARDED.contains(&sig)
        {
            return Ending::not_started(None, None, Verdict::Signal(sig));
        }
        // The room and the keeper exist before the command does: from its first instruction,
        // the command is inside the tree and the keeper's kill point is armed.
        let Guard { tree, keeper } = self
            .guard
            .take()
            .unwrap_or_else(|| Guard::prepare(plan.args.contain));
        let keeper = match keeper {
            Ok(keeper) => keeper,
            Err(e) => {
                let record =
                    self.record(Outcome::Failed, Exit::NotExecutable.code(), Duration::ZERO);
                return Ending::not_started(
                    Some(record),
                    None,
                    Verdict::NotStarted(fail(
                        Exit::NotExecutable,
                        format!(
                            "cannot start the keeper that guards the command: {e}; lock released"
                        ),
                    )),
                );
            }
        };
        let timeline = plan.lease.timeline(plan.first_ttl, self.sent);
        let limit = plan
            .args
            .max_runtime
            .map(|d| plan.lease.limit(d, self.sent));
        // A grant that came too late (a stalled server, redlock stopped after sending) leaves no
        // time to run anything under it.
        if Moment::now() >= timeline.term_at {
            keeper.dismiss();
            let late = fail(
                Exit::Unavailable,
                format!(
                    "{} was granted {} after it was asked for, too late to run anything under a \
                     {} lease; lock released",
                    plan.keys.names(),
                    lease::fmt(self.sent.elapsed()),
                    lease::fmt(plan.first_ttl)
                ),
            );
            return Ending::not_started(None, Some(keeper), Verdict::NotStarted(late));
        }
        keeper.arm().arm(timeline.kill_at);
        let env = self.environment();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let child = match child::spawn(&plan.argv, &env, tree) {
            Ok(child) => child,
            Err(e) => {
                tree.reaped.store(true, Ordering::Release);
                keeper.dismiss();
                let exit = child::spawn_failure_exit(&e);
                let record = self.record(Outcome::Failed, exit.code(), Duration::ZERO);
                let failed = fail(
                    exit,
                    format!(
                        "cannot run {}: {e}; lock released",
                        plan.argv[0].to_string_lossy()
                    ),
                );
                return Ending::not_started(
                    Some(record),
                    Some(keeper),
                    Verdict::NotStarted(failed),
                );
            }
        };
        // Only now, while the command starts: the keeper's real-time priority and closing what
        // the wait used are not worth holding its start for.
        keeper.arm().promote();
        drop(std::mem::take(&mut self.spent));
        if let Some(why) = &tree.declined {
            log::warn("room", why, &[]);
        }
        log::info(
            "started",
            &format!(
                "started {} (pid {}) in {}",
                plan.display,
                child.pid,
                tree.describe()
            ),
            &[("pid", child.pid.into())],
        );

        let mut heartbeat = Heartbeat::new(
            ctx.nodes(super::node_timeout(ctx, plan.lease.ttl))
                .with_replicas(plan.args.replicas),
            plan.keys.clone(),
            self.token.to_string(),
            Standing {
                fence: Some(self.fence),
                started_ms: Some(self.started_ms),
                holder: Some(self.holder.clone()),
                also_fences: self.also.clone(),
            },
            plan.lease,
            timeline,
            limit,
            keeper.arm(),
            !plan.args.no_replace && plan.shape == Shape::Exclusive,
        );
        let mut command = Command::new(tree, child.pid);
        let max_runtime = plan.args.max_runtime.zip(limit);
        let mut end = supervisor::supervise(
            signals,
            child.pid,
            &mut heartbeat,
            plan.lease,
            max_runtime,
            &mut command,
        );
        heartbeat.stop();
        if let Some(fired) = keeper.fired() {
            let late = fired.at - fired.kill_at;
            let late_text = format!("{:.3} ms", late.as_secs_f64() * 1000.0);
            log::info(
                "keeper_fired",
                &format!("the keeper killed the command {late_text} after the kill point"),
                &[("late_us", late.as_micros().into())],
            );
            // The keeper got there first: the supervisor was not running when it should have
            // been. (After a timeout the supervisor's own SIGKILL may come just before the
            // lease's kill point; the keeper repeating it on a tree still dying is no sign of
            // that.)
            let killed_first =
                end.timed_out.is_some() && end.killed_at.is_some_and(|at| at <= fired.at);
            if end.lost_at.is_none_or(|at| fired.at < at) && !killed_first {
                end.lost = Some(format!(
                    "redlock was not scheduled (stopped, or starved of CPU) past its kill point; \
                     the keeper killed the command {late_text} after it"
                ));
            }
        }
        keeper.dismiss();

        let ran = self.acquired_at.elapsed();
        let (exit, outcome) = match (&end.lost, end.timed_out, end.status) {
            (Some(_), _, _) => (Exit::LeaseLost, Outcome::LeaseLost),
            (None, _, _) if end.replaced.is_some() => (Exit::Replaced, Outcome::Replaced),
            (None, Some(_), _) => (Exit::TimedOut, Outcome::TimedOut),
            (None, None, Status::Exited(0)) => (Exit::Child(0), Outcome::Ok),
            (None, None, Status::Exited(code)) => (Exit::Child(code), Outcome::Failed),
            (None, None, Status::Signaled(sig)) => (Exit::Signal(sig), Outcome::Killed),
        };
        log::info(
            "exited",
            &format!(
                "command {} after {}",
                describe_status(end.status),
                lease::fmt(ran)
            ),
            &[
                ("exit", end.status.exit().code().into()),
                ("duration_ms", ran.as_millis().into()),
            ],
        );
        let mut record = self.record(outcome, end.status.exit().code(), ran);
        record.replaced_by = end.replaced.clone().filter(|_| end.lost.is_none());
        Ending {
            ran: true,
            record: Some(record),
            keeper: Some(keeper),
            verdict: Verdict::Ran { end, exit },
        }
    }

    /// The variables the command gets: `REDLOCK_KEY` (the first key as given, without the
    /// prefix), `REDLOCK_TOKEN`, `REDLOCK_FENCE` (the first key's), `REDLOCK_KEYS` and
    /// `REDLOCK_FENCES` (every key and its fence, one a line, in the order of `--key`; keys
    /// hold no control characters), and `REDLOCK_SLOT` with `--slots`.
    fn environment(&self) -> Vec<(&'static str, String)> {
        let keys = &self.plan.keys;
        let mut env = vec![
            ("REDLOCK_KEY", keys.name.clone()),
            ("REDLOCK_TOKEN", self.token.to_string()),
            ("REDLOCK_FENCE", self.fence.to_string()),
        ];
        let mut names = keys.name.clone();
        let mut fences = self.fence.to_string();
        for (other, fence) in keys.also.iter().zip(&self.also) {
            names.push('\n');
            names.push_str(&other.name);
            fences.push('\n');
            fences.push_str(&fence.to_string());
        }
        env.push(("REDLOCK_KEYS", names));
        env.push(("REDLOCK_FENCES", fences));
        // `--slots 1` is the exclusive lock, whose one slot is 0.
        match (self.plan.args.slots, self.slot) {
            (_, Some(slot)) => env.push(("REDLOCK_SLOT", slot.to_string())),
            (Some(_), None) => env.push(("REDLOCK_SLOT", "0".to_string())),
            (None, None) => {}
        }
        env
    }

    fn record(&self, outcome: Outcome, exit: u8, duration: Duration) -> LastRun {
        let mut record = LastRun::new(
            outcome,
            exit,
            self.holder,
            self.started_ms,
            duration,
            self.fence,
        );
        record.once_per_ms = self.plan.once.map(|o| o.every.as_millis() as i64);
        record.shared = self.plan.shape != Shape::Exclusive;
        record.also_fences = self.also.clone();
        record
    }

    /// Releases the lock (or, when the command ran under `--hold-at-least`, leaves it to
    /// expire then: a command that never started holds nothing back), writing the run's
    /// record. Failure here is a warning, not an error: the lease expires by itself. Returns
    /// whether the lock was still ours (`None`: no answer).
    pub fn release(&self, nodes: &mut Nodes, ending: &Ending) -> Option<bool> {
        let keys = &self.plan.keys;
        let keep = self
            .plan
            .args
            .hold_at_least
            .filter(|_| ending.ran)
            .and_then(|d| d.checked_sub(self.acquired_at.elapsed()))
            .filter(|d| !d.is_zero());
        // A connection idle longer than one renewal interval is replaced first: a server or a
        // middlebox may have dropped it without a word.
        if self.acquired_at.elapsed() > self.plan.lease.interval() {
            nodes.disconnect();
        }
        // The keeper gives up its real-time priority while the release is on the wire: after
        // that, it only leaves.
        let mut demote = || {
            if let Some(keeper) = &ending.keeper {
                keeper.demote();
            }
        };
        let mut meanwhile: Option<&mut dyn FnMut()> = ending.ran.then_some(&mut demote);
        // A run that started nothing has no record: the audit log says so as its end.
        let mut attempt = |nodes: &mut Nodes| match &ending.record {
            Some(record) => nodes.release(keys, self.token, keep, Some(record), meanwhile.take()),
            None => nodes.hand_back(keys, self.token, GivenBack::NotStarted),
        };
        // The connection sat idle while the command ran; the server may have dropped it, and
        // the failed attempt dropped it too, so a second attempt reconnects. A timeout or a
        // refusal, though, would only repeat: one try.
        let result = attempt(nodes).or_else(|first| {
            // READONLY: the master was demoted by a failover; reconnecting finds the new one.
            if is_timeout(&first) || (is_server_reply(&first) && !is_readonly(&first)) {
                Err(first)
            } else {
                attempt(nodes)
            }
        });
        let fields = [("key", keys.lock.as_str().into())];
        match result {
            Ok(true) => match keep {
                Some(k) => log::info(
                    "kept",
                    &format!(
                        "{} kept for {} more (--hold-at-least)",
                        keys.names(),
                        lease::fmt(k)
                    ),
                    &fields,
                ),
                None => log::info("released", &format!("released {}", keys.names()), &fields),
            },
            Ok(false) => log::info(
                "not_released",
                &format!("{} was no longer ours; left it alone", keys.names()),
                &fields,
            ),
            Err(ref e) => log::warn(
                "release_failed",
                &format!("{}; the lock expires by itself", render(e)),
                &fields,
            ),
        }
        result.ok()
    }
}
