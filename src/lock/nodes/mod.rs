//! The servers a lock lives on: one Redis, or a quorum of independent masters (Redlock).
//!
//! With one server every operation is a single call on one connection — the fast path, with
//! no thread and no extra round trip. With N servers every operation goes to all of them at
//! once (one scoped thread per node, each bounded by the per-node timeout), and a result counts
//! only when a majority (N/2 + 1) agrees. This module is that plumbing: the nodes, their
//! connections, asking one or all of them, and the errors when too few answered; `majority`
//! has what each operation makes of the answers (the quorum rules).
//!
//! A majority means something only if the nodes are distinct servers: a server named twice
//! (the same URL, `localhost` and `127.0.0.1`, its unix socket and its port, a DNS alias)
//! would be counted twice, and one server would make a majority of three. So a quorum's node
//! learns which server it reached as it connects (its `run_id`, asked in the connection's
//! handshake) and compares it with the other nodes' ([`Identities`]); [`Nodes::connect`]
//! connects every node before anything is sent, so such a quorum is refused (64) before any
//! write. One server is asked nothing more.

mod majority;

pub use self::majority::{Renewal, Tally};

use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use crate::lock;
use crate::lock::keys::{self, Keys};
use crate::redis::server::{Conn, Server, set_timeouts};
use crate::report::error::{
    classify, fail, is_readonly, is_server_reply, is_timeout, render, usage,
};
use crate::report::exit::Exit;

/// What each node of a quorum is: its URL as shown (redacted) and the `run_id` of the server its
/// last connection reached (`None` before it connected). Shared by the nodes' threads: a node
/// that connects compares itself with the others under the lock, so of two URLs that reach one
/// server only the first to connect is used, whichever it is.
type Identities = Arc<Mutex<Vec<(String, Option<String>)>>>;

struct Node {
    server: Server,
    /// In a quorum, this node's place in the quorum's [`Identities`]; `None` for one server.
    quorum: Option<(usize, Identities)>,
    /// Why [`Nodes::connect`] could not connect this node: the answer of its next request,
    /// which would otherwise wait for the same failure a second time.
    unreached: Option<anyhow::Error>,
    con: Option<Conn>,
    timeout: Option<Duration>,
    /// The connection of a request that timed out: unusable (its reply may still come), but
    /// the only place where something can be queued *behind* that request (`Nodes::abandon`).
    stale: Option<Conn>,
    /// Whether the current connection has answered a request (its TLS handshake, if any, is
    /// done).
    answered: bool,
    /// No connect nor request of this node waits past this ([`Nodes::bound_by`]).
    deadline: Option<Instant>,
}

impl Node {
    /// Runs `f` on this node's connection, connecting first if needed. A transport error
    /// drops the connection, so the next call reconnects.
    fn with<T>(&mut self, timeout: Duration, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        if let Some(e) = self.unreached.take() {
            return Err(e);
        }
        let within = |deadline: Option<Instant>| match deadline {
            Some(d) => timeout
                .min(d.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => timeout,
        };
        let deadline = self.deadline;
        let con = match &mut self.con {
            Some(con) => con,
            None => {
                self.answered = false;
                self.timeout = Some(within(deadline));
                match self.open(within(deadline)) {
                    Ok(con) => self.con.insert(con),
                    Err(e) => return Err(self.explain(e, false)),
                }
            }
        };
        // The request gets what is left once connected.
        let timeout = within(deadline);
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

    /// A new connection. A quorum's node says which server it reached, and is refused (64) when
    /// another node of the quorum reached that server too: a server counts once.
    fn open(&mut self, timeout: Duration) -> Result<Conn> {
        let Some((me, identities)) = &self.quorum else {
            return self.server.connect(timeout);
        };
        let (con, id) = self.server.connect_identified(timeout)?;
        // The server answered INFO: the connection speaks plain RESP (TLS, if any, is done).
        self.answered = true;
        let mut known = identities.lock().unwrap_or_else(PoisonError::into_inner);
        let twin = known
            .iter()
            .enumerate()
            .position(|(i, (_, other))| i != *me && other.as_deref() == Some(id.as_str()));
        if let Some(twin) = twin {
            let (first, second) = if twin < *me {
                (&known[twin].0, &known[*me].0)
            } else {
                (&known[*me].0, &known[twin].0)
            };
            return Err(usage(format!(
                "{first} and {second} are one Redis server (run_id {id}): a quorum counts each \
                 server once, so give independent servers, each once"
            )));
        }
        known[*me].1 = Some(id);
        Ok(con)
    }

    /// An error in plain words (`Server::explain`): a TLS handshake that failed is one plain
    /// line (still 69); a refused connection, an unknown host, a refused password say so; a
    /// plain `redis://` server that hangs up before its first answer may be a TLS port, and a
    /// TLS server's plain port shows up as the handshake timing out. A timeout stays a timeout
    /// underneath the words (a timed-out acquire is undone).
    fn explain(&self, err: anyhow::Error, answered: bool) -> anyhow::Error {
        self.server.explain(err, self.timeout, answered)
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

impl Nodes {
    /// `timeout` bounds each node's connect and each command.
    pub fn new(servers: &[Server], timeout: Duration) -> Nodes {
        let identities: Option<Identities> = (servers.len() > 1).then(|| {
            Arc::new(Mutex::new(
                servers
                    .iter()
                    .map(|s| (s.name().to_string(), None))
                    .collect(),
            ))
        });
        Nodes {
            nodes: servers
                .iter()
                .enumerate()
                .map(|(i, server)| Node {
                    server: server.clone(),
                    quorum: identities.clone().map(|ids| (i, ids)),
                    unreached: None,
                    con: None,
                    timeout: None,
                    stale: None,
                    answered: false,
                    deadline: None,
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

    /// Connects now, before anything is asked. The single server: so that an unreachable
    /// Redis is reported before anything else. A quorum: every node at once, each saying which
    /// server it is, so that two URLs of one server are refused (64) before any node is
    /// written to, by every subcommand alike. A node out of reach is no such refusal: its
    /// error is the answer of its next request, counted as the quorum rules count any node
    /// that fails; the requests after that try it again (and it compares itself with the
    /// others when it does connect).
    pub fn connect(&mut self) -> Result<()> {
        if let [node] = self.nodes.as_mut_slice() {
            node.with(self.timeout, |_| Ok(()))?;
            // Connecting sends nothing but a single server's TLS handshake, which redlock's own
            // connection completes there (`wire.rs`): only that counts as an answer.
            node.answered = node.server.is_direct() && node.server.is_tls();
            return Ok(());
        }
        let results = self.each(|_| Ok(()));
        for (node, result) in self.nodes.iter_mut().zip(results) {
            match result {
                Err(e) if classify(&e) == Exit::Usage => return Err(e),
                Err(e) => node.unreached = Some(e),
                Ok(()) => {}
            }
        }
        Ok(())
    }

    /// Drops every connection; the next operation connects afresh.
    pub fn disconnect(&mut self) {
        for node in &mut self.nodes {
            node.con = None;
            node.unreached = None;
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

    /// Until `deadline` (`None`: again), every connect and request waits at most until then,
    /// and at most the timeout: a waiter's steps once its wait ran out (leaving the queue,
    /// undoing its attempt, counting the refusal) fit the timeout it has left, whatever the
    /// server does meanwhile (frozen, cut off).
    pub fn bound_by(&mut self, deadline: Option<Instant>) {
        for node in &mut self.nodes {
            node.deadline = deadline;
        }
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

    /// Every lock under `prefix` that has a companion of one of `names` (`FENCE`: every lock
    /// redlock took and whose fence has not expired; `PAUSED`: every lock paused, taken or not), found by SCAN on every node, once each, by name.
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
        names: &[&str],
        mut batch: impl FnMut(&mut Nodes, Vec<Keys>) -> Result<bool>,
    ) -> Result<()> {
        let mut seen = keys::Seen::new();
        let mut found: Vec<Keys> = Vec::new();
        let mut failed: Vec<Result<()>> = Vec::new();
        for i in 0..self.nodes.len() {
            let mut scans: Vec<keys::Scan> =
                names.iter().map(|n| keys::Scan::new(prefix, n)).collect();
            'node: for scan in &mut scans {
                while !scan.done() {
                    let timeout = self.timeout;
                    match self.nodes[i].with(timeout, |c| scan.page(c)) {
                        Ok(page) => found.extend(page.into_iter().filter(|k| seen.first(&k.lock))),
                        Err(e) => {
                            failed.resize_with(i, || Ok(()));
                            failed.push(Err(e));
                            break 'node;
                        }
                    }
                    if found.len() >= keys::BATCH {
                        found.sort_by(|a, b| a.lock.cmp(&b.lock));
                        if !batch(self, std::mem::take(&mut found))? {
                            return Ok(());
                        }
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
