//! A private three-master Redis Cluster per test.
//!
//! Each master is a [`RedisServer`] (its own scratch directory, nothing on disk, killed on
//! drop) started with `--cluster-enabled yes` and an explicit cluster bus port, because the
//! default bus port (port + 10000) of a high ephemeral port does not exist. `redis-cli
//! --cluster create` then splits the slots between the three, and the cluster counts as up
//! once every node reports `cluster_state:ok` (a bounded poll). [`RedisCluster::start`] starts
//! no replicas: each slot lives on exactly one node, so a test can tell where a key is.
//!
//! [`RedisCluster::start_with_replicas`] adds one replica per master (six nodes) with a short
//! node timeout, for failover tests. It counts as up only once, besides `cluster_state:ok`,
//! every node lists all six with the same roles, every link connected and no failure flag, and
//! every replica's link to its master is up (so a vote for a failover can succeed).
//! [`RedisCluster::fail_over`] promotes a shard's replica with `CLUSTER FAILOVER` (a manual
//! failover: the master is alive and hands over), then waits until every node's `CLUSTER SLOTS`
//! names the replica for the slot and the old master replicates from it. Node indexes do not
//! change: a failover swaps the roles of two indexes, so tests ask for roles, never assume them.
//!
//! The harness talks to each node on its own (plain) connection: a key must be read on the
//! node that owns its slot, which [`RedisCluster::owner`] finds from `CLUSTER NODES`. A
//! replica answers reads of its slots with MOVED, so the harness reads keys on masters only.

use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::certs::Certs;
use super::poll::{POLL_INTERVAL, wait_until};
use super::proxy::DelayingProxy;
use super::redis_server::{RedisServer, free_port};
use super::temp::TempDir;

/// How long `redis-cli --cluster create` may take (it waits for the nodes to meet).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the nodes may take to agree that the cluster is up.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a failover may take, from the first `CLUSTER FAILOVER` until every node agrees.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(20);
/// A manual failover that has not promoted the replica by then has been given up by Redis
/// (after 5 s, `CLUSTER_MF_TIMEOUT`), so the harness asks again.
const FAILOVER_ATTEMPT: Duration = Duration::from_secs(6);
/// The node timeout of a cluster with replicas: short, so elections and retries are quick.
const REPLICATED_NODE_TIMEOUT: &str = "1000";

pub const MASTERS: usize = 3;

pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Replicas per master: 0, 1 (or 2 with lagging replicas).
    replicas: usize,
    /// For a TLS-only cluster: the CA `redis-cli` verifies the nodes with.
    ca_file: Option<String>,
    /// With lagging replicas: each shard's master, replicas and proxy.
    lagging: Vec<Lagging>,
}

/// A shard whose master is known by a proxy that delays its replication
/// ([`RedisCluster::start_with_lagging_replicas`]).
struct Lagging {
    master: usize,
    promotable: usize,
    standby: usize,
    proxy: DelayingProxy,
}

/// How far behind its master a shard's promotable replica is.
pub const PROMOTABLE_LAG: Duration = Duration::from_millis(300);
/// How far behind its master a shard's standby (never promoted) is.
pub const STANDBY_LAG: Duration = Duration::from_millis(1000);

impl RedisCluster {
    /// Three masters sharing the 16384 slots, every node agreeing the cluster is up.
    pub fn start() -> RedisCluster {
        RedisCluster::launch(0, "2000", None)
    }

    /// Three masters that speak TLS only, to clients and on the cluster bus, with `certs`'s
    /// server certificate; [`RedisServer::port`] is each node's TLS port.
    pub fn start_tls(certs: &Certs) -> RedisCluster {
        RedisCluster::launch(0, "2000", Some(certs))
    }

    /// Three masters sharing the 16384 slots and one replica of each (six nodes): every node
    /// agrees on the cluster and on every node's role, and every replica is in sync.
    pub fn start_with_replicas() -> RedisCluster {
        RedisCluster::launch(1, REPLICATED_NODE_TIMEOUT, None)
    }

    fn launch(replicas: usize, node_timeout: &str, tls: Option<&Certs>) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..MASTERS * (1 + replicas))
            .map(|_| {
                let bus_port = free_port().to_string();
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    node_timeout,
                    "--cluster-port",
                    &bus_port,
                ];
                if replicas > 0 {
                    // A master waits 5 s by default before a diskless sync, in case more
                    // replicas come; a replica's first sync should not.
                    args.extend(["--repl-diskless-sync-delay", "0"]);
                }
                match tls {
                    Some(certs) => RedisServer::start_tls_only(certs, &args),
                    None => RedisServer::start_with(&args),
                }
            })
            .collect();
        let cluster = RedisCluster {
            nodes,
            replicas,
            ca_file: tls.map(|certs| certs.path("ca.crt")),
            lagging: Vec::new(),
        };
        cluster.create();
        cluster.wait_until_converged();
        if replicas > 0 {
            cluster.wait_until_roles_agree();
            cluster.wait_until_replicas_linked();
        }
        cluster
    }

    /// Three masters with two replicas each (nine nodes), for failovers that lose writes.
    /// Each master is known to the cluster (and so to its replicas and to clients) by the
    /// address of a [`DelayingProxy`] in front of it (`cluster-announce-port`), which delays
    /// what it sends one replica by [`PROMOTABLE_LAG`] and the other, a standby that never
    /// starts an election (`cluster-replica-no-failover`), by [`STANDBY_LAG`]: the promotable
    /// replica is the first to acknowledge a write, and the one a failover promotes.
    /// [`RedisCluster::lose_master`] cuts a master's links and kills it.
    pub fn start_with_lagging_replicas() -> RedisCluster {
        let mut cluster = RedisCluster::launch(2, REPLICATED_NODE_TIMEOUT, None);
        for master in 0..MASTERS {
            let replicas = cluster.replicas_of(master);
            let [promotable, standby] = replicas[..] else {
                panic!("node {master} has replicas {replicas:?}, not two");
            };
            let _: () = cluster.nodes[standby].query(&[
                "CONFIG",
                "SET",
                "cluster-replica-no-failover",
                "yes",
            ]);
            let proxy = DelayingProxy::start(cluster.nodes[master].port());
            proxy.delay(cluster.nodes[promotable].port(), PROMOTABLE_LAG);
            proxy.delay(cluster.nodes[standby].port(), STANDBY_LAG);
            let announced = proxy.port().to_string();
            let _: () = cluster.nodes[master].query(&[
                "CONFIG",
                "SET",
                "cluster-announce-port",
                &announced,
            ]);
            cluster.lagging.push(Lagging {
                master,
                promotable,
                standby,
                proxy,
            });
        }
        for shard in &cluster.lagging {
            let proxy = shard.proxy.port();
            for replica in [shard.promotable, shard.standby] {
                wait_until(
                    &format!("node {replica} to replicate through the proxy on port {proxy}"),
                    CONVERGE_TIMEOUT,
                    || {
                        let node = &cluster.nodes[replica];
                        (replication(node, "master_port") == Some(proxy.to_string())
                            && replication(node, "master_link_status").as_deref() == Some("up"))
                        .then_some(())
                    },
                );
            }
            wait_until(
                &format!("every node to know node {} by port {proxy}", shard.master),
                CONVERGE_TIMEOUT,
                || {
                    cluster
                        .nodes
                        .iter()
                        .all(|viewer| {
                            viewer
                                .try_query::<String>(&["CLUSTER", "NODES"])
                                .is_ok_and(|table| {
                                    parse_nodes(&table).iter().any(|line| line.port == proxy)
                                })
                        })
                        .then_some(())
                },
            );
            super::fleet::online(&cluster.nodes[shard.master], 2);
        }
        cluster
    }

    /// The replicas of master `master`, as it sees them.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let id = self.node_id(master);
        let table: String = self.nodes[master].query(&["CLUSTER", "NODES"]);
        parse_nodes(&table)
            .iter()
            .filter(|line| line.master.as_deref() == Some(id.as_str()))
            .filter_map(|line| self.index_of_port(line.port))
            .collect()
    }

    /// With lagging replicas: master `master`'s host goes away, its links cut (its replicas
    /// lose what it sent them in the last lag), then the master killed.
    pub fn lose_master(&mut self, master: usize) {
        let shard = self
            .lagging
            .iter()
            .find(|s| s.master == master)
            .unwrap_or_else(|| panic!("node {master} is not a master with lagging replicas"));
        shard.proxy.cut();
        self.nodes[master].kill9();
    }

    /// With lagging replicas: waits until the slot of `key`, which master `master` served
    /// until it was lost, is served by the shard's promotable replica, as the shard's standby
    /// sees the cluster; how long that took.
    pub fn wait_for_failover(&self, master: usize, key: &str) -> Duration {
        let started = Instant::now();
        let shard = self
            .lagging
            .iter()
            .find(|s| s.master == master)
            .unwrap_or_else(|| panic!("node {master} is not a master with lagging replicas"));
        let slot = self.slot_from(key, shard.standby);
        let promoted = self.nodes[shard.promotable].port();
        wait_until(
            &format!("node {} to serve slot {slot}", shard.promotable),
            FAILOVER_TIMEOUT,
            || {
                (role(&self.nodes[shard.promotable]) == "master"
                    && self.nodes[shard.standby]
                        .try_query::<Vec<Value>>(&["CLUSTER", "SLOTS"])
                        .is_ok_and(|slots| master_port_of_slot(&slots, slot) == Some(promoted)))
                .then_some(())
            },
        );
        started.elapsed()
    }

    /// The hash slot of `key`, asked of node `node`.
    fn slot_from(&self, key: &str, node: usize) -> u16 {
        let slot: i64 = self.nodes[node].query(&["CLUSTER", "KEYSLOT", key]);
        u16::try_from(slot).expect("a slot is below 16384")
    }

    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    pub fn node_mut(&mut self, index: usize) -> &mut RedisServer {
        &mut self.nodes[index]
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// `redis+cluster://127.0.0.1:PORT` with node `index` as the only seed.
    pub fn seed_url(&self, index: usize) -> String {
        format!("redis+cluster://127.0.0.1:{}", self.nodes[index].port())
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: every node a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// The hash slot of `key`, as the cluster computes it.
    pub fn slot(&self, key: &str) -> u16 {
        let slot: i64 = self.nodes[0].query(&["CLUSTER", "KEYSLOT", key]);
        u16::try_from(slot).expect("a slot is below 16384")
    }

    /// The index of the node that owns `key`'s slot, as node 0 sees the cluster.
    pub fn owner(&self, key: &str) -> usize {
        self.owner_of_slot(self.slot(key), 0)
            .unwrap_or_else(|| panic!("no node owns the slot of {key}"))
    }

    /// The node that owns `key`'s slot.
    pub fn owner_node(&self, key: &str) -> &RedisServer {
        &self.nodes[self.owner(key)]
    }

    /// The index of the node owning `slot`, as node `viewer` sees the cluster.
    pub fn owner_of_slot(&self, slot: u16, viewer: usize) -> Option<usize> {
        let table: String = self.nodes[viewer].query(&["CLUSTER", "NODES"]);
        parse_nodes(&table)
            .iter()
            .find(|line| line.slots.iter().any(|range| in_range(range, slot)))
            .and_then(|line| self.index_of_port(line.port))
    }

    /// Keys named `PREFIX-N`, at least one on every master; returns them with their owners.
    pub fn keys_on_every_master(&self, prefix: &str) -> Vec<(String, usize)> {
        let mut keys: Vec<(String, usize)> = Vec::new();
        for n in 0.. {
            let key = format!("{prefix}-{n}");
            let owner = self.owner(&key);
            if !keys.iter().any(|(_, o)| *o == owner) {
                keys.push((key, owner));
            }
            if keys.len() == MASTERS {
                break;
            }
            assert!(n < 1000, "no keys found on every master: {keys:?}");
        }
        keys
    }

    /// A node other than the one owning `key`'s slot.
    pub fn not_owner(&self, key: &str) -> usize {
        (self.owner(key) + 1) % MASTERS
    }

    pub fn node_id(&self, index: usize) -> String {
        self.nodes[index].query(&["CLUSTER", "MYID"])
    }

    /// Moves `slot`, with every key in it, from node `from` to node `to` the way `redis-cli
    /// --cluster reshard` does (IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE on every node),
    /// then waits until every node sees `to` as its owner.
    pub fn migrate_slot(&self, slot: u16, from: usize, to: usize) {
        let slot_text = slot.to_string();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let _: () =
            self.nodes[to].query(&["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id]);
        let _: () =
            self.nodes[from].query(&["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id]);
        loop {
            let keys: Vec<String> =
                self.nodes[from].query(&["CLUSTER", "GETKEYSINSLOT", &slot_text, "100"]);
            if keys.is_empty() {
                break;
            }
            let to_port = self.nodes[to].port().to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: () = self.nodes[from].query(&args);
        }
        for node in [to, from] {
            let _: () = self.nodes[node].query(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]);
        }
        for node in 0..MASTERS {
            if node != to && node != from {
                let _: () =
                    self.nodes[node].query(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]);
            }
        }
        wait_until(
            &format!("every node to see slot {slot} on node {to}"),
            CONVERGE_TIMEOUT,
            || {
                (0..MASTERS)
                    .all(|viewer| self.owner_of_slot(slot, viewer) == Some(to))
                    .then_some(())
            },
        );
    }

    /// The index of the replica of master `master`, as the master sees it.
    pub fn replica_of(&self, master: usize) -> usize {
        let id = self.node_id(master);
        let table: String = self.nodes[master].query(&["CLUSTER", "NODES"]);
        parse_nodes(&table)
            .iter()
            .find(|line| line.master.as_deref() == Some(id.as_str()))
            .and_then(|line| self.index_of_port(line.port))
            .unwrap_or_else(|| panic!("node {master} has no replica:\n{table}"))
    }

    /// A master of another shard than `key`'s: neither the owner of its slot nor a replica.
    pub fn master_outside_shard_of(&self, key: &str) -> usize {
        let owner = self.owner(key);
        (0..self.nodes.len())
            .find(|&index| index != owner && role(&self.nodes[index]) == "master")
            .unwrap_or_else(|| panic!("no master other than node {owner}"))
    }

    /// Waits until the replica of master `master` has applied everything the master has
    /// written so far (replication is asynchronous).
    pub fn wait_until_replicated(&self, master: usize) {
        let replica = self.replica_of(master);
        let written = replication_offset(&self.nodes[master], "master_repl_offset")
            .expect("the master's replication offset");
        wait_until(
            &format!("node {replica} to reach the offset {written} of its master, node {master}"),
            CONVERGE_TIMEOUT,
            || {
                replication_offset(&self.nodes[replica], "slave_repl_offset")
                    .is_some_and(|applied| applied >= written)
                    .then_some(())
            },
        );
    }

    /// Fails over the shard owning `slot` with `CLUSTER FAILOVER` on its replica (a manual
    /// failover: the master, alive, stops writes until the replica has caught up, then hands
    /// over). Returns the index of the promoted replica once it is a master, every node's
    /// `CLUSTER SLOTS` maps `slot` to it, the old master replicates from it with its link up,
    /// and every node agrees on the roles again.
    pub fn fail_over(&self, slot: u16) -> usize {
        assert!(self.replicas > 0, "fail_over needs start_with_replicas");
        let old = self
            .owner_of_slot(slot, 0)
            .unwrap_or_else(|| panic!("no node owns slot {slot}"));
        let new = self.replica_of(old);
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        let mut refusals = Vec::new();
        loop {
            if let Err(e) = self.nodes[new].try_query::<()>(&["CLUSTER", "FAILOVER"]) {
                refusals.push(e.to_string());
            }
            let attempt_end = deadline.min(Instant::now() + FAILOVER_ATTEMPT);
            if poll_until(attempt_end, || role(&self.nodes[new]) == "master") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {new} was not promoted within {FAILOVER_TIMEOUT:?} (refusals: {refusals:?})"
            );
        }
        let new_port = self.nodes[new].port();
        let left = deadline.saturating_duration_since(Instant::now());
        wait_until(
            &format!("every node's CLUSTER SLOTS to map slot {slot} to node {new}"),
            left,
            || {
                self.nodes
                    .iter()
                    .all(|viewer| {
                        viewer
                            .try_query::<Vec<Value>>(&["CLUSTER", "SLOTS"])
                            .is_ok_and(|slots| master_port_of_slot(&slots, slot) == Some(new_port))
                    })
                    .then_some(())
            },
        );
        let left = deadline.saturating_duration_since(Instant::now());
        wait_until(
            &format!("the old master, node {old}, to replicate from node {new}"),
            left,
            || {
                let old = &self.nodes[old];
                (role(old) == "slave"
                    && replication(old, "master_port") == Some(new_port.to_string())
                    && replication(old, "master_link_status").as_deref() == Some("up"))
                .then_some(())
            },
        );
        self.wait_until_roles_agree();
        new
    }

    /// The node listening on `port`, or known by it (a master behind its proxy).
    fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .or_else(|| {
                self.lagging
                    .iter()
                    .find(|s| s.proxy.port() == port)
                    .map(|s| s.master)
            })
    }

    /// Runs `redis-cli --cluster create` with a deadline; panics with its output on failure.
    fn create(&self) {
        let scratch = TempDir::new("cluster-create");
        let output = scratch.join("redis-cli.out");
        let file = fs::File::create(&output).expect("create the redis-cli output file");
        let mut command = Command::new("redis-cli");
        if let Some(ca_file) = &self.ca_file {
            command.args(["--tls", "--cacert", ca_file]);
        }
        command.arg("--cluster").arg("create");
        for node in &self.nodes {
            command.arg(format!("127.0.0.1:{}", node.port()));
        }
        command
            .args([
                "--cluster-replicas",
                &self.replicas.to_string(),
                "--cluster-yes",
            ])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the output file"))
            .stderr(file);
        let mut process = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-cli --cluster create: {e}"));
        let deadline = Instant::now() + CREATE_TIMEOUT;
        let status = loop {
            if let Some(status) = process.try_wait().expect("wait for redis-cli") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = process.kill();
                let _ = process.wait();
                break None;
            }
            thread::sleep(POLL_INTERVAL);
        };
        if !status.is_some_and(|s| s.success()) {
            let text = fs::read_to_string(&output).unwrap_or_default();
            panic!(
                "redis-cli --cluster create failed ({}):\n{text}",
                status.map_or("timed out".to_owned(), |s| s.to_string())
            );
        }
    }

    fn wait_until_converged(&self) {
        wait_until(
            "every cluster node to report cluster_state:ok",
            CONVERGE_TIMEOUT,
            || {
                self.nodes
                    .iter()
                    .all(|node| {
                        node.try_query::<String>(&["CLUSTER", "INFO"])
                            .is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
                    })
                    .then_some(())
            },
        );
    }

    /// Waits until every node lists every node, with the same role (master, or replica of
    /// the same master) in every view, all links connected and no failure flag.
    fn wait_until_roles_agree(&self) {
        let ports: Vec<u16> = self.nodes.iter().map(RedisServer::port).collect();
        wait_until(
            "every cluster node to agree on every node's role",
            CONVERGE_TIMEOUT,
            || {
                let mut views = Vec::new();
                for node in &self.nodes {
                    let table: String = node.try_query(&["CLUSTER", "NODES"]).ok()?;
                    let mut view: Vec<(u16, Option<String>)> = Vec::new();
                    for line in parse_nodes(&table) {
                        let healthy = line.connected
                            && !line.flags.iter().any(|flag| {
                                matches!(flag.as_str(), "fail" | "fail?" | "handshake" | "noaddr")
                            });
                        if !healthy {
                            return None;
                        }
                        view.push((line.port, line.master));
                    }
                    view.sort();
                    views.push(view);
                }
                let listed: Vec<u16> = views[0].iter().map(|(port, _)| *port).collect();
                let mut expected = ports.clone();
                expected.sort_unstable();
                let masters = views[0].iter().filter(|(_, m)| m.is_none()).count();
                (listed == expected
                    && masters == MASTERS
                    && views.iter().all(|view| *view == views[0]))
                .then_some(())
            },
        );
    }

    /// Waits until every replica's link to its master is up.
    fn wait_until_replicas_linked(&self) {
        wait_until(
            "every replica to report master_link_status:up",
            CONVERGE_TIMEOUT,
            || {
                self.nodes
                    .iter()
                    .filter(|node| role(node) != "master")
                    .all(|node| replication(node, "master_link_status").as_deref() == Some("up"))
                    .then_some(())
            },
        );
    }
}

/// One line of `CLUSTER NODES`.
struct NodeLine {
    port: u16,
    flags: Vec<String>,
    /// The id of its master, for a replica.
    master: Option<String>,
    connected: bool,
    /// Slot fields: `0-5460`, `42`, `[42->-id]`.
    slots: Vec<String>,
}

/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`
fn parse_nodes(table: &str) -> Vec<NodeLine> {
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields
                .get(1)?
                .split('@')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let master = (*fields.get(3)? != "-").then(|| fields[3].to_owned());
            Some(NodeLine {
                port,
                flags: fields.get(2)?.split(',').map(str::to_owned).collect(),
                master,
                connected: *fields.get(7)? == "connected",
                slots: fields.iter().skip(8).map(|f| (*f).to_owned()).collect(),
            })
        })
        .collect()
}

/// The port of the master that a `CLUSTER SLOTS` reply names for `slot`. Each entry is
/// `[start, end, [ip, port, id, ...], replicas...]`.
fn master_port_of_slot(slots: &[Value], slot: u16) -> Option<u16> {
    slots.iter().find_map(|entry| {
        let Value::Array(fields) = entry else {
            return None;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        if !(*start..=*end).contains(&i64::from(slot)) {
            return None;
        }
        match master.get(1) {
            Some(Value::Int(port)) => u16::try_from(*port).ok(),
            _ => None,
        }
    })
}

/// A field of `INFO replication`, or `None` while the server cannot be asked (a node changing
/// roles may drop the harness's connection; the next query reconnects).
fn replication(server: &RedisServer, field: &str) -> Option<String> {
    let text: String = server.try_query(&["INFO", "replication"]).ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value.trim().to_owned())
}

fn replication_offset(server: &RedisServer, field: &str) -> Option<u64> {
    replication(server, field).and_then(|value| value.parse().ok())
}

/// `role` from `INFO replication`: `master` or `slave` (empty while it cannot be asked).
fn role(server: &RedisServer) -> String {
    replication(server, "role").unwrap_or_default()
}

/// Polls `check` until it holds or `deadline` passes; says whether it held.
fn poll_until(deadline: Instant, mut check: impl FnMut() -> bool) -> bool {
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Whether a `CLUSTER NODES` slot field (`5461-10922`, `42`, or `[42->-id]` for a slot being
/// migrated) covers `slot`.
fn in_range(field: &str, slot: u16) -> bool {
    if field.starts_with('[') {
        return false;
    }
    let (start, end) = field.split_once('-').unwrap_or((field, field));
    match (start.parse::<u16>(), end.parse::<u16>()) {
        (Ok(start), Ok(end)) => (start..=end).contains(&slot),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::in_range;

    #[test]
    fn slot_fields_of_cluster_nodes_are_read_as_ranges() {
        assert!(in_range("0-5460", 0));
        assert!(in_range("0-5460", 5460));
        assert!(!in_range("0-5460", 5461));
        assert!(in_range("42", 42));
        assert!(!in_range("[42->-abc]", 42));
        assert!(!in_range("connected", 1));
    }
}
