//! `redlock run`: acquire, spawn, supervise, release.
//!
//! The supervisor is one event loop over {signal, child exited, lease news, timer}. Its
//! invariant: the command's tree (`tree.rs`: every process it started, whatever its group or
//! session) is running only while the lease is confirmed, i.e. before the current
//! [`Timeline`]'s `term_at`; from `term_at` it is being stopped (SIGTERM), and at `kill_at` it
//! is killed, so it is dead before the deadline even if Redis never answers again. A definitive
//! loss (key deleted, another token, a refusal) starts the same stop at once. If redlock itself
//! was stopped past the kill point, the tree gets SIGKILL straight away — the grace period is
//! already spent — and the keeper (`keeper.rs`) has killed it at the kill point already, as it
//! does whenever the supervisor is frozen, starved or dead. The lock is released only after
//! every process of the tree is gone, so nothing runs unlocked. The timeline is drawn in
//! `lease.rs`; the whole argument is the README's "Safety: nothing escapes the lease".
//!
//! `--max-runtime D` adds a [`Limit`], counted from when the winning acquire was sent (where
//! the lease is counted from too): the same stop (SIGTERM to the tree at `term_at`, SIGKILL at
//! `kill_at`, release once it is empty), then exit 124 and a "timed out" record. The lease is
//! acquired and renewed for no longer than reaches `lease_end`, so its own kill point never
//! comes before the limit's; a lost lease still wins (76).

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use libc::pid_t;

use crate::Context;
use crate::child::{self, Reaped, Status};
use crate::cli::{Contain, RunArgs};
use crate::error::{fail, is_readonly, is_server_reply, is_timeout, render, usage};
use crate::exit::{BUSY, Exit};
use crate::heartbeat::Heartbeat;
use crate::keeper::Keeper;
use crate::keys::Keys;
use crate::lease::{self, Lease, Limit, Moment, Timeline};
use crate::lock::{self, Claim, Standing};
use crate::log;
use crate::nodes::Nodes;
use crate::record::{Holder, LastRun, Outcome};
use crate::signals::{self, Event, Signals};
use crate::tree::{Scratch, Tree};
use crate::wait::{self, Request, Taken};

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

pub fn run(ctx: &Context, mut args: RunArgs) -> Result<Exit> {
    let Some(path) = args.metrics_file.take() else {
        return run_locked(ctx, args);
    };
    let key = args.key.clone();
    let result = run_locked(ctx, args);
    // After the release, so the file shows the run's own record; a bad command line contacted
    // nothing and writes nothing. The file is the run's by-product: failing to write it is a
    // warning, and the exit status stays the run's.
    if !matches!(&result, Err(e) if crate::error::classify(e) == Exit::Usage) {
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
    // Everything the operator typed is checked before Redis is contacted.
    let lease = Lease::new(args.ttl, args.kill_after)?;
    if args.max_runtime.is_some_and(|d| d.is_zero()) {
        return Err(usage(
            "--max-runtime must be greater than 0 (it is how long the command may run)",
        ));
    }
    // Under --max-runtime the lock is taken for no longer than the run can last.
    let first_ttl = lease.first_ttl(args.max_runtime);
    let keys = Keys::new(&ctx.prefix, &args.key)?;
    let shape = ctx.shape(args.shared, args.slots)?;
    let once = once_per(ctx, &args)?;
    let argv = command_line(&args)?;
    if let Some(hold) = args.hold_at_least
        && hold > lease::MAX_TTL
    {
        return Err(usage(format!(
            "--hold-at-least {} is longer than 24h",
            lease::fmt(hold)
        )));
    }
    let display = crate::record::redact(&display_command(&argv, args.shell.is_some()));

    let signals = Signals::block();
    let started = Moment::now();
    let mut nodes = ctx.nodes(node_timeout(ctx, lease.ttl));
    nodes.connect()?;
    // Inside a run that holds this key: become the command, under that run's lease.
    if crate::nested::confirm(&mut nodes, &keys)?.is_some() {
        drop(nodes);
        return Err(crate::nested::exec(&argv));
    }
    child::become_subreaper();
    if crate::log::enabled(crate::log::Level::Info) {
        let names: Vec<&str> = nodes
            .servers()
            .map(super::super::server::Server::name)
            .collect();
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
    let token = lock::new_token()?;
    let holder = Holder::current(&display, args.label.as_deref());
    let request = Request {
        claim: Claim {
            keys: &keys,
            token: &token,
            ttl: first_ttl,
            holder: &holder,
            shape,
            once,
        },
        wait: args.wait,
        timeout: ctx.timeout,
    };
    // The command's room and its keeper are made while the acquire is on the wire: local work
    // that would otherwise follow the round trip.
    let mut guard: Option<Guard> = None;
    let socket = nodes.single_socket();
    let taken = wait::take(&mut nodes, &request, &signals, &mut || {
        guard = Some(Guard::prepare(args.contain, socket));
    });
    let (fence, started_ms, slot, sent, spent) = match taken? {
        Taken::Acquired {
            fence,
            started_ms,
            slot,
            sent,
            spent,
        } => (fence, started_ms, slot, sent, spent),
        Taken::Busy(busy) => {
            let code = args.conflict_exit_code.unwrap_or(BUSY);
            let waited = match args.wait {
                Some(w) if !w.is_zero() => format!(" (waited {})", lease::fmt(w)),
                _ => String::new(),
            };
            let msg = format!(
                "{} is {}{waited}; not running the command",
                keys.lock,
                busy.describe()
            );
            if code == 0 {
                log::warn("busy", &msg, &[("key", (&keys.lock).into())]);
            } else {
                log::error("busy", &msg, &[("key", (&keys.lock).into())]);
            }
            return Ok(Exit::Busy(code));
        }
        Taken::Skipped(ran) => {
            let code = args.conflict_exit_code.unwrap_or(BUSY);
            let msg = format!("{}: {}; not running the command", keys.lock, ran.describe());
            if code == 0 {
                log::warn("skipped", &msg, &[("key", (&keys.lock).into())]);
            } else {
                log::error("skipped", &msg, &[("key", (&keys.lock).into())]);
            }
            return Ok(Exit::Busy(code));
        }
        Taken::Interrupted(sig) => return Ok(wait::interrupted(sig, &keys)),
    };
    let acquired_at = Moment::now();
    log::info(
        "acquired",
        &format!(
            "acquired {} after {} ms with fence {fence}{}",
            keys.lock,
            started.elapsed().as_millis(),
            match (shape, slot) {
                (_, Some(slot)) => format!(" in slot {slot}"),
                (lock::Shape::Shared, _) => " (shared)".to_string(),
                _ => String::new(),
            }
        ),
        &[
            ("key", (&keys.lock).into()),
            ("fence", fence.into()),
            ("elapsed_ms", started.elapsed().as_millis().into()),
        ],
    );

    let session = Session {
        keys: &keys,
        token: &token,
        holder: &holder,
        fence,
        started_ms,
        acquired_at,
        hold_at_least: args.hold_at_least,
        once_per: once.map(|o| o.every),
        idle_limit: lease.interval(),
    };

    // A signal that arrived during the acquire round trip: honour it before starting anything.
    if let Event::Signal(sig) = signals.poll()
        && signals::FORWARDED.contains(&sig)
    {
        session.release(&mut nodes, false, None, None);
        log::error(
            "interrupted",
            &format!(
                "{} before the command started; lock released",
                signals::name(sig)
            ),
            &[],
        );
        return Ok(Exit::Signal(sig));
    }

    let fence_text = fence.to_string();
    // `--slots 1` is the exclusive lock, whose one slot is 0.
    let slot_text = match (args.slots, slot) {
        (_, Some(slot)) => Some(slot.to_string()),
        (Some(_), None) => Some("0".to_string()),
        (None, None) => None,
    };
    let mut env = vec![
        ("REDLOCK_KEY", keys.name.as_str()),
        ("REDLOCK_TOKEN", token.as_str()),
        ("REDLOCK_FENCE", fence_text.as_str()),
    ];
    if let Some(slot) = &slot_text {
        env.push(("REDLOCK_SLOT", slot.as_str()));
    }
    // The room and the keeper exist before the command does: from its first instruction, the
    // command is inside the tree and the keeper's kill point is armed.
    let Guard { tree, keeper } = guard
        .take()
        .unwrap_or_else(|| Guard::prepare(args.contain, None));
    let keeper = match keeper {
        Ok(keeper) => keeper,
        Err(e) => {
            session.release(
                &mut nodes,
                false,
                Some(session.record(Outcome::Failed, Exit::NotExecutable.code(), Duration::ZERO)),
                None,
            );
            return Err(fail(
                Exit::NotExecutable,
                format!("cannot start the keeper that guards the command: {e}; lock released"),
            ));
        }
    };
    let timeline = lease.timeline(first_ttl, sent);
    let limit = args.max_runtime.map(|d| lease.limit(d, sent));
    // A grant that came too late (a stalled server, redlock stopped after sending) leaves no
    // time to run anything under it.
    if Moment::now() >= timeline.term_at {
        keeper.dismiss();
        session.release(&mut nodes, false, None, None);
        return Err(fail(
            Exit::Unavailable,
            format!(
                "{} was granted {} after it was asked for, too late to run anything under a \
                 {} lease; lock released",
                keys.lock,
                lease::fmt(sent.elapsed()),
                lease::fmt(first_ttl)
            ),
        ));
    }
    keeper.arm().arm(timeline.kill_at);
    let child = match child::spawn(&argv, &env, tree) {
        Ok(child) => child,
        Err(e) => {
            tree.reaped.store(true, Ordering::Release);
            keeper.dismiss();
            let exit = child::spawn_failure_exit(&e);
            session.release(
                &mut nodes,
                false,
                Some(session.record(Outcome::Failed, exit.code(), Duration::ZERO)),
                None,
            );
            return Err(fail(
                exit,
                format!("cannot run {}: {e}; lock released", argv[0]),
            ));
        }
    };
    // Only now, while the command starts: the keeper's real-time priority and closing what the
    // wait used are not worth holding its start for.
    keeper.arm().promote();
    drop(spent);
    if let Some(why) = &tree.declined {
        log::warn("room", why, &[]);
    }
    log::info(
        "started",
        &format!(
            "started {} (pid {}) in {}",
            display,
            child.pid,
            tree.describe()
        ),
        &[("pid", child.pid.into())],
    );

    let mut heartbeat = Heartbeat::new(
        ctx.nodes(node_timeout(ctx, lease.ttl)),
        keys.clone(),
        token.clone(),
        Standing {
            fence: Some(fence),
            started_ms: Some(started_ms),
            holder: Some(holder.clone()),
        },
        lease,
        timeline,
        limit,
        keeper.arm(),
    );
    let mut command = Command {
        tree,
        pgid: child.pid,
        scratch: None,
    };
    let max_runtime = args.max_runtime.zip(limit);
    let mut end = supervise(
        &signals,
        child.pid,
        &mut heartbeat,
        lease,
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
        // The keeper got there first: the supervisor was not running when it should have been.
        // (After a timeout the supervisor's own SIGKILL may come just before the lease's kill
        // point; the keeper repeating it on a tree still dying is no sign of that.)
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

    let ran = acquired_at.elapsed();
    let (exit, outcome) = match (&end.lost, end.timed_out, end.status) {
        (Some(_), _, _) => (Exit::LeaseLost, Outcome::LeaseLost),
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
    // The keeper gives up its real-time priority while the release is on the wire: after
    // that, it only leaves.
    let released = session.release(
        &mut nodes,
        true,
        Some(session.record(outcome, end.status.exit().code(), ran)),
        Some(&mut || keeper.demote()),
    );
    if let Some(reason) = end.lost {
        return Err(fail(
            Exit::LeaseLost,
            format!(
                "lease on {} lost: {reason}; the command was stopped ({})",
                keys.lock,
                describe_status(end.status)
            ),
        ));
    }
    // The key was gone or someone else's when we came to release it: somewhere since the last
    // confirmed renewal the lease lapsed, and the command was not covered the whole time
    // (the release script recorded the run as "lease lost").
    if released == Some(false) {
        return Err(fail(
            Exit::LeaseLost,
            format!(
                "lease on {} lost: at the release the key was gone or held by another token, so \
                 another holder may have run alongside the command ({})",
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
                keys.lock
            ),
        ));
    }
    Ok(exit)
}

/// The command's room and its keeper, made before the command is started.
struct Guard {
    tree: &'static Tree,
    keeper: std::io::Result<Keeper>,
}

impl Guard {
    fn prepare(contain: Contain, socket: Option<libc::c_int>) -> Guard {
        // Leaked: the keeper reads it, and may outlive this function (or redlock).
        let tree: &'static Tree = Box::leak(Box::new(Tree::prepare(contain == Contain::Auto)));
        // Unused (the lock was busy, the wait interrupted), the keeper is never armed and leaves
        // with redlock; the cgroup is free again once both are gone.
        Guard {
            tree,
            keeper: Keeper::start(tree, socket),
        }
    }
}

/// The state a run carries from acquire to release.
struct Session<'a> {
    keys: &'a Keys,
    token: &'a str,
    holder: &'a Holder,
    fence: i64,
    started_ms: i64,
    acquired_at: Moment,
    hold_at_least: Option<Duration>,
    /// `--once-per`: the record says so, for the release script.
    once_per: Option<Duration>,
    /// A connection idle longer than this (one renewal interval) is replaced before the
    /// release: a server or a middlebox may have dropped it without a word.
    idle_limit: Duration,
}

impl Session<'_> {
    fn record(&self, outcome: Outcome, exit: u8, duration: Duration) -> LastRun {
        let mut record = LastRun::new(
            outcome,
            exit,
            self.holder,
            self.started_ms,
            duration,
            self.fence,
        );
        record.once_per_ms = self.once_per.map(|d| d.as_millis() as i64);
        record
    }

    /// Releases the lock (or, when the command `ran` under `--hold-at-least`, leaves it to
    /// expire then: a command that never started holds nothing back). Failure here is a
    /// warning, not an error: the lease expires by itself. Returns whether the lock was still
    /// ours (`None`: no answer).
    /// `meanwhile` runs while the release is on the wire (see [`Nodes::release`]).
    fn release(
        &self,
        nodes: &mut Nodes,
        ran: bool,
        record: Option<LastRun>,
        meanwhile: Option<&mut dyn FnMut()>,
    ) -> Option<bool> {
        let keep = self
            .hold_at_least
            .filter(|_| ran)
            .and_then(|d| d.checked_sub(self.acquired_at.elapsed()))
            .filter(|d| !d.is_zero());
        if self.acquired_at.elapsed() > self.idle_limit {
            nodes.disconnect();
        }
        let mut meanwhile = meanwhile;
        let mut attempt = |nodes: &mut Nodes| {
            nodes.release(
                self.keys,
                self.token,
                keep,
                record.as_ref(),
                meanwhile.take(),
            )
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
        match result {
            Ok(true) => match keep {
                Some(k) => log::info(
                    "kept",
                    &format!(
                        "{} kept for {} more (--hold-at-least)",
                        self.keys.lock,
                        lease::fmt(k)
                    ),
                    &[("key", self.keys.lock.as_str().into())],
                ),
                None => log::info(
                    "released",
                    &format!("released {}", self.keys.lock),
                    &[("key", self.keys.lock.as_str().into())],
                ),
            },
            Ok(false) => log::info(
                "not_released",
                &format!("{} was no longer ours; left it alone", self.keys.lock),
                &[("key", self.keys.lock.as_str().into())],
            ),
            Err(ref e) => log::warn(
                "release_failed",
                &format!("{}; the lock expires by itself", render(e)),
                &[("key", self.keys.lock.as_str().into())],
            ),
        }
        result.ok()
    }
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

struct End {
    status: Status,
    lost: Option<String>,
    /// When the supervisor learnt that the lease was lost.
    lost_at: Option<Moment>,
    /// `--max-runtime` (its value) ran out and the supervisor stopped the command.
    timed_out: Option<Duration>,
    /// When the supervisor sent the tree SIGKILL, if it did.
    killed_at: Option<Moment>,
}

/// The command's tree, as the supervisor acts on it.
struct Command {
    tree: &'static Tree,
    /// The command's process group (its pid).
    pgid: pid_t,
    /// Room for walks; allocated the first time a signal or a kill needs one.
    scratch: Option<Box<Scratch>>,
}

impl Command {
    fn scratch(&mut self) -> &mut Scratch {
        self.scratch.get_or_insert_with(Scratch::new)
    }

    /// Sends `sig` to every process of the command (its group as a terminal would, the rest
    /// one by one).
    fn signal(&mut self, sig: libc::c_int) {
        let tree = self.tree;
        tree.signal(sig, self.scratch());
    }

    /// SIGKILL to the whole tree, frozen first so that nothing forks its way out.
    fn kill(&mut self) {
        let tree = self.tree;
        tree.kill_all(tree.redlock, self.scratch());
    }
}

/// Where the tree is in being stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Running,
    /// SIGTERM sent; SIGKILL at the moment given.
    Terminating(Moment),
    Killed(Moment),
}

fn supervise(
    signals: &Signals,
    pid: pid_t,
    heartbeat: &mut Heartbeat,
    lease: Lease,
    max_runtime: Option<(Duration, Limit)>,
    command: &mut Command,
) -> End {
    let pgid = command.pgid;
    let mut status: Option<Status> = None;
    let mut lost: Option<String> = None;
    let mut lost_at: Option<Moment> = None;
    let mut timed_out: Option<Duration> = None;
    let mut stop = Stop::Running;
    let mut terminal = Terminal::default();
    loop {
        let now = Moment::now();
        heartbeat.start_if_due(now);
        let lease_now = heartbeat.snapshot();
        let line: Timeline = lease_now.timeline;

        // --max-runtime: the command (still running, the lease still ours) has had its time.
        if let Some((d, limit)) = max_runtime
            && timed_out.is_none()
            && lost.is_none()
            && status.is_none()
            && now >= limit.term_at
        {
            timed_out = Some(d);
            log::info(
                "timed_out",
                &format!(
                    "the command ran for {} (--max-runtime); stopping it",
                    lease::fmt(d)
                ),
                &[("max_runtime_ms", d.as_millis().into())],
            );
            stop = if now >= limit.kill_at {
                stop.kill(command, now)
            } else {
                stop.terminate(command, limit.kill_at)
            };
        }
        // A lease that outlives --max-runtime's kill point cannot lapse on a live command:
        // its own term and kill points are not news (a definitive loss still is).
        let covered = max_runtime.is_some_and(|(_, limit)| limit.covered_by(&line));
        if lost.is_none() {
            if let Some(reason) = lease_now.lost {
                lost = Some(reason);
                stop = stop.terminate(command, (now + lease.kill_after).min(line.kill_at));
            } else if !covered && now >= line.kill_at {
                // Stopped past the kill point (SIGSTOP, a VM pause): no grace is left.
                lost = Some("no renewal was confirmed before the lease ran out".into());
                stop = stop.kill(command, now);
            } else if !covered && now >= line.term_at {
                lost = Some(format!(
                    "no renewal was confirmed in {}",
                    lease::fmt(now - line.sent)
                ));
                stop = stop.terminate(command, line.kill_at);
            }
            if lost.is_some() {
                lost_at = Some(now);
            }
        }
        if let Stop::Terminating(kill_at) = stop
            && now >= kill_at
        {
            stop = stop.kill(command, now);
        }
        if status.is_some() {
            if !command.tree.occupied() {
                break;
            }
            // The command has ended but left processes behind (in its group or not): they
            // must not run on unlocked.
            if stop == Stop::Running {
                log::warn(
                    "leftovers",
                    "the command exited but left processes running; stopping them",
                    &[],
                );
                stop = stop.terminate(command, (now + lease.kill_after).min(line.kill_at));
            }
            if let Stop::Killed(at) = stop
                && now >= at + Duration::from_secs(5)
            {
                log::warn(
                    "unkillable",
                    "processes of the command survive SIGKILL; releasing anyway",
                    &[],
                );
                break;
            }
        }

        let next = match stop {
            Stop::Running => {
                let next = heartbeat
                    .due()
                    .map_or(line.term_at, |d| d.min(line.term_at));
                match max_runtime {
                    Some((_, limit)) if status.is_none() => next.min(limit.term_at),
                    _ => next,
                }
            }
            Stop::Terminating(kill_at) => kill_at,
            // Descendants that are not our children die without telling us; look again soon.
            Stop::Killed(_) => now + Duration::from_millis(20),
        };
        let next = match status {
            Some(_) => next.min(now + Duration::from_millis(100)),
            None => next,
        };
        match signals.wait(Some(next - Moment::now())) {
            Event::Signal(sig) => {
                log::info(
                    "forwarded",
                    &format!("forwarding {} to the command", signals::name(sig)),
                    &[],
                );
                if sig == libc::SIGCONT && terminal.handed {
                    child::give_terminal(pgid);
                }
                command.signal(sig);
                if !signals::JOB_CONTROL.contains(&sig) {
                    // A stopped command must be able to act on what it was sent.
                    command.signal(libc::SIGCONT);
                }
            }
            Event::Child => match child::reap(pid) {
                Reaped::Ended(s) => {
                    // Its pid may be reused from now on: the keeper must not walk from it.
                    command.tree.reaped.store(true, Ordering::Release);
                    status = Some(s);
                    terminal.take_back();
                }
                Reaped::Stopped(libc::SIGTTIN | libc::SIGTTOU) => terminal.lend(pgid),
                // Ctrl-Z reached the command, which has the terminal: stop as a job, so the
                // shell gets it back. Renewals stop with redlock; if the lease runs out
                // before `fg`, the keeper kills the command at the kill point.
                Reaped::Stopped(libc::SIGTSTP) if terminal.handed => {
                    terminal.take_back();
                    // Still lent, as far as the SIGCONT of `fg` is concerned.
                    terminal.handed = true;
                    child::stop_self();
                }
                Reaped::Stopped(_) | Reaped::Nothing => {}
            },
            Event::Wake | Event::Timeout => {}
        }
    }
    terminal.take_back();
    End {
        status: status.unwrap_or(Status::Signaled(libc::SIGKILL)),
        lost,
        lost_at,
        timed_out,
        killed_at: match stop {
            Stop::Killed(at) => Some(at),
            _ => None,
        },
    }
}

/// Whether the command has been lent the terminal. It runs in its own process group, so it is
/// not in the terminal's foreground; the first time it tries to read from (or configure) the
/// terminal, the kernel stops it with SIGTTIN/SIGTTOU, and redlock then lends it the terminal
/// and lets it continue — but only when redlock itself is in the foreground.
#[derive(Default)]
struct Terminal {
    handed: bool,
}

impl Terminal {
    fn lend(&mut self, pgid: pid_t) {
        if self.handed || child::foreground_terminal() {
            child::give_terminal(pgid);
            self.handed = true;
            log::info(
                "terminal",
                "the command reads the terminal: lent it the foreground",
                &[],
            );
            // SAFETY: killpg has no memory effects.
            unsafe { libc::killpg(pgid, libc::SIGCONT) };
        } else {
            // Continuing it would only stop it again.
            log::warn(
                "stopped",
                "the command is stopped: it tried to use a terminal redlock does not own \
                 (redirect its stdin, e.g. </dev/null)",
                &[],
            );
        }
    }

    fn take_back(&mut self) {
        if std::mem::take(&mut self.handed) {
            // SAFETY: getpgrp has no preconditions.
            child::give_terminal(unsafe { libc::getpgrp() });
        }
    }
}

impl Stop {
    fn terminate(self, command: &mut Command, kill_at: Moment) -> Stop {
        match self {
            Stop::Running => {
                command.signal(libc::SIGTERM);
                command.signal(libc::SIGCONT);
                Stop::Terminating(kill_at)
            }
            Stop::Terminating(at) => Stop::Terminating(at.min(kill_at)),
            killed => killed,
        }
    }

    fn kill(self, command: &mut Command, now: Moment) -> Stop {
        match self {
            Stop::Killed(_) => self,
            _ => {
                command.kill();
                Stop::Killed(now)
            }
        }
    }
}

fn describe_status(status: Status) -> String {
    match status {
        Status::Exited(code) => format!("exited with status {code}"),
        Status::Signaled(sig) => format!("was killed by {}", signals::name(sig)),
    }
}

/// `-c 'cmd'` → `sh -c cmd`; otherwise the words after `--`.
fn command_line(args: &RunArgs) -> Result<Vec<String>> {
    match (&args.shell, args.command.is_empty()) {
        (Some(_), false) => Err(usage(
            "give the command either with -c 'SHELL COMMAND' or after --, not both",
        )),
        (Some(shell), true) if shell.trim().is_empty() => Err(usage("-c is empty")),
        (Some(shell), true) => Ok(vec!["/bin/sh".into(), "-c".into(), shell.clone()]),
        (None, true) => Err(usage(
            "missing command: give it after -- (redlock run --key K --ttl 30s -- CMD ARGS) or with -c",
        )),
        (None, false) if args.command[0].is_empty() => Err(usage("the command is empty")),
        (None, false) => Ok(args.command.clone()),
    }
}

fn display_command(argv: &[String], shell: bool) -> String {
    if shell {
        return argv[2].clone();
    }
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_display_as_a_shell_would_read_them() {
        let argv: Vec<String> = ["echo", "a b", "it's"]
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert_eq!(display_command(&argv, false), "echo 'a b' 'it'\\''s'");
    }
}
