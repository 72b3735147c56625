//! Waiting on one server: the path `--wait` takes where the lock lives on a single Redis (not a
//! cluster, not a quorum). Apart from the queue protocol in the parent module because it is a
//! different way of waiting, with its own connection handling, signal polling and undoing; the
//! notified wait there is the fallback when this one cannot run.
//!
//! A waiter's next attempt waits *on the server*, queued behind `BLPOP` of the waiter's grant
//! list, which the release that makes this waiter the head pushes to, so the server runs it in
//! the same pass as the release; the main thread waits for the answer and its signals at once,
//! so the answer wakes the thread that starts the command ([`wait_for_grant`]). It waits on the
//! connection its first attempt used: one connection per waiter.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::waiter::{Step, Waiter};
use super::{Request, Spent, Taken, moved, settle};
use crate::lock::nodes::Nodes;
use crate::lock::{self, Acquire, Busy, QUEUE_REFRESH};
use crate::redis::wire::Wire;
use crate::report::error::{is_readonly, is_server_reply, is_timeout, redis_errors};
use crate::supervise::lease::Moment;
use crate::supervise::signals::{self, Event, Signals};

/// Waits on one server for this waiter's turn. One attempt at a time waits on the server,
/// queued behind `BLPOP` of the waiter's grant list (`lock::send_after_grant`), on the
/// connection the first attempt used: the release that makes this waiter the head pushes to
/// the list, and the server runs the attempt in the same pass, so the waiter learns it holds
/// the lock one network trip after the release. A refused attempt is the queue entry's refresh;
/// how long the next one waits on the server follows from the refusal ([`block_after`]). A
/// grant to a queued waiter is provisional and counted from its confirmation, so a long wait
/// on the server costs the lease nothing.
///
/// The main thread waits for the answer and for its signals at once (`poll` on the socket and
/// a signalfd), so the answer wakes the very thread that starts the command. A waiter that
/// gives up leaves the queue at once, which lets its attempt through, then reads that attempt
/// (a round trip): one that took the lock meanwhile is undone before redlock goes on. An
/// attempt unanswered its block plus `--timeout` after it was sent is a timeout, abandoned
/// behind itself on its connection. `None`: the server refused the blocking pop, and the
/// caller waits the notified way instead.
#[allow(clippy::too_many_arguments)]
pub(super) fn wait_for_grant(
    nodes: &mut Nodes,
    req: &Request,
    signals: &Signals,
    waiter: &mut Waiter,
    busy: &mut Busy,
    place: &mut usize,
    unacknowledged: Option<anyhow::Error>,
    until: Instant,
) -> Option<Result<Taken>> {
    // The queue as every attempt of this wait carries it (the ticket, the options): the same
    // whichever attempt is on the wire.
    let queue = waiter.attempt(false)?;
    let keys = req.claim.keys;
    let server = nodes.servers().next().cloned()?;
    let doorbell = signals.readable().ok()?;
    // The pace at the front of a free lock: at most a tenth of the TTL, so that a waiter whose
    // TTL is short still tries again well within it.
    let fast = (req.claim.ttl / 10)
        .min(req.timeout / 2)
        .clamp(Duration::from_millis(10), QUEUE_REFRESH);
    let read_timeout = req.timeout + lock::QUEUE_FAR_REFRESH;
    // `--replicas`: WAIT follows each attempt, and makes a refused one no slower than its block.
    let ack = nodes.ack(req.claim.ttl);
    let mut con: Option<Wire> = nodes.lend();
    if let Some(c) = &con
        && c.set_timeouts(read_timeout).is_err()
    {
        con = None;
    }
    // The attempt on `con` whose answer is still to be read: when it was sent (for the lease,
    // and for its timeout), and how long it waits on the server.
    let mut in_flight: Option<(Moment, Instant, Duration)> = None;
    // Since when the server has been out of reach (no connection, or a connection lost): for
    // `--timeout` it is retried, then the wait ends with the failure (69), as on the notified
    // path, rather than waiting out `--wait` to report a busy lock it can no longer see.
    let mut unreachable_since: Option<Instant> = None;
    // The next attempt is to run at once, waiting on the server for no push: on a connection
    // made anew (the last one was lost), what this waiter knew of the queue may be gone with it
    // — a failover, a restart or a FLUSHALL loses the queue and the lock with it —; and after
    // an attempt the server could not run (it did not know the script, as after a restart).
    let mut at_once = false;
    // Sentinel: a master that stops answering is asked about again for as long as the wait
    // lasts ([`follow`]), since a failover gives the service a new one. Why the master could
    // not be used, while it could not: what the wait ends with if it runs out meanwhile.
    let sentinel = server.is_sentinel();
    let mut unanswered: Option<anyhow::Error> = None;
    // The master answered a new connection while the attempt on the old one did not.
    let mut answered_anew = false;
    let look_pace = fast.max(LOOKUP_PACE);
    // The waiter outlives its wait by at most its --timeout: each connect and each read is
    // given at most what is left before then (`nodes` are bound by it too, `wait::taking`).
    let end = until + req.timeout;
    let within = |now: Instant| {
        req.timeout
            .min(end.saturating_duration_since(now))
            .max(Duration::from_millis(1))
    };
    // `--replicas`: why the last grant did not count (too few replicas acknowledged it, and
    // it was given back), while no later answer said otherwise; and when the next attempt is
    // due, at a bounded pace (a failover's new master may not have its replicas yet).
    let mut unacked = unacknowledged;
    let mut retry_at = unacked
        .as_ref()
        .map(|_| Instant::now() + UNACKNOWLEDGED_PACE);
    if unacked.is_some() {
        at_once = true;
    }
    let ended = loop {
        let now = Instant::now();
        if now >= until {
            if let Some(e) = unacked.take() {
                break Err(e);
            }
            if let Some(e) = unanswered.take() {
                // An attempt unanswered on a master out of reach is abandoned behind itself.
                if in_flight.take().is_some()
                    && let Some(mut lost) = con.take()
                {
                    lock::abandon_single(&mut lost, keys, req.claim.token);
                }
                break Err(e);
            }
            break Ok(Taken::Busy(busy.clone()));
        }
        let c = match con.as_mut() {
            Some(c) => c,
            None => match server.connect_direct(within(now)) {
                Ok(c) => {
                    let _ = c.set_timeouts(read_timeout);
                    at_once = true;
                    if unanswered.take().is_some() {
                        followed(keys, &c);
                    }
                    con.insert(c)
                }
                Err(e) => {
                    let since = *unreachable_since.get_or_insert(now);
                    if !sentinel && now.duration_since(since) >= req.timeout {
                        break Err(e);
                    }
                    let pace = if sentinel {
                        unanswered = Some(e);
                        look_pace
                    } else {
                        fast
                    };
                    match wait_for(signals, &doorbell, None, pace.min(until - now)) {
                        Waited::Interrupted(sig) => break Ok(Taken::Interrupted(sig)),
                        Waited::Stop => crate::supervise::child::stop_self(),
                        Waited::Nothing => {}
                    }
                    continue;
                }
            },
        };
        let (sent, sent_at, block) = match in_flight {
            Some(sent) => sent,
            None if retry_at.is_some_and(|at| at > now) => {
                let pause = retry_at.map_or(Duration::ZERO, |at| at - now);
                match wait_for(signals, &doorbell, None, pause.min(until - now)) {
                    Waited::Interrupted(sig) => break Ok(Taken::Interrupted(sig)),
                    Waited::Stop => crate::supervise::child::stop_self(),
                    Waited::Nothing => {}
                }
                continue;
            }
            None => {
                retry_at = None;
                let block = if std::mem::take(&mut at_once) {
                    AT_ONCE
                } else {
                    waiter.pace(block_after(busy, fast))
                };
                let sent = (Moment::now(), Instant::now(), block);
                let capped = ack.map(|a| a.at_most(block));
                let attempt = waiter.attempt(true).unwrap_or(queue);
                if lock::send_after_grant(c, &req.claim, &attempt, block, capped).is_err() {
                    unreachable_since.get_or_insert(now);
                    con = None;
                    continue;
                }
                *in_flight.insert(sent)
            }
        };
        let answer_due = sent_at + block + req.timeout;
        let limit = until.min(answer_due).saturating_duration_since(now);
        let mut ready = c.reply_ready();
        if !ready {
            match wait_for(signals, &doorbell, Some(c.fd()), limit) {
                Waited::Interrupted(sig) => break Ok(Taken::Interrupted(sig)),
                // Stopped with an attempt queued on the server, the waiter could be granted
                // the lock while it cannot run, and hold it up to the TTL: out of the queue
                // first (its attempt read, and undone if it took the lock); once continued,
                // its next attempt joins at the back.
                Waited::Stop => {
                    step_out(nodes, req, &queue, &mut con, true, end);
                    in_flight = None;
                    crate::supervise::child::stop_self();
                    continue;
                }
                Waited::Nothing => {}
            }
            ready = c.reply_ready();
        }
        if !ready {
            if Instant::now() < answer_due {
                continue;
            }
            if sentinel {
                // The master does not answer: frozen, cut off, or gone. The sentinels are asked
                // again; the attempt stays on its connection until another master is named.
                let old = c.peer();
                let again = server.connect_direct(within(Instant::now()));
                match again {
                    // The same master answers a new connection: the attempt on the old one is
                    // waited for once more (it is answered when the server gets to it); if it
                    // still is not, that connection is dead, and the new one is used.
                    Ok(new) if new.peer() == old && old.is_some() && !answered_anew => {
                        answered_anew = true;
                        in_flight = Some((sent, Instant::now(), block));
                        drop(new);
                    }
                    // Another master (a failover): the attempt is abandoned behind itself on
                    // the old one, whose undoing can only meet the old master, and the next
                    // attempt runs at once on the new one.
                    Ok(new) => {
                        if let Some(mut lost) = con.take() {
                            lock::abandon_single(&mut lost, keys, req.claim.token);
                        }
                        let _ = new.set_timeouts(read_timeout);
                        followed(keys, &new);
                        con = Some(new);
                        in_flight = None;
                        at_once = true;
                        answered_anew = false;
                        unanswered = None;
                        unreachable_since = None;
                    }
                    Err(e) => {
                        unanswered = Some(e);
                        let Some(c) = con.as_mut() else { continue };
                        let left = until.saturating_duration_since(Instant::now());
                        match wait_for(signals, &doorbell, Some(c.fd()), look_pace.min(left)) {
                            Waited::Interrupted(sig) => break Ok(Taken::Interrupted(sig)),
                            // Nothing can be read from a master out of reach: the attempt is
                            // abandoned, and the next one, once continued, joins at the back.
                            Waited::Stop => {
                                if let Some(mut lost) = con.take() {
                                    lock::abandon_single(&mut lost, keys, req.claim.token);
                                }
                                in_flight = None;
                                step_out(nodes, req, &queue, &mut con, false, end);
                                crate::supervise::child::stop_self();
                            }
                            Waited::Nothing => {}
                        }
                    }
                }
                continue;
            }
            // No answer: abandoned behind itself, as for any timed-out acquire.
            if let Some(mut lost) = con.take() {
                lock::abandon_single(&mut lost, keys, req.claim.token);
            }
            in_flight = None;
            break Err(
                anyhow::Error::new(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer",
                )))
                .context(format!("cannot acquire {}", keys.lock)),
            );
        }
        in_flight = None;
        // Its reply has begun; the rest of it (the replicas' acknowledgement) is read within
        // what is left.
        let _ = c.set_timeouts(read_timeout.min(within(Instant::now())));
        match lock::grant_reply(c, &req.claim, &queue, ack) {
            Ok(answer) => {
                unreachable_since = None;
                unanswered = None;
                answered_anew = false;
                if matches!(answer, Some(Acquire::Busy(_))) {
                    // Another holds it now: a wait that runs out is busy, not unacknowledged.
                    unacked = None;
                }
                let Some(answer) = answer else {
                    at_once = true;
                    continue;
                };
                match waiter.answered(answer, &req.claim, sent) {
                    Step::Wait(b) => {
                        *busy = b;
                        moved(keys, busy, place);
                    }
                    Step::Over(ended) => break ended,
                    // A provisional grant is confirmed on this same connection, handed back
                    // for it; one that lapsed before its confirmation is waited for again.
                    step => {
                        if let Some(c) = con.take() {
                            nodes.give_back(c);
                        }
                        match settle(nodes, waiter, &req.claim, step, busy) {
                            // The grant lapsed: what the waiter knew of the lock is stale, and
                            // the next attempt runs at once.
                            Ok(Taken::Busy(_)) => {
                                con = nodes.lend();
                                at_once = true;
                            }
                            // Its confirmation too few replicas acknowledged: given back, and
                            // tried again while the wait lasts, as a grant's.
                            Err(e)
                                if lock::replicas::is_unacknowledged(&e)
                                    && Instant::now() < until =>
                            {
                                unacked = Some(e);
                                retry_at = Some(Instant::now() + UNACKNOWLEDGED_PACE);
                                con = nodes.lend();
                                at_once = true;
                            }
                            other => break other,
                        }
                    }
                }
            }
            // Sentinel: a master demoted under the attempt (a failover): the next attempt runs
            // at once on the master the sentinels name now.
            Err(e) if sentinel && demoted(&e) => {
                unanswered = Some(e);
                con = None;
            }
            Err(e) if is_server_reply(&e) => {
                if let Some(c) = con.take() {
                    nodes.give_back(c);
                }
                return None;
            }
            // A grant too few replicas acknowledged was given back: while the wait lasts, the
            // waiter tries again at a bounded pace — behind Sentinel on the master a majority
            // of the sentinels name now (a failover) —; the wait that runs out ends with why.
            Err(e) if lock::replicas::is_unacknowledged(&e) => {
                if unacked.is_none() {
                    unacknowledged_again(keys, &e);
                }
                unacked = Some(e);
                retry_at = Some(Instant::now() + UNACKNOWLEDGED_PACE);
                at_once = true;
                if sentinel && let Ok(new) = server.connect_direct(within(Instant::now())) {
                    let old = con.as_ref().and_then(Wire::peer);
                    if new.peer() != old || old.is_none() {
                        let _ = new.set_timeouts(read_timeout);
                        followed(keys, &new);
                        con = Some(new);
                    }
                }
            }
            // A timed-out attempt may still run on the server (a stalled one runs what is
            // queued when it resumes): its undoing goes behind it on the same connection, and
            // the wait ends with the timeout, as for any acquire.
            Err(e) if is_timeout(&e) => {
                if let Some(mut lost) = con.take() {
                    lock::abandon_single(&mut lost, keys, req.claim.token);
                }
                break Err(e);
            }
            // A lost connection: a new one, and the next attempt.
            Err(e) => {
                unreachable_since.get_or_insert(now);
                if sentinel {
                    unanswered = Some(e);
                }
                con = None;
            }
        }
    };
    let mut ended = ended;
    match &mut ended {
        Ok(Taken::Acquired { spent, .. }) => {
            *spent = Spent {
                _doorbell: Some(doorbell),
            };
        }
        _ => step_out(nodes, req, &queue, &mut con, in_flight.is_some(), end),
    }
    // What is left of the connection goes back: nothing of it is left to read.
    if let Some(c) = con.take() {
        nodes.give_back(c);
    }
    if matches!(ended, Ok(Taken::Busy(_))) {
        nodes.count_busy(keys, req.claim.holder);
    }
    Some(ended)
}

/// With `-v`, says that a grant too few replicas acknowledged was given back, and that the
/// waiter tries again while its wait lasts.
fn unacknowledged_again(keys: &crate::lock::keys::Keys, err: &anyhow::Error) {
    crate::report::log::info(
        "grant_unacknowledged",
        &format!(
            "{}; trying again while the wait lasts",
            crate::report::error::render(err)
        ),
        &[("key", (&keys.lock).into())],
    );
}

/// The pause before a waiter whose grant too few replicas acknowledged tries again.
const UNACKNOWLEDGED_PACE: Duration = Duration::from_millis(500);

/// The least pause between two Sentinel lookups while the master is out of reach.
const LOOKUP_PACE: Duration = Duration::from_millis(100);

/// Whether the server turned replica under an attempt: a write refused (`READONLY`), or its
/// blocking pop ended by the change (`UNBLOCKED`).
fn demoted(err: &anyhow::Error) -> bool {
    is_readonly(err) || redis_errors(err).any(|e| e.code() == Some("UNBLOCKED"))
}

/// With `-v`, says that the wait goes on on another connection after its master was out of
/// reach: the master the sentinels name now (another, after a failover).
fn followed(keys: &crate::lock::keys::Keys, con: &Wire) {
    let at = con
        .peer()
        .map_or_else(|| "it".to_owned(), |a| a.to_string());
    crate::report::log::info(
        "master_followed",
        &format!(
            "{}: the master was out of reach; waiting on the master the sentinels name now, {at}",
            keys.lock
        ),
        &[("key", (&keys.lock).into()), ("master", at.as_str().into())],
    );
}

/// The block of an attempt that is to run at once: the shortest a blocking pop takes.
const AT_ONCE: Duration = Duration::from_millis(1);

/// How long a waiter's next attempt waits on the server for a push, after `busy`: at the
/// front of a free lock (others ahead, none holding), `fast`, the front's pace (queue.lua);
/// at the front of a held lock, until it expires, so that a holder that died without a
/// release is followed at once; otherwise `lock::QUEUE_FAR_REFRESH`, since a release, a
/// forced one, a resume and a waiter that finds the lock free all wake the front.
fn block_after(busy: &Busy, fast: Duration) -> Duration {
    let far = lock::QUEUE_FAR_REFRESH;
    // Several keys: at the front of one that is free, the front's pace, whatever holds another.
    if busy.hurry {
        return fast;
    }
    if busy.ahead >= lock::QUEUE_NEAR || busy.pause.is_some() {
        return far;
    }
    match busy.pttl_ms {
        -2 => fast,
        ms if ms >= 0 => Duration::from_millis(ms as u64 + 1).clamp(fast.min(far), far),
        _ => far,
    }
}

/// Takes a waiter out of the queue at once, so the next one is not held up by it, then reads
/// its attempt still on the server (`in_flight`): one that took the lock meanwhile holds it for
/// nobody and is undone; one that was refused joined the queue again and is taken out again;
/// one that does not answer is abandoned behind itself.
fn step_out(
    nodes: &mut Nodes,
    req: &Request,
    queue: &lock::Queueing,
    con: &mut Option<Wire>,
    in_flight: bool,
    end: Instant,
) {
    let keys = req.claim.keys;
    nodes.leave(keys, queue.ticket);
    let Some(c) = con.as_mut().filter(|_| in_flight) else {
        return;
    };
    // A frozen server answers nothing: the read waits no longer than the waiter may.
    let left = end
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = c.set_timeouts(left);
    match lock::grant_reply(c, &req.claim, queue, nodes.ack(req.claim.ttl)) {
        Ok(Some(Acquire::Acquired { .. })) => {
            let _ = nodes.release(keys, req.claim.token, None, None, None);
        }
        Ok(Some(Acquire::Busy(_))) => nodes.leave(keys, queue.ticket),
        Err(e) if is_timeout(&e) => {
            if let Some(mut lost) = con.take() {
                lock::abandon_single(&mut lost, keys, req.claim.token);
            }
        }
        _ => {}
    }
}

/// What a wait for the socket or a signal came to.
enum Waited {
    /// The socket is readable, `limit` passed, or a signal that changes nothing came.
    Nothing,
    /// A signal ends the wait (INT, TERM, …).
    Interrupted(libc::c_int),
    /// Ctrl-Z (SIGTSTP): the waiter is to stop, once nothing of it can be granted the lock.
    Stop,
}

/// Waits until `socket` is readable, a signal arrives, or `limit` passes. Job-control signals
/// other than SIGTSTP, and children (reaped), do not end the wait.
fn wait_for(
    signals: &Signals,
    doorbell: &OwnedFd,
    socket: Option<RawFd>,
    limit: Duration,
) -> Waited {
    let mut fds = [
        libc::pollfd {
            fd: doorbell.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: socket.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let limit = limit.min(Duration::from_secs(24 * 3600));
    let ts = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: limit.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` and `ts` outlive the call; a null sigmask leaves the mask as it is. A
    // negative fd is ignored by ppoll.
    unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    if fds[0].revents == 0 {
        return Waited::Nothing;
    }
    match signals.poll() {
        Event::Signal(libc::SIGTSTP) => Waited::Stop,
        Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => Waited::Nothing,
        Event::Signal(sig) => Waited::Interrupted(sig),
        Event::Child => {
            crate::supervise::child::reap(0);
            Waited::Nothing
        }
        Event::Wake | Event::Timeout => Waited::Nothing,
    }
}
