//! A private Sentinel setup per test: a master, one replica of it, and one `redis-sentinel`
//! watching the master under the service name [`SERVICE`] with a quorum of 1, so a failover
//! needs no other sentinel.
//!
//! Master and replica are [`RedisServer`]s (killed on drop); the sentinel runs from a config
//! file in its own scratch directory (it rewrites that file as it learns), is killed with
//! SIGKILL on drop, and goes with the test thread should the test die. Readiness is bounded:
//! the replica's link to the master is up, and the sentinel names the master and knows the
//! replica, so a failover can pick it.
//!
//! [`RedisSentinel::start_tls`] makes all three speak TLS only (the sentinel to its clients
//! and to the servers, the replica to the master), and can give the sentinel its own
//! `requirepass`; the harness then asks the sentinel over TLS, with that password.
//!
//! [`RedisSentinel::failover`] asks the sentinel to fail over, waits until it names the
//! replica and has ended the failover, and then turns the old master into a replica of the
//! new one (the sentinel would do the same about ten seconds later): afterwards `master()`
//! and `replica()` have swapped. A promotion disconnects the promoted server's clients, so
//! the harness reads replication state with queries that reconnect.

use std::io;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use std::{fs, thread};

use super::certs::Certs;
use super::poll::{POLL_INTERVAL, wait_until};
use super::redis_server::{RedisServer, free_port};
use super::temp::TempDir;

/// With an ACL user on the sentinel, the user (and password) the harness watches it as: the
/// user under test may be allowed too little for that.
const WATCHER: &str = "harness-watcher";

/// The master's service name, as the sentinel knows it.
pub const SERVICE: &str = "mymaster";

const START_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(15);
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(20);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct RedisSentinel {
    master: RedisServer,
    replica: RedisServer,
    dir: TempDir,
    port: u16,
    process: Option<Child>,
    setup: Setup,
}

/// How the three are set up beyond the defaults.
#[derive(Default)]
struct Setup {
    /// The master's and replica's password (`auth-pass` for the sentinel).
    password: Option<String>,
    /// The sentinel's own `requirepass`.
    sentinel_password: Option<String>,
    /// An ACL user on the sentinel, with its password and its rules; `default` is off, and the
    /// harness has a user of its own ([`WATCHER`]).
    sentinel_user: Option<(String, String, String)>,
    /// TLS only, everywhere: the server certificate's file, its key and the CA's.
    tls: Option<[String; 3]>,
    /// More arguments for the master and the replica.
    server_args: Vec<String>,
}

impl RedisSentinel {
    /// Master, replica and sentinel, without passwords.
    pub fn start() -> RedisSentinel {
        RedisSentinel::start_inner(Setup::default(), None)
    }

    /// Master, replica and sentinel speaking TLS only with `certs`'s server certificate
    /// (no client certificates required); the sentinel requires `sentinel_password` if given.
    pub fn start_tls(certs: &Certs, sentinel_password: Option<&str>) -> RedisSentinel {
        RedisSentinel::start_tls_with(certs, certs, sentinel_password)
    }

    /// The same, the master and replica with `servers`'s certificates and the sentinel with
    /// `sentinel`'s (each its `server.crt`, `server.key` and `ca.crt`).
    pub fn start_tls_with(
        servers: &Certs,
        sentinel: &Certs,
        sentinel_password: Option<&str>,
    ) -> RedisSentinel {
        let setup = Setup {
            sentinel_password: sentinel_password.map(String::from),
            tls: Some([
                sentinel.path("server.crt"),
                sentinel.path("server.key"),
                sentinel.path("ca.crt"),
            ]),
            ..Setup::default()
        };
        RedisSentinel::start_inner(setup, Some(servers))
    }

    /// Plain master, replica and sentinel; the sentinel knows only the ACL user `user`, with
    /// `password`.
    pub fn start_with_sentinel_user(user: &str, password: &str) -> RedisSentinel {
        RedisSentinel::start_with_sentinel_user_rules(user, password, "+@all")
    }

    /// The same, the user allowed only what `rules` grant.
    pub fn start_with_sentinel_user_rules(
        user: &str,
        password: &str,
        rules: &str,
    ) -> RedisSentinel {
        let setup = Setup {
            sentinel_user: Some((user.to_string(), password.to_string(), rules.to_string())),
            ..Setup::default()
        };
        RedisSentinel::start_inner(setup, None)
    }

    /// Plain master, replica and sentinel, the master and replica started with `args` too.
    pub fn start_with_server_args(args: &[&str]) -> RedisSentinel {
        let setup = Setup {
            server_args: args.iter().map(ToString::to_string).collect(),
            ..Setup::default()
        };
        RedisSentinel::start_inner(setup, None)
    }

    /// Plain master, replica and sentinel; the sentinel requires `sentinel_password`.
    pub fn start_with_sentinel_password(sentinel_password: &str) -> RedisSentinel {
        let setup = Setup {
            sentinel_password: Some(sentinel_password.to_string()),
            ..Setup::default()
        };
        RedisSentinel::start_inner(setup, None)
    }

    /// Master and replica both require `password` (the sentinel authenticates to them with
    /// `auth-pass`); the sentinel itself requires none.
    pub fn start_with_password(password: &str) -> RedisSentinel {
        let setup = Setup {
            password: Some(password.to_string()),
            ..Setup::default()
        };
        RedisSentinel::start_inner(setup, None)
    }

    fn start_inner(setup: Setup, certs: Option<&Certs>) -> RedisSentinel {
        // A master waits 5 s by default before a diskless sync, in case more replicas come.
        let mut args = vec!["--repl-diskless-sync-delay", "0"];
        args.extend(setup.server_args.iter().map(String::as_str));
        if let Some(pw) = &setup.password {
            args.extend(["--requirepass", pw, "--masterauth", pw]);
        }
        let start = |args: &[&str]| match certs {
            Some(certs) => RedisServer::start_tls_only(certs, args),
            None => RedisServer::start_with(args),
        };
        let master = start(&args);
        let master_port = master.port().to_string();
        let mut replica_args = args.clone();
        replica_args.extend(["--replicaof", "127.0.0.1", &master_port]);
        let replica = start(&replica_args);
        wait_until_linked(&replica);

        let mut sentinel = RedisSentinel {
            master,
            replica,
            dir: TempDir::new("sentinel"),
            port: free_port(),
            process: None,
            setup,
        };
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match sentinel.launch() {
                Ok(()) => break,
                Err(failure) => failures.push(failure),
            }
            sentinel.port = free_port();
        }
        if sentinel.process.is_none() {
            panic!(
                "redis-sentinel did not start in {START_ATTEMPTS} attempts:\n{}",
                failures.join("\n---\n")
            );
        }
        sentinel.wait_until_replica_known();
        sentinel
    }

    /// `redis+sentinel://127.0.0.1:PORT/mymaster` (`rediss+sentinel://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.setup.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}+sentinel://127.0.0.1:{}/{SERVICE}", self.port)
    }

    /// `redis+sentinel://:PASSWORD@127.0.0.1:PORT/mymaster`: the password is the master's.
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "redis+sentinel://:{password}@127.0.0.1:{}/{SERVICE}",
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server that is the master now.
    pub fn master_mut(&mut self) -> &mut RedisServer {
        &mut self.master
    }

    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// The server that is the replica now.
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// The port the sentinel names as the master's, if it names one.
    pub fn master_port(&self) -> Option<u16> {
        let addr: Option<(String, String)> = self
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])
            .ok()
            .flatten();
        addr.and_then(|(_, port)| port.parse().ok())
    }

    /// The master as `SENTINEL MASTER` describes it: its port and its flags (`master`, plus
    /// `failover_in_progress` and the like while a failover runs).
    pub fn master_entry(&self) -> Option<(u16, String)> {
        let fields: Vec<String> = self.query(&["SENTINEL", "MASTER", SERVICE]).ok()?;
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|pair| pair[0] == name)
                .and_then(|pair| pair.get(1).cloned())
        };
        Some((field("port")?.parse().ok()?, field("flags")?))
    }

    /// Runs one command on the sentinel.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let auth = match (&self.setup.sentinel_user, &self.setup.sentinel_password) {
            (Some(_), _) => format!("{WATCHER}:{WATCHER}@"),
            (None, Some(pw)) => format!(":{pw}@"),
            (None, None) => String::new(),
        };
        let client = match &self.setup.tls {
            Some([_, _, ca]) => redis::Client::build_with_tls(
                format!("rediss://{auth}127.0.0.1:{}", self.port).as_str(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(fs::read(ca)?),
                },
            )?,
            None => redis::Client::open(format!("redis://{auth}127.0.0.1:{}", self.port).as_str())?,
        };
        let mut con = client.get_connection_with_timeout(CLIENT_TIMEOUT)?;
        con.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        con.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        let (name, rest) = args.split_first().expect("a command name");
        redis::cmd(name).arg(rest).query(&mut con)
    }

    /// Waits until the replica has applied everything the master has written so far.
    pub fn wait_until_replicated(&self) {
        let offset = |server: &RedisServer, field: &str| {
            replication(server, field).and_then(|v| v.parse::<u64>().ok())
        };
        let written = offset(&self.master, "master_repl_offset").expect("the master's offset");
        wait_until(
            &format!("the replica to reach the master's offset {written}"),
            READY_TIMEOUT,
            || {
                offset(&self.replica, "slave_repl_offset")
                    .is_some_and(|applied| applied >= written)
                    .then_some(())
            },
        );
    }

    /// Makes the replica the master (see the module doc); returns once the sentinel names it
    /// and the old master replicates from it.
    pub fn failover(&mut self) {
        let new_port = self.replica.port();
        wait_until(
            "the sentinel to accept SENTINEL FAILOVER",
            FAILOVER_TIMEOUT,
            // NOGOODSLAVE until the sentinel has heard from the replica; INPROG is fine.
            || match self.query::<()>(&["SENTINEL", "FAILOVER", SERVICE]) {
                Ok(()) => Some(()),
                Err(e) if e.code() == Some("INPROG") => Some(()),
                Err(_) => None,
            },
        );
        wait_until(
            &format!("the sentinel to name port {new_port} as the master"),
            FAILOVER_TIMEOUT,
            || (self.master_port() == Some(new_port)).then_some(()),
        );
        // Until the failover has ended, SENTINEL MASTER (which clients that check flags read)
        // still describes the old master.
        wait_until("the sentinel to end the failover", FAILOVER_TIMEOUT, || {
            (self.master_entry() == Some((new_port, "master".to_owned()))).then_some(())
        });
        wait_until(
            "the promoted replica to be a master",
            FAILOVER_TIMEOUT,
            || (role(&self.replica) == "master").then_some(()),
        );
        let new_port = new_port.to_string();
        let _: () = self
            .master
            .query(&["REPLICAOF", "127.0.0.1", new_port.as_str()]);
        std::mem::swap(&mut self.master, &mut self.replica);
        wait_until_linked(&self.replica);
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("sentinel.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("sentinel.log")
    }

    fn launch(&mut self) -> Result<(), String> {
        let ports = match &self.setup.tls {
            Some([cert, key, ca]) => format!(
                "port 0\ntls-port {port}\ntls-cert-file {cert}\ntls-key-file {key}\n\
                 tls-ca-cert-file {ca}\ntls-auth-clients no\ntls-replication yes\n",
                port = self.port
            ),
            None => format!("port {}\n", self.port),
        };
        let mut config = format!(
            "{ports}bind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {log}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {master} 1\n\
             sentinel down-after-milliseconds {SERVICE} 1000\n\
             sentinel failover-timeout {SERVICE} 3000\n",
            dir = self.dir.path().display(),
            log = self.log_path().display(),
            master = self.master.port(),
        );
        if let Some(pw) = &self.setup.password {
            config.push_str(&format!("sentinel auth-pass {SERVICE} {pw}\n"));
        }
        if let Some(pw) = &self.setup.sentinel_password {
            config.push_str(&format!("requirepass {pw}\n"));
        }
        if let Some((user, pw, rules)) = &self.setup.sentinel_user {
            config.push_str(&format!(
                "user default off\nuser {user} on >{pw} {rules}\n\
                 user {WATCHER} on >{WATCHER} +@all\n"
            ));
        }
        fs::write(self.config_path(), config).expect("write sentinel.conf");
        let _ = fs::remove_file(self.log_path());

        let mut command = super::server_kind::sentinel_command(&self.config_path());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        super::process::dies_with_the_test(&mut command);
        let process = match command.spawn() {
            Ok(process) => process,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
                "redis-sentinel is not on PATH; the Sentinel tests need it: \
                 apt-get install redis-sentinel"
            ),
            Err(e) => panic!("cannot start redis-sentinel: {e}"),
        };
        self.process = Some(process);
        let master = self.master.port();
        if let Err(why) = self.wait_until_it_names(master) {
            self.kill9();
            let log = fs::read_to_string(self.log_path()).unwrap_or_default();
            return Err(format!("port {}: {why}\nsentinel log:\n{log}", self.port));
        }
        Ok(())
    }

    /// Polls until the sentinel names `master_port` as the master, failing early when the
    /// sentinel process exits.
    fn wait_until_it_names(&mut self, master_port: u16) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let process = self.process.as_mut().expect("launched");
            if let Some(status) = process.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("redis-sentinel exited with {status}"));
            }
            if self.master_port() == Some(master_port) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("it named no master within {READY_TIMEOUT:?}"));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn wait_until_replica_known(&self) {
        let replica = self.replica.port().to_string();
        wait_until("the sentinel to know the replica", READY_TIMEOUT, || {
            let replicas: Vec<Vec<String>> = self
                .query(&["SENTINEL", "REPLICAS", SERVICE])
                .unwrap_or_default();
            replicas
                .iter()
                .any(|fields| {
                    fields
                        .chunks(2)
                        .any(|pair| pair[0] == "port" && pair.get(1) == Some(&replica))
                })
                .then_some(())
        });
    }

    fn kill9(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A field of `INFO replication`, or `None` while the server cannot be asked: a sentinel
/// promoting a replica disconnects its clients (`CLIENT KILL TYPE normal`), the harness's
/// own included, and the next query reconnects.
fn replication(server: &RedisServer, field: &str) -> Option<String> {
    let text: String = server.try_query(&["INFO", "replication"]).ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value.trim().to_owned())
}

/// `role` from `INFO replication`: `master` or `slave`.
fn role(server: &RedisServer) -> String {
    replication(server, "role").unwrap_or_default()
}

/// Waits until `replica` is a replica whose link to its master is up.
fn wait_until_linked(replica: &RedisServer) {
    wait_until(
        &format!("the replica on port {} to sync", replica.port()),
        READY_TIMEOUT,
        || {
            (role(replica) == "slave"
                && replication(replica, "master_link_status").as_deref() == Some("up"))
            .then_some(())
        },
    );
}
