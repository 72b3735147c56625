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
//!
//! **Asked to stop** (`--replace`). A replaceable exclusive holder on one server (not a
//! Cluster, not a quorum) waits between renewals in a `BLPOP` of its stop list
//! (`{L}:redlock:stop:FENCE`, which a replacer's acquire pushes to) on the connection it renews
//! on, instead of sleeping: one blocked client per holder, and no more requests than the
//! renewals (each wait ends when the next renewal is due). Such a holder starts the thread
//! [`LISTEN_AFTER`] after the acquire (or at the first renewal, if sooner): a command that ends
//! within a second costs nothing more, and a longer one learns of a request at once. The
//! renewal refuses to renew a holder that was asked (extend.lua), so on a Cluster, or when the
//! blocking pop is refused or its connection fails, the request is learnt at the next renewal.
//! Either way the holder renews no more, and the main thread stops the tree as on a lost lease.

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
    /// Who asked this holder to stop (`--replace`).
    replaced: Option<String>,
    stop: bool,
}

/// How soon after the acquire a holder that may be replaced starts listening for a request to
/// stop (see the module's comment).
pub const LISTEN_AFTER: Duration = Duration::from_secs(1);

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
    /// Who asked this holder to stop (`--replace`): the tree is to be stopped.
    pub replaced: Option<String>,
}

impl Heartbeat {
    /// Prepares the heartbeat for a lease confirmed at `timeline.sent`; the thread starts with
    /// [`Heartbeat::start_if_due`], unless the lease already covers `limit`. `replaceable`: the
    /// holder listens for a request to stop (`--replace`) on its stop list.
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
        replaceable: bool,
    ) -> Heartbeat {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                timeline,
                lost: None,
                replaced: None,
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
        // Listening needs the connection the renewals use to itself: one server, not a Cluster.
        let stop_list = standing.fence.filter(|_| {
            replaceable && !nodes.is_quorum() && nodes.servers().all(|s| !s.is_cluster())
        });
        let stop_list = stop_list.map(|fence| keys.stop_list(fence));
        let first_renewal = timeline.sent + lease.interval();
        let start_at = match stop_list {
            Some(_) => timeline.sent + lease.interval().min(LISTEN_AFTER),
            None => first_renewal,
        };
        let worker = Worker {
            shared: Arc::clone(&shared),
            stop_list,
            listen_paused: false,
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
            first_renewal: start_at,
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
            replaced: state.replaced.clone(),
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

fn report_replaced(shared: &Shared, by: String) {
    let mut state = shared.lock();
    if state.replaced.is_none() {
        state.replaced = Some(by);
    }
    drop(state);
    signals::wake();
}

struct Worker {
    shared: Arc<Shared>,
    /// The stop list this holder listens on between renewals (`--replace`); `None`: it does
    /// not (not replaceable, a Cluster or a quorum, or the server refused the blocking pop).
    stop_list: Option<String>,
    /// The last wait on the stop list failed (its connection): the renewals listen no more
    /// until one is confirmed, so a server out of reach is not asked more often.
    listen_paused: bool,
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
                    if state.stop || state.lost.is_some() || state.replaced.is_some() {
                        return;
                    }
                    let now = Moment::now();
                    if now >= next {
                        break;
                    }
                    if self.stop_list.is_some() && !self.listen_paused {
                        drop(state);
                        if let Some(by) = self.wait_for_stop(next - now) {
                            report_replaced(&self.shared, by);
                            return;
                        }
                        state = self.shared.lock();
                        continue;
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
                    self.listen_paused = false;
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
                Renewal::Replaced(by) => {
                    report_replaced(&self.shared, by);
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

impl Worker {
    /// Waits up to `block` for a request to stop on this holder's stop list, on the connection
    /// the renewals use: who asked, or `None` when none came (or the wait failed: a refused
    /// blocking pop stops the listening for good, a failed connection until the next confirmed
    /// renewal).
    fn wait_for_stop(&mut self, block: Duration) -> Option<String> {
        let key = self.stop_list.clone()?;
        // A blocking pop shorter than Redis's resolution is a sleep.
        if block < Duration::from_millis(10) {
            std::thread::sleep(block);
            return None;
        }
        self.nodes.set_timeout(self.attempt_timeout);
        let wire = match self.nodes.lend() {
            Some(wire) => Some(wire),
            None => self.nodes.connect().ok().and_then(|()| self.nodes.lend()),
        };
        let Some(mut wire) = wire else {
            self.listen_paused = true;
            return None;
        };
        if wire.set_timeouts(block + self.attempt_timeout).is_err() {
            self.listen_paused = true;
            return None;
        }
        let mut pop = redis::cmd("BLPOP");
        pop.arg(&key).arg(format!("{:.3}", block.as_secs_f64()));
        match pop.query::<Option<(String, String)>>(&mut wire) {
            Ok(popped) => {
                self.nodes.give_back(wire);
                popped.map(|(_, by)| by)
            }
            // Refused (an ACL without BLPOP, a server before 6.0): the renewals tell instead.
            Err(e) if e.code().is_some() => {
                self.nodes.give_back(wire);
                self.stop_list = None;
                None
            }
            Err(_) => {
                self.listen_paused = true;
                None
            }
        }
    }
}
