//! Where the lock lives: parsing `--url`, applying `--password-file`, connecting with timeouts.
//!
//! Three kinds of target, all through the redis crate's own support:
//! * `redis://`, `rediss://`, `redis+unix://`: one server.
//! * `redis+cluster://HOST:PORT[,HOST:PORT...]`: a Redis Cluster, from any of its nodes; the
//!   crate routes each script by its first key and follows MOVED/ASK, and the lock's companion
//!   keys share its hash slot.
//! * `redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`: the master Sentinel names for
//!   SERVICE, asked again at every (re)connection, so a failover is followed. A password (URL or
//!   `--password-file`) is the master's; the sentinels are reached without one.
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
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    Client, Cmd, Connection, ConnectionAddr, ConnectionInfo, ConnectionLike, IntoConnectionInfo,
    RedisResult, TlsCertificates, Value,
};

use crate::error::usage;

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Clone)]
pub struct Server {
    target: Target,
    name: String,
    /// For a `rediss://` server: what its TLS failures are explained with.
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
    Direct(Client),
    Cluster {
        seeds: Vec<ConnectionInfo>,
        password: Option<String>,
        username: Option<String>,
    },
    Sentinel {
        /// One client per sentinel, asked in parallel: a hung sentinel must not hide the others.
        sentinels: Vec<Arc<Mutex<Sentinel>>>,
        service: String,
        node: SentinelNodeConnectionInfo,
    },
}

/// A connection to wherever the lock lives: one server, or a cluster that routes by key.
pub enum Conn {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
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
        loop {
            match c.recv_response()? {
                Value::Push { .. } => continue,
                value => return Ok(value),
            }
        }
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

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        self.req_packed_command(&cmd.get_packed_command())
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

/// A pipeline's replies, read until the first transport failure. The redis crate reads every
/// reply even after one timed out, so on a server that stopped answering a pipeline of N
/// commands would wait out the timeout N times. After a failure the connection is out of step
/// and is dropped by its owner (`nodes.rs`). Error replies from the server are values here,
/// as in the crate (the pipeline decides what they mean). No MULTI pipelines are sent.
fn pipeline_until_first_failure(
    con: &mut Connection,
    cmd: &[u8],
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    con.send_packed_command(cmd)?;
    let mut replies = Vec::with_capacity(count);
    for index in 0..offset + count {
        let reply = con.recv_response()?;
        if index >= offset {
            replies.push(reply);
        }
    }
    Ok(replies)
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
            Conn::Single(c) => pipeline_until_first_failure(c, cmd, offset, count),
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
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Server {
    /// Parses one URL; `password` (from `--password-file`) wins over one in the URL.
    pub fn parse(url: &str, password: Option<&str>, tls: &Tls) -> Result<Server> {
        let name = redact(url);
        let url = url.trim();
        if url.is_empty() {
            return Err(usage("--url is empty"));
        }
        if let Some(rest) = url.strip_prefix("redis+cluster://") {
            return Server::parse_cluster(rest, password, name);
        }
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            return Server::parse_sentinel(rest, password, name);
        }
        let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(usage(format!(
                "--url {name}: unsupported scheme; use redis://HOST:PORT, rediss://HOST:PORT or \
                 redis+unix:///PATH, redis+cluster://HOST:PORT or \
                 redis+sentinel://HOST:PORT/SERVICE"
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
        let client = if is_tls && tls.configured() {
            let certs = TlsCertificates {
                client_tls: tls
                    .identity
                    .clone()
                    .map(|(cert, key)| redis::ClientTlsConfig {
                        client_cert: cert,
                        client_key: key,
                    }),
                root_cert: tls.ca.clone(),
            };
            Client::build_with_tls(info, certs).map_err(|e| {
                usage(format!(
                    "--url {name}: cannot use the TLS certificate files: {}",
                    describe_url_error(&e)
                ))
            })?
        } else {
            Client::open(info)
                .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))?
        };
        Ok(Server {
            target: Target::Direct(client),
            name,
            tls: tls_target,
        })
    }

    /// `[user:pass@]host:port[,host:port...]` into one `redis://` URL per node.
    fn nodes_of(rest: &str, name: &str) -> Result<(Vec<String>, Option<String>, Option<String>)> {
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
        let urls: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| format!("redis://{h}"))
            .collect();
        if urls.is_empty() {
            return Err(usage(format!("--url {name}: no host:port given")));
        }
        Ok((urls, username, password))
    }

    fn parse_cluster(rest: &str, password: Option<&str>, name: String) -> Result<Server> {
        let (urls, username, url_password) = Server::nodes_of(rest.trim_end_matches('/'), &name)?;
        let seeds = urls
            .iter()
            .map(|u| {
                u.as_str()
                    .into_connection_info()
                    .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Server {
            target: Target::Cluster {
                seeds,
                password: password.map(str::to_string).or(url_password),
                username,
            },
            name,
            tls: None,
        })
    }

    fn parse_sentinel(rest: &str, password: Option<&str>, name: String) -> Result<Server> {
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
        let (urls, username, url_password) = Server::nodes_of(hosts, &name)?;
        let sentinels = urls
            .into_iter()
            .map(|url| {
                Sentinel::build(vec![url])
                    .map(|s| Arc::new(Mutex::new(s)))
                    .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut info = redis::RedisConnectionInfo::default()
            .set_skip_set_lib_name()
            .set_db(db);
        if let Some(user) = username {
            info = info.set_username(user);
        }
        if let Some(pw) = password.map(str::to_string).or(url_password) {
            info = info.set_password(pw);
        }
        Ok(Server {
            target: Target::Sentinel {
                sentinels,
                service: service.to_string(),
                node: SentinelNodeConnectionInfo::default()
                    .set_redis_connection_info(info)
                    .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true)),
            },
            name,
            tls: None,
        })
    }

    pub fn is_tls(&self) -> bool {
        match &self.target {
            Target::Direct(client) => matches!(
                client.get_connection_info().addr(),
                ConnectionAddr::TcpTls { .. }
            ),
            _ => false,
        }
    }

    /// For a `rediss://` server, what its TLS failures are explained with.
    pub fn tls_target(&self) -> Option<&TlsTarget> {
        self.tls.as_ref()
    }

    /// A Redis Cluster (`redis+cluster://`, `rediss+cluster://`).
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster { .. })
    }

    /// Cluster and Sentinel targets cannot be members of a quorum.
    pub fn is_direct(&self) -> bool {
        matches!(self.target, Target::Direct(_))
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
            let con = builder
                .build()
                .and_then(|client| client.get_connection())
                .with_context(|| format!("cannot connect to {}", self.name))?;
            let con = Conn::Cluster(Box::new(con));
            set_timeouts(&con, timeout)?;
            return Ok(con);
        }
        Ok(Conn::Single(self.connect_direct(timeout)?))
    }

    /// A plain connection: to the server, to Sentinel's current master, or to one node of a
    /// cluster (enough for pub/sub, which a cluster broadcasts to every node).
    pub fn connect_direct(&self, timeout: Duration) -> Result<Connection> {
        let timeout = timeout.max(Duration::from_millis(1));
        let started = Instant::now();
        let client = match &self.target {
            Target::Direct(client) => client.clone(),
            Target::Cluster {
                seeds,
                password,
                username,
            } => {
                let mut info = seeds[0].redis_settings().clone().set_skip_set_lib_name();
                if let Some(pw) = password {
                    info = info.set_password(pw);
                }
                if let Some(user) = username {
                    info = info.set_username(user);
                }
                Client::open(seeds[0].clone().set_redis_settings(info))?
            }
            Target::Sentinel {
                sentinels,
                service,
                node,
            } => self.master(sentinels, service, node, timeout)?,
        };
        let left = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        let con = client
            .get_connection_with_timeout(left)
            .with_context(|| format!("cannot connect to {}", self.name))?;
        set_timeouts_direct(&con, timeout)?;
        Ok(con)
    }

    /// Asks the sentinels where the master is, all at once; the first answer wins. The crate's
    /// lookup has no timeout of its own, so each runs in a thread that is abandoned if it does
    /// not answer within `timeout`.
    fn master(
        &self,
        sentinels: &[Arc<Mutex<Sentinel>>],
        service: &str,
        node: &SentinelNodeConnectionInfo,
        timeout: Duration,
    ) -> Result<Client> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = mpsc::channel();
        for sentinel in sentinels {
            let (tx, sentinel) = (tx.clone(), Arc::clone(sentinel));
            let (service, node) = (service.to_string(), node.clone());
            std::thread::Builder::new()
                .name("sentinel".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut sentinel = sentinel
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let _ = tx.send(sentinel.master_for(&service, Some(&node)));
                })
                .context("cannot start a Sentinel lookup")?;
        }
        drop(tx);
        let mut last_error = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(e)) => last_error = Some(e),
                // Every sentinel answered, none with a master.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let e = last_error.expect("an answer");
                    return Err(e)
                        .with_context(|| format!("Sentinel {} has no usable master", self.name));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let timed_out = redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no sentinel of {} answered within {timeout:?}", self.name),
                    ));
                    return Err(anyhow!(last_error.unwrap_or(timed_out)));
                }
            }
        }
    }
}

pub fn set_timeouts(con: &Conn, timeout: Duration) -> Result<()> {
    match con {
        Conn::Single(c) => set_timeouts_direct(c, timeout),
        Conn::Cluster(c) => {
            let timeout = Some(timeout.max(Duration::from_millis(1)));
            c.set_read_timeout(timeout)?;
            c.set_write_timeout(timeout)?;
            Ok(())
        }
    }
}

pub fn set_timeouts_direct(con: &Connection, timeout: Duration) -> Result<()> {
    let timeout = Some(timeout.max(Duration::from_millis(1)));
    con.set_read_timeout(timeout)?;
    con.set_write_timeout(timeout)?;
    Ok(())
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
pub fn read_password_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!(
            "cannot read --password-file {}: {e}",
            path.display()
        ))
    })?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(usage(format!(
            "--password-file {} is empty",
            path.display()
        )));
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
            let err = Server::parse(url, None, &Tls::default()).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            assert!(!format!("{err:#}").contains("hunter2"), "{err:#}");
        }
        let tls = Tls::default();
        assert!(Server::parse("redis://127.0.0.1:6379", None, &tls).is_ok());
        assert!(Server::parse("redis+unix:///tmp/x.sock", None, &tls).is_ok());
        assert!(
            Server::parse("rediss://localhost:6380", None, &tls)
                .unwrap()
                .is_tls()
        );
    }
}
