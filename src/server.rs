//! Where the lock lives: parsing `--url`, applying `--password-file`, connecting with timeouts.
//!
//! Three kinds of target, all through the redis crate's own support:
//! * `redis://`, `rediss://`, `redis+unix://`: one server.
//! * `redis+cluster://HOST:PORT[,HOST:PORT...]`: a Redis Cluster, from any of its nodes; the
//!   crate routes each script by its first key and follows MOVED/ASK, and the lock's companion
//!   keys share its hash slot.
//! * `redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`: the master Sentinel names for
//!   SERVICE, asked again at every (re)connection, so a failover is followed. A password (URL or
//!   `--password-file`) is the master's; the sentinels' own credentials are separate
//!   ([`SentinelAuth`]: `--sentinel-user`, `--sentinel-password-file`), because operators give
//!   sentinels their own `requirepass` or ACL user.
//! * `rediss+cluster://` and `rediss+sentinel://`: the same over TLS, with the TLS flags of
//!   `rediss://` ([`Tls`]): to every cluster node; to the sentinels and to the master they name.
//!   One TLS setting for both sides of Sentinel, as managed services and the Redis docs deploy
//!   it (`tls-replication yes` on the sentinels).
//!
//! A failed TLS handshake is worded by `error::explain_tls` with a [`TlsTarget`]: the server that
//! refused. The cluster client keeps only the text of a failed seed connection, so after a
//! failure one seed is asked again on a plain TLS connection to learn why (failure path only).
//! A Sentinel lookup that fails asks its sentinel whether it is the one refusing, or the master
//! it names (and where that master is), so the message names the right server and the right
//! password flag.
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
use redis::sentinel::{
    SentinelClient, SentinelClientBuilder, SentinelNodeConnectionInfo, SentinelServerType::Master,
};
use redis::{
    Client, Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, IntoConnectionInfo, RedisError,
    RedisResult, TlsCertificates, TlsMode, Value,
};

use crate::error::{classify_redis, explain_tls, fail, is_timeout, maybe_tls, usage};
use crate::exit::Exit;
use crate::wire::{self, Wire};

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
    /// Whether a certificate of `ca_file` presented as the server's own is accepted: on
    /// redlock's own connections to one server, not through the crate's cluster and Sentinel
    /// clients (see `wire.rs`).
    pub own_accepted: bool,
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
        /// One client per sentinel, asked in parallel: a hung sentinel must not hide the others.
        sentinels: Vec<SentinelNode>,
        service: String,
        /// `Some` for `rediss+sentinel://`, holding `--tls-ca-file` if given (for messages).
        ca_file: Option<Option<String>>,
        /// For `rediss+sentinel://`: redlock's own connections to the master.
        master_tls: Option<Arc<rustls::ClientConfig>>,
    },
}

/// One sentinel: its address as given (for messages) and a client that asks it for the master.
#[derive(Clone)]
struct SentinelNode {
    address: String,
    client: Arc<Mutex<SentinelClient>>,
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
    Cluster(Box<ClusterConnection<Wire>>),
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

    fn configured(&self) -> bool {
        self.ca.is_some() || self.identity.is_some()
    }

    /// The CA and client certificate as the redis crate takes them.
    fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self
                .identity
                .clone()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert,
                    client_key: key,
                }),
            root_cert: self.ca.clone(),
        }
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

    fn mode(&self) -> TlsMode {
        if self.insecure {
            TlsMode::Insecure
        } else {
            TlsMode::Secure
        }
    }

    fn target(&self, address: String) -> TlsTarget {
        TlsTarget {
            address,
            ca_file: self.ca_file.clone(),
            own_accepted: true,
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
                own_accepted: true,
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
        // With verification off the crate reaches the master without certificates, so a client
        // certificate would be sent to the sentinels only: refused rather than half applied.
        if let Some(tls) = tls
            && tls.insecure
            && tls.identity.is_some()
        {
            return Err(usage(format!(
                "--url {name}: --tls-insecure cannot be combined with --tls-cert-file for \
                 Sentinel (the master would be reached without the certificate); give \
                 --tls-ca-file instead of --tls-insecure"
            )));
        }
        let (nodes, username, url_password) = Server::nodes_of(hosts, tls.is_some(), &name)?;
        let master_password = password.map(str::to_string).or(url_password);
        let setup = SentinelSetup {
            service,
            db,
            master: (username.as_deref(), master_password.as_deref()),
            own: auth,
            tls,
        };
        let sentinels = nodes
            .iter()
            .map(|node| {
                let client = setup.client(node).map_err(|e| {
                    let files = if tls.is_some_and(Tls::configured) {
                        "cannot use the TLS certificate files: "
                    } else {
                        ""
                    };
                    usage(format!("--url {name}: {files}{}", describe_url_error(&e)))
                })?;
                Ok(SentinelNode {
                    address: address_of(node),
                    client: Arc::new(Mutex::new(client)),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let master_tls = tls
            .map(|tls| tls.config(false))
            .transpose()
            .map_err(|e| usage(format!("--url {name}: {e}")))?;
        Ok(Server {
            target: Target::Sentinel {
                sentinels,
                service: service.to_string(),
                ca_file: tls.map(|tls| tls.ca_file.clone()),
                master_tls,
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
                .and_then(|client| client.get_generic_connection::<Wire>())
            {
                Ok(con) => con,
                Err(e) => {
                    let err = anyhow!(e).context(format!("cannot connect to {}", self.name));
                    return Err(self.why_no_tls(err, timeout));
                }
            };
            let con = Conn::Cluster(Box::new(con));
            set_timeouts(&con, timeout)?;
            return Ok(con);
        }
        Ok(Conn::Single(self.connect_direct(timeout)?))
    }

    /// The cluster client words a failed seed connection as text only: for a TLS cluster, one
    /// seed is asked again on a connection of our own (same TLS settings, one PING) to learn
    /// what its handshake says. `err` stays as it is when that says nothing about TLS.
    fn why_no_tls(&self, err: anyhow::Error, timeout: Duration) -> anyhow::Error {
        let (seed, tls) = self.seed();
        let Some(target) = &self.tls else {
            // A plain cluster URL at TLS ports: the seed hangs up at the first request.
            let probe = Wire::connect(&seed, None, timeout, timeout)
                .and_then(|mut con| redis::cmd("PING").query::<()>(&mut con));
            return match probe {
                Err(probe) if probe.is_connection_dropped() => {
                    err.context(maybe_tls(&address_of(&seed), "rediss+cluster://"))
                }
                _ => err,
            };
        };
        let probe = Wire::connect(&seed, tls, timeout, timeout)
            .and_then(|mut con| redis::cmd("PING").query::<()>(&mut con));
        let Err(probe) = probe else {
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
        let started = Instant::now();
        let master;
        let (info, tls) = match &self.target {
            Target::Direct { info, tls } => (info, tls.as_ref()),
            Target::Cluster { .. } => {
                let (seed, tls) = self.seed();
                master = seed;
                (&master, tls)
            }
            Target::Sentinel {
                sentinels,
                service,
                ca_file,
                master_tls,
            } => {
                master = self.master(sentinels, service, ca_file.as_ref(), timeout)?;
                (&master, master_tls.as_ref())
            }
        };
        let left = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        match Wire::connect(info, tls, left, timeout) {
            Ok(con) => Ok(con),
            Err(e) => {
                let err = anyhow!(e).context(format!("cannot connect to {}", self.name));
                Err(self.explained(err))
            }
        }
    }

    /// Asks the sentinels where the master is, all at once; the first answer wins. The crate's
    /// lookup has no timeout of its own, so each runs in a thread that is abandoned if it does
    /// not answer within `timeout`. `ca_file` is `Some` for `rediss+sentinel://`.
    fn master(
        &self,
        sentinels: &[SentinelNode],
        service: &str,
        ca_file: Option<&Option<String>>,
        timeout: Duration,
    ) -> Result<ConnectionInfo> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = mpsc::channel();
        for sentinel in sentinels {
            let (tx, sentinel) = (tx.clone(), sentinel.clone());
            let (ca_file, service) = (ca_file.cloned(), service.to_string());
            std::thread::Builder::new()
                .name("sentinel".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut client = sentinel
                        .client
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let answer = client.get_client().map_err(|e| {
                        let asked = Asked {
                            sentinel: &sentinel.address,
                            service: &service,
                            ca_file,
                            timeout,
                        };
                        asked.refusal(&mut client, e)
                    });
                    let _ = tx.send(answer);
                })
                .context("cannot start a Sentinel lookup")?;
        }
        drop(tx);
        let mut last_error: Option<anyhow::Error> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(client)) => return Ok(client.get_connection_info().clone()),
                // A refusal that says what to do (a password, a certificate) outranks one
                // that does not.
                Ok(Err(e)) => {
                    if last_error.as_ref().is_none_or(|last| !decided(last)) {
                        last_error = Some(e);
                    }
                }
                // Every sentinel answered, none with a master.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let e = last_error.expect("an answer");
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

/// What every sentinel of one URL is asked with.
struct SentinelSetup<'a> {
    service: &'a str,
    db: i64,
    /// The master's user and password.
    master: (Option<&'a str>, Option<&'a str>),
    /// The sentinels' own.
    own: &'a SentinelAuth,
    tls: Option<&'a Tls>,
}

impl SentinelSetup<'_> {
    /// A client that asks the sentinel at `node` for the master, and checks what it names.
    fn client(&self, node: &ConnectionInfo) -> RedisResult<SentinelClient> {
        let mut addr = node.addr().clone();
        if let (ConnectionAddr::TcpTls { insecure, .. }, Some(tls)) = (&mut addr, self.tls) {
            *insecure = tls.insecure;
        }
        if let Some(tls) = self.tls.filter(|tls| tls.configured()) {
            return self.client_with_certificates(addr, tls);
        }
        let (username, password) = self.master;
        let mut master = redis::RedisConnectionInfo::default()
            .set_skip_set_lib_name()
            .set_db(self.db);
        if let Some(user) = username {
            master = master.set_username(user);
        }
        if let Some(pw) = password {
            master = master.set_password(pw);
        }
        let mut to_master = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(master)
            .set_tcp_settings(nodelay());
        if let Some(tls) = self.tls {
            to_master = to_master.set_tls_mode(tls.mode());
        }
        let mut own = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(user) = &self.own.username {
            own = own.set_username(user);
        }
        if let Some(pw) = &self.own.password {
            own = own.set_password(pw);
        }
        let sentinel = node
            .clone()
            .set_addr(addr)
            .set_redis_settings(own)
            .set_tcp_settings(nodelay());
        SentinelClient::build(vec![sentinel], self.service, Some(to_master), Master)
    }

    /// Sentinels and master verified against `--tls-ca-file` (or shown the client
    /// certificate). Only the crate's builder hands certificates to the master's connections;
    /// it cannot skip `CLIENT SETINFO`, so the crate's check of the master costs one round
    /// trip more than on the other paths.
    fn client_with_certificates(
        &self,
        addr: ConnectionAddr,
        tls: &Tls,
    ) -> RedisResult<SentinelClient> {
        let mut builder = SentinelClientBuilder::new([addr], self.service, Master)?
            .set_client_to_redis_db(self.db)
            .set_client_to_redis_tcp_settings(nodelay())
            .set_client_to_sentinel_tcp_settings(nodelay())
            .set_client_to_sentinel_tls_mode(tls.mode())
            .set_client_to_redis_tls_mode(tls.mode())
            .set_client_to_sentinel_certificates(tls.certificates())
            .set_client_to_redis_certificates(tls.certificates());
        let (username, password) = self.master;
        if let Some(user) = username {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(pw) = password {
            builder = builder.set_client_to_redis_password(pw);
        }
        if let Some(user) = &self.own.username {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(pw) = &self.own.password {
            builder = builder.set_client_to_sentinel_password(pw);
        }
        builder.build()
    }
}

fn nodelay() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

/// Whether an error already carries its status and words (a `Failure`).
fn decided(err: &anyhow::Error) -> bool {
    err.downcast_ref::<crate::error::Failure>().is_some()
}

/// One sentinel's lookup of the master, for explaining its failure.
struct Asked<'a> {
    sentinel: &'a str,
    service: &'a str,
    /// `Some` for `rediss+sentinel://`: `--tls-ca-file`, if given.
    ca_file: Option<Option<String>>,
    timeout: Duration,
}

impl Asked<'_> {
    /// What a failed lookup means. The crate returns the sentinel's own error and the error
    /// of the master it named alike; asking the sentinel again (failure path only) tells them
    /// apart, so a refused password or certificate is blamed on the right server.
    fn refusal(&self, client: &mut SentinelClient, err: RedisError) -> anyhow::Error {
        let sentinel = self.sentinel;
        let denied = classify_redis(&err) == Exit::Permission;
        let Ok(sentinel_client) = client.get_sentinel_client() else {
            // The sentinel itself refused.
            if denied {
                let text = if err.code() == Some("NOAUTH") {
                    format!(
                        "sentinel {sentinel} requires a password: give the sentinels' own \
                         password with --sentinel-password-file"
                    )
                } else {
                    format!(
                        "sentinel {sentinel} refused the sentinels' password: check \
                         --sentinel-password-file (and --sentinel-user)"
                    )
                };
                return fail(Exit::Permission, text);
            }
            let err = anyhow!(err);
            if let Some(text) = self.explain_tls(&err, sentinel.to_string()) {
                return fail(Exit::Unavailable, text);
            }
            return err.context(format!("sentinel {sentinel}"));
        };
        let err = anyhow!(err);
        if self.explain_tls(&err, String::new()).is_some() {
            // The master refused the handshake: say where it is.
            let address = self
                .master_address(&sentinel_client)
                .unwrap_or_else(|| format!("the master of {}", self.service));
            if let Some(text) = self.explain_tls(&err, address) {
                return fail(Exit::Unavailable, text);
            }
        }
        err
    }

    fn explain_tls(&self, err: &anyhow::Error, address: String) -> Option<String> {
        let ca_file = self.ca_file.clone()?;
        explain_tls(
            err,
            &TlsTarget {
                address,
                ca_file,
                own_accepted: false,
            },
        )
    }

    /// `HOST:PORT` of the master the sentinel names now.
    fn master_address(&self, sentinel: &Client) -> Option<String> {
        let mut con = sentinel.get_connection_with_timeout(self.timeout).ok()?;
        con.set_read_timeout(Some(self.timeout)).ok()?;
        con.set_write_timeout(Some(self.timeout)).ok()?;
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(self.service)
            .query(&mut con)
            .ok()?;
        Some(format!("{host}:{port}"))
    }
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
