//! `--replicas N`: a write made on behalf of a holder counts only once N replicas
//! acknowledged it.
//!
//! Redis replicates asynchronously. A failover (Sentinel, a Cluster shard, a managed primary)
//! may promote a replica that has not received the last writes yet: a lock just taken is not
//! there, and the next contender takes it while the first holder's command runs; or a renewal
//! is not there, and the key lapses on the new master with the expiry of an older one, before
//! the kill point the holder counts on. With `--replicas N`, the acquire script and the
//! renewal script are followed by `WAIT N timeout` on the same connection, in the same round
//! trip (a cluster routes both by the script's first key, to the node that ran it): the server
//! runs WAIT after the script, so it answers how many replicas hold the script's writes.
//!
//! * A grant with fewer acknowledgements is given back at once (the lock is released on the
//!   same connection) and the acquire fails with 69, saying how many replicas acknowledged it
//!   and how many the master has connected. So does a waiter's grant, and the confirmation of
//!   a provisional grant (a renewal). A renewal with fewer moves nothing: the kill point stays
//!   where the last acknowledged lease put it, and the heartbeat tries again until then.
//! * A server that refuses WAIT (an ACL without `+wait`: 77; a service that does not offer it:
//!   78) ends the acquire, after the grant was given back, or the lease (76), with that error:
//!   never a silent downgrade to unacknowledged writes.
//! * The acknowledgement is waited for at most half of what the request's timeout leaves
//!   after one tick of the server's clock (a server notices a WAIT that timed out only at a
//!   tick, up to 100 ms late), so that its answer still comes within the timeout, and at most
//!   a third of the TTL asked for ([`Ack::new`]): a grant acknowledged within it leaves its
//!   command at least a third of the TTL before SIGTERM is due (the longest `--kill-after`
//!   included), time for a first renewal;
//!   a renewal's request timeout is itself bounded by the time left before SIGTERM is due
//!   (`heartbeat.rs`), and a grant acknowledged too late to run anything under it is given
//!   back as any late grant is (`commands/run/hold.rs`).
//!
//! The default is 0, off: redlock cannot tell a lone server from a primary whose replicas are
//! away without asking (INFO: a round trip on every run, and a permission least-privilege
//! users lack), and a guess would either fail every run while a replica is away or downgrade
//! without a word. The operator says it (`REDLOCK_REPLICAS=1`); `doctor` warns about a primary
//! with replicas when it is not said.
//!
//! What it promises: a failover to a replica that acknowledged the write keeps the lock, and
//! Sentinel and Cluster promote the replica with the highest replication offset among those
//! they may promote. What it cannot: a failover to a replica that did not acknowledge (one
//! chosen by priority, or because the ones that did are down), a replica that acknowledged
//! and then lost the write (restarted without persistence), and WAIT does not make Redis
//! strongly consistent. Releases are not waited for: a release lost in a failover only leaves
//! the key to expire (and a `--hold-at-least` hold lost with it ends sooner).

use std::time::Duration;

use anyhow::Result;
use redis::{Cmd, ConnectionLike, RedisResult, Value};

use crate::lock::keys::Keys;
use crate::redis::server::Conn;
use crate::report::json::Json;
use crate::supervise::lease;

/// How late a server may answer a WAIT that timed out: it notices the timeout at a tick of
/// its clock, ten a second by default (`hz 10`).
pub const SERVER_TICK: Duration = Duration::from_millis(100);

/// How many replicas must acknowledge a write, and how long to wait for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub replicas: u32,
    pub timeout: Duration,
}

impl Ack {
    /// The acknowledgement `--replicas N` asks of a request bounded by `request_timeout` for a
    /// lease of `ttl`; `None` without `--replicas` (or with 0).
    ///
    /// Half of what the request's timeout leaves after [`SERVER_TICK`], and at most a third of
    /// the TTL: the server answers a WAIT that timed out only at a tick of its clock, so the
    /// answer still comes within the request's timeout. (Replicas that acknowledge answer it
    /// at once.)
    pub fn new(replicas: u32, request_timeout: Duration, ttl: Duration) -> Option<Ack> {
        (replicas > 0).then(|| Ack {
            replicas,
            timeout: (request_timeout.saturating_sub(SERVER_TICK) / 2)
                .min(ttl / 3)
                .max(Duration::from_millis(1)),
        })
    }

    /// The same, waiting no longer than `limit`.
    pub fn at_most(self, limit: Duration) -> Ack {
        Ack {
            timeout: self.timeout.min(limit).max(Duration::from_millis(1)),
            ..self
        }
    }

    /// `WAIT N MS`. The timeout is never 0, which would wait for ever.
    pub fn command(&self) -> Cmd {
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas)
            .arg(self.timeout.as_millis().max(1) as u64);
        wait
    }

    /// What WAIT's answer says: enough replicas, too few ([`Unacknowledged`]), or the server
    /// refused WAIT itself (an ACL without it, a service that does not offer it).
    pub fn check(&self, reply: RedisResult<Value>) -> Result<()> {
        let acked = match reply {
            Ok(value) => redis::from_redis_value_ref::<i64>(&value).unwrap_or(0),
            Err(e) => {
                let grant = if e.code() == Some("NOPERM") {
                    " (grant the ACL user +wait)"
                } else {
                    ""
                };
                return Err(anyhow::Error::new(e).context(format!(
                    "--replicas {} needs the WAIT command, which the server refused{grant}",
                    self.replicas
                )));
            }
        };
        if acked >= i64::from(self.replicas) {
            return Ok(());
        }
        Err(anyhow::Error::new(Unacknowledged {
            acked: acked.max(0) as u32,
            asked: self.replicas,
            within: self.timeout,
            replication: None,
        }))
    }
}

/// Fewer replicas than `--replicas` acknowledged a write within the time allowed. Exit 69: the
/// server could not do what was asked (a replica down or lagging, or fewer replicas than
/// asked for), as when it cannot be reached.
#[derive(Debug)]
pub struct Unacknowledged {
    pub acked: u32,
    pub asked: u32,
    pub within: Duration,
    /// What the master said of its replicas, when it could be asked.
    pub replication: Option<Replication>,
}

impl std::fmt::Display for Unacknowledged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--replicas {}: {} acknowledged it within {}",
            self.asked,
            match self.acked {
                0 => "no replica".to_string(),
                1 => "only 1 replica".to_string(),
                n => format!("only {n} replicas"),
            },
            lease::fmt(self.within)
        )?;
        if let Some(replication) = &self.replication {
            write!(f, " (the master has {})", replication.describe())?;
        }
        Ok(())
    }
}

impl std::error::Error for Unacknowledged {}

/// Which faults keep the lock exclusive when holders ask `asked` acknowledgements of a master
/// with `replicas` replicas (docs/guide.md, "What each setting survives"), in words for
/// `doctor`. A partition counts a replica cut off as down: a holder cut off with the old
/// master keeps renewing while the replicas on its side are enough, and at the heal the new
/// master's grant counts at once.
pub fn guarantee(asked: u32, replicas: usize) -> String {
    let asked = asked as usize;
    let majority = replicas / 2 + 1;
    if asked == 0 {
        "a failover or a partition can let a second holder run".to_owned()
    } else if asked >= replicas {
        "exclusive through a master crash and every partition; unavailable while any replica \
         is away"
            .to_owned()
    } else if asked >= majority {
        format!(
            "exclusive through a master crash and a partition that leaves fewer than {asked} \
             replicas with the old master; --replicas {replicas} (every replica) keeps it \
             through every partition"
        )
    } else {
        format!(
            "exclusive through a master crash and a partition that leaves no{} replica with the \
             old master, not one that leaves {} with it; --replicas {replicas} (every replica) \
             keeps it through every partition",
            if asked == 1 {
                String::new()
            } else {
                format!(" more than {}", asked - 1)
            },
            if asked == 1 {
                "one".to_owned()
            } else {
                asked.to_string()
            }
        )
    }
}

/// Whether `err` says that too few replicas acknowledged a write.
pub fn is_unacknowledged(err: &anyhow::Error) -> bool {
    err.chain()
        .any(<dyn std::error::Error + 'static>::is::<Unacknowledged>)
}

/// Adds what the master says of its replicas to an [`Unacknowledged`] error, best effort (a
/// user may not be allowed INFO): only on the way to an error, for it costs a round trip.
pub fn explain(err: anyhow::Error, con: &mut dyn ConnectionLike, keys: &Keys) -> anyhow::Error {
    match err.downcast::<Unacknowledged>() {
        Ok(mut unacknowledged) => {
            unacknowledged.replication = of_lock(con, keys);
            anyhow::Error::new(unacknowledged)
        }
        Err(other) => other,
    }
}

/// `INFO replication` of the master that holds `keys`. The lock's `PTTL` goes first: a cluster
/// routes a pipeline by its first command, so both reach the node that owns the lock's slot.
fn of_lock(con: &mut dyn ConnectionLike, keys: &Keys) -> Option<Replication> {
    let mut pipe = redis::pipe();
    pipe.cmd("PTTL")
        .arg(&keys.lock)
        .ignore()
        .cmd("INFO")
        .arg("replication");
    let (text,): (String,) = pipe.query(con).ok()?;
    Some(Replication::parse(&text))
}

/// The master's view of its replicas, from `INFO replication`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replication {
    /// `master`, or `slave` for a replica.
    pub role: String,
    /// The master's replication offset (bytes of its replication stream so far).
    pub offset: Option<i64>,
    pub replicas: Vec<Replica>,
}

/// One replica as its master sees it (`slaveN:ip=…,port=…,state=online,offset=…,lag=…`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replica {
    pub address: String,
    /// `online` once it is in sync; `wait_bgsave`, `send_bulk` while it syncs.
    pub state: String,
    /// The offset it acknowledged last.
    pub offset: Option<i64>,
    /// Seconds since it last acknowledged (it does every second).
    pub lag_s: Option<i64>,
}

impl Replication {
    pub fn parse(info: &str) -> Replication {
        Replication::from_fields(info.lines().filter_map(|line| line.trim().split_once(':')))
    }

    /// From INFO's fields as name/value pairs (any sections; the replication ones are read).
    pub fn from_fields<'a>(fields: impl Iterator<Item = (&'a str, &'a str)>) -> Replication {
        let mut out = Replication::default();
        for (name, value) in fields {
            match name {
                "role" => out.role = value.to_string(),
                "master_repl_offset" => out.offset = value.parse().ok(),
                _ if name.starts_with("slave") && name[5..].parse::<u32>().is_ok() => {
                    let field = |key: &str| {
                        value
                            .split(',')
                            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                            .map(str::to_string)
                    };
                    out.replicas.push(Replica {
                        address: format!(
                            "{}:{}",
                            field("ip").unwrap_or_default(),
                            field("port").unwrap_or_default()
                        ),
                        state: field("state").unwrap_or_default(),
                        offset: field("offset").and_then(|o| o.parse().ok()),
                        lag_s: field("lag").and_then(|l| l.parse().ok()),
                    });
                }
                _ => {}
            }
        }
        out
    }

    pub fn is_master(&self) -> bool {
        self.role == "master"
    }

    /// "no replica connected", "1 replica connected (127.0.0.1:6380: online, lag 0s, 120
    /// bytes behind)".
    pub fn describe(&self) -> String {
        if !self.is_master() {
            return format!("the role {:?}, not master", self.role);
        }
        if self.replicas.is_empty() {
            return "no replica connected".to_string();
        }
        let each: Vec<String> = self
            .replicas
            .iter()
            .map(|r| {
                let mut text = format!("{}: {}", r.address, r.state);
                if let Some(lag) = r.lag_s {
                    text.push_str(&format!(", lag {lag}s"));
                }
                if let (Some(master), Some(acked)) = (self.offset, r.offset) {
                    text.push_str(&format!(", {} bytes behind", (master - acked).max(0)));
                }
                text
            })
            .collect();
        let count = match self.replicas.len() {
            1 => "1 replica connected".to_string(),
            n => format!("{n} replicas connected"),
        };
        format!("{count} ({})", each.join("; "))
    }

    /// `status --json`'s replication entry for one server.
    pub fn json(&self) -> Json {
        Json::Obj(vec![
            ("role", Json::str(&self.role)),
            ("offset", Json::opt_num(self.offset)),
            (
                "replicas",
                Json::Arr(
                    self.replicas
                        .iter()
                        .map(|r| {
                            Json::Obj(vec![
                                ("address", Json::str(&r.address)),
                                ("state", Json::str(&r.state)),
                                ("offset", Json::opt_num(r.offset)),
                                ("lag_s", Json::opt_num(r.lag_s)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ])
    }
}

/// `INFO replication` of each master: the server, or every master of a cluster (named by its
/// address). `status` and `doctor` show it; a user that may not run INFO gets the error.
pub fn of_masters(con: &mut Conn) -> Result<Vec<(Option<String>, Replication)>> {
    let mut info = redis::cmd("INFO");
    info.arg("replication");
    match con {
        Conn::Single(single) => {
            let text: String = info.query(single)?;
            Ok(vec![(None, Replication::parse(&text))])
        }
        // Routed to every master; the answer maps each one's address to its INFO.
        Conn::Cluster(cluster) => {
            let reply: std::collections::BTreeMap<String, String> = info.query(cluster.as_mut())?;
            Ok(reply
                .into_iter()
                .map(|(address, text)| (Some(address), Replication::parse(&text)))
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_guarantee_follows_the_setting_and_the_replicas() {
        assert!(super::guarantee(1, 2).contains("not one that leaves one with it"));
        assert!(super::guarantee(1, 2).contains("--replicas 2"));
        assert!(super::guarantee(2, 2).contains("every partition; unavailable"));
        assert!(super::guarantee(3, 2).contains("every partition"));
        assert!(super::guarantee(2, 3).contains("fewer than 2 replicas"));
        assert!(super::guarantee(1, 1).contains("every partition"));
        assert!(super::guarantee(0, 2).contains("second holder"));
    }
    use super::*;

    const INFO: &str = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
        slave0:ip=127.0.0.1,port=6380,state=online,offset=1200,lag=0\r\n\
        slave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=3\r\n\
        master_failover_state:no-failover\r\nmaster_repl_offset:1320\r\n";

    #[test]
    fn info_replication_is_read_replica_by_replica() {
        let r = Replication::parse(INFO);
        assert!(r.is_master());
        assert_eq!(r.offset, Some(1320));
        assert_eq!(r.replicas.len(), 2);
        assert_eq!(r.replicas[1].address, "127.0.0.1:6381");
        assert_eq!(r.replicas[1].lag_s, Some(3));
        assert_eq!(
            r.describe(),
            "2 replicas connected (127.0.0.1:6380: online, lag 0s, 120 bytes behind; \
             127.0.0.1:6381: wait_bgsave, lag 3s, 1320 bytes behind)"
        );
        let none = Replication::parse("role:master\r\nconnected_slaves:0\r\n");
        assert_eq!(none.describe(), "no replica connected");
    }

    #[test]
    fn the_wait_is_bounded_by_half_the_request_and_a_third_of_the_ttl() {
        let ack = |timeout_ms, ttl_ms| {
            Ack::new(
                1,
                Duration::from_millis(timeout_ms),
                Duration::from_millis(ttl_ms),
            )
            .unwrap()
            .timeout
        };
        assert_eq!(ack(3000, 30_000), Duration::from_millis(1450));
        assert_eq!(ack(3000, 900), Duration::from_millis(300));
        assert_eq!(ack(166, 1500), Duration::from_millis(33));
        assert_eq!(ack(50, 900), Duration::from_millis(1));
        assert!(Ack::new(0, Duration::from_secs(3), Duration::from_secs(30)).is_none());
    }

    #[test]
    fn too_few_acknowledgements_are_unavailable_and_a_refused_wait_is_its_class() {
        let ack = Ack::new(2, Duration::from_millis(2100), Duration::from_secs(30)).unwrap();
        assert!(ack.check(Ok(Value::Int(2))).is_ok());
        let few = ack.check(Ok(Value::Int(1))).unwrap_err();
        assert!(is_unacknowledged(&few));
        assert_eq!(
            crate::report::error::classify(&few),
            crate::report::exit::Exit::Unavailable
        );
        assert_eq!(
            few.to_string(),
            "--replicas 2: only 1 replica acknowledged it within 1s"
        );
        let denied = ack
            .check(Err(crate::report::error::server_error(
                "NOPERM this user has no permissions to run the 'wait' command",
            )))
            .unwrap_err();
        assert_eq!(
            crate::report::error::classify(&denied),
            crate::report::exit::Exit::Permission
        );
        assert!(crate::report::error::render(&denied).contains("+wait"));
        let missing = ack
            .check(Err(crate::report::error::server_error(
                "ERR unknown command 'WAIT'",
            )))
            .unwrap_err();
        assert_eq!(
            crate::report::error::classify(&missing),
            crate::report::exit::Exit::Config
        );
    }
}
