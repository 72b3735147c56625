//! The servers a lock lives on: one Redis, or a quorum of independent masters (Redlock).
//!
//! With one server every operation is a single call on one connection — the fast path, with
//! no thread and no extra round trip. With N servers every operation goes to all of them at
//! once (one scoped thread per node, each bounded by the per-node timeout), and a result counts
//! only when a majority (N/2 + 1) agrees:
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

use std::thread;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::lock::inspect::Inspection;
use crate::lock::keys::{self, Keys};
use crate::lock::record::{LastRun, LockState};
use crate::lock::{self, Acquire, Busy, Claim, Queueing, Refusal, Removed, Renewed, Standing};
use crate::redis::server::{Conn, Overlap, Server, set_timeouts};
use crate::redis::tls::{explain_tls, maybe_tls};
use crate::report::error::{
    classify, fail, is_definitive_error, is_dropped, is_readonly, is_server_reply, is_timeout,
    render,
};
use crate::report::exit::Exit;
use crate::report::log;
use crate::supervise::lease::Moment;

struct Node {
    server: Server,
    con: Option<Conn>,
    timeout: Option<Duration>,
    /// The connection of a request that timed out: unusable (its reply may still come), but
    /// the only place where something can be queued *behind* that request (`Nodes::abandon`).
    stale: Option<Conn>,
    /// Whether the current connection has answered a request (its TLS handshake, if any, is
    /// done).
    answered: bool,
}

impl Node {
    /// Runs `f` on this node's connection, connecting first if needed. A transport error
    /// drops the connection, so the next call reconnects.
    fn with<T>(&mut self, timeout: Duration, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let con = match &mut self.con {
            Some(con) => con,
            None => {
                self.answered = false;
                self.timeout = Some(timeout);
                match self.server.connect(timeout) {
                    Ok(con) => self.con.insert(con),
                    Err(e) => return Err(self.explain(e, false)),
                }
            }
        };
        if self.timeout != Some(timeout) {
            set_timeouts(con, timeout)?;
            self.timeout = Some(timeout);
        }
        let result = f(con);
        // After a transport error the connection is unusable; after READONLY it leads to a
        // demoted master (a failover): either way the next call connects afresh.
        if let Err(e) = &result
            && (!is_server_reply(e) || is_readonly(e))
        {
            let con = self.con.take();
            if is_timeout(e) {
                self.stale = con;
            }
        }
        self.answered |= result.is_ok() && self.con.is_some();
        let answered = self.answered;
        result.map_err(|e| self.explain(e, answered))
    }

    /// A TLS handshake that failed becomes one plain line (still 69); a plain `redis://` server
    /// that hangs up at the first request may be a TLS port, and the error says so. A TLS server's plain
    /// port shows up as the handshake timing out (when connecting to one server, with the
    /// first request through a cluster): the error stays a timeout (a timed-out acquire is
    /// undone), with the likely cause added.
    fn explain(&self, err: anyhow::Error, answered: bool) -> anyhow::Error {
        let Some(target) = self.server.tls_target() else {
            if !answered && self.server.name().starts_with("redis://") && is_dropped(&err) {
                return err.context(maybe_tls(self.server.name(), "rediss://"));
            }
            return err;
        };
        if let Some(text) = explain_tls(&err, target) {
            return fail(Exit::Unavailable, text);
        }
        if !answered && is_timeout(&err) && !is_server_reply(&err) {
            return err.context(format!(
                "{} gave no TLS answer (is it the plain port? use redis:// or the tls-port)",
                target.address
            ));
        }
        err
    }
}

pub struct Nodes {
    nodes: Vec<Node>,
    timeout: Duration,
    /// How many nodes confirmed the last renewal, when that was not all of them: said once,
    /// not at every renewal.
    degraded: Option<usize>,
    /// `--replicas N`: acquires and renewals count once N replicas acknowledged them (one
    /// server, Sentinel or Cluster; a quorum is refused before it gets here).
    replicas: u32,
}

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
    /// `timeout` bounds each node's connect and each command.
    pub fn new(servers: &[Server], timeout: Duration) -> Nodes {
        Nodes {
            nodes: servers
                .iter()
                .map(|server| Node {
                    server: server.clone(),
                    con: None,
                    timeout: None,
                    stale: None,
                    answered: false,
                })
                .collect(),
            timeout,
            degraded: None,
            replicas: 0,
        }
    }

    /// These nodes' acquires and renewals count once `replicas` replicas acknowledged them
    /// (`--replicas`; 0: at once). See `lock::replicas`.
    pub fn with_replicas(mut self, replicas: u32) -> Nodes {
        self.replicas = replicas;
        self
    }

    /// The acknowledgement a request for a lease of `ttl` waits for, within this request's
    /// timeout (`None` without `--replicas`).
    pub fn ack(&self, ttl: Duration) -> Option<lock::replicas::Ack> {
        if self.is_quorum() {
            return None;
        }
        lock::replicas::Ack::new(self.replicas, self.timeout, ttl)
    }

    /// Connects the single server now, so that an unreachable Redis is reported before anything
    /// else (quorum nodes connect in parallel on first use).
    pub fn connect(&mut self) -> Result<()> {
        if let [node] = self.nodes.as_mut_slice() {
            node.with(self.timeout, |_| Ok(()))?;
            // Connecting sends nothing but a single server's TLS handshake, which redlock's own
            // connection completes there (`wire.rs`): only that counts as an answer.
            node.answered = node.server.is_direct() && node.server.is_tls();
        }
        Ok(())
    }

    /// Drops every connection; the next operation connects afresh.
    pub fn disconnect(&mut self) {
        for node in &mut self.nodes {
            node.con = None;
        }
    }

    /// The single server's connection, lent out (one server, not through a cluster router):
    /// a waiter waits on it for its grant rather than opening a second one. `None` when there
    /// is none to lend; the node connects afresh if used meanwhile.
    pub fn lend(&mut self) -> Option<crate::redis::wire::Wire> {
        let [node] = self.nodes.as_mut_slice() else {
            return None;
        };
        match node.con.take() {
            Some(Conn::Single(wire)) => Some(wire),
            other => {
                node.con = other;
                None
            }
        }
    }

    /// Takes back a connection [`Nodes::lend`] lent (or one to the same server), idle: nothing
    /// of it is left to read. Its timeouts are set again at its next use.
    pub fn give_back(&mut self, wire: crate::redis::wire::Wire) {
        if let [node] = self.nodes.as_mut_slice() {
            node.con = Some(Conn::Single(wire));
            node.timeout = None;
            node.answered = true;
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_quorum(&self) -> bool {
        self.nodes.len() > 1
    }

    pub fn majority(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    pub fn servers(&self) -> impl Iterator<Item = &Server> {
        self.nodes.iter().map(|n| &n.server)
    }

    /// Runs `f` on every node — concurrently when there are several — and returns each node's
    /// result, in the order the servers were given.
    pub fn each<T: Send>(&mut self, f: impl Fn(&mut Conn) -> Result<T> + Sync) -> Vec<Result<T>> {
        self.each_of(&vec![true; self.nodes.len()], f)
            .into_iter()
            .map(|r| r.expect("every node asked"))
            .collect()
    }

    /// Runs `f` on node `i` alone, connecting first if needed (`log` reads the first node
    /// that answers).
    pub fn on<T>(&mut self, i: usize, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let timeout = self.timeout;
        self.nodes[i].with(timeout, f)
    }

    /// [`Nodes::each`] on the nodes marked in `which`; `None` for the others.
    fn each_of<T: Send>(
        &mut self,
        which: &[bool],
        f: impl Fn(&mut Conn) -> Result<T> + Sync,
    ) -> Vec<Option<Result<T>>> {
        let timeout = self.timeout;
        if let [node] = self.nodes.as_mut_slice() {
            return vec![which[0].then(|| node.with(timeout, &f))];
        }
        let f = &f;
        thread::scope(|scope| {
            let running: Vec<_> = self
                .nodes
                .iter_mut()
                .zip(which)
                .map(|(node, &asked)| {
                    asked.then(|| {
                        thread::Builder::new()
                            .stack_size(256 * 1024)
                            .spawn_scoped(scope, move || node.with(timeout, f))
                    })
                })
                .collect();
            running
                .into_iter()
                .map(|handle| {
                    handle.map(|handle| match handle {
                        Ok(h) => h
                            .join()
                            .unwrap_or_else(|_| Err(anyhow!("node thread failed"))),
                        Err(e) => Err(anyhow!("cannot start a thread: {e}")),
                    })
                })
                .collect()
        })
    }

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
                Ok(Acquire::Mismatch(_) | Acquire::Skipped(_)) => {}
                Err(e) => errors.push(node_error(server, e)),
            }
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

    /// The results of a read-only request, or the error when fewer than a majority answered
    /// (then the state is unknown: 69 in a quorum, the node's own error on one server).
    pub fn answered<T>(&self, results: Vec<Result<T>>) -> Result<Vec<Result<T>>> {
        let ok = results.iter().filter(|r| r.is_ok()).count();
        if ok >= self.majority() {
            return Ok(results);
        }
        if !self.is_quorum() {
            return Err(results.into_iter().find_map(Result::err).expect("an error"));
        }
        let errors = self.failures(&results);
        Err(fail(
            Exit::Unavailable,
            format!(
                "no quorum: {} of {} nodes failed, the lock state is unknown: {}",
                errors.len(),
                self.len(),
                errors.join("; ")
            ),
        ))
    }

    /// Each failed node's error, naming the node.
    pub fn failures<T>(&self, results: &[Result<T>]) -> Vec<String> {
        self.servers()
            .zip(results)
            .filter_map(|(s, r)| r.as_ref().err().map(|e| node_error(s, e)))
            .collect()
    }

    /// The error for "not enough nodes answered": every node's error, and the class they share
    /// (or 69 when they differ).
    fn no_quorum<T>(&self, results: &[Result<T>], errors: &[String]) -> anyhow::Error {
        let mut classes = results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .map(classify);
        let first = classes.next().unwrap_or(Exit::Unavailable);
        let exit = if classes.all(|c| c == first) {
            first
        } else {
            Exit::Unavailable
        };
        fail(
            exit,
            format!(
                "no quorum: {} of {} nodes failed: {}",
                errors.len(),
                self.len(),
                errors.join("; ")
            ),
        )
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

    /// Every lock under `prefix` that has a companion `name` (`FENCE`: every lock redlock
    /// created), found by SCAN on every node, once each, by name.
    pub fn find_locks(&mut self, prefix: &str, name: &str) -> Result<Vec<Keys>> {
        let found = self.each(|c| crate::lock::keys::scan_companions(c, prefix, name));
        let mut all = std::collections::BTreeMap::new();
        for k in self.answered(found)?.into_iter().flatten().flatten() {
            all.insert(k.lock.clone(), k);
        }
        Ok(all.into_values().collect())
    }

    /// Every lock under `prefix` that has a companion `name` (`FENCE`: every lock redlock
    /// created), handed to `batch` about [`keys::BATCH`] at a time as SCAN finds them, each
    /// batch sorted by key: the listings (`status`, `metrics`) hold one batch, never every
    /// lock. Each lock is handed over once ([`keys::Seen`]), whichever nodes list it. The
    /// nodes are scanned one after the other; a node whose SCAN fails is left out (its locks
    /// are read on the others: a lock a majority holds is on more than one), unless that
    /// leaves fewer than a majority, which ends the listing with the nodes' errors, as
    /// [`Nodes::answered`] does. `batch` returns false to stop early (its reader went away).
    pub fn each_batch_of_locks(
        &mut self,
        prefix: &str,
        name: &str,
        mut batch: impl FnMut(&mut Nodes, Vec<Keys>) -> Result<bool>,
    ) -> Result<()> {
        let mut seen = keys::Seen::new();
        let mut found: Vec<Keys> = Vec::new();
        let mut failed: Vec<Result<()>> = Vec::new();
        for i in 0..self.nodes.len() {
            let mut scan = keys::Scan::new(prefix, name);
            while !scan.done() {
                let timeout = self.timeout;
                match self.nodes[i].with(timeout, |c| scan.page(c)) {
                    Ok(page) => found.extend(page.into_iter().filter(|k| seen.first(&k.lock))),
                    Err(e) => {
                        failed.resize_with(i, || Ok(()));
                        failed.push(Err(e));
                        break;
                    }
                }
                if found.len() >= keys::BATCH {
                    found.sort_by(|a, b| a.lock.cmp(&b.lock));
                    if !batch(self, std::mem::take(&mut found))? {
                        return Ok(());
                    }
                }
            }
            if failed.iter().filter(|r| r.is_err()).count() > self.len() - self.majority() {
                failed.resize_with(self.len(), || Ok(()));
                return self.answered(failed).map(drop);
            }
        }
        if !found.is_empty() {
            found.sort_by(|a, b| a.lock.cmp(&b.lock));
            batch(self, found)?;
        }
        Ok(())
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

/// "server: error", unless the error already names the server.
pub fn node_error(server: &Server, err: &anyhow::Error) -> String {
    named_error(server.name(), err)
}

fn named_error(name: &str, err: &anyhow::Error) -> String {
    let text = render(err);
    if text.contains(name) {
        text
    } else {
        format!("{name}: {text}")
    }
}
