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

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use redis::cluster::{ClusterClientBuilder, ClusterConnection};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, IntoConnectionInfo, RedisError,
    RedisResult, TlsMode, Value,
};

use crate::error::{classify_redis, explain_tls, fail, is_timeout, maybe_tls, usage};
use crate::exit::Exit;
use crate::wire::{self, Node, Wire};

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Clone)]
pub struct Server {
    target: Target,
    name: String,
    /// For a `rediss://` server or a `rediss+cluster://` seed: what its TLS failures are
    /// explained with.
    tls: Option<TlsTarget>,
}

/// What a TLS failure's message names: the server as dialled and where trust came from.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    /// `HOST:PORT` as in the URL (no password).
    pub address: String,
    /// `--tls-ca-file` as given; `None` means the system's trust store.
    pub ca_file: Option<String>,
}

#[derive(Clone)]
enum Target {
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

/// The sentinels' own credentials, apart from the master's (`--sentinel-user`,
/// `--sentinel-password-file`).
#[derive(Clone, Default)]
pub struct SentinelAuth {
    pub username: Option<String>,
    pub password: Option<String>,
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
        self.run_meanwhile();
        self.con.req_packed_commands(cmd, offset, count)
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

/// How to talk TLS to `rediss://` servers. Verification is on unless `insecure`; without a CA
/// file the system's trust store is used.
#[derive(Clone, Default)]
pub struct Tls {
    pub ca: Option<Vec<u8>>,
    /// The path `ca` was read from, for messages.
    pub ca_file: Option<String>,
    /// Client certificate and key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub insecure: bool,
}

impl Tls {
    /// Reads the certificate files now, so a wrong path is a usage error (64) before anything
    /// is contacted.
    pub fn load(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
        insecure: bool,
    ) -> Result<Tls> {
        let read = |flag: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|e| usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        let ca_bytes = ca.map(|p| read("--tls-ca-file", p)).transpose()?;
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((read("--tls-cert-file", c)?, read("--tls-key-file", k)?)),
            _ => None,
        };
        Ok(Tls {
            ca: ca_bytes,
            ca_file: ca.map(|p| p.display().to_string()),
            identity,
            insecure,
        })
    }

    /// redlock's own TLS settings (`wire.rs`), with the exception for a server presenting a
    /// certificate of `--tls-ca-file` as its own when `own_certificates`. Errors name the flag.
    fn config(
        &self,
        own_certificates: bool,
    ) -> std::result::Result<Arc<rustls::ClientConfig>, String> {
        wire::client_config(&wire::TlsFiles {
            ca: self.ca.as_deref(),
            identity: self
                .identity
                .as_ref()
                .map(|(cert, key)| (cert.as_slice(), key.as_slice())),
            insecure: self.insecure,
            own_certificates,
        })
    }

    fn target(&self, address: String) -> TlsTarget {
        TlsTarget {
            address,
            ca_file: self.ca_file.clone(),
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Server {
    /// Parses one URL; `password` (from `--password-file`) wins over one in the URL.
    /// `sentinel` is for the sentinels of a `redis+sentinel://` URL, and refused with any other.
    pub fn parse(
        url: &str,
        password: Option<&str>,
        tls: &Tls,
        sentinel: &SentinelAuth,
    ) -> Result<Server> {
        let name = redact(url);
        let url = url.trim();
        if url.is_empty() {
            return Err(usage("--url is empty"));
        }
        for (scheme, tls) in [
            ("redis+sentinel://", None),
            ("rediss+sentinel://", Some(tls)),
        ] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return Server::parse_sentinel(rest, password, tls, sentinel, name);
            }
        }
        if sentinel.password.is_some() {
            return Err(usage(format!(
                "--sentinel-password-file is for redis+sentinel:// and rediss+sentinel:// URLs, \
                 not --url {name}"
            )));
        }
        for (scheme, tls) in [("redis+cluster://", None), ("rediss+cluster://", Some(tls))] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return Server::parse_cluster(rest, password, tls, name);
            }
        }
        let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(usage(format!(
                "--url {name}: unsupported scheme; use redis://HOST:PORT, rediss://HOST:PORT or \
                 redis+unix:///PATH, redis[s]+cluster://HOST:PORT or \
                 redis[s]+sentinel://HOST:PORT/SERVICE"
            )));
        }
        let info = url
            .into_connection_info()
            .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))?;
        if let redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } = info.addr()
            && (host.is_empty() || *port == 0)
        {
            return Err(usage(format!("--url {name}: missing host or port")));
        }
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(password) = password {
            settings = settings.set_password(password);
        }
        let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let mut info = info.set_redis_settings(settings).set_tcp_settings(tcp);
        let is_tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        let tls_target = match info.addr() {
            ConnectionAddr::TcpTls { host, port, .. } => Some(TlsTarget {
                address: format!("{host}:{port}"),
                ca_file: tls.ca_file.clone(),
            }),
            _ => None,
        };
        if let ConnectionAddr::TcpTls { host, port, .. } = info.addr().clone()
            && tls.insecure
        {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: true,
                tls_params: None,
            });
        }
        let tls = if is_tls {
            Some(
                tls.config(true)
                    .map_err(|e| usage(format!("--url {name}: {e}")))?,
            )
        } else {
            None
        };
        Ok(Server {
            target: Target::Direct { info, tls },
            name,
            tls: tls_target,
        })
    }

    /// `[user:pass@]host:port[,host:port...]` into one address per node (`rediss://` ones when
    /// `tls`), and the user and password of the URL.
    fn nodes_of(
        rest: &str,
        tls: bool,
        name: &str,
    ) -> Result<(Vec<ConnectionInfo>, Option<String>, Option<String>)> {
        let (userinfo, hosts) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (username, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
            Some((u, p)) => (
                (!u.is_empty()).then(|| percent_decode(u)),
                (!p.is_empty()).then(|| percent_decode(p)),
            ),
            None => (None, None),
        };
        let scheme = if tls { "rediss" } else { "redis" };
        let nodes = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                format!("{scheme}://{h}")
                    .as_str()
                    .into_connection_info()
                    .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))
            })
            .collect::<Result<Vec<_>>>()?;
        if nodes.is_empty() {
            return Err(usage(format!("--url {name}: no host:port given")));
        }
        Ok((nodes, username, password))
    }

    fn parse_cluster(
        rest: &str,
        password: Option<&str>,
        tls: Option<&Tls>,
        name: String,
    ) -> Result<Server> {
        let (seeds, username, url_password) =
            Server::nodes_of(rest.trim_end_matches('/'), tls.is_some(), &name)?;
        let target = tls.map(|tls| tls.target(address_of(&seeds[0])));
        let config = tls
            .map(|tls| tls.config(true))
            .transpose()
            .map_err(|e| usage(format!("--url {name}: {e}")))?;
        Ok(Server {
            target: Target::Cluster {
                seeds,
                password: password.map(str::to_string).or(url_password),
                username,
                tls: config,
            },
            name,
            tls: target,
        })
    }

    fn parse_sentinel(
        rest: &str,
        password: Option<&str>,
        tls: Option<&Tls>,
        auth: &SentinelAuth,
        name: String,
    ) -> Result<Server> {
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut path = path.split('/').filter(|p| !p.is_empty());
        let service = path.next().ok_or_else(|| {
            usage(format!(
                "--url {name}: missing the service name, as in redis+sentinel://HOST:26379/mymaster"
            ))
        })?;
        let db: i64 = match path.next() {
            Some(db) => db
                .parse()
                .map_err(|_| usage(format!("--url {name}: database {db:?} is not a number")))?,
            None => 0,
        };
        let (nodes, username, url_password) = Server::nodes_of(hosts, tls.is_some(), &name)?;
        let mut master = redis::RedisConnectionInfo::default()
            .set_skip_set_lib_name()
            .set_db(db);
        if let Some(user) = username {
            master = master.set_username(user);
        }
        if let Some(pw) = password.map(str::to_string).or(url_password) {
            master = master.set_password(pw);
        }
        let mut own = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(user) = &auth.username {
            own = own.set_username(user);
        }
        if let Some(pw) = &auth.password {
            own = own.set_password(pw);
        }
        let sentinels = nodes
            .into_iter()
            .map(|node| node.set_redis_settings(own.clone()))
            .collect();
        let config = tls
            .map(|tls| tls.config(true))
            .transpose()
            .map_err(|e| usage(format!("--url {name}: {e}")))?;
        Ok(Server {
            target: Target::Sentinel {
                sentinels,
                service: service.to_string(),
                master,
                tls: config,
                ca_file: tls.map(|tls| tls.ca_file.clone()),
            },
            name,
            tls: None,
        })
    }

    pub fn is_tls(&self) -> bool {
        match &self.target {
            Target::Sentinel { ca_file, .. } => ca_file.is_some(),
            _ => self.tls.is_some(),
        }
    }

    /// For a `rediss://` server or a `rediss+cluster://` one, what its TLS failures are
    /// explained with. (A Sentinel lookup explains its own: it knows which server refused.)
    pub fn tls_target(&self) -> Option<&TlsTarget> {
        self.tls.as_ref()
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
    /// `nodes.rs` does the same for the lock's operations.
    pub fn explained(&self, err: anyhow::Error) -> anyhow::Error {
        match self
            .tls
            .as_ref()
            .and_then(|target| explain_tls(&err, target))
        {
            Some(text) => fail(Exit::Unavailable, text),
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
            wire::cluster_tls(tls.clone());
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
                format!(
                    "cluster node {address} requires a password: give it with --password-file \
                     or in the URL"
                )
            } else {
                format!(
                    "cluster node {address} refused the password: check --password-file (and \
                     the URL's user)"
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
                Err(self.explained(err))
            }
        }
    }

    /// A connection to the master the sentinels name, as Redis documents for Sentinel clients:
    /// every sentinel is asked `SENTINEL GET-MASTER-ADDR-BY-NAME` at once, each in a thread of
    /// its own that then connects to the master named and checks that `ROLE` says master (one
    /// named by a sentinel that has not yet seen a failover may have been demoted, or be gone).
    /// The first master that does wins. Each address is tried by one thread only; each step of
    /// each thread (connecting, each reply) is given the time left before one deadline,
    /// `timeout` from now, and the lookup ends there: a hung sentinel, or a stale one naming a
    /// hung old master, cannot hide the others. All on redlock's own connections, so sentinels
    /// and master get the TLS of `rediss://`.
    fn master(&self, timeout: Duration) -> Result<Wire> {
        let Target::Sentinel {
            sentinels,
            service,
            master,
            tls,
            ca_file,
        } = &self.target
        else {
            unreachable!("only Sentinel has a master to look up");
        };
        let deadline = Instant::now() + timeout;
        let claimed = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        for sentinel in sentinels {
            let asked = Asked {
                sentinel: sentinel.clone(),
                service: service.clone(),
                master: master.clone(),
                tls: tls.clone(),
                ca_file: ca_file.clone(),
                deadline,
                claimed: Arc::clone(&claimed),
            };
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("sentinel".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let answer = asked.master(&tx);
                    let _ = tx.send(Lookup::Answer(answer));
                })
                .context("cannot start a Sentinel lookup")?;
        }
        drop(tx);
        let mut last_error: Option<anyhow::Error> = None;
        // The last master named, while it is being tried: what a lookup that runs out of time
        // was waiting for.
        let mut named: Option<String> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Lookup::Named(master)) => named = Some(master),
                Ok(Lookup::Answer(Ok(Some(con)))) => {
                    con.set_timeouts(timeout)?;
                    return Ok(con);
                }
                // Another sentinel's thread tries that master.
                Ok(Lookup::Answer(Ok(None))) => {}
                // A refusal that says what to do (a password, a certificate) outranks one
                // that does not.
                Ok(Lookup::Answer(Err(e))) => {
                    if last_error.as_ref().is_none_or(|last| !decided(last)) {
                        last_error = Some(e);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Every thread answered (a thread that found its master claimed by another
                    // answers nothing of its own).
                    let Some(e) = last_error else {
                        return Err(anyhow!(
                            "no sentinel of {} named a usable master",
                            self.name
                        ));
                    };
                    if decided(&e) {
                        return Err(e);
                    }
                    return Err(e)
                        .with_context(|| format!("Sentinel {} has no usable master", self.name));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(e) = last_error {
                        return Err(e);
                    }
                    if let Some(master) = named {
                        return Err(anyhow!(redis::RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("{master} did not answer within {timeout:?}"),
                        ))));
                    }
                    let hint = if ca_file.is_some() {
                        " (is it the plain port? use redis+sentinel:// or the sentinels' tls-port)"
                    } else {
                        ""
                    };
                    return Err(anyhow!(redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no sentinel of {} answered within {timeout:?}{hint}",
                            self.name
                        ),
                    ))));
                }
            }
        }
    }
}

/// What a sentinel's thread tells the lookup.
enum Lookup {
    /// The master it is about to try, in words for a message.
    Named(String),
    /// A connection to that master, `None` when another thread tries it, or why not.
    Answer(Result<Option<Wire>>),
}

/// One sentinel, asked for the master in a thread of its own, and the master it names.
struct Asked {
    /// Its address, with the sentinels' own credentials.
    sentinel: ConnectionInfo,
    service: String,
    /// The master's user, password and database.
    master: redis::RedisConnectionInfo,
    tls: Option<Arc<rustls::ClientConfig>>,
    ca_file: Option<Option<String>>,
    deadline: Instant,
    /// The masters some thread has tried or is trying.
    claimed: Arc<Mutex<Vec<(String, u16)>>>,
}

impl Asked {
    /// Time left before the deadline (at least 1 ms, so that a late step fails as a timeout).
    fn left(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    }

    /// A connection to the master this sentinel names; `None` when another thread tries that
    /// master. Tells `lookup` which master it tries before trying it.
    fn master(&self, lookup: &mpsc::Sender<Lookup>) -> Result<Option<Wire>> {
        let address = address_of(&self.sentinel);
        let ask = || -> RedisResult<Option<(String, u16)>> {
            let mut con =
                Wire::connect(&self.sentinel, self.tls.as_ref(), self.left(), self.left())?;
            con.set_timeouts(self.left())?;
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&self.service)
                .query(&mut con)
        };
        let (host, port) = match ask() {
            Ok(Some(named)) => named,
            Ok(None) => {
                return Err(anyhow!(
                    "sentinel {address} knows no master named {}",
                    self.service
                ));
            }
            Err(e) => return Err(self.refusal(&address, e)),
        };
        {
            let mut claimed = self
                .claimed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if claimed.contains(&(host.clone(), port)) {
                return Ok(None);
            }
            claimed.push((host.clone(), port));
        }
        let named = format!(
            "the master {host}:{port} that sentinel {address} names for {}",
            self.service
        );
        let _ = lookup.send(Lookup::Named(named.clone()));
        self.connect_master(&named, &host, port).map(Some)
    }

    /// What a sentinel's refusal means, in the words of the flags that change it.
    fn refusal(&self, address: &str, err: RedisError) -> anyhow::Error {
        if classify_redis(&err) == Exit::Permission {
            let text = if err.code() == Some("NOAUTH") {
                format!(
                    "sentinel {address} requires a password: give the sentinels' own password \
                     with --sentinel-password-file"
                )
            } else if err.code() == Some("NOPERM") {
                let user = self
                    .sentinel
                    .redis_settings()
                    .username()
                    .map_or_else(|| "the default user".to_string(), |u| format!("user {u}"));
                format!(
                    "sentinel {address} does not let {user} run SENTINEL \
                     GET-MASTER-ADDR-BY-NAME: grant it +sentinel|get-master-addr-by-name \
                     (--sentinel-user names the user)"
                )
            } else {
                format!(
                    "sentinel {address} refused the sentinels' password: check \
                     --sentinel-password-file (and --sentinel-user)"
                )
            };
            return fail(Exit::Permission, text);
        }
        let err = anyhow!(err);
        if let Some(text) = tls_words(&err, address, self.ca_file.as_ref()) {
            return fail(Exit::Unavailable, text);
        }
        err.context(format!("sentinel {address}"))
    }

    /// Connects to the master at `host`:`port` (`named` in messages: which sentinel named it),
    /// with the master's credentials, and checks with `ROLE` that it still is one.
    fn connect_master(&self, named: &str, host: &str, port: u16) -> Result<Wire> {
        let addr = match self.tls {
            Some(_) => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: false,
                tls_params: None,
            },
            None => ConnectionAddr::Tcp(host.to_string(), port),
        };
        let info = addr
            .into_connection_info()?
            .set_redis_settings(self.master.clone());
        let address = format!("{host}:{port}");
        let mut con = match Wire::connect(&info, self.tls.as_ref(), self.left(), self.left()) {
            Ok(con) => con,
            Err(e) => {
                let err = anyhow!(e);
                if let Some(text) = tls_words(&err, &address, self.ca_file.as_ref()) {
                    return Err(fail(Exit::Unavailable, text));
                }
                return Err(err.context(format!("cannot connect to {named}")));
            }
        };
        con.set_timeouts(self.left())?;
        match redis::cmd("ROLE").query::<Value>(&mut con) {
            Ok(Value::Array(role)) => match role.first() {
                Some(Value::BulkString(role)) if role.as_slice() == b"master" => Ok(con),
                _ => Err(anyhow!(
                    "{named} is not a master (a failover is under way?)"
                )),
            },
            // A user not allowed ROLE: its writes are refused on a replica anyway.
            Err(e) if e.code() == Some("NOPERM") => Ok(con),
            Ok(other) => Err(anyhow!("{named} answered ROLE with {other:?}")),
            Err(e) => Err(anyhow!(e).context(format!("cannot ask {named} its ROLE"))),
        }
    }
}

/// A TLS refusal by the server at `address` in plain words, when `ca_file` is `Some`
/// (`rediss+sentinel://`, holding `--tls-ca-file` if given).
fn tls_words(
    err: &anyhow::Error,
    address: &str,
    ca_file: Option<&Option<String>>,
) -> Option<String> {
    explain_tls(
        err,
        &TlsTarget {
            address: address.to_string(),
            ca_file: ca_file?.clone(),
        },
    )
}

/// Whether an error already carries its status and words (a `Failure`).
fn decided(err: &anyhow::Error) -> bool {
    err.downcast_ref::<crate::error::Failure>().is_some()
}

/// `HOST:PORT` of a node, as messages show it.
fn address_of(node: &ConnectionInfo) -> String {
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

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the first line of a password file. An unreadable or empty file is a usage error (64):
/// the operator named it, so guessing another way to authenticate would only hide the mistake.
/// `flag` is the option that named the file, for the message.
pub fn read_password_file(flag: &str, path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {flag} {}: {e}", path.display())))?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(usage(format!("{flag} {} is empty", path.display())));
    }
    Ok(password.to_string())
}

fn describe_url_error(err: &redis::RedisError) -> String {
    // The redis crate's messages may quote the URL; ours never carries the password.
    match err.detail() {
        Some(detail) if !detail.contains('@') => format!("{} ({detail})", err.category()),
        _ => "malformed URL".to_string(),
    }
}

/// `redis://user:secret@host:6379/0` → `redis://user:***@host:6379/0`; also the `pass` and
/// `password` query parameters (`redis+unix:///s.sock?pass=secret`). People paste raw passwords
/// containing `/`, `?` or `@` into URLs, so the user part runs to the *last* `@`: redacting a
/// little too much is the safe mistake.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end + 3);
    let rest = match rest.rfind('@') {
        Some(at) => {
            let user = match rest[..at].split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None if at == 0 => String::new(),
                // `redis://secret@host` is read as a username, but people write passwords there.
                None => "***".to_string(),
            };
            format!("{user}@{}", &rest[at + 1..])
        }
        None => rest.to_string(),
    };
    let Some((before, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if matches!(name, "pass" | "password") => format!("{name}=***"),
            _ => param.to_string(),
        })
        .collect();
    format!("{head}{before}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::classify;
    use crate::exit::Exit;

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("redis://user:s3cr%40t@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact("redis://:pw@host"), "redis://:***@host");
        assert_eq!(redact("redis://pw@host/1"), "redis://***@host/1");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock"),
            "redis+unix:///tmp/r.sock"
        );
    }

    #[test]
    fn malformed_urls_are_usage_errors_without_the_password() {
        for url in [
            "http://x",
            "redis://:99999",
            "redis://:hunter2@host:99999",
            "",
            "localhost:6379",
        ] {
            let err =
                Server::parse(url, None, &Tls::default(), &SentinelAuth::default()).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            assert!(!format!("{err:#}").contains("hunter2"), "{err:#}");
        }
        let (tls, none) = (Tls::default(), SentinelAuth::default());
        assert!(Server::parse("redis://127.0.0.1:6379", None, &tls, &none).is_ok());
        assert!(Server::parse("redis+unix:///tmp/x.sock", None, &tls, &none).is_ok());
        assert!(
            Server::parse("rediss://localhost:6380", None, &tls, &none)
                .unwrap()
                .is_tls()
        );
    }

    #[test]
    fn tls_cluster_and_sentinel_urls_are_tls_and_plain_ones_are_not() {
        let (tls, none) = (Tls::default(), SentinelAuth::default());
        let parse = |url| Server::parse(url, None, &tls, &none).unwrap();
        assert!(parse("rediss+cluster://127.0.0.1:7000,127.0.0.1:7001").is_tls());
        assert!(parse("rediss+sentinel://127.0.0.1:26380/mymaster/2").is_tls());
        assert!(!parse("redis+cluster://127.0.0.1:7000").is_tls());
        assert!(!parse("redis+sentinel://127.0.0.1:26379/mymaster").is_tls());
        let cluster = parse("rediss+cluster://127.0.0.1:7000,127.0.0.1:7001");
        assert_eq!(
            cluster.tls_target().map(|t| t.address.as_str()),
            Some("127.0.0.1:7000")
        );
        assert!(!cluster.is_direct());
    }

    #[test]
    fn a_sentinel_password_is_refused_with_urls_that_are_not_sentinel_ones() {
        let tls = Tls::default();
        let auth = SentinelAuth {
            username: None,
            password: Some("hunter2".into()),
        };
        for url in [
            "redis://127.0.0.1:6379",
            "rediss://127.0.0.1:6380",
            "redis+cluster://127.0.0.1:7000",
        ] {
            let err = Server::parse(url, None, &tls, &auth).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            let text = format!("{err:#}");
            assert!(text.contains("--sentinel-password-file"), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
        assert!(Server::parse("redis+sentinel://127.0.0.1:26379/m", None, &tls, &auth).is_ok());
    }
}
