//! Taking the lock, waiting for it when asked: `--wait` is a fair queue.
//!
//! A waiter joins the key's queue with its first refused attempt (the acquire script adds its
//! *ticket*, a random name that is not its lock token), and keeps its place by trying again;
//! an entry not refreshed in time lapses and is skipped. The pace is the server's to set
//! (queue.lua): while the lock is held or paused, or further back than the first
//! `lock::QUEUE_NEAR` waiters (the *front*), a waiter tries again every
//! `lock::QUEUE_FAR_REFRESH` (at the front of a held lock, also when it expires) and its entry
//! lives three times that; the moment the lock comes free — a release, a forced release, a
//! resume, or a waiter that finds it free with someone else at the head — the front is put
//! on notice: woken, and its entries cut to `lock::QUEUE_ENTRY_LIFE`, refreshed every
//! `lock::QUEUE_REFRESH` by the living. So a queue of a thousand costs the server a few
//! attempts a second, and a killed or cut-off waiter at the front of a free lock holds the
//! queue up by at most 2 s; a head granted the lock while it could not act on it, by less
//! (below). The lock goes to the head of the queue only: the acquire script refuses anyone
//! else while waiters are queued, a non-waiting run included. The queue is one per key, whatever
//! the shape each waiter asks for (`lock::Shape`): once an exclusive run waits, shared runs that
//! come later queue behind it, so a stream of them cannot starve it. A shared or slotted taker
//! that heads the queue wakes the next waiter when it takes its share, since that waiter may
//! fit beside it. A key held with another shape than asked for ends the wait at once (78).
//! With `--max-waiters N` a waiter not yet queued joins only while fewer than N live entries
//! are (acquire.lua counts and joins in one step); refused, it is busy at once.
//!
//! **A dead waiter.** The grant to a waiter's later attempt (any but its first; see
//! [`waiter`], the waiter's life as one state machine) is *provisional*: a lease of
//! [`lock::PROVISIONAL`] (1 s, or the TTL if shorter), which only the waiter's own confirmation
//! (a renewal to its TTL, sent once it has read the grant) makes the full lease; its lease is
//! counted from that confirmation, and nothing runs before it. The server may grant the lock
//! to a waiter that cannot act on it — its attempt waits on the server (`on_server`) while its
//! host dies with the connection open, or while it is frozen — and such a head holds the queue up
//! for the provisional lease and one refresh (1.5 s), not a whole TTL; its `--once-per` window
//! is only 'granted', and goes to the next run if the grant lapses. A waiter whose grant lapsed
//! before it confirmed (it was frozen) waits again, at the back. The first attempt of a wait,
//! which was never queued, takes a free lock outright, as a run without `--wait` does: the
//! confirmation costs a round trip only where a queue was waited in. `model/redlock.pml`
//! (-DQUEUE) checks the bound, and finds it broken without the provisional lease.
//!
//! On one server (not a cluster, not a quorum) a waiter's next attempt waits *on the server*
//! for its grant (`on_server`). Elsewhere, or where the server refuses the blocking pop:
//!
//! A waiter is *notified*, not polling: it subscribes (on a second connection, in a small
//! thread) to its own channel, `{L}:redlock:released:TICKET`, on which a release wakes the head
//! of the queue and nobody else.
//! It tries again the moment a message arrives — about a network round trip after the holder's
//! release. Once subscribed it tries once more, closing the window in which a release could
//! have slipped between the refusal and the subscription. The refresh covers what sends no
//! message: a holder that crashed and let its key expire, a foreign client's `DEL`, a dead head
//! of the queue, a lost subscription, a server that lost the queue (the waiters join again).
//! Such a waiter tries again every `lock::QUEUE_REFRESH` wherever it stands (only the head is
//! told on its channel), and holds a connection to each node and a listener's beside it.
//!
//! Arrival is the server's clock on one server; in a quorum it is this host's clock, so that
//! every node orders the waiters alike (waiters on hosts whose clocks differ are ordered by
//! their clocks). A waiter that gives up (its wait runs out, a signal) leaves the queue at once.
//!
//! Behind Sentinel a waiter follows a failover: an attempt its master does not answer (killed,
//! frozen, cut off), or a master demoted under it, sends the waiter to the sentinels again for
//! as long as its wait lasts, and it waits on the master they name (`on_server`), keeping its
//! place where the queue reached the new master, joining at the back where it did not.
//!
//! The wait itself is a `sigtimedwait`, so INT/TERM/… end it at once with 128+N and nothing held.

mod on_server;
mod waiter;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use self::on_server::wait_for_grant;
use self::waiter::{Confirmation, Grant, Step, Waiter};
use crate::lock::keys::Keys;
use crate::lock::nodes::Nodes;
use crate::lock::nodes::Renewal;
use crate::lock::{self, Busy, Claim, QUEUE_REFRESH, Queueing, Refusal, Standing};
use crate::redis::server::Server;
use crate::report::error::{classify, is_server_reply, is_timeout, not_a_lock};
use crate::report::exit::Exit;
use crate::supervise::lease::Moment;
use crate::supervise::signals::{self, Event, Signals};

pub enum Taken {
    Acquired {
        fence: i64,
        /// The fences of the claim's other locks (`Keys::also`), in order.
        also: Vec<i64>,
        started_ms: i64,
        /// The slot taken (`--slots N`).
        slot: Option<u32>,
        /// When the successful acquire was sent: the lease is counted from here.
        sent: Moment,
        /// What the wait no longer needs; see [`Spent`].
        spent: Spent,
    },
    Busy(Busy),
    /// `--once-per`: another run already took this window; waiting longer changes nothing.
    Skipped(lock::Ran),
    /// A signal arrived while waiting.
    Interrupted(libc::c_int),
    /// `--replace`: a later replacer superseded this waiting one (who asked) before it ran.
    Superseded(String),
}

/// What a wait used and no longer needs once the lock is taken: its signal descriptor, which a
/// run drops once its command has started, not between the grant and the start.
#[derive(Default)]
pub struct Spent {
    _doorbell: Option<OwnedFd>,
}

pub struct Request<'a> {
    pub claim: Claim<'a>,
    pub wait: Option<Duration>,
    /// `--max-waiters N`: a waiter that finds N waiting gives up at once (see acquire.lua).
    pub max_waiters: Option<u32>,
    /// `--replace`: ask the exclusive holder to stop (as this, who asks), and wait until it
    /// has (see [`take`]).
    pub replace: Option<&'a str>,
    /// Connect timeout of the release listeners.
    pub timeout: Duration,
}

/// Tries to take the lock, and with `wait` keeps trying until it is free or the wait runs out.
/// A refusal is counted once, by the last attempt. `meanwhile` runs once, while the first
/// attempt is on the wire.
pub fn take(
    nodes: &mut Nodes,
    req: &Request,
    signals: &Signals,
    meanwhile: &mut dyn FnMut(),
) -> Result<Taken> {
    let keys = req.claim.keys;
    taking(nodes, req, signals, meanwhile).map_err(|e| {
        let doing = format!("cannot acquire {}", keys.names());
        not_a_lock(e, &doing, !keys.also.is_empty())
    })
}

fn taking(
    nodes: &mut Nodes,
    req: &Request,
    signals: &Signals,
    meanwhile: &mut dyn FnMut(),
) -> Result<Taken> {
    let start = Instant::now();
    let wait = req.wait.filter(|w| !w.is_zero());
    let sent = Moment::now();
    // A replacer waits for the holder it asked to stop: it queues like a waiter.
    let queues = wait.is_some() || req.replace.is_some();
    // Without a wait, this attempt's refusal is the run's; with one, only the last counts.
    let refusal = if queues {
        Refusal::Uncounted
    } else {
        Refusal::Count
    };
    // A waiter joins the queue with its first attempt. Its arrival is the server's clock on one
    // server; a quorum's nodes must order waiters alike, so there it is this host's clock.
    let ticket = match queues {
        true => Some(lock::new_token()?),
        false => None,
    };
    let queue = ticket.as_deref().map(|ticket| Queueing {
        ticket,
        arrival_us: nodes.is_quorum().then(now_us),
        max_waiters: req.max_waiters,
        replace: req.replace,
        waits: wait.is_some(),
        later: None,
    });
    let mut waiter = Waiter::new(queue);
    let mut first = nodes.acquire(&req.claim, refusal, queue.as_ref(), sent, Some(meanwhile));
    // A run that waits has time to get past a dropped connection (a CLIENT KILL, a proxy's
    // reset): it tries again, on a new connection, for --timeout, as its later attempts do.
    // Not after a timeout (the attempt may still run; its undoing is queued behind it), nor
    // after an answer of the server's.
    let mut sent = sent;
    let since = Instant::now();
    while queues
        && since.elapsed() < req.timeout
        && first.as_ref().is_err_and(worth_another_connection)
    {
        if let Event::Signal(sig) = signals.wait(Some(RETRY_PAUSE))
            && !signals::JOB_CONTROL.contains(&sig)
        {
            return Ok(Taken::Interrupted(sig));
        }
        sent = Moment::now();
        first = nodes.acquire(&req.claim, refusal, queue.as_ref(), sent, None);
    }
    let first = first.and_then(|a| {
        let step = waiter.answered(a, &req.claim, sent);
        settle(nodes, &mut waiter, &req.claim, step, &Busy::default())
    });
    let Some(queue) = queue else {
        return first;
    };
    // `--replace` without `--wait` waits as long as the holder it asked may take to stop: its
    // lease as the request found it (the holder renews no more once asked; frozen or dead, it
    // is stopped by its keeper before that lease ends), and the queue's hand-off.
    let wait = match (wait, &first) {
        (Some(wait), _) => wait,
        (None, Ok(Taken::Busy(busy))) if busy.replacing => {
            Duration::from_millis(busy.pttl_ms.max(0) as u64) + REPLACE_SLACK
        }
        // Nobody to replace (a holder that may not be replaced, a foreign one, a shared one, a
        // pause): busy, as a run without --wait is.
        (None, Ok(Taken::Busy(busy))) => {
            let busy = busy.clone();
            nodes.leave(req.claim.keys, queue.ticket);
            nodes.count_busy(req.claim.keys, req.claim.holder);
            return Ok(Taken::Busy(busy));
        }
        (None, _) => Duration::ZERO,
    };
    let until = start + wait.min(YEAR);
    // A waiter outlives its wait by at most its --timeout, whatever the server does (frozen,
    // cut off, gone): every connect and request of the wait, and of leaving it, ends by then.
    nodes.bound_by(Some(until + req.timeout));
    let (taken, left) = match first {
        // The queue is full: this run did not join it, and waits no longer.
        Ok(Taken::Busy(busy)) if busy.full.is_some() => {
            nodes.count_busy(req.claim.keys, req.claim.holder);
            nodes.bound_by(None);
            return Ok(Taken::Busy(busy));
        }
        Ok(Taken::Busy(busy)) => {
            wait_in_queue(nodes, req, signals, &mut waiter, &queue, busy, None, until)
        }
        // A grant too few replicas acknowledged was given back: a waiter with time left waits
        // on (a failover's new master may not have its replicas yet), at the back of the queue.
        Err(e) if wait > Duration::ZERO && lock::replicas::is_unacknowledged(&e) => wait_in_queue(
            nodes,
            req,
            signals,
            &mut waiter,
            &queue,
            Busy::default(),
            Some(e),
            until,
        ),
        // Refused for its records' layout, the first attempt wrote nothing on one server (the
        // scripts check them before any write): it joined no queue, and leaving one would
        // write (a wake-up for its ticket). In a quorum other nodes may have queued it.
        Err(e) if !nodes.is_quorum() && lock::record::is_layout(&e) => (Err(e), true),
        other => (other, false),
    };
    // A waiter that gives up leaves the queue at once, so the next one is not held up by it
    // (one that waited for its grant has left already). In a quorum a waiter also leaves once
    // a majority granted it the lock: the nodes keep it queued until then (see acquire.lua).
    if !left && (nodes.is_quorum() || !matches!(taken, Ok(Taken::Acquired { .. }))) {
        nodes.leave(req.claim.keys, queue.ticket);
    }
    nodes.bound_by(None);
    taken
}

/// Carries a step of the waiter's life through to an answer for the run: a provisional grant
/// is confirmed here (see [`waiter`]); a refusal is `busy` (`last`, for a waiter whose grant
/// lapsed before it was confirmed: it goes on waiting, at the back of the queue).
fn settle(
    nodes: &mut Nodes,
    waiter: &mut Waiter,
    claim: &Claim,
    step: Step,
    last: &Busy,
) -> Result<Taken> {
    let step = match step {
        Step::Confirm(grant) => {
            let confirmation = confirm(nodes, claim, &grant);
            waiter.confirmed(grant, confirmation, last)
        }
        step => step,
    };
    match step {
        Step::Over(taken) => taken,
        Step::Wait(busy) => Ok(Taken::Busy(busy)),
        Step::Confirm(_) => unreachable!("a confirmation is answered, never confirmed again"),
    }
}

/// Confirms a provisional grant: renews it to the claim's TTL, and says what came of it. The
/// lease of a confirmed grant starts at the confirmation's sending. A grant that lapsed before
/// the confirmation reached the server (this waiter was frozen or starved meanwhile, and the
/// queue went on without it) is waited for again. A confirmation that fails for another
/// reason, or finds that a later replacer asked this grantee to stop, gives the grant back.
fn confirm(nodes: &mut Nodes, claim: &Claim, grant: &Grant) -> Confirmation {
    let sent = Moment::now();
    let standing = Standing {
        fence: Some(grant.fence),
        started_ms: Some(grant.started_ms),
        holder: Some(claim.holder.clone()),
        also_fences: grant.also.clone(),
    };
    let renew = |nodes: &mut Nodes| {
        nodes.extend(
            claim.keys,
            claim.token,
            claim.ttl,
            &standing,
            claim.once.is_some(),
        )
    };
    // The connection may have been idle since the wait began, and dropped meanwhile; a failed
    // attempt dropped it too, so a second one reconnects. Not after a timeout: the renewal may
    // still run (a renewal run late only renews, it never shortens).
    let renewal = match renew(nodes) {
        Renewal::Failed(e) if !is_timeout(&e) => renew(nodes),
        other => other,
    };
    match renewal {
        Renewal::Confirmed => Confirmation::Confirmed(sent),
        Renewal::Lost { .. } => {
            crate::report::log::info(
                "grant_lapsed",
                &format!(
                    "{}: granted while this waiter could not confirm it within {}; waiting again",
                    claim.keys.lock,
                    crate::supervise::lease::fmt(lock::PROVISIONAL)
                ),
                &[("key", (&claim.keys.lock).into())],
            );
            Confirmation::Lapsed
        }
        Renewal::Failed(e) => {
            let _ = nodes.release(claim.keys, claim.token, None, None, None);
            Confirmation::Failed(e)
        }
        // A replacer asked before the confirmation: nothing of this run started; the grant is
        // given back (the waiter's life says what follows).
        Renewal::Replaced(by) => {
            let _ = nodes.release(claim.keys, claim.token, None, None, None);
            Confirmation::AskedToStop(by)
        }
    }
}

/// What a replacer without `--wait` waits beyond the lease of the holder it asked to stop: the
/// queue's hand-off (a provisional grant and a refresh) and a few round trips.
const REPLACE_SLACK: Duration = Duration::from_secs(5);

/// Whether an attempt that failed is worth sending again on a new connection: the old one was
/// dropped. Not after a timeout (the attempt may still run, and its undoing is queued behind
/// it: it would undo a retry with the same token), nor after an answer of the server's (a
/// refusal, or a grant too few replicas acknowledged).
fn worth_another_connection(e: &anyhow::Error) -> bool {
    !is_server_reply(e) && !is_timeout(e) && !lock::replicas::is_unacknowledged(e)
}

/// The pause between a waiter's first attempts while its connection keeps dropping.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A wait longer than a year is a year: `start + wait` must not overflow.
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Waits in the key's queue until this waiter is at its head when the lock is free, `until`
/// passes, or a signal arrives. `true` with the answer: the waiter has left the queue already.
#[allow(clippy::too_many_arguments)]
fn wait_in_queue(
    nodes: &mut Nodes,
    req: &Request,
    signals: &Signals,
    waiter: &mut Waiter,
    queue: &Queueing,
    mut busy: Busy,
    mut unacknowledged: Option<anyhow::Error>,
    until: Instant,
) -> (Result<Taken>, bool) {
    let keys = req.claim.keys;
    match &unacknowledged {
        Some(e) => crate::report::log::note(
            "waiting",
            &format!(
                "{}; waiting up to {} for the replicas to acknowledge a grant",
                crate::report::error::render(e),
                crate::supervise::lease::fmt(until.saturating_duration_since(Instant::now()))
            ),
            &[("key", (&keys.lock).into())],
        ),
        None => announce(keys, &busy, until),
    }
    let mut place = busy.ahead;
    // On one server (not a cluster), the next attempt waits on the server for this waiter's
    // grant: no listener, and no round trip after the release.
    let single = !nodes.is_quorum() && nodes.servers().all(|s| !s.is_cluster());
    if single
        && let Some(ended) = wait_for_grant(
            nodes,
            req,
            signals,
            waiter,
            &mut busy,
            &mut place,
            unacknowledged.take(),
            until,
        )
    {
        return (ended, true);
    }
    (
        wait_notified(
            nodes,
            req,
            signals,
            waiter,
            queue,
            busy,
            place,
            unacknowledged,
            until,
        ),
        false,
    )
}

/// Waits woken on the waiter's channel, trying again at each message and at least every
/// `QUEUE_REFRESH` (see the module's comment).
#[allow(clippy::too_many_arguments)]
fn wait_notified(
    nodes: &mut Nodes,
    req: &Request,
    signals: &Signals,
    waiter: &mut Waiter,
    queue: &Queueing,
    mut busy: Busy,
    mut place: usize,
    unacknowledged: Option<anyhow::Error>,
    until: Instant,
) -> Result<Taken> {
    let keys = req.claim.keys;
    // Several keys: a release of any of them may be the one this waiter waits for.
    let channels: Vec<String> = keys
        .each()
        .map(|k| format!("{}:{}", k.channel, queue.ticket))
        .collect();
    // Since when the servers have been out of reach, or refusing in a transient state.
    let mut unreachable_since: Option<Instant> = None;
    // `--replicas`: why the last grant did not count, while no later answer said otherwise.
    let mut unacked: Option<anyhow::Error> = unacknowledged;
    let _listeners: Vec<Listener> = nodes
        .servers()
        .map(|server| Listener::start(server.clone(), channels.clone(), req.timeout))
        .collect();
    loop {
        let now = Instant::now();
        if now >= until {
            if let Some(e) = unacked {
                return Err(e);
            }
            nodes.count_busy(keys, req.claim.holder);
            return Ok(Taken::Busy(busy));
        }
        // The next attempt also refreshes this waiter's queue entry, which lapses otherwise.
        let mut poll = match busy.pttl_ms {
            ms if ms >= 0 => Duration::from_millis(ms as u64 + 1),
            _ => QUEUE_REFRESH,
        }
        .min(QUEUE_REFRESH);
        if nodes.is_quorum() {
            // Contenders that split the nodes between them back off for different times.
            poll = poll.min(jitter(
                Duration::from_millis(20),
                Duration::from_millis(200),
            ));
        }
        match signals.wait(Some(poll.min(until - now))) {
            // Ctrl-Z while waiting: redlock holds nothing, so it may stop like any job.
            Event::Signal(libc::SIGTSTP) => {
                crate::supervise::child::stop_self();
                continue;
            }
            Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => continue,
            Event::Signal(sig) => return Ok(Taken::Interrupted(sig)),
            Event::Child => {
                crate::supervise::child::reap(0);
                continue;
            }
            Event::Wake | Event::Timeout => {}
        }
        let attempt = waiter.attempt(false);
        let mut sent = Moment::now();
        let mut answer =
            nodes.acquire(&req.claim, Refusal::Uncounted, attempt.as_ref(), sent, None);
        // A long wait may outlive one connection; the failed one was dropped, so this attempt
        // reconnects. Not after a timeout: that attempt's undoing is queued behind it
        // (`nodes/majority.rs`), and would undo a retry with the same token.
        if answer.as_ref().is_err_and(worth_another_connection) {
            sent = Moment::now();
            answer = nodes.acquire(&req.claim, Refusal::Uncounted, attempt.as_ref(), sent, None);
        }
        let attempt = match answer {
            Ok(a) => {
                unreachable_since = None;
                let step = waiter.answered(a, &req.claim, sent);
                match settle(nodes, waiter, &req.claim, step, &busy) {
                    Err(e) if lock::replicas::is_unacknowledged(&e) => {
                        unacked = Some(e);
                        continue;
                    }
                    other => {
                        unacked = None;
                        other?
                    }
                }
            }
            // A grant too few replicas acknowledged was given back: tried again at the next
            // poll while the wait lasts; a wait that runs out ends with why.
            Err(e) if lock::replicas::is_unacknowledged(&e) => {
                unacked = Some(e);
                continue;
            }
            Err(e) if is_timeout(&e) || classify(&e) != Exit::Unavailable => {
                return Err(e);
            }
            // Out of reach, or in a transient state (a failover, a node restarting, LOADING):
            // tried again at the next poll, for up to --timeout, as a waiter on one server
            // does; then the wait ends with the failure.
            Err(e) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= req.timeout {
                    return Err(e);
                }
                continue;
            }
        };
        match attempt {
            // Its entry lapsed (it was frozen, or cut off) and the queue filled up meanwhile.
            Taken::Busy(b) if b.full.is_some() => {
                nodes.count_busy(keys, req.claim.holder);
                return Ok(Taken::Busy(b));
            }
            Taken::Busy(b) => busy = b,
            taken => return Ok(taken),
        }
        moved(keys, &busy, &mut place);
    }
}

/// Says once where the waiter stands.
fn announce(keys: &Keys, busy: &Busy, until: Instant) {
    crate::report::log::note(
        "waiting",
        &format!(
            "waiting for {}: {} in line, {}; waiting up to {}",
            busy.lock(keys),
            ordinal(busy.ahead + 1),
            busy.describe(),
            crate::supervise::lease::fmt(until.saturating_duration_since(Instant::now()))
        ),
        &[
            ("key", (&keys.lock).into()),
            ("place", (busy.ahead + 1).into()),
        ],
    );
}

/// With `-v`, says when the waiter's place changed.
fn moved(keys: &Keys, busy: &Busy, place: &mut usize) {
    if busy.ahead != *place {
        *place = busy.ahead;
        crate::report::log::info(
            "queue_moved",
            &format!("{}: now {} in line", busy.lock(keys), ordinal(*place + 1)),
            &[("key", (&keys.lock).into()), ("place", (*place + 1).into())],
        );
    }
}

/// "1st", "2nd", "3rd", "4th", … "11th", "21st".
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// This host's clock in µs since the epoch.
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Says that a signal ended the wait, and returns the status for it (128+N).
pub fn interrupted(sig: libc::c_int, keys: &Keys) -> crate::report::exit::Exit {
    crate::report::log::ending(
        "interrupted",
        &format!(
            "{} while waiting for {}; nothing held",
            signals::name(sig),
            keys.names()
        ),
        &[],
        crate::report::exit::Exit::Signal(sig),
    )
}

/// A random duration in [lo, hi), from the OS random source.
fn jitter(lo: Duration, hi: Duration) -> Duration {
    let mut bytes = [0u8; 4];
    // SAFETY: the buffer is valid for its length; a short read only makes the delay less random.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let span = (hi - lo).as_micros() as u64;
    lo + Duration::from_micros(u64::from(u32::from_le_bytes(bytes)) % span.max(1))
}

/// The subscriber thread. It outlives nothing: dropping the listener tells it to stop.
struct Listener {
    done: Arc<AtomicBool>,
}

impl Listener {
    fn start(server: Server, channels: Vec<String>, timeout: Duration) -> Listener {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let spawned = thread::Builder::new()
            .name("release-listener".into())
            .stack_size(256 * 1024)
            .spawn(move || listen(&server, &channels, timeout, &flag));
        if spawned.is_err() {
            // Without the listener the bounded poll still finds the lock free.
            done.store(true, Ordering::Relaxed);
        }
        Listener { done }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn listen(server: &Server, channels: &[String], timeout: Duration, done: &AtomicBool) {
    // How often the thread looks at `done` while no message arrives.
    let tick = Duration::from_millis(200);
    while !done.load(Ordering::Relaxed) {
        let Ok(mut con) = server.connect_direct(timeout) else {
            thread::sleep(tick);
            continue;
        };
        let _ = con.set_timeouts(timeout);
        if con.subscribe(channels).is_err() {
            thread::sleep(tick);
            continue;
        }
        // Subscribed: one more attempt closes the race with a release that came just before.
        signals::wake();
        let _ = con.set_read_timeout(Some(tick));
        while !done.load(Ordering::Relaxed) {
            match con.recv_response() {
                Ok(_) => signals::wake(),
                Err(e) if e.is_timeout() => {}
                Err(_) => break,
            }
        }
    }
}
