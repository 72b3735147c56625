//! A private `redis-server` per test.
//!
//! Each server lives in its own scratch directory, keeps nothing on disk (`--save ""
//! --appendonly no`), and listens both on a unix socket in that directory and on a free
//! 127.0.0.1 port, so tests can hand redlock either kind of URL. Readiness is a bounded PING
//! loop; `Drop` kills the process with SIGKILL and waits for it, so no server outlives its test
//! (and, should the test binary itself die, `PR_SET_PDEATHSIG` takes the server with it).
//!
//! The server can be paused (SIGSTOP) to play a Redis that stops answering, killed with
//! SIGKILL, and restarted on the same port and socket to play a crash without persistence.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};
use std::{fs, io};

use redis::FromRedisValue;

use super::certs::Certs;
use super::poll::POLL_INTERVAL;
use super::process::{Pid, send_signal};
use super::temp::TempDir;

const START_TIMEOUT: Duration = Duration::from_secs(10);
const START_ATTEMPTS: usize = 5;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
const PING_TIMEOUT: Duration = Duration::from_secs(1);

pub struct RedisServer {
    dir: TempDir,
    port: u16,
    extra_args: Vec<String>,
    password: Option<String>,
    /// Listens with TLS only (`--port 0`, `--tls-port PORT`): the harness talks to it over
    /// its unix socket.
    tls_only: bool,
    process: Option<Child>,
    admin: Mutex<Option<redis::Connection>>,
}

impl RedisServer {
    /// A fresh server with the default configuration.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A fresh server with extra `redis-server` arguments, e.g. `["--requirepass", "pw"]`.
    /// When `--requirepass` is among them, the harness's own connections authenticate.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        RedisServer::start_inner(extra_args, false)
    }

    /// A server whose only TCP listener is TLS, on [`RedisServer::port`], with `certs`'s
    /// server certificate and CA (no client certificate required; replication and the
    /// cluster bus over TLS too), plus `extra_args`. The harness uses its unix socket.
    pub fn start_tls_only(certs: &Certs, extra_args: &[&str]) -> RedisServer {
        let mut args = certs.server_args("no");
        args.extend(["--tls-replication", "yes", "--tls-cluster", "yes"].map(String::from));
        // A node dialling another's cluster bus must present a client certificate (the bus
        // requires one whatever `--tls-auth-clients` says).
        args.extend([
            "--tls-client-cert-file".to_string(),
            certs.path("client.crt"),
            "--tls-client-key-file".to_string(),
            certs.path("client.key"),
        ]);
        args.extend(extra_args.iter().map(|a| (*a).to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RedisServer::start_inner(&args, true)
    }

    fn start_inner(extra_args: &[&str], tls_only: bool) -> RedisServer {
        let extra_args: Vec<String> = extra_args
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let password = extra_args
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| extra_args.get(i + 1).cloned());
        let mut server = RedisServer {
            dir: TempDir::new("redis"),
            port: free_port(),
            extra_args,
            password,
            tls_only,
            process: None,
            admin: Mutex::new(None),
        };
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match server.launch() {
                Ok(()) => return server,
                // Most likely another process took the port between our probe and redis
                // binding it: try another, and another cluster bus port (the one given may
                // have been taken the same way).
                Err(failure) => failures.push(failure),
            }
            server.port = free_port();
            if let Some(i) = server.extra_args.iter().position(|a| a == "--cluster-port")
                && let Some(bus) = server.extra_args.get_mut(i + 1)
            {
                *bus = free_port().to_string();
            }
        }
        panic!(
            "redis-server did not start in {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n---\n")
        );
    }

    /// `redis://127.0.0.1:PORT`, without credentials.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `redis://:PASSWORD@127.0.0.1:PORT`.
    pub fn url_with_password(&self, password: &str) -> String {
        format!("redis://:{password}@127.0.0.1:{}", self.port)
    }

    /// `redis://USER:PASSWORD@127.0.0.1:PORT`.
    pub fn url_with_user(&self, user: &str, password: &str) -> String {
        format!("redis://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// `redis+unix:///path/to/redis.sock`.
    pub fn unix_url(&self) -> String {
        format!("redis+unix://{}", self.socket_path().display())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    pub fn pid(&self) -> Pid {
        let process = self.process.as_ref().expect("redis-server is not running");
        Pid::try_from(process.id()).expect("pid fits in pid_t")
    }

    /// A new connection for the test's own use, with timeouts so a paused server cannot hang
    /// the test.
    pub fn client(&self) -> redis::Connection {
        self.try_client()
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url()))
    }

    fn try_client(&self) -> redis::RedisResult<redis::Connection> {
        let url = match &self.password {
            Some(password) if self.tls_only => format!("{}?pass={password}", self.unix_url()),
            None if self.tls_only => self.unix_url(),
            Some(password) => self.url_with_password(password),
            None => self.url(),
        };
        let client = redis::Client::open(url.as_str()).expect("valid admin url");
        let con = client.get_connection_with_timeout(CLIENT_TIMEOUT)?;
        con.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        con.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        Ok(con)
    }

    /// Runs one command on the harness's own (cached) connection. A cached connection the
    /// server closed since its last use (a restart, a demotion, Sentinel's `CLIENT KILL TYPE
    /// normal` after a failover) is made anew and the command sent once more; a timeout is
    /// not retried: the server is paused, and would keep the test waiting twice.
    pub fn try_query<T: FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let (name, rest) = args.split_first().expect("a command name");
        let mut admin = self.admin();
        let cached = admin.is_some();
        let con = admin.get_or_insert_with(|| self.client());
        let mut result = redis::cmd(name).arg(rest).query(con);
        if let Err(e) = &result
            && (e.is_io_error() || e.is_connection_dropped() || e.is_timeout())
        {
            *admin = None;
            if cached && !e.is_timeout() {
                result = self.try_client().and_then(|mut con| {
                    let again = redis::cmd(name).arg(rest).query(&mut con);
                    *admin = Some(con);
                    again
                });
                if result
                    .as_ref()
                    .is_err_and(|e| e.is_io_error() || e.is_connection_dropped())
                {
                    *admin = None;
                }
            }
        }
        result
    }

    /// Runs one command and panics if Redis answers with an error.
    pub fn query<T: FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_query(args)
            .unwrap_or_else(|e| panic!("redis command {args:?} failed: {e}"))
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.query(&["GET", key])
    }

    /// The server's clock (TIME) in microseconds since the epoch.
    pub fn micros(&self) -> i64 {
        let (secs, micros): (i64, i64) = self.query(&["TIME"]);
        secs * 1_000_000 + micros
    }

    pub fn exists(&self, key: &str) -> bool {
        self.query::<i64>(&["EXISTS", key]) == 1
    }

    /// The key's remaining time to live, or `None` when the key is missing or never expires.
    pub fn pttl(&self, key: &str) -> Option<Duration> {
        let ms: i64 = self.query(&["PTTL", key]);
        u64::try_from(ms).ok().map(Duration::from_millis)
    }

    pub fn hgetall(&self, key: &str) -> HashMap<String, String> {
        self.query(&["HGETALL", key])
    }

    /// The holder record (`{L}:redlock:holder`: name=value pairs separated by 0x1F, the
    /// identity's among them) as fields; none when there is no record.
    pub fn holder_record(&self, lock: &str) -> HashMap<String, String> {
        let record: Option<String> = self.query(&["GET", &super::companion_key(lock, "holder")]);
        record
            .unwrap_or_default()
            .split('\u{1f}')
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    /// The lock's record (`{L}:redlock:stats`): its counters, the last run's host and command,
    /// and the last run's `last` (OUTCOME, EXIT, STARTED, DURATION_MS, FENCE, PID, USER
    /// separated by 0x1F) read into fields of those names, as the design's data layout
    /// describes it.
    pub fn lock_record(&self, lock: &str) -> HashMap<String, String> {
        let mut record = self.hgetall(&super::companion_key(lock, "stats"));
        if let Some(last) = record.get("last").cloned() {
            let names = [
                "outcome",
                "exit",
                "started",
                "duration_ms",
                "fence",
                "pid",
                "user",
            ];
            for (name, value) in names.iter().zip(last.split('\u{1f}')) {
                record.insert((*name).to_string(), value.to_string());
            }
        }
        record
    }

    /// `INFO section` as field → value.
    pub fn info(&self, section: &str) -> HashMap<String, String> {
        let text: String = self.query(&["INFO", section]);
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect()
    }

    /// Waits until `waiters` are in `lock`'s queue and as many clients are blocked here: each
    /// waiter's next attempt waits on this server behind its grant list (what a test freezes a
    /// waiter in, or releases a lock under).
    pub fn wait_until_waiting_on_server(&self, lock: &str, waiters: usize) {
        super::poll::wait_until(
            &format!("{waiters} waiter(s) of {lock} to wait on the server"),
            Duration::from_secs(10),
            || {
                let queued: usize = self.query(&["ZCARD", &super::companion_key(lock, "queue")]);
                (queued == waiters
                    && self.info_number("clients", "blocked_clients") == waiters as u64)
                    .then_some(())
            },
        );
    }

    pub fn info_number(&self, section: &str, field: &str) -> u64 {
        let info = self.info(section);
        let value = info
            .get(field)
            .unwrap_or_else(|| panic!("INFO {section} has no field {field}: {info:?}"));
        value
            .parse()
            .unwrap_or_else(|e| panic!("INFO {field} is not a number ({value}): {e}"))
    }

    /// How many connections the server has accepted since it started (the harness's own
    /// cached connection counts once).
    pub fn connections_received(&self) -> u64 {
        self.info_number("stats", "total_connections_received")
    }

    /// Total calls of every script-running command (EVAL, EVALSHA, FCALL and their `_RO`
    /// forms), failed ones included. Grows with each acquire attempt.
    pub fn script_calls(&self) -> u64 {
        const COMMANDS: [&str; 6] = [
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
        ];
        let stats = self.info("commandstats");
        COMMANDS
            .iter()
            .filter_map(|name| stats.get(&format!("cmdstat_{name}")))
            .filter_map(|fields| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix("calls="))
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .sum()
    }

    /// How many clients are subscribed to `channel`.
    /// Clients subscribed to `channel` or to one of its per-waiter channels (`channel:TICKET`).
    pub fn subscribers(&self, channel: &str) -> u64 {
        let pattern = format!("{}*", glob_escape(channel));
        let channels: Vec<String> = self.query(&["PUBSUB", "CHANNELS", &pattern]);
        channels
            .iter()
            .filter(|c| *c == channel || c.starts_with(&format!("{channel}:")))
            .map(|c| {
                let reply: Vec<redis::Value> = self.query(&["PUBSUB", "NUMSUB", c]);
                match reply.get(1) {
                    Some(redis::Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
                    other => panic!("unexpected PUBSUB NUMSUB reply: {other:?}"),
                }
            })
            .sum()
    }

    pub fn config_set(&self, name: &str, value: &str) {
        let _: () = self.query(&["CONFIG", "SET", name, value]);
    }

    /// `ACL SETUSER user rules...`, e.g. `["on", ">pw", "~*", "+@all", "-evalsha"]`.
    pub fn acl_setuser(&self, user: &str, rules: &[&str]) {
        let mut args = vec!["ACL", "SETUSER", user];
        args.extend_from_slice(rules);
        let _: () = self.query(&args);
    }

    /// Stops the server with SIGSTOP: connections stay open, nothing is answered.
    pub fn pause(&self) {
        send_signal(self.pid(), libc::SIGSTOP);
    }

    pub fn resume(&self) {
        send_signal(self.pid(), libc::SIGCONT);
    }

    /// Kills the server with SIGKILL and waits for it. Its data is gone for good.
    pub fn kill9(&mut self) {
        *self.admin() = None;
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    /// Kills the server (if it runs) and starts an empty one on the same port and socket.
    pub fn restart(&mut self) {
        self.kill9();
        if let Err(failure) = self.launch() {
            panic!(
                "redis-server did not restart on port {}:\n{failure}",
                self.port
            );
        }
    }

    fn admin(&self) -> MutexGuard<'_, Option<redis::Connection>> {
        // A test that panicked while holding the lock leaves a usable connection behind.
        self.admin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Starts redis-server and waits until it answers on both listeners. On failure, the
    /// process is gone and the error carries its log.
    fn launch(&mut self) -> Result<(), String> {
        let _ = fs::remove_file(self.log_path());
        let mut command = super::server_kind::server_command();
        let port = self.port.to_string();
        let ports = if self.tls_only {
            ["--port", "0", "--tls-port", &port]
        } else {
            ["--port", &port, "", ""]
        };
        command
            .args(ports.iter().filter(|a| !a.is_empty()))
            .args(["--bind", "127.0.0.1"])
            .arg("--unixsocket")
            .arg(self.socket_path())
            .args(["--unixsocketperm", "700"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .args(["--daemonize", "no"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        super::process::dies_with_the_test(&mut command);
        let process = match command.spawn() {
            Ok(process) => process,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH; the integration tests need it: \
                 apt-get install redis-server"
            ),
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        self.process = Some(process);
        match self.wait_until_ready() {
            Ok(()) => Ok(()),
            Err(why) => {
                self.kill9();
                let log = fs::read_to_string(self.log_path()).unwrap_or_default();
                Err(format!("port {}: {why}\nredis log:\n{log}", self.port))
            }
        }
    }

    fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let process = self.process.as_mut().expect("launched");
            if let Some(status) = process.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("redis-server exited with {status}"));
            }
            let unix = UnixStream::connect(self.socket_path()).and_then(|stream| {
                stream.set_read_timeout(Some(PING_TIMEOUT))?;
                answers_ping(stream)
            });
            // A TLS-only server's port is checked by the unix socket's answer: it is up.
            let tcp_ok = self.tls_only
                || TcpStream::connect(("127.0.0.1", self.port))
                    .and_then(|stream| {
                        stream.set_read_timeout(Some(PING_TIMEOUT))?;
                        answers_ping(stream)
                    })
                    .is_ok();
            if unix.is_ok() && tcp_ok {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no answer to PING within {START_TIMEOUT:?}"));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A port nobody listens on right now. Another process may take it before we use it; the
/// caller retries when that happens.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Any reply to PING (`+PONG`, or `-NOAUTH` from a server with a password) means the server
/// is up and serving.
fn answers_ping(mut stream: impl io::Read + Write) -> io::Result<()> {
    stream.write_all(b"PING\r\n")?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.starts_with('+') || line.starts_with('-') {
        Ok(())
    } else {
        Err(io::Error::other(format!("unexpected reply {line:?}")))
    }
}

/// `text` as a glob pattern that matches only itself (Redis's `*?[]\\` escaped).
pub fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
