//! The supervisor: one event loop over {signal, child exited, lease news, timer} that keeps the
//! run's invariant — the command's tree (`supervise::tree`: every process it started, whatever
//! its group or session) runs only while the lease is confirmed, i.e. before the current
//! [`Timeline`]'s `term_at`. From `term_at` it is being stopped (SIGTERM), at `kill_at` it is
//! killed, so it is dead before the deadline even if Redis never answers again. A definitive
//! loss (key deleted, another token, a refusal) starts the same stop at once. If redlock itself
//! was stopped past the kill point, the tree gets SIGKILL straight away: the grace period is
//! already spent (and the keeper has killed it at the kill point already). `--max-runtime`
//! stops the tree the same way at its [`Limit`]. The loop ends only when the tree is empty.

use std::sync::atomic::Ordering;
use std::time::Duration;

use libc::pid_t;

use crate::lock::heartbeat::Heartbeat;
use crate::report::log;
use crate::supervise::child::{self, Reaped, Status};
use crate::supervise::lease::{self, Lease, Limit, Moment, Timeline};
use crate::supervise::signals::{self, Event, Signals};
use crate::supervise::tree::{Scratch, Tree};

/// How supervision ended: the command's status, and whether (and why) it was stopped.
pub struct End {
    pub status: Status,
    pub lost: Option<String>,
    /// When the supervisor learnt that the lease was lost.
    pub lost_at: Option<Moment>,
    /// `--max-runtime` (its value) ran out and the supervisor stopped the command.
    pub timed_out: Option<Duration>,
    /// When the supervisor sent the tree SIGKILL, if it did.
    pub killed_at: Option<Moment>,
    /// Who asked this holder to stop (`--replace`); the supervisor stopped the command.
    pub replaced: Option<String>,
}

/// The command's tree, as the supervisor acts on it.
pub struct Command {
    tree: &'static Tree,
    /// The command's process group (its pid).
    pgid: pid_t,
    /// Room for walks; allocated the first time a signal or a kill needs one.
    scratch: Option<Box<Scratch>>,
}

impl Command {
    pub fn new(tree: &'static Tree, pgid: pid_t) -> Command {
        Command {
            tree,
            pgid,
            scratch: None,
        }
    }

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

pub fn supervise(
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
    let mut replaced: Option<String> = None;
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
        // Another run asked this holder to stop (--replace): the same stop as for a lost lease.
        // The heartbeat renews no more, so the lease's own kill point still bounds it.
        // A command that had ended by itself was not replaced.
        if replaced.is_none()
            && lost.is_none()
            && status.is_none()
            && let Some(by) = lease_now.replaced
        {
            log::info(
                "replaced",
                &format!("{by} asked this run to stop (--replace); stopping the command"),
                &[],
            );
            replaced = Some(by);
            stop = stop.terminate(command, (now + lease.kill_after).min(line.kill_at));
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
        replaced,
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

pub fn describe_status(status: Status) -> String {
    match status {
        Status::Exited(code) => format!("exited with status {code}"),
        Status::Signaled(sig) => format!("was killed by {}", signals::name(sig)),
    }
}
