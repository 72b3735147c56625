//! The Sentinel lookup: the master the sentinels name for a service, asked again at every
//! (re)connection so that a failover is followed. redlock's own, as Redis documents it for
//! clients (`SENTINEL GET-MASTER-ADDR-BY-NAME` to every sentinel at once, then `ROLE` on the
//! master named, each sentinel in a thread, one deadline): the crate's Sentinel client built its
//! TLS inside and could not trust a server's own certificate, and it connected to the master
//! twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult, Value};

use super::server::address_of;
use super::server::{Server, Target};
use super::tls::{TlsTarget, explain_tls};
use super::wire::Wire;
use crate::report::error::{classify_redis, fail};
use crate::report::exit::Exit;

/// The sentinels' own credentials, apart from the master's (`--sentinel-user`,
/// `--sentinel-password-file`).
#[derive(Clone, Default)]
pub struct SentinelAuth {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl Server {
    /// A connection to the master the sentinels name, as Redis documents for Sentinel clients:
    /// every sentinel is asked `SENTINEL GET-MASTER-ADDR-BY-NAME` at once, each in a thread of
    /// its own that then connects to the master named and checks that `ROLE` says master (one
    /// named by a sentinel that has not yet seen a failover may have been demoted, or be gone).
    /// The first master that does wins. Each address is tried by one thread only; each step of
    /// each thread (connecting, each reply) is given the time left before one deadline,
    /// `timeout` from now, and the lookup ends there: a hung sentinel, or a stale one naming a
    /// hung old master, cannot hide the others. All on redlock's own connections, so sentinels
    /// and master get the TLS of `rediss://`.
    ///
    /// That is the first connection of a run, two round trips when nothing failed. Every later
    /// one — a reconnection, after a failover perhaps — trusts no single sentinel: a sentinel
    /// cut off from the others, or one that has not yet seen the failover, names the old
    /// master, which may still say it is one. So a reconnection uses the master a majority of
    /// the sentinels name ([`Server::agreed_master`]).
    pub(super) fn master(&self, timeout: Duration) -> Result<Wire> {
        if LOOKED_UP.load(Ordering::Relaxed) {
            return self.agreed_master(timeout);
        }
        let con = self.first_master(timeout)?;
        LOOKED_UP.store(true, Ordering::Relaxed);
        Ok(con)
    }

    /// The master a majority of the URL's sentinels name, once it says with `ROLE` that it is
    /// one. The sentinels are asked at once, each in a thread; as soon as a majority name one
    /// address it is connected to. Sentinels that disagree, or a master named that says it is
    /// a replica (a failover under way), are asked again after a pause, until `timeout` from
    /// now.
    fn agreed_master(&self, timeout: Duration) -> Result<Wire> {
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
        let majority = sentinels.len() / 2 + 1;
        let asking = |sentinel: &ConnectionInfo| Asked {
            sentinel: sentinel.clone(),
            service: service.clone(),
            master: master.clone(),
            tls: tls.clone(),
            ca_file: ca_file.clone(),
            deadline,
            claimed: Arc::new(Mutex::new(Vec::new())),
        };
        loop {
            let (tx, rx) = mpsc::channel();
            for sentinel in sentinels {
                let asked = asking(sentinel);
                let tx = tx.clone();
                std::thread::Builder::new()
                    .name("sentinel".into())
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        let address = address_of(&asked.sentinel);
                        let _ = tx.send(asked.ask().map_err(|e| asked.refusal(&address, e)));
                    })
                    .context("cannot start a Sentinel lookup")?;
            }
            drop(tx);
            let mut named: Vec<((String, u16), usize)> = Vec::new();
            let mut last_error: Option<anyhow::Error> = None;
            let mut agreed = None;
            while agreed.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(Ok(Some(address))) => match named.iter_mut().find(|(a, _)| *a == address) {
                        Some((_, n)) => {
                            *n += 1;
                            if *n >= majority {
                                agreed = Some(address);
                            }
                        }
                        None if majority <= 1 => agreed = Some(address),
                        None => named.push((address, 1)),
                    },
                    Ok(Ok(None)) => {
                        last_error = Some(anyhow!("a sentinel knows no master named {service}"));
                    }
                    Ok(Err(e)) => {
                        if decided(&e) {
                            return Err(e);
                        }
                        last_error = Some(e);
                    }
                    Err(_) => break,
                }
            }
            let why = match agreed {
                Some((host, port)) => {
                    let named = format!(
                        "the master {host}:{port} that {majority} of the {} sentinels name for \
                         {service}",
                        sentinels.len()
                    );
                    match asking(&sentinels[0]).connect_master(&named, &host, port) {
                        Ok(con) => {
                            con.set_timeouts(timeout)?;
                            return Ok(con);
                        }
                        Err(e) if decided(&e) => return Err(e),
                        Err(e) => e,
                    }
                }
                None => {
                    let said: Vec<String> = named
                        .iter()
                        .map(|((host, port), n)| format!("{host}:{port} by {n}"))
                        .collect();
                    let disagree = anyhow!(
                        "no {majority} of the {} sentinels of {} name one master for {service} \
                         (named: {})",
                        sentinels.len(),
                        self.name,
                        if said.is_empty() {
                            "none".to_owned()
                        } else {
                            said.join(", ")
                        }
                    );
                    match last_error {
                        Some(e) => e.context(disagree),
                        None => disagree,
                    }
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left < AGAIN {
                return Err(why);
            }
            std::thread::sleep(AGAIN);
        }
    }

    /// The first lookup of a run: the first master named that says it is one.
    fn first_master(&self, timeout: Duration) -> Result<Wire> {
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

/// Whether this process has looked a master up already: every later lookup is a reconnection,
/// and asks a majority of the sentinels ([`Server::master`]).
static LOOKED_UP: AtomicBool = AtomicBool::new(false);

/// The pause before the sentinels are asked again when they did not agree on a master.
const AGAIN: Duration = Duration::from_millis(100);

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
    /// The master this sentinel names, if it names one.
    fn ask(&self) -> RedisResult<Option<(String, u16)>> {
        let mut con = Wire::connect(&self.sentinel, self.tls.as_ref(), self.left(), self.left())?;
        con.set_timeouts(self.left())?;
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.service)
            .query(&mut con)
    }

    fn master(&self, lookup: &mpsc::Sender<Lookup>) -> Result<Option<Wire>> {
        let address = address_of(&self.sentinel);
        let (host, port) = match self.ask() {
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
    err.downcast_ref::<crate::report::error::Failure>()
        .is_some()
}
