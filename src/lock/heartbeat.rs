//! The renewal thread.
//!
//! It renews every ttl/3 on a connection of its own, reconnects after any transport error, and
//! bounds every connect, read and write by the time left before SIGTERM is due — never by a
//! fixed timeout that could outlast the lease — and by a third of the renewal interval (a
//! quorum: the per-node timeout), so that a connection that died silently is replaced in time.
//! What it learns goes into [`Shared`]: a new [`Timeline`] after each confirmed renewal (and
//! the keeper's kill point moves with it, see `keeper.rs`), or the reason the lease is lost. A
//! loss rings the main thread's doorbell ([`signals::wake`]); a renewal needs no wake-up because
//! the main thread re-reads the timeline whenever its own timer fires.
//!
//! The thread and its connection are created only when the first renewal is due: a command
//! that ends within ttl/3 costs no thread and no second connection.
//!
//! Under `--max-runtime` ([`Limit`]) a renewal asks for no more than what reaches the limit's
//! `lease_end` (the kill point of the maximum runtime plus [`Lease::reach`]); once a confirmed
//! lease covers the limit, renewing stops: the command is dead before that lease can lapse.
//! A lease acquired already covering it (`Lease::first_ttl`) never starts the thread.
//!
//! The main thread enforces the kill point by itself, and the keeper does when the main thread
//! cannot, so a heartbeat stuck in I/O (or stopped with the rest of redlock) can delay nothing.
//! If the thread panicked, the panic is reported as a lost lease rather than dying silently.

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crate::lock::Standing;
use crate::lock::keys::Keys;
use crate::lock::nodes::{Nodes, Renewal};
use crate::report::log;
use crate::supervise::keeper::Arm;
use crate::supervise::lease::{Lease, Limit, Moment, Timeline};
use crate::supervise::signals;

#[derive(Debug)]
struct State {
    timeline: Timeline,
    lost: Option<String>,
    stop: bool,
}

pub struct Shared {
    state: Mutex<State>,
    stop: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub struct Heartbeat {
    shared: Arc<Shared>,
    /// The work to hand to the thread, until it is started.
    pending: Option<Worker>,
    first_renewal: Moment,
}

/// What the main thread needs to know about the lease right now.
pub struct Snapshot {
    pub timeline: Timeline,
    pub lost: Option<String>,
}

impl Heartbeat {
    /// Prepares the heartbeat for a lease confirmed at `timeline.sent`; the thread starts with
    /// [`Heartbeat::start_if_due`], unless the lease already covers `limit`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        nodes: Nodes,
        keys: Keys,
        token: String,
        standing: Standing,
        lease: Lease,
        timeline: Timeline,
        limit: Option<Limit>,
        keeper: Arm,
    ) -> Heartbeat {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                timeline,
                lost: None,
                stop: false,
            }),
            stop: Condvar::new(),
        });
        // A quorum's nodes keep their per-node timeout (far below the TTL); one server gets a
        // third of the renewal interval, so two more attempts fit before the kill point.
        let attempt_timeout = if nodes.is_quorum() {
            nodes.timeout()
        } else {
            (lease.interval() / 3).max(Duration::from_millis(50))
        };
        let worker = Worker {
            shared: Arc::clone(&shared),
            nodes,
            attempt_timeout,
            keys,
            token,
            standing,
            lease,
            limit,
            keeper,
        };
        let needed = !limit.is_some_and(|l| l.covered_by(&timeline));
        Heartbeat {
            shared,
            pending: needed.then_some(worker),
            first_renewal: timeline.sent + lease.interval(),
        }
    }

    /// When the thread must be running; `None` once it is.
    pub fn due(&self) -> Option<Moment> {
        self.pending.as_ref().map(|_| self.first_renewal)
    }

    /// Starts the renewal thread once the first renewal is due.
    pub fn start_if_due(&mut self, now: Moment) {
        if now < self.first_renewal {
            return;
        }
        let Some(worker) = self.pending.take() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let spawned = thread::Builder::new()
            .name("heartbeat".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let shared = Arc::clone(&worker.shared);
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run()));
                if result.is_err() {
                    report_lost(&shared, "the heartbeat thread failed".into());
                }
            });
        if let Err(e) = spawned {
            report_lost(&shared, format!("cannot start the heartbeat thread: {e}"));
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let state = self.shared.lock();
        Snapshot {
            timeline: state.timeline,
            lost: state.lost.clone(),
        }
    }

    /// Tells the thread to stop renewing. It is not joined: it may be inside a bounded network
    /// call, and the release must not wait for it. A renewal racing the release is harmless:
    /// it is compare-and-pexpire, and finds the key gone.
    pub fn stop(&self) {
        self.shared.lock().stop = true;
        // A thread never started waits on nothing (and the notification is a system call).
        if self.pending.is_none() {
            self.shared.stop.notify_all();
        }
    }
}

fn report_lost(shared: &Shared, reason: String) {
    let mut state = shared.lock();
    if state.lost.is_none() {
        state.lost = Some(reason);
    }
    drop(state);
    signals::wake();
}

struct Worker {
    shared: Arc<Shared>,
    nodes: Nodes,
    /// The longest one renewal attempt may take (connect included).
    attempt_timeout: Duration,
    keys: Keys,
    token: String,
    /// What a quorum renewal writes back where a node lost the key.
    standing: Standing,
    lease: Lease,
    /// `--max-runtime`: how far renewals may carry the lease.
    limit: Option<Limit>,
    /// Moves the keeper's kill point after each confirmed renewal.
    keeper: Arm,
}

impl Worker {
    fn run(mut self) {
        let mut failing_since: Option<Moment> = None;
        let interval = self.lease.interval();
        let retry = (interval / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut next = self.shared.lock().timeline.sent + interval;
        loop {
            let timeline = {
                let mut state = self.shared.lock();
                loop {
                    if state.stop || state.lost.is_some() {
                        return;
                    }
                    let now = Moment::now();
                    if now >= next {
                        break;
                    }
                    state = self
                        .shared
                        .stop
                        .wait_timeout(state, next - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                state.timeline
            };
            let now = Moment::now();
            // Past the kill point the main thread has already given up on this lease; a late
            // renewal must not revive it.
            let Some(left) = timeline.term_at.checked_duration_since(now) else {
                return;
            };
            // One attempt may not use up all the time left: a connection that silently died
            // must time out early enough for a fresh one to be tried before the kill point.
            self.nodes.set_timeout(left.min(self.attempt_timeout));
            let sent = Moment::now();
            let ttl = match self.limit {
                Some(limit) => match limit.ttl_at(self.lease.ttl, sent) {
                    Some(ttl) => ttl,
                    None => return,
                },
                None => self.lease.ttl,
            };
            match self
                .nodes
                .extend(&self.keys, &self.token, ttl, &self.standing, false)
            {
                Renewal::Confirmed => {
                    let renewed = self.lease.timeline(ttl, sent);
                    self.shared.lock().timeline = renewed;
                    self.keeper.arm(renewed.kill_at);
                    if let Some(since) = failing_since.take() {
                        log::warn(
                            "renewal_recovered",
                            &format!(
                                "lease on {} renewed again after {} of failures",
                                self.keys.names(),
                                crate::supervise::lease::fmt(since.elapsed())
                            ),
                            &[("key", (&self.keys.lock).into())],
                        );
                    } else {
                        log::info(
                            "renewed",
                            &format!("renewed {}", self.keys.names()),
                            &[("key", (&self.keys.lock).into())],
                        );
                    }
                    // This lease outlives --max-runtime's kill point: no renewal is needed,
                    // and none may carry the lease further.
                    if self.limit.is_some_and(|l| l.covered_by(&renewed)) {
                        return;
                    }
                    next = sent + interval;
                }
                Renewal::Lost { reason, .. } => {
                    report_lost(&self.shared, reason);
                    return;
                }
                Renewal::Failed(err) => {
                    if failing_since.is_none() {
                        failing_since = Some(now);
                        log::warn(
                            "renewal_failed",
                            &format!(
                                "cannot renew {}: {}; retrying, the command is stopped in {} \
                                 unless a renewal succeeds",
                                self.keys.names(),
                                crate::report::error::render(&err),
                                crate::supervise::lease::fmt(left)
                            ),
                            &[("key", (&self.keys.lock).into())],
                        );
                    }
                    next = Moment::now() + retry;
                }
            }
        }
    }
}
