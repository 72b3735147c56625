//! A waiter's life, as one state machine: what each answer of the server means for a run that
//! waits (`--wait`, `--replace`), read in one place by every way of waiting (on one server, a
//! cluster, a quorum), for every shape, `--max-waiters`, `--replace` and several keys.
//!
//! ```text
//!            first attempt (takes a free lock outright)
//! NotQueued ─┬─ taken ──────────────────────────────────────────► Holder   (lease from the first send)
//!            ├─ refused: joins the queue ─► Queued
//!            └─ full, skipped, another shape ─► GivenUp
//!
//!            later attempt (refreshes the entry; granted only provisionally)
//! Queued ────┬─ refused ─► Queued           (an entry that lapsed joins again, at the back)
//!            ├─ granted ─► Granted ─ confirm ┬─ confirmed ─► Holder   (lease from the confirmation's send)
//!            │                               ├─ lapsed, or taken by another ─► Queued (at the back)
//!            │                               ├─ a replacer asked, this one a replacer ─► GivenUp (superseded)
//!            │                               └─ a replacer asked, this one a plain waiter ─► Queued
//!            ├─ superseded by a later replacer ─► GivenUp
//!            └─ full (its entry lapsed, and the queue filled meanwhile) ─► GivenUp
//!
//! any ─ the wait runs out, a signal, a failure ─► GivenUp (the driver leaves the queue)
//! ```
//!
//! The rules the server keeps for it (acquire.lua, acquire_rest.lua, queue.lua):
//! - only a first attempt is granted the lock outright; every later one may have run without
//!   its waiter (queued behind a blocking pop that timed out while the waiter was frozen), so
//!   it is granted a [`crate::lock::PROVISIONAL`] lease, and nothing runs before the waiter's own
//!   confirmation, from whose send the lease is counted. So a waiter never starts under a lease
//!   counted from an attempt sent seconds before its grant, and never gives up because it
//!   waited;
//! - an entry lives from its attempt's *send* (the waiter reckons the server's clock from the
//!   reply before), so a frozen waiter keeps its place no longer than an entry's life after its
//!   last act, and the next attempt runs within the life the server gave ([`Waiter::pace`]);
//! - an entry that lapsed is no place: the next attempt joins at the back, and `--max-waiters`
//!   counts live entries only, so a thawed waiter never joins beside the newcomer that took
//!   its place;
//! - the last replacer to arrive runs: one that joins supersedes the replacers still waiting,
//!   and a replacer that asks a provisional grantee to stop makes it give up at its
//!   confirmation.
//!
//! The drivers (`mod.rs`, `on_server.rs`) do the I/O; this type holds the state and decides.

use std::time::{Duration, Instant};

use crate::lock::{Acquire, Busy, Claim, Queueing, Shape};
use crate::report::error::fail;
use crate::report::exit::Exit;
use crate::supervise::lease::Moment;

use super::{Spent, Taken};

/// Where a waiter is in its life (see the module's diagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Its first attempt is still to be answered.
    NotQueued,
    /// Refused, with an entry in the queue (which may lapse).
    Queued,
    /// Granted the lock provisionally: its confirmation is on its way.
    Granted,
    /// The lock is its own; the lease counts from the send of what made it so.
    Holder,
    /// The wait is over without the lock.
    GivenUp,
}

/// A provisional grant, to be confirmed.
pub struct Grant {
    pub fence: i64,
    pub started_ms: i64,
    pub slot: Option<u32>,
    pub also: Vec<i64>,
}

/// What came of a confirmation.
pub enum Confirmation {
    /// Renewed to the claim's TTL; sent at this moment.
    Confirmed(Moment),
    /// The grant lapsed before the confirmation reached the server (the waiter was frozen or
    /// starved), or another holds the lock now.
    Lapsed,
    /// A replacer asked this grantee to stop (who asked) before it started anything; the grant
    /// was given back.
    AskedToStop(String),
    /// It failed otherwise; the grant was given back.
    Failed(anyhow::Error),
}

/// What the driver is to do next.
pub enum Step {
    /// The wait is over: taken, refused for good, or failed.
    Over(anyhow::Result<Taken>),
    /// A provisional grant: confirm it, and hand the result to [`Waiter::confirmed`].
    Confirm(Grant),
    /// Refused: wait in the queue, and try again at the pace [`Waiter::pace`] allows.
    Wait(Busy),
}

pub struct Waiter<'a> {
    /// The waiter's place in the queue; `None` for a run that does not queue.
    base: Option<Queueing<'a>>,
    state: State,
    /// The server's clock as the last refusal read it, and when that reply arrived.
    clock: Option<(i64, Instant)>,
    /// How long the entry lives from the last attempt.
    life: Option<Duration>,
}

impl<'a> Waiter<'a> {
    pub fn new(base: Option<Queueing<'a>>) -> Waiter<'a> {
        Waiter {
            base,
            state: State::NotQueued,
            clock: None,
            life: None,
        }
    }

    #[cfg(test)]
    pub fn state(&self) -> State {
        self.state
    }

    /// The queue as the next attempt carries it. `behind_pop`: the attempt waits on the
    /// server behind a blocking pop, so it may run well after it was sent; it then says when
    /// it was sent, on the server's clock as this waiter reckons it.
    pub fn attempt(&self, behind_pop: bool) -> Option<Queueing<'a>> {
        let mut q = self.base?;
        if self.state != State::NotQueued {
            let sent = self
                .clock
                .filter(|_| behind_pop)
                .map(|(ms, at)| ms + at.elapsed().as_millis() as i64);
            q.later = Some(sent);
        }
        Some(q)
    }

    /// At most how long the next attempt may wait on the server: a third of the life the
    /// server gave the entry, so that a living waiter refreshes it twice over before it lapses.
    pub fn pace(&self, wanted: Duration) -> Duration {
        match self.life {
            Some(life) => wanted.min(life / 3),
            None => wanted,
        }
    }

    /// What an attempt's answer means. `sent`: when the attempt was sent (a lease taken
    /// outright counts from it).
    pub fn answered(&mut self, answer: Acquire, claim: &Claim, sent: Moment) -> Step {
        match answer {
            Acquire::Acquired {
                fence,
                started_ms,
                slot,
                provisional,
                also,
            } => {
                if provisional {
                    self.state = State::Granted;
                    return Step::Confirm(Grant {
                        fence,
                        started_ms,
                        slot,
                        also,
                    });
                }
                self.state = State::Holder;
                Step::Over(Ok(Taken::Acquired {
                    fence,
                    also,
                    started_ms,
                    slot,
                    sent,
                    spent: Spent::default(),
                }))
            }
            Acquire::Busy(busy) if busy.full.is_some() => {
                self.state = State::GivenUp;
                Step::Over(Ok(Taken::Busy(busy)))
            }
            Acquire::Busy(busy) => {
                self.clock = Some((busy.server_now_ms, Instant::now()));
                self.life = busy.life;
                if self.base.is_some() {
                    self.state = State::Queued;
                }
                Step::Wait(busy)
            }
            Acquire::Skipped(ran) => {
                self.state = State::GivenUp;
                Step::Over(Ok(Taken::Skipped(ran)))
            }
            Acquire::Superseded(by) => {
                self.state = State::GivenUp;
                Step::Over(Ok(Taken::Superseded(by)))
            }
            Acquire::Mismatch(held) => {
                self.state = State::GivenUp;
                Step::Over(Err(mismatch(claim, held)))
            }
        }
    }

    /// What a provisional grant's confirmation means. `busy`: the last refusal, which a
    /// waiter whose grant lapsed waits on again.
    pub fn confirmed(&mut self, grant: Grant, confirmation: Confirmation, busy: &Busy) -> Step {
        match confirmation {
            Confirmation::Confirmed(sent) => {
                self.state = State::Holder;
                Step::Over(Ok(Taken::Acquired {
                    fence: grant.fence,
                    also: grant.also,
                    started_ms: grant.started_ms,
                    slot: grant.slot,
                    sent,
                    spent: Spent::default(),
                }))
            }
            Confirmation::Lapsed => {
                self.state = State::Queued;
                Step::Wait(busy.clone())
            }
            // A replacer that is asked to stop was superseded by a later one: the last to
            // arrive runs. A plain waiter waits again, behind the replacer.
            Confirmation::AskedToStop(by) if self.base.is_some_and(|q| q.replace.is_some()) => {
                self.state = State::GivenUp;
                Step::Over(Ok(Taken::Superseded(by)))
            }
            Confirmation::AskedToStop(_) => {
                self.state = State::Queued;
                Step::Wait(busy.clone())
            }
            Confirmation::Failed(e) => {
                self.state = State::GivenUp;
                Step::Over(Err(e))
            }
        }
    }
}

/// A key held with another shape than the one asked for: a configuration error (78), whatever
/// the wait.
fn mismatch(claim: &Claim, held: Shape) -> anyhow::Error {
    let held = match held {
        Shape::Slots(n) => format!("held with {n} slots"),
        _ => "held shared".to_string(),
    };
    let asked = match claim.shape {
        Shape::Slots(n) => format!("asks for {n} slots"),
        _ => "asks for a shared hold".to_string(),
    };
    fail(
        Exit::Config,
        format!(
            "{} is {held}, and this {asked}; every holder of a key must ask for the same shape \
             (the same --slots N, or --shared)",
            claim.keys.lock
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::keys::Keys;
    use crate::lock::record::Holder;

    fn busy(life_ms: u64) -> Busy {
        Busy {
            server_now_ms: 1_000_000,
            life: Some(Duration::from_millis(life_ms)).filter(|l| !l.is_zero()),
            waiting: true,
            ..Busy::default()
        }
    }

    fn granted(provisional: bool) -> Acquire {
        Acquire::Acquired {
            fence: 7,
            started_ms: 1,
            slot: None,
            provisional,
            also: vec![],
        }
    }

    fn with_claim(f: impl FnOnce(&Claim)) {
        let keys = Keys::new("", "k").unwrap();
        let holder = Holder::default();
        let claim = Claim {
            keys: &keys,
            token: "t",
            ttl: Duration::from_secs(5),
            holder: &holder,
            shape: Shape::Exclusive,
            once: None,
        };
        f(&claim);
    }

    fn queueing() -> Queueing<'static> {
        Queueing {
            ticket: "w",
            arrival_us: None,
            max_waiters: None,
            replace: None,
            waits: true,
            later: None,
        }
    }

    #[test]
    fn only_the_first_attempt_may_be_taken_outright() {
        with_claim(|claim| {
            let mut w = Waiter::new(Some(queueing()));
            assert_eq!(w.attempt(true).unwrap().later, None);
            assert!(matches!(
                w.answered(Acquire::Busy(busy(15_000)), claim, Moment::now()),
                Step::Wait(_)
            ));
            assert_eq!(w.state(), State::Queued);
            // Later attempts carry when they were sent behind a pop, and only then.
            assert!(matches!(w.attempt(true).unwrap().later, Some(Some(_))));
            assert_eq!(w.attempt(false).unwrap().later, Some(None));
            assert!(matches!(
                w.answered(granted(true), claim, Moment::now()),
                Step::Confirm(_)
            ));
            assert_eq!(w.state(), State::Granted);
        });
    }

    #[test]
    fn the_lease_counts_from_the_confirmation() {
        with_claim(|claim| {
            let mut w = Waiter::new(Some(queueing()));
            let attempt = Moment::now();
            let Step::Confirm(grant) = w.answered(granted(true), claim, attempt) else {
                panic!("a provisional grant is confirmed");
            };
            let confirmation = Moment::now();
            let Step::Over(Ok(Taken::Acquired { sent, .. })) = w.confirmed(
                grant,
                Confirmation::Confirmed(confirmation),
                &Busy::default(),
            ) else {
                panic!("a confirmed grant is held");
            };
            assert!(sent == confirmation);
            assert_eq!(w.state(), State::Holder);
        });
    }

    #[test]
    fn a_lapsed_grant_waits_again_and_a_superseded_one_gives_up() {
        with_claim(|claim| {
            let mut w = Waiter::new(Some(queueing()));
            let Step::Confirm(grant) = w.answered(granted(true), claim, Moment::now()) else {
                panic!();
            };
            assert!(matches!(
                w.confirmed(grant, Confirmation::Lapsed, &busy(1500)),
                Step::Wait(_)
            ));
            assert_eq!(w.state(), State::Queued);
            let Step::Confirm(grant) = w.answered(granted(true), claim, Moment::now()) else {
                panic!();
            };
            assert!(matches!(
                w.confirmed(grant, Confirmation::AskedToStop("d3".into()), &busy(0)),
                Step::Wait(_)
            ));
            assert_eq!(w.state(), State::Queued);
            let mut replacer = Waiter::new(Some(Queueing {
                replace: Some("d2"),
                ..queueing()
            }));
            let Step::Confirm(grant) = replacer.answered(granted(true), claim, Moment::now())
            else {
                panic!();
            };
            assert!(matches!(
                replacer.confirmed(grant, Confirmation::AskedToStop("d3".into()), &busy(0)),
                Step::Over(Ok(Taken::Superseded(_)))
            ));
            assert_eq!(replacer.state(), State::GivenUp);
        });
    }

    #[test]
    fn the_pace_stays_within_the_entrys_life() {
        with_claim(|claim| {
            let mut w = Waiter::new(Some(queueing()));
            let wanted = Duration::from_secs(5);
            assert_eq!(w.pace(wanted), wanted);
            w.answered(Acquire::Busy(busy(1500)), claim, Moment::now());
            assert_eq!(w.pace(wanted), Duration::from_millis(500));
            w.answered(Acquire::Busy(busy(15_000)), claim, Moment::now());
            assert_eq!(w.pace(wanted), wanted);
        });
    }

    #[test]
    fn a_full_queue_and_a_superseded_replacer_end_the_wait() {
        with_claim(|claim| {
            let mut w = Waiter::new(Some(queueing()));
            let full = Busy {
                full: Some(1),
                ..busy(0)
            };
            assert!(matches!(
                w.answered(Acquire::Busy(full), claim, Moment::now()),
                Step::Over(Ok(Taken::Busy(_)))
            ));
            let mut w = Waiter::new(Some(queueing()));
            assert!(matches!(
                w.answered(Acquire::Superseded("d3".into()), claim, Moment::now()),
                Step::Over(Ok(Taken::Superseded(_)))
            ));
        });
    }
}
