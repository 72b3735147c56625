//! A Redlock quorum: several independent `redis-server`s, each a private [`RedisServer`], and
//! a `redlock` builder that names every one of them with its own `--url`.
//!
//! Nodes are addressed by index, in the order their URLs are given to redlock, so a test can
//! kill, pause or restart "the second node" and then look for that node's URL in what redlock
//! printed.

use super::redis_server::RedisServer;
use super::redlock::Redlock;

pub struct RedisQuorum {
    nodes: Vec<RedisServer>,
}

impl RedisQuorum {
    /// `count` fresh servers.
    pub fn start(count: usize) -> RedisQuorum {
        RedisQuorum {
            nodes: (0..count).map(|_| RedisServer::start()).collect(),
        }
    }

    /// `count` fresh servers, each with extra `redis-server` arguments.
    pub fn start_with(count: usize, extra_args: &[&str]) -> RedisQuorum {
        RedisQuorum {
            nodes: (0..count)
                .map(|_| RedisServer::start_with(extra_args))
                .collect(),
        }
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

    /// Every node's `redis://127.0.0.1:PORT`, in order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes' URLs as one comma-separated `REDLOCK_URL` value.
    pub fn url_list(&self) -> String {
        self.urls().join(",")
    }

    /// `redlock --url NODE1 --url NODE2 ...`; add the subcommand and its flags.
    pub fn redlock(&self) -> Redlock {
        self.urls()
            .iter()
            .fold(Redlock::without_url(), |redlock, url| {
                redlock.args(["--url", url])
            })
    }

    /// The nodes not listed in `down`, with their indexes.
    pub fn running(&self, down: &[usize]) -> impl Iterator<Item = (usize, &RedisServer)> {
        let down = down.to_vec();
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(i, _)| !down.contains(i))
    }

    /// Expects every node not in `down` to hold `key` with `token`.
    pub fn expect_held(&self, key: &str, token: &str, down: &[usize]) {
        for (i, node) in self.running(down) {
            assert_eq!(
                node.get(key).as_deref(),
                Some(token),
                "node {i} ({}) does not hold {key} with the run's token",
                node.url()
            );
        }
    }

    /// Expects no node in `nodes` to have `key` at all.
    pub fn expect_free_on(&self, key: &str, nodes: &[usize]) {
        for &i in nodes {
            let node = &self.nodes[i];
            assert!(
                !node.exists(key),
                "node {i} ({}) still has {key} = {:?}",
                node.url(),
                node.get(key)
            );
        }
    }
}
