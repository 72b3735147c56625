//! Taking the lock, waiting for it when asked.
//!
//! A waiter is *notified*, not polling: after the first refusal it subscribes (on a second
//! connection, in a small thread) to the lock's release channel, which the release script
//! publishes on, and retries the moment a message arrives — about a network round trip after the
//! holder's release. Once subscribed it retries once more, closing the window in which a release
//! could have slipped between the refusal and the subscription. A bounded poll covers what
//! sends no message: a holder that crashed and let its key expire (the retry is timed to the
//! key's own PTTL), a foreign client's `DEL`, or a lost subscription.
//!
//! The wait itself is a `sigtimedwait`, so INT/TERM/… end it at once with 128+N and nothing held.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::error::{is_server_reply, is_timeout};
use crate::keys::Keys;
use crate::lease::Moment;
use crate::lock::{Acquire, Busy, Claim, Refusal};
use crate::nodes::Nodes;
use crate::server::{Server, set_timeouts_direct};
use crate::signals::{self, Event, Signals};

/// The longest a waiter goes without asking again.
const MAX_POLL: Duration = Duration::from_secs(1);

pub enum Taken {
    Acquired {
        fence: i64,
        started_ms: i64,
        /// When the successful acquire was sent: the lease is counted from here.
        sent: Moment,
    },
    Busy(Busy),
    /// A signal arrived while waiting.
    Interrupted(libc::c_int),
}

pub struct Request<'a> {
    pub claim: Claim<'a>,
    pub wait: Option<Duration>,
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
    let start = Instant::now();
    let wait = req.wait.filter(|w| !w.is_zero());
    let sent = Moment::now();
    // Without a wait, this attempt's refusal is the run's; with one, only the last counts.
    let refusal = if wait.is_none() {
        Refusal::Count
    } else {
        Refusal::Uncounted
    };
    let first = nodes.acquire(&req.claim, refusal, sent, Some(meanwhile))?;
    let mut busy = match first {
        Acquire::Acquired { fence, started_ms } => {
            return Ok(Taken::Acquired {
                fence,
                started_ms,
                sent,
            });
        }
        Acquire::Busy(busy) => busy,
    };
    let Some(wait) = wait else {
        return Ok(Taken::Busy(busy));
    };
    // A wait longer than a year is a year: `start + wait` must not overflow.
    let until = start + wait.min(Duration::from_secs(365 * 24 * 3600));
    let _listeners: Vec<Listener> = nodes
        .servers()
        .map(|server| Listener::start(server.clone(), req.claim.keys.channel.clone(), req.timeout))
        .collect();
    crate::log::info(
        "waiting",
        &format!(
            "{} is {}; waiting up to {}",
            req.claim.keys.lock,
            busy.describe(),
            crate::lease::fmt(wait)
        ),
        &[("key", (&req.claim.keys.lock).into())],
    );
    loop {
        let now = Instant::now();
        if now >= until {
            nodes.count_busy(req.claim.keys);
            return Ok(Taken::Busy(busy));
        }
        let mut poll = match busy.pttl_ms {
            ms if ms >= 0 => Duration::from_millis(ms as u64 + 1).min(MAX_POLL),
            _ => MAX_POLL,
        };
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
                // SAFETY: stopping ourselves has no memory effects.
                unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
                continue;
            }
            Event::Signal(sig) if signals::JOB_CONTROL.contains(&sig) => continue,
            Event::Signal(sig) => return Ok(Taken::Interrupted(sig)),
            Event::Child => {
                crate::child::reap(0);
                continue;
            }
            Event::Wake | Event::Timeout => {}
        }
        let sent = Moment::now();
        let attempt = match nodes.acquire(&req.claim, Refusal::Uncounted, sent, None) {
            Ok(a) => a,
            // A long wait may outlive one connection; the failed one was dropped, so this
            // attempt reconnects. Not after a timeout: that attempt's undoing is queued behind
            // it (nodes.rs), and would undo a retry with the same token.
            Err(e) if !is_server_reply(&e) && !is_timeout(&e) => {
                let sent = Moment::now();
                let retry = nodes.acquire(&req.claim, Refusal::Uncounted, sent, None)?;
                if let Acquire::Acquired { fence, started_ms } = retry {
                    return Ok(Taken::Acquired {
                        fence,
                        started_ms,
                        sent,
                    });
                }
                retry
            }
            Err(e) => return Err(e),
        };
        match attempt {
            Acquire::Acquired { fence, started_ms } => {
                return Ok(Taken::Acquired {
                    fence,
                    started_ms,
                    sent,
                });
            }
            Acquire::Busy(b) => busy = b,
        }
    }
}

/// Says that a signal ended the wait, and returns the status for it (128+N).
pub fn interrupted(sig: libc::c_int, keys: &Keys) -> crate::exit::Exit {
    crate::log::error(
        "interrupted",
        &format!(
            "{} while waiting for {}; nothing held",
            signals::name(sig),
            keys.lock
        ),
        &[],
    );
    crate::exit::Exit::Signal(sig)
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
    fn start(server: Server, channel: String, timeout: Duration) -> Listener {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let spawned = thread::Builder::new()
            .name("release-listener".into())
            .stack_size(256 * 1024)
            .spawn(move || listen(&server, &channel, timeout, &flag));
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

fn listen(server: &Server, channel: &str, timeout: Duration, done: &AtomicBool) {
    // How often the thread looks at `done` while no message arrives.
    let tick = Duration::from_millis(200);
    while !done.load(Ordering::Relaxed) {
        let Ok(mut con) = server.connect_direct(timeout) else {
            thread::sleep(tick);
            continue;
        };
        let _ = set_timeouts_direct(&con, timeout);
        let mut pubsub = con.as_pubsub();
        if pubsub.subscribe(channel).is_err() {
            thread::sleep(tick);
            continue;
        }
        // Subscribed: one more attempt closes the race with a release that came just before.
        signals::wake();
        let _ = pubsub.set_read_timeout(Some(tick));
        while !done.load(Ordering::Relaxed) {
            match pubsub.get_message() {
                Ok(_) => signals::wake(),
                Err(e) if e.is_timeout() => {}
                Err(_) => break,
            }
        }
    }
}
