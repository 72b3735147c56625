//! Sentinel as operators run it, for failover tests: three sentinels (quorum 2) watching
//! several masters, one service each (`svc0`, `svc1`, …), so that each round of a test fails
//! over a service of its own.
//!
//! Each master is known — to the sentinels, its replicas and clients alike — by the address of
//! a [`DelayingProxy`] in front of it, and has two replicas: one the sentinels may promote,
//! whose replication lags by [`PROMOTABLE_LAG`], and a standby they never promote
//! (`replica-priority 0`), lagging by [`STANDBY_LAG`]. So the promotable replica is the first
//! to acknowledge a write, and the one a failover promotes; the standby then replicates from
//! it (the sentinels reconfigure it), so that the new master has a replica too.
//! [`Fleet::lose_master`] plays the master's host going away: its links cut (what it sent in
//! the last lag never arrives), then the master killed.
//!
//! The sentinels are started knowing each other and the replicas (`sentinel known-sentinel`,
//! `known-replica`, fixed ids), so no discovery is waited for; the fleet counts as ready once
//! every sentinel says its quorum and failover authorisation can be reached for every service
//! (`SENTINEL CKQUORUM`) and knows the standby's priority. Every process is killed on drop.

use std::fs;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::poll::wait_until;
use super::proxy::DelayingProxy;
use super::redis_server::{RedisServer, free_port};
use super::temp::TempDir;

/// How far behind the master the promotable replica is.
pub const PROMOTABLE_LAG: Duration = Duration::from_millis(300);
/// How far behind the master the standby (never promoted) is.
pub const STANDBY_LAG: Duration = Duration::from_millis(1000);

const SENTINELS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(20);

/// One service: its master, the proxy it is known by, and its two replicas.
pub struct Group {
    pub name: String,
    pub master: RedisServer,
    pub proxy: DelayingProxy,
    pub promotable: RedisServer,
    pub standby: RedisServer,
}

pub struct Fleet {
    groups: Vec<Group>,
    sentinels: Vec<Sentinel>,
}

struct Sentinel {
    port: u16,
    dir: TempDir,
    process: Option<Child>,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

impl Fleet {
    pub fn start(services: usize) -> Fleet {
        let groups: Vec<Group> = (0..services).map(start_group).collect();
        let ports: Vec<u16> = (0..SENTINELS).map(|_| free_port()).collect();
        let ids: Vec<String> = (0..SENTINELS).map(|i| format!("{:040x}", i + 1)).collect();
        let sentinels = (0..SENTINELS)
            .map(|i| launch(i, &ports, &ids, &groups))
            .collect();
        let fleet = Fleet { groups, sentinels };
        fleet.wait_until_ready();
        fleet
    }

    pub fn group(&self, service: usize) -> &Group {
        &self.groups[service]
    }

    /// `redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/svcN`.
    pub fn url(&self, service: usize) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!(
            "redis+sentinel://{}/{}",
            sentinels.join(","),
            self.groups[service].name
        )
    }

    /// The master's host goes away: every link to it cut (the replicas lose what it sent them
    /// in the last lag), then the master killed.
    pub fn lose_master(&mut self, service: usize) {
        let group = &mut self.groups[service];
        group.proxy.cut();
        group.master.kill9();
    }

    /// Makes sentinel `which` name the server on `port` as `service`'s master (it forgets
    /// the real one and monitors that one instead), as a sentinel that has not seen a failover
    /// names the old master. The other sentinels still reach their quorum without it.
    pub fn mislead(&self, service: usize, which: usize, port: u16) {
        let name = &self.groups[service].name;
        let sentinel = &self.sentinels[which];
        let _: () = sentinel
            .query(&["SENTINEL", "REMOVE", name])
            .expect("SENTINEL REMOVE");
        let port = port.to_string();
        let _: () = sentinel
            .query(&["SENTINEL", "MONITOR", name, "127.0.0.1", &port, "2"])
            .expect("SENTINEL MONITOR");
        wait_until(
            &format!("sentinel {} to name port {port}", sentinel.port),
            READY_TIMEOUT,
            || {
                (sentinel.master_port(name).map(|p| p.to_string()) == Some(port.clone()))
                    .then_some(())
            },
        );
    }

    /// Waits until a sentinel names the promotable replica as the service's master and it is
    /// one. Returns how long that took.
    pub fn wait_for_failover(&self, service: usize) -> Duration {
        let started = std::time::Instant::now();
        let group = &self.groups[service];
        let port = group.promotable.port();
        wait_until(
            &format!("a sentinel to promote port {port} for {}", group.name),
            FAILOVER_TIMEOUT,
            || {
                (self
                    .sentinels
                    .iter()
                    .any(|s| s.master_port(&group.name) == Some(port))
                    && role(&group.promotable) == "master")
                    .then_some(())
            },
        );
        started.elapsed()
    }

    fn wait_until_ready(&self) {
        for group in &self.groups {
            for replica in [&group.promotable, &group.standby] {
                wait_until(
                    &format!("the replica on port {} to sync", replica.port()),
                    READY_TIMEOUT,
                    || {
                        (replication(replica, "master_link_status").as_deref() == Some("up"))
                            .then_some(())
                    },
                );
            }
            online(&group.master, 2);
            let standby = group.standby.port().to_string();
            for sentinel in &self.sentinels {
                wait_until(
                    &format!(
                        "sentinel {} to reach its quorum for {} and know the standby",
                        sentinel.port, group.name
                    ),
                    READY_TIMEOUT,
                    || {
                        let quorum: redis::RedisResult<String> =
                            sentinel.query(&["SENTINEL", "CKQUORUM", &group.name]);
                        let replicas: Vec<Vec<String>> = sentinel
                            .query(&["SENTINEL", "REPLICAS", &group.name])
                            .unwrap_or_default();
                        let standby_known = replicas.iter().any(|fields| {
                            let field = |name: &str| {
                                fields
                                    .chunks(2)
                                    .find(|pair| pair[0] == name)
                                    .and_then(|pair| pair.get(1).cloned())
                            };
                            field("port").as_deref() == Some(standby.as_str())
                                && field("slave-priority").as_deref() == Some("0")
                                && field("master-link-status").as_deref() == Some("ok")
                        });
                        (quorum.is_ok_and(|q| q.starts_with("OK")) && standby_known).then_some(())
                    },
                );
            }
        }
    }
}

impl Sentinel {
    fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.port).as_str())?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(2)))?;
        let (name, rest) = args.split_first().expect("a command name");
        redis::cmd(name).arg(rest).query(&mut con)
    }

    fn master_port(&self, service: &str) -> Option<u16> {
        let addr: Option<(String, String)> = self
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", service])
            .ok()
            .flatten();
        addr.and_then(|(_, port)| port.parse().ok())
    }
}

fn start_group(index: usize) -> Group {
    // A master waits 5 s by default before a diskless sync, in case more replicas come.
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let proxy = DelayingProxy::start(master.port());
    let upstream = proxy.port().to_string();
    let replica = |priority: &str, lag: Duration| {
        let replica = RedisServer::start_with(&["--replica-priority", priority]);
        proxy.delay(replica.port(), lag);
        let _: () = replica.query(&["REPLICAOF", "127.0.0.1", &upstream]);
        replica
    };
    Group {
        name: format!("svc{index}"),
        promotable: replica("100", PROMOTABLE_LAG),
        standby: replica("0", STANDBY_LAG),
        master,
        proxy,
    }
}

fn launch(index: usize, ports: &[u16], ids: &[String], groups: &[Group]) -> Sentinel {
    let dir = TempDir::new("fleet-sentinel");
    let mut config = format!(
        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
         sentinel myid {id}\n",
        port = ports[index],
        dir = dir.path().display(),
        id = ids[index],
    );
    for g in groups {
        let name = &g.name;
        config.push_str(&format!(
            "sentinel monitor {name} 127.0.0.1 {master} 2\n\
             sentinel down-after-milliseconds {name} 400\n\
             sentinel failover-timeout {name} 4000\n\
             sentinel known-replica {name} 127.0.0.1 {promotable}\n\
             sentinel known-replica {name} 127.0.0.1 {standby}\n",
            master = g.proxy.port(),
            promotable = g.promotable.port(),
            standby = g.standby.port(),
        ));
        for other in (0..ports.len()).filter(|&o| o != index) {
            config.push_str(&format!(
                "sentinel known-sentinel {name} 127.0.0.1 {} {}\n",
                ports[other], ids[other]
            ));
        }
    }
    let path = dir.join("sentinel.conf");
    fs::write(&path, config).expect("write sentinel.conf");
    let mut command = super::server_kind::sentinel_command(&path);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    super::process::dies_with_the_test(&mut command);
    let process = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start redis-sentinel: {e}"));
    let sentinel = Sentinel {
        port: ports[index],
        dir,
        process: Some(process),
    };
    wait_until(
        &format!("sentinel {} to answer", sentinel.port),
        READY_TIMEOUT,
        || sentinel.query::<String>(&["PING"]).ok(),
    );
    sentinel
}

/// Waits until `master` counts `replicas` replicas online: only then does it count their
/// acknowledgements.
pub fn online(master: &RedisServer, replicas: usize) {
    wait_until(
        &format!("port {} to have {replicas} replicas online", master.port()),
        READY_TIMEOUT,
        || {
            let info: String = master.try_query(&["INFO", "replication"]).ok()?;
            (info.matches("state=online").count() >= replicas).then_some(())
        },
    );
}

/// Waits until `master`'s `replicas` replicas (linked directly, without lag) are online and
/// acknowledge a write at once: a replica just online (Redis 7.0 and Valkey alike) may
/// acknowledge its first write only at its next once-a-second ACK, which a `WAIT` of a second
/// (a 3 s TTL's) can miss.
pub fn acknowledging(master: &RedisServer, replicas: usize) {
    online(master, replicas);
    let probe = "harness:replicas-acknowledge";
    wait_until(
        &format!(
            "port {}'s {replicas} replicas to acknowledge",
            master.port()
        ),
        READY_TIMEOUT,
        || {
            let _: () = master.try_query(&["SET", probe, "1"]).ok()?;
            let _: i64 = master.try_query(&["DEL", probe]).ok()?;
            let acknowledged: usize = master
                .try_query(&["WAIT", &replicas.to_string(), "100"])
                .ok()?;
            (acknowledged >= replicas).then_some(())
        },
    );
}

/// A field of `INFO replication`, or `None` while the server cannot be asked.
fn replication(server: &RedisServer, field: &str) -> Option<String> {
    let text: String = server.try_query(&["INFO", "replication"]).ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value.trim().to_owned())
}

fn role(server: &RedisServer) -> String {
    replication(server, "role").unwrap_or_default()
}
