//! Where the lock lives: parsing `--url`, applying `--password-file`, connecting with timeouts.
//!
//! Three kinds of target, every connection redlock's own (`wire.rs`):
//! * `redis://`, `rediss://`, `redis+unix://`: one server.
//! * `redis+cluster://HOST:PORT[,HOST:PORT...]`: a Redis Cluster, from any of its nodes; the
//!   redis crate's cluster router routes each script by its first key and follows MOVED/ASK
//!   (the lock's companion keys share its hash slot), connecting to nodes through
//!   `wire::Wire`'s `redis::cluster::Connect`.
//! * `redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`: the master Sentinel names for
//!   SERVICE, asked again at every (re)connection, so a failover is followed: every sentinel
//!   is asked `SENTINEL GET-MASTER-ADDR-BY-NAME` at once, and the first master named that
//!   answers `ROLE` as a master is the connection ([`Server::connect_direct`]). A password
//!   (URL or `--password-file`) is the master's; the sentinels' own credentials are separate
//!   ([`SentinelAuth`]: `--sentinel-user`, `--sentinel-password-file`), because operators give
//!   sentinels their own `requirepass` or ACL user.
//! * `rediss+cluster://` and `rediss+sentinel://`: the same over TLS, with the TLS flags of
//!   `rediss://` ([`Tls`]): to every cluster node; to the sentinels and to the master they name.
//!   One TLS setting for both sides of Sentinel, as managed services and the Redis docs deploy
//!   it (`tls-replication yes` on the sentinels).
//!
//! A failed TLS handshake is worded by `error::explain_tls` with a [`TlsTarget`]: the server that
//! refused. The cluster router keeps only the text of a failed seed connection, so after a
//! failure one seed is asked again on a plain TLS connection to learn why (failure path only).
//! A Sentinel lookup knows which step failed, so its messages name the sentinel or the master
//! and the password flag that applies.
//!
//! Invariants: a password never leaves this module except inside the redis crate's
//! `ConnectionInfo` (every message names the server by [`Server::name`], which is redacted);
//! every connection has connect, read and write timeouts, because a sync connection without them
//! blocks forever on a hung server; and connecting costs one TCP handshake and nothing else —
//! no `CLIENT SETINFO`, no `HELLO` (AUTH only when a password is set).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use redis::cluster::{ClusterClientBuilder, ClusterConnection};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, RedisResult, TlsMode, Value,
};

use super::node::{self, Node};
use super::reach::{self, Dialled};
use super::tls::{TlsTarget, explain_tls, maybe_tls};
use super::wire::Wire;
use crate::report::error::{GIVE_PASSWORD, classify_redis, fail, is_timeout, redis_errors, worded};
use crate::report::exit::Exit;

#[derive(Clone)]
pub struct Server {
    pub(super) target: Target,
    pub(super) name: String,
    /// For a `rediss://` server or a `rediss+cluster://` seed: what its TLS failures are
    /// explained with.
    pub(super) tls: Option<TlsTarget>,
    /// How the password file was named (`--password-file`, or `REDLOCK_PASSWORD_FILE` when
    /// the value came from the environment) when the password came from one: messages about
    /// the password name what the operator gave.
    pub(super) password_file: Option<String>,
}

#[derive(Clone)]
pub(super) enum Target {
    Direct {
        info: ConnectionInfo,
        /// For `rediss://`: built once, trusting the server's own certificate when
        /// `--tls-ca-file` lists it (see `wire.rs`).
        tls: Option<Arc<rustls::ClientConfig>>,
    },
    Cluster {
        seeds: Vec<ConnectionInfo>,
        password: Option<String>,
        username: Option<String>,
        /// `rediss+cluster://`: TLS to every node, trusting a node's own certificate when
        /// `--tls-ca-file` lists it (see `wire.rs`).
        tls: Option<Arc<rustls::ClientConfig>>,
    },
    Sentinel {
        /// The sentinels, with their own credentials, asked in parallel: a hung sentinel must
        /// not hide the others.
        sentinels: Vec<ConnectionInfo>,
        service: String,
        /// The master's user, password and database.
        master: redis::RedisConnectionInfo,
        /// `rediss+sentinel://`: TLS to the sentinels and to the master, trusting a server's
        /// own certificate when `--tls-ca-file` lists it (see `wire.rs`).
        tls: Option<Arc<rustls::ClientConfig>>,
        /// For messages, `Some` for `rediss+sentinel://`: `--tls-ca-file` if given.
        ca_file: Option<Option<String>>,
    },
}

/// A connection to wherever the lock lives: one server, or a cluster that routes by key.
pub enum Conn {
    Single(Wire),
    Cluster(Box<ClusterConnection<Node>>),
}

/// A connection that runs local work while its first request is on the wire: the round trip
/// to Redis is idle time for redlock, and the work (preparing the command's room and keeper)
/// would otherwise follow it. Only a single server's plain connection is overlapped; through a
/// cluster router the work simply runs first.
pub struct Overlap<'a> {
    con: &'a mut Conn,
    meanwhile: Option<&'a mut dyn FnMut()>,
}

impl<'a> Overlap<'a> {
    pub fn new(con: &'a mut Conn, meanwhile: &'a mut dyn FnMut()) -> Overlap<'a> {
        Overlap {
            con,
            meanwhile: Some(meanwhile),
        }
    }

    fn run_meanwhile(&mut self) {
        if let Some(work) = self.meanwhile.take() {
            work();
        }
    }
}

impl Drop for Overlap<'_> {
    /// The work is owed whatever the request did (an error before sending included).
    fn drop(&mut self) {
        self.run_meanwhile();
    }
}

impl ConnectionLike for Overlap<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let work = self.meanwhile.take();
        let run = |work: Option<&mut dyn FnMut()>| {
            if let Some(work) = work {
                work();
            }
        };
        let Conn::Single(c) = &mut *self.con else {
            run(work);
            return self.con.req_packed_command(cmd);
        };
        let sent = c.send_packed_command(cmd);
        run(work);
        sent?;
        c.recv_response()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        // A pipeline (the acquire and WAIT, with `--replicas`) is overlapped the same way.
        let work = self.meanwhile.take();
        let Conn::Single(c) = &mut *self.con else {
            if let Some(work) = work {
                work();
            }
            return self.con.req_packed_commands(cmd, offset, count);
        };
        let sent = c.send_packed_command(cmd);
        if let Some(work) = work {
            work();
        }
        sent?;
        let mut replies = Vec::with_capacity(count);
        for index in 0..offset + count {
            let reply = c.recv_response()?;
            if index >= offset {
                replies.push(reply);
            }
        }
        Ok(replies)
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.con.check_connection()
    }

    fn is_open(&self) -> bool {
        self.con.is_open()
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Single(c) => c.req_command(cmd),
            Conn::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Conn::Single(c) => c.check_connection(),
            Conn::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Conn::Single(c) => c.is_open(),
            Conn::Cluster(c) => c.is_open(),
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Server {
    pub fn is_tls(&self) -> bool {
        match &self.target {
            Target::Sentinel { ca_file, .. } => ca_file.is_some(),
            _ => self.tls.is_some(),
        }
    }

    /// The ACL user named in the URL, for messages, when the password came from a file: then
    /// the URL's userinfo can only be the user (a URL's lone userinfo may be a password, and
    /// is never shown otherwise).
    pub fn user_beside_password_file(&self) -> Option<String> {
        self.password_file.as_ref()?;
        let user = match &self.target {
            Target::Direct { info, .. } => info.redis_settings().username().map(str::to_string),
            Target::Cluster { username, .. } => username.clone(),
            Target::Sentinel { master, .. } => master.username().map(str::to_string),
        };
        user.filter(|u| !u.is_empty())
    }

    /// For a `rediss://` server or a `rediss+cluster://` one, what its TLS failures are
    /// explained with. (A Sentinel lookup explains its own: it knows which server refused.)
    pub fn tls_target(&self) -> Option<&TlsTarget> {
        self.tls.as_ref()
    }

    /// This server, its password read from the file named `named` (as the operator gave it:
    /// the flag or the environment variable).
    pub fn with_password_file(mut self, named: String) -> Server {
        self.password_file = Some(named);
        self
    }

    /// Where a password given for this server came from, as messages name it; `None` when
    /// none was given (a URL naming a user alone).
    fn password_given(&self) -> Option<&str> {
        if let Some(file) = self.password_file.as_deref() {
            return Some(file);
        }
        let in_url = match &self.target {
            Target::Direct { info, .. } => info.redis_settings().password().is_some(),
            Target::Cluster { password, .. } => password.is_some(),
            Target::Sentinel { master, .. } => master.password().is_some(),
        };
        in_url.then_some("the URL")
    }

    /// A Sentinel setup (`redis+sentinel://`, `rediss+sentinel://`).
    pub fn is_sentinel(&self) -> bool {
        matches!(self.target, Target::Sentinel { .. })
    }

    /// A Redis Cluster (`redis+cluster://`, `rediss+cluster://`).
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster { .. })
    }

    /// Cluster and Sentinel targets cannot be members of a quorum.
    pub fn is_direct(&self) -> bool {
        matches!(self.target, Target::Direct { .. })
    }

    /// `err` in plain words when it is a TLS handshake this server (or cluster seed) refused,
    /// as a 69; otherwise as it is. For callers that talk to a connection themselves (doctor);
    /// `nodes/mod.rs` does the same for the lock's operations.
    pub fn explained(&self, err: anyhow::Error) -> anyhow::Error {
        // Whether the connection answered before is not known here: only what is plain
        // whatever it did (refused, unknown host, a password) is worded.
        self.explain(err, None, true)
    }

    /// `err` in plain words (see `reach.rs`): a TLS handshake this server refused (as a 69),
    /// a connection that could not be made or was closed unanswered, a refused password.
    /// `answered`: whether the connection had answered a request before `err`; `timeout`: the
    /// wait it was given, when known. Otherwise `err` as it is.
    pub fn explain(
        &self,
        err: anyhow::Error,
        timeout: Option<Duration>,
        answered: bool,
    ) -> anyhow::Error {
        if let Some(text) = self
            .tls
            .as_ref()
            .and_then(|target| explain_tls(&err, target))
        {
            return fail(Exit::Unavailable, text);
        }
        // Through Sentinel, a failure of the master's connection is the master's: name the
        // master the sentinel pointed at (sentinel.rs words it), not the sentinel's URL.
        let master = self.is_sentinel().then(|| master_named(&err)).flatten();
        let (name, address) = match &master {
            Some(named) => (named.clone(), named.clone()),
            None => (
                self.name.clone(),
                self.address().unwrap_or_else(|| self.name.clone()),
            ),
        };
        if !answered
            && self.is_cluster()
            && redis_errors(&err).any(|e| e.kind() == ErrorKind::ClusterConnectionNotFound)
        {
            return self.no_node(err, timeout.unwrap_or(Duration::from_secs(1)));
        }
        let dialled = Dialled {
            name: &name,
            address: &address,
            tls: self.is_tls(),
            timeout,
            answered,
            password: self.password_given(),
        };
        match reach::explain(&err, &dialled) {
            Some(text) => worded(err, text),
            None => err,
        }
    }

    /// The URL as it may be shown to people: without its password.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection whose connect, read and write operations each give up after `timeout`.
    pub fn connect(&self, timeout: Duration) -> Result<Conn> {
        let timeout = timeout.max(Duration::from_millis(1));
        if let Target::Cluster {
            seeds,
            password,
            username,
            tls,
            ..
        } = &self.target
        {
            let mut builder = ClusterClientBuilder::new(seeds.clone())
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(2);
            if let Some(pw) = password {
                builder = builder.password(pw);
            }
            if let Some(user) = username {
                builder = builder.username(user);
            }
            if tls.is_some() {
                // Node addresses become `rediss://` ones; their TLS is redlock's (`wire.rs`).
                builder = builder.tls(TlsMode::Secure);
            }
            node::cluster_tls(tls.clone());
            let con = match builder
                .build()
                .and_then(|client| client.get_generic_connection::<Node>())
            {
                Ok(con) => con,
                Err(e) => {
                    let err = anyhow!(e).context(format!("cannot connect to {}", self.name));
                    return Err(self.why_not(err, timeout));
                }
            };
            let con = Conn::Cluster(Box::new(con));
            set_timeouts(&con, timeout)?;
            return Ok(con);
        }
        Ok(Conn::Single(self.connect_direct(timeout)?))
    }

    /// The cluster router words a failed seed connection as text only: one seed is asked
    /// again on a connection of our own (same credentials and TLS settings, one PING) to learn
    /// what it says — a refused password (77), a TLS handshake explained, a plain URL at a TLS
    /// port. `err` stays as it is when the seed says nothing of the kind.
    fn why_not(&self, err: anyhow::Error, timeout: Duration) -> anyhow::Error {
        let (seed, tls) = self.seed();
        let probe = Wire::connect(&seed, tls, timeout, timeout)
            .and_then(|mut con| redis::cmd("PING").query::<()>(&mut con));
        let Err(probe) = probe else {
            return err;
        };
        let address = address_of(&seed);
        if classify_redis(&probe) == Exit::Permission {
            let text = if probe.code() == Some("NOAUTH") {
                format!("cluster node {address} requires a password: {GIVE_PASSWORD}")
            } else {
                format!(
                    "cluster node {address} refused the password: check it ({}) and the URL's \
                     user",
                    self.password_given()
                        .unwrap_or("nowhere: the URL names a user alone")
                )
            };
            return fail(Exit::Permission, text);
        }
        let Some(target) = &self.tls else {
            // A plain cluster URL at TLS ports: the seed hangs up at the first request.
            if probe.is_connection_dropped() {
                return err.context(maybe_tls(&address, "rediss+cluster://"));
            }
            return err;
        };
        let probe = anyhow!(probe);
        if let Some(text) = explain_tls(&probe, target) {
            return fail(Exit::Unavailable, text);
        }
        if is_timeout(&probe) {
            return err.context(format!(
                "{} gave no TLS answer (is it the plain port? use redis+cluster:// or the \
                 tls-port)",
                target.address
            ));
        }
        err
    }

    /// A cluster URL whose router found no node to send a request to, though a seed took the
    /// connection: the router words it `No connections found`, which says nothing of why. The
    /// seed is asked for its slot map on a connection of our own (failure path only): a
    /// server that is no cluster node refuses (cluster support disabled), a cluster not yet
    /// set up has no slots, and otherwise the nodes it lists did not answer from here (the
    /// addresses they announce may be ones only their own network reaches).
    fn no_node(&self, err: anyhow::Error, timeout: Duration) -> anyhow::Error {
        let (seed, tls) = self.seed();
        let address = address_of(&seed);
        let slots = Wire::connect(&seed, tls, timeout, timeout)
            .and_then(|mut con| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut con));
        let text = match slots {
            Err(e)
                if e.detail()
                    .is_some_and(|d| d.contains("cluster support disabled")) =>
            {
                let scheme = if self.is_tls() { "rediss" } else { "redis" };
                format!(
                    "the server at {address} is not in cluster mode (cluster support disabled): \
                     use {scheme}://{address} for a single server"
                )
            }
            Ok(Value::Array(slots)) if slots.is_empty() => format!(
                "the cluster at {address} has no hash slots assigned: finish setting it up \
                 (redis-cli --cluster create), or use redis://{address} for a single server"
            ),
            Ok(_) => format!(
                "no node of the cluster answered: {address} lists the nodes, but none of them \
                 could be reached from here (check the addresses they announce: \
                 cluster-announce-ip)"
            ),
            Err(_) => return err,
        };
        worded(err, text)
    }

    /// A cluster's first seed, with the cluster's credentials, and its TLS settings.
    fn seed(&self) -> (ConnectionInfo, Option<&Arc<rustls::ClientConfig>>) {
        let Target::Cluster {
            seeds,
            password,
            username,
            tls,
            ..
        } = &self.target
        else {
            unreachable!("only a cluster has seeds");
        };
        let mut info = seeds[0].redis_settings().clone();
        if let Some(pw) = password {
            info = info.set_password(pw);
        }
        if let Some(user) = username {
            info = info.set_username(user);
        }
        (seeds[0].clone().set_redis_settings(info), tls.as_ref())
    }

    /// A quorum node's connection ([`Server::connect`] of a `redis://`, `rediss://` or
    /// `redis+unix://` server) and which server answered: its `run_id`, learned in the
    /// connection's own handshake (see [`Wire::connect_identified`]). A server that will not
    /// say (`INFO` refused by an ACL, a proxy that has no `run_id`) is an error: a quorum
    /// cannot tell it from its other nodes. Cluster and Sentinel, never a quorum's nodes, are
    /// refused too.
    pub fn connect_identified(&self, timeout: Duration) -> Result<(Conn, String)> {
        let Target::Direct { info, tls } = &self.target else {
            return Err(anyhow!("{} cannot be a quorum's node", self.name));
        };
        let timeout = timeout.max(Duration::from_millis(1));
        match Wire::connect_identified(info, tls.as_ref(), timeout, timeout) {
            Ok((con, Ok(id))) => Ok((Conn::Single(con), id)),
            Ok((_, Err(e))) => Err(anyhow!(e).context(format!(
                "{} did not say which server it is (INFO server, which tells a quorum's nodes \
                 apart; an ACL user needs +info)",
                self.name
            ))),
            Err(e) => {
                let err = anyhow!(e).context(format!("cannot connect to {}", self.name));
                Err(self.explain(err, Some(timeout), false))
            }
        }
    }

    /// Where a `redis://`, `rediss://` or `redis+unix://` URL leads, as text: the host (in
    /// lower case) and port, or the socket's path. Two URLs with the same address name one
    /// server whatever else they say (a database, a user): a quorum refuses them before
    /// anything is contacted. `None` for a Cluster or Sentinel.
    pub fn address(&self) -> Option<String> {
        let Target::Direct { info, .. } = &self.target else {
            return None;
        };
        Some(match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                format!("{}:{port}", host.to_ascii_lowercase())
            }
            other => other.to_string(),
        })
    }

    /// A plain connection: to the server, to Sentinel's current master, or to one node of a
    /// cluster (enough for pub/sub, which a cluster broadcasts to every node).
    pub fn connect_direct(&self, timeout: Duration) -> Result<Wire> {
        let timeout = timeout.max(Duration::from_millis(1));
        let seed;
        let (info, tls) = match &self.target {
            Target::Direct { info, tls } => (info, tls.as_ref()),
            Target::Cluster { .. } => {
                let (first, tls) = self.seed();
                seed = first;
                (&seed, tls)
            }
            Target::Sentinel { .. } => return self.master(timeout),
        };
        match Wire::connect(info, tls, timeout, timeout) {
            Ok(con) => Ok(con),
            Err(e) => {
                let err = anyhow!(e).context(format!("cannot connect to {}", self.name));
                Err(self.explain(err, Some(timeout), false))
            }
        }
    }
}

/// `HOST:PORT` of a node, as messages show it.
pub(super) fn address_of(node: &ConnectionInfo) -> String {
    match node.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        other => other.to_string(),
    }
}

pub fn set_timeouts(con: &Conn, timeout: Duration) -> Result<()> {
    match con {
        Conn::Single(c) => Ok(c.set_timeouts(timeout)?),
        Conn::Cluster(c) => {
            let timeout = Some(timeout.max(Duration::from_millis(1)));
            c.set_read_timeout(timeout)?;
            c.set_write_timeout(timeout)?;
            Ok(())
        }
    }
}

/// The master a sentinel named, as `sentinel.rs` words it in `err`'s chain ("the master
/// HOST:PORT that sentinel … names for SERVICE").
fn master_named(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|cause| {
        let text = cause.to_string();
        let at = text.find("the master ")?;
        let named = &text[at..];
        // "that sentinel S names for" (a first lookup), "that 2 of the 3 sentinels name for"
        // (a reconnection, which needs a majority).
        let end = [" names for ", " name for "]
            .iter()
            .find_map(|words| named.find(words).map(|at| at + words.len()))?;
        let service_end = named[end..]
            .find(|c: char| c.is_whitespace() || c == ':')
            .map_or(named.len(), |i| end + i);
        Some(named[..service_end].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::master_named;

    #[test]
    fn the_master_is_named_by_a_lone_sentinel_or_a_majority() {
        let lone = anyhow::anyhow!("connection refused").context(
            "cannot connect to the master 10.0.0.1:6379 that sentinel 10.0.0.9:26379 names for svc",
        );
        assert_eq!(
            master_named(&lone).as_deref(),
            Some("the master 10.0.0.1:6379 that sentinel 10.0.0.9:26379 names for svc")
        );
        let agreed = anyhow::anyhow!("connection refused").context(
            "cannot connect to the master 10.0.0.1:6379 that 2 of the 3 sentinels name for svc",
        );
        assert_eq!(
            master_named(&agreed).as_deref(),
            Some("the master 10.0.0.1:6379 that 2 of the 3 sentinels name for svc")
        );
    }
}
