//! What each operation makes of the nodes' answers: acquire, renew, release, force a release,
//! ask who holds the lock, leave the queue, count a refusal; and what a quorum's readings of a
//! lock add up to ([`Tally`]). Apart from the plumbing in the parent module (one connection per
//! node, every node asked at once) because this is where the Redlock rules live: each operation
//! decides here when a majority agrees, and what to undo when it does not.
//!
//! On one server each operation is that server's answer. In a quorum:
//!
//! * **acquire** succeeds when a majority took the key *and* the lease still has validity left
//!   (ttl − elapsed − drift, the caller counts from when it sent). Otherwise it releases on every
//!   node, including those that did not answer (their SET may have landed), without waking
//!   anyone, and reports busy or the nodes' errors. A node whose acquire timed out also gets the
//!   undoing queued behind it on the same connection (`lock::abandon`).
//! * **fencing**: each node's acquire script raises that node's counter; the token handed
//!   out is the maximum of the majority's answers, and before it is handed out every node's
//!   counter is raised to at least that value, which must succeed on a majority. Any later
//!   majority shares a node with that one, so its maximum is strictly larger: fences keep
//!   growing even when different majorities answer. A node restarted without persistence
//!   forgets its counter, but the acquire script floors every fence by the node's clock in
//!   microseconds, so fences keep growing as long as the nodes' clocks agree to within the time
//!   between two acquisitions.
//! * **extend** confirms the lease when a majority renewed it; it is lost at once when so many
//!   nodes refused (key gone, another token, a refusal) that a majority can no longer confirm.
//!   A node where the key is *missing* while a majority renewed it is healed: the key is written
//!   back there with our token and fence (`lock::heal`), so nodes restarted one at a time never
//!   leave the holder without a majority.
//! * **release** goes to every node.

use std::time::Duration;

use anyhow::{Result, anyhow};

use super::{Nodes, named_error, node_error};
use crate::lock::inspect::Inspection;
use crate::lock::keys::Keys;
use crate::lock::record::{GivenBack, LastRun, LockState, is_layout};
use crate::lock::{self, Acquire, Busy, Claim, Queueing, Refusal, Removed, Renewed, Standing};
use crate::redis::server::{Conn, Overlap};
use crate::report::error::{fail, is_definitive_error, is_server_reply, render};
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::lease::Moment;

/// What a majority said about a renewal.
pub enum Renewal {
    /// A majority renewed the lease.
    Confirmed,
    /// Too many nodes refused for a majority to confirm it, ever. `refusal` is the server's
    /// error when that (and not "not the holder") is what ended it, for callers that report
    /// it by its class.
    Lost {
        reason: String,
        refusal: Option<anyhow::Error>,
    },
    /// Not confirmed this time; worth retrying until the kill point.
    Failed(anyhow::Error),
    /// Not renewed: a run asked this holder to stop (`--replace`; who asked). One server only
    /// (`--replace` is refused in a quorum).
    Replaced(String),
}

impl Nodes {
    /// One acquire attempt on every node; see the module doc for the quorum rules. `sent` is
    /// when the attempt started: the lease is counted from it. `meanwhile` runs while the
    /// request is on the wire (one server) or before it is sent (a quorum).
    pub fn acquire(
        &mut self,
        claim: &Claim,
        refusal: Refusal,
        queue: Option<&Queueing>,
        sent: Moment,
        meanwhile: Option<&mut dyn FnMut()>,
    ) -> Result<Acquire> {
        let (keys, token, ttl) = (claim.keys, claim.token, claim.ttl);
        let timeout = self.timeout;
        let ack = self.ack(ttl);
        for node in &mut self.nodes {
            node.stale = None;
        }
        if let Some(work) = meanwhile {
            if let [node] = self.nodes.as_mut_slice() {
                let result = node.with(timeout, |c| {
                    let cluster = matches!(c, Conn::Cluster(_));
                    let mut c = Overlap::new(c, work);
                    lock::acquire(&mut c, claim, refusal, queue, cluster, ack)
                });
                self.abandon(claim);
                return result;
            }
            work();
        }
        let results = self.each(|c| {
            let cluster = matches!(c, Conn::Cluster(_));
            lock::acquire(c, claim, refusal, queue, cluster, ack)
        });
        if !self.is_quorum() {
            self.abandon(claim);
            return results.into_iter().next().expect("one node");
        }
        let mut fences = Vec::new();
        // Several keys: the fence of each other lock is the highest any node handed out.
        let mut also = vec![0i64; keys.also.len()];
        let mut started = None;
        let mut busy: Option<Busy> = None;
        let mut errors = Vec::new();
        let mut provisional = false;
        // Nodes whose queue was full (--max-waiters): the queue is full when a majority says so.
        let mut full = 0;
        for (server, result) in self.servers().zip(&results) {
            match result {
                Ok(Acquire::Acquired {
                    fence,
                    started_ms,
                    provisional: short,
                    also: others,
                    ..
                }) => {
                    fences.push(*fence);
                    for (high, other) in also.iter_mut().zip(others) {
                        *high = (*high).max(*other);
                    }
                    started = Some(started.map_or(*started_ms, |s: i64| s.min(*started_ms)));
                    provisional |= *short;
                }
                Ok(Acquire::Busy(b)) => {
                    busy.get_or_insert_with(|| b.clone());
                    full += usize::from(b.full.is_some());
                }
                // Shapes and --once-per are refused before a quorum is contacted (see `run`).
                Ok(Acquire::Mismatch(_) | Acquire::Skipped(_) | Acquire::Superseded(_)) => {}
                Err(e) => errors.push(node_error(server, e)),
            }
        }
        // A node whose records are of another data layout is no node that failed: taking the
        // lock on the others would share it with a redlock that reads it otherwise. Nothing is
        // kept anywhere, and the run ends with that node's refusal.
        if let Some(at) = results
            .iter()
            .position(|r| r.as_ref().is_err_and(is_layout))
        {
            self.abandon(claim);
            let _ = self.each(|c| lock::undo(c, keys, token));
            return results.into_iter().nth(at).expect("the node found");
        }
        // A provisional grant lives no longer than its provisional lease on any node.
        let ttl = if provisional {
            ttl.min(lock::PROVISIONAL)
        } else {
            ttl
        };
        let valid = sent.elapsed() + crate::supervise::lease::drift(ttl) < ttl;
        if fences.len() >= self.majority() && valid {
            let fence = fences.iter().copied().max().unwrap_or(0);
            let raised = self.each(|c| lock::raise_fence(c, keys, token, fence, &also));
            let ok = raised.iter().filter(|r| r.is_ok()).count();
            if ok >= self.majority() {
                if !errors.is_empty() {
                    log::warn(
                        "node_failed",
                        &format!(
                            "{} taken on {} of {} nodes; {}",
                            keys.lock,
                            fences.len(),
                            self.len(),
                            errors.join("; ")
                        ),
                        &[],
                    );
                }
                // A node that timed out and yet took the key holds it for us: our renewals
                // and release treat it like the others.
                for node in &mut self.nodes {
                    node.stale = None;
                }
                return Ok(Acquire::Acquired {
                    fence,
                    started_ms: started.unwrap_or(0),
                    slot: None,
                    provisional,
                    also,
                });
            }
            errors.push(format!(
                "the fence could be raised on only {ok} of {} nodes",
                self.len()
            ));
        }
        // No quorum: undo whatever landed, on every node (also those that did not answer).
        self.abandon(claim);
        let _ = self.each(|c| lock::undo(c, keys, token));
        if let Some(mut busy) = busy {
            if full < self.majority() {
                busy.full = None;
            } else if busy.full.is_none() {
                busy.full = results.iter().find_map(|r| match r {
                    Ok(Acquire::Busy(b)) => b.full,
                    _ => None,
                });
            }
            return Ok(Acquire::Busy(busy));
        }
        if fences.len() >= self.majority() {
            return Err(fail(
                Exit::Unavailable,
                format!(
                    "{}: a majority answered too late to leave any lease ({})",
                    keys.lock,
                    errors.join("; ")
                ),
            ));
        }
        Err(self.no_quorum(&results, &errors))
    }

    /// An acquire that timed out may still run on the server (a stalled server runs what is
    /// queued when it resumes): queues its undoing behind it, on the connection it was sent on
    /// (see `lock::abandon`), on every node where the last acquire timed out. Other transport
    /// errors mean the connection broke; what reached the server then is found by a retry with
    /// the same token (the acquire script treats our own token as ours).
    fn abandon(&mut self, claim: &Claim) {
        for node in &mut self.nodes {
            if let Some(mut con) = node.stale.take() {
                lock::abandon(&mut con, claim.keys, claim.token);
            }
        }
    }

    /// Renews the lease on every node and says what a majority made of it.
    ///
    /// In a quorum, a node where the key is missing while a majority renewed it (the node
    /// restarted without persistence, or was flushed) gets it back at once, with our token and
    /// fence (`standing`): otherwise restarting the nodes one at a time, each between two
    /// renewals, would leave the holder on fewer nodes each time until another could take a
    /// majority. A node where another token holds the key is left alone.
    ///
    /// `confirming`: a waiter confirms its provisional grant (see [`lock::PROVISIONAL`]).
    pub fn extend(
        &mut self,
        keys: &Keys,
        token: &str,
        ttl: Duration,
        standing: &Standing,
        confirming: bool,
    ) -> Renewal {
        let ack = self.ack(ttl);
        let results = self.each(|c| lock::extend(c, keys, token, ttl, confirming, ack));
        let missing: Vec<bool> = results
            .iter()
            .map(|r| matches!(r, Ok(Renewed::Missing)))
            .collect();
        let renewed = results
            .iter()
            .filter(|r| matches!(r, Ok(Renewed::Yes)))
            .count();
        let mut healed: Vec<Option<Result<bool>>> = Vec::new();
        if self.is_quorum() && renewed >= self.majority() && missing.contains(&true) {
            healed = self.each_of(&missing, |c| lock::heal(c, keys, token, ttl, standing));
            let names: Vec<&str> = self
                .servers()
                .zip(&healed)
                .filter(|(_, h)| matches!(h, Some(Ok(true))))
                .map(|(s, _)| s.name())
                .collect();
            if !names.is_empty() {
                log::warn(
                    "node_healed",
                    &format!(
                        "{} was missing on {} (restarted without persistence, or flushed?); \
                         re-established there",
                        keys.lock,
                        names.join(", ")
                    ),
                    &[],
                );
            }
        }
        let mut confirmed = 0;
        let mut refused: Vec<(String, String)> = Vec::new();
        let mut refusal = None;
        let mut failed: Vec<(String, anyhow::Error)> = Vec::new();
        let mut stop: Option<String> = None;
        for (i, (server, result)) in self.servers().zip(results).enumerate() {
            let name = server.name().to_string();
            let healed_here = matches!(healed.get(i), Some(Some(Ok(true))));
            match result {
                Ok(Renewed::Yes) => confirmed += 1,
                Ok(Renewed::Missing) if healed_here => confirmed += 1,
                Ok(Renewed::Stop(by)) => {
                    refused.push((name, format!("{by} asked this holder to stop")));
                    stop = Some(by);
                }
                Ok(Renewed::Missing | Renewed::Taken) => refused.push((
                    name,
                    if keys.also.is_empty() {
                        format!("{} was deleted or taken by another holder", keys.lock)
                    } else {
                        format!(
                            "one of {} was deleted or taken by another holder",
                            keys.names()
                        )
                    },
                )),
                Err(e) if is_definitive_error(&e) => {
                    refused.push((
                        name,
                        format!("the server refused the renewal: {}", render(&e)),
                    ));
                    refusal.get_or_insert(e);
                }
                Err(e) => failed.push((name, e)),
            }
        }
        if confirmed >= self.majority() {
            let degraded = (confirmed < self.len()).then_some(confirmed);
            if degraded.is_some() && degraded != self.degraded {
                let reasons: Vec<String> = failed
                    .iter()
                    .map(|(name, e)| named_error(name, e))
                    .chain(refused.iter().map(|(name, r)| format!("{name}: {r}")))
                    .collect();
                log::warn(
                    "node_failed",
                    &format!(
                        "{} renewed on {confirmed} of {} nodes: {}",
                        keys.lock,
                        self.len(),
                        reasons.join("; ")
                    ),
                    &[],
                );
            }
            self.degraded = degraded;
            return Renewal::Confirmed;
        }
        let single = !self.is_quorum();
        if single && let Some(by) = stop {
            return Renewal::Replaced(by);
        }
        let named = |(name, reason): &(String, String)| format!("{name}: {reason}");
        if self.len() - refused.len() < self.majority() {
            let reason = if single {
                refused[0].1.clone()
            } else {
                let reasons: Vec<String> = refused.iter().map(named).collect();
                format!("no majority can confirm the lease: {}", reasons.join("; "))
            };
            return Renewal::Lost { reason, refusal };
        }
        if single && let Some((_, e)) = failed.pop() {
            return Renewal::Failed(e);
        }
        let reasons: Vec<String> = failed
            .iter()
            .map(|(name, e)| named_error(name, e))
            .chain(refused.iter().map(named))
            .collect();
        Renewal::Failed(anyhow!(
            "renewed on {confirmed} of {} nodes: {}",
            self.len(),
            reasons.join("; ")
        ))
    }

    /// Releases on every node. `Ok(true)` when a majority (the one node) released it.
    /// `meanwhile` runs while the request is on the wire (one server) or before it is sent (a
    /// quorum); a release that cannot connect does not run it.
    pub fn release(
        &mut self,
        keys: &Keys,
        token: &str,
        keep: Option<Duration>,
        record: Option<&LastRun>,
        meanwhile: Option<&mut dyn FnMut()>,
    ) -> Result<bool> {
        if let Some(work) = meanwhile {
            if let [node] = self.nodes.as_mut_slice() {
                return node.with(self.timeout, |c| {
                    lock::release(&mut Overlap::new(c, work), keys, token, keep, record)
                });
            }
            work();
        }
        let results = self.each(|c| lock::release(c, keys, token, keep, record));
        self.released(keys, results)
    }

    /// Releases a hold that ran nothing to record on every node, the audit log saying `why`
    /// (see `lock::give_back`). `Ok(true)` when a majority (the one node) released it.
    pub fn hand_back(&mut self, keys: &Keys, token: &str, why: GivenBack) -> Result<bool> {
        let results = self.each(|c| lock::give_back(c, keys, token, why));
        self.released(keys, results)
    }

    /// What the nodes' answers to a release come to.
    fn released(&mut self, keys: &Keys, results: Vec<Result<bool>>) -> Result<bool> {
        if !self.is_quorum() {
            return results.into_iter().next().expect("one node");
        }
        let released = results.iter().filter(|r| matches!(r, Ok(true))).count();
        let errors = self.failures(&results);
        if errors.len() >= self.majority() {
            return Err(self.no_quorum(&results, &errors));
        }
        if !errors.is_empty() {
            log::warn(
                "node_failed",
                &format!("release of {}: {}", keys.lock, errors.join("; ")),
                &[],
            );
        }
        Ok(released >= self.majority())
    }

    /// `release --force` on every node: what each removed.
    pub fn force_release(
        &mut self,
        keys: &Keys,
        by: &str,
    ) -> Result<Vec<(String, Option<Removed>)>> {
        let results = self.each(|c| lock::force_release(c, keys, by));
        if !self.is_quorum() {
            let removed = results.into_iter().next().expect("one node")?;
            return Ok(vec![(self.nodes[0].server.name().to_string(), removed)]);
        }
        let errors = self.failures(&results);
        if errors.len() >= self.majority() {
            return Err(self.no_quorum(&results, &errors));
        }
        if !errors.is_empty() {
            log::warn("node_failed", &errors.join("; "), &[]);
        }
        Ok(self
            .servers()
            .zip(results)
            .filter_map(|(s, r)| r.ok().map(|removed| (s.name().to_string(), removed)))
            .collect())
    }

    /// Whether `token` holds the lock: on one server, that server's word; in a quorum, a
    /// majority's (the shortest lease among them, the highest fence). `None` when it does not,
    /// an error when too few nodes answered to tell.
    pub fn held(&mut self, keys: &Keys, token: &str) -> Result<Option<lock::Held>> {
        let results = self.each(|c| lock::held(c, keys, token));
        if !self.is_quorum() {
            return results.into_iter().next().expect("one node");
        }
        let holding: Vec<lock::Held> = self
            .answered(results)?
            .into_iter()
            .filter_map(|r| r.ok().flatten())
            .collect();
        if holding.len() < self.majority() {
            return Ok(None);
        }
        Ok(holding.into_iter().reduce(|a, b| lock::Held {
            fence: a.fence.max(b.fence),
            started_ms: a.started_ms.min(b.started_ms),
            server_now_ms: a.server_now_ms.max(b.server_now_ms),
            pttl_ms: a.pttl_ms.min(b.pttl_ms),
            shape: a.shape,
        }))
    }

    /// Takes a waiter that gives up out of the queue on every node. A refusal is only a
    /// warning, and a server out of reach not even that (the run says why it stopped waiting):
    /// the entry lapses by itself within `lock::QUEUE_ENTRY_LIFE`.
    pub fn leave(&mut self, keys: &Keys, ticket: &str) {
        let results = self.each(|c| lock::leave(c, keys, ticket));
        for (server, result) in self.servers().zip(results) {
            if let Err(e) = result
                && is_server_reply(&e)
            {
                log::warn("leave_failed", &node_error(server, &e), &[]);
            }
        }
    }

    /// Counts one busy refusal on every node.
    pub fn count_busy(&mut self, keys: &Keys, holder: &crate::lock::record::Holder) {
        for result in self.each(|c| lock::count_busy(c, keys, holder)) {
            if let Err(e) = result {
                log::warn("count_failed", &render(&e), &[]);
            }
        }
    }
}

/// What a quorum's answers say about one lock: the token most nodes hold decides.
pub struct Tally<'a> {
    /// The answer to show: a node's that has another type of value there (no lock at all),
    /// else the majority's when one holds the lock, else a free node's.
    pub shown: &'a Inspection,
    /// How many nodes hold the lock with the most common token.
    pub holding: usize,
    /// Held by some nodes, and the silent ones could make it a majority: nobody can say
    /// whether the lock is held.
    pub unknown: bool,
    /// The most common token, which each node's view is compared with.
    pub token: Option<&'a str>,
}

/// One node's view of a lock, next to the quorum's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeView {
    Held,
    HeldByAnotherToken,
    Free,
    WrongType,
}

impl NodeView {
    /// The spelling in `status --json`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeView::Held => "held",
            NodeView::HeldByAnotherToken => "held_by_another_token",
            NodeView::Free => "free",
            NodeView::WrongType => "wrong_type",
        }
    }
}

impl<'a> Tally<'a> {
    /// Counts the answers (`None`: the node did not answer) against `majority`; `nothing`
    /// stands for a key no node could describe.
    pub fn count(
        answers: &[Option<&'a Inspection>],
        majority: usize,
        nothing: &'a Inspection,
    ) -> Tally<'a> {
        let ok: Vec<&Inspection> = answers.iter().flatten().copied().collect();
        let mut best: Option<(&Inspection, usize)> = None;
        for i in &ok {
            if let Some(token) = &i.token {
                let count = ok
                    .iter()
                    .filter(|j| j.token.as_ref() == Some(token))
                    .count();
                if best.is_none_or(|(_, c)| count > c) {
                    best = Some((i, count));
                }
            }
        }
        // Without a majority for one token, the lock is free as far as the quorum is concerned.
        let (i, holding) = match best {
            Some((i, count)) if count >= majority => (i, count),
            Some((_, count)) => (
                ok.iter()
                    .copied()
                    .find(|i| i.token.is_none())
                    .unwrap_or(nothing),
                count,
            ),
            None => (ok.first().copied().unwrap_or(nothing), 0),
        };
        let wrong = ok
            .iter()
            .copied()
            .find(|i| i.state() == LockState::WrongType);
        // Without a majority for one token, the nodes that did not answer decide: if they
        // could complete one, nobody can say whether the lock is held.
        let silent = answers.len() - ok.len();
        Tally {
            shown: wrong.unwrap_or(i),
            holding,
            unknown: holding < majority && holding + silent >= majority && holding > 0,
            token: best.and_then(|(i, _)| i.token.as_deref()),
        }
    }

    /// What one node's answer says, next to the quorum's token.
    pub fn view(&self, i: &Inspection) -> NodeView {
        match i.state() {
            LockState::Free | LockState::Unknown => NodeView::Free,
            LockState::Held if self.token.is_some() && i.token.as_deref() == self.token => {
                NodeView::Held
            }
            LockState::Held => NodeView::HeldByAnotherToken,
            LockState::WrongType => NodeView::WrongType,
        }
    }
}
