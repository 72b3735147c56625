//! A private three-master Redis Cluster per test.
//!
//! Each master is a [`RedisServer`] (its own scratch directory, nothing on disk, killed on
//! drop) started with `--cluster-enabled yes` and an explicit cluster bus port, because the
//! default bus port (port + 10000) of a high ephemeral port does not exist. `redis-cli
//! --cluster create` then splits the slots between the three, and the cluster counts as up
//! once every node reports `cluster_state:ok` (a bounded poll). No replicas: each slot lives on
//! exactly one node, so a test can tell where a key is.
//!
//! The harness talks to each node on its own (plain) connection: a key must be read on the
//! node that owns its slot, which [`RedisCluster::owner`] finds from `CLUSTER NODES`.

use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::poll::{POLL_INTERVAL, wait_until};
use super::redis_server::{RedisServer, free_port};
use super::temp::TempDir;

/// How long `redis-cli --cluster create` may take (it waits for the nodes to meet).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the nodes may take to agree that the cluster is up.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);

pub const MASTERS: usize = 3;

pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Three masters sharing the 16384 slots, every node agreeing the cluster is up.
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..MASTERS)
            .map(|_| {
                let bus_port = free_port().to_string();
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--cluster-port",
                    &bus_port,
                ])
            })
            .collect();
        let cluster = RedisCluster { nodes };
        cluster.create();
        cluster.wait_until_converged();
        cluster
    }

    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
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
        table.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields.get(1)?.split('@').next()?.rsplit(':').next()?;
            let owns = fields.iter().skip(8).any(|range| in_range(range, slot));
            if !owns {
                return None;
            }
            self.nodes.iter().position(|n| n.port().to_string() == port)
        })
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

    /// Runs `redis-cli --cluster create` with a deadline; panics with its output on failure.
    fn create(&self) {
        let scratch = TempDir::new("cluster-create");
        let output = scratch.join("redis-cli.out");
        let file = fs::File::create(&output).expect("create the redis-cli output file");
        let mut command = Command::new("redis-cli");
        command.arg("--cluster").arg("create");
        for node in &self.nodes {
            command.arg(format!("127.0.0.1:{}", node.port()));
        }
        command
            .args(["--cluster-replicas", "0", "--cluster-yes"])
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
