//! Sentinel across a real network, for partition tests: one master (`m`), two replicas (`r1`,
//! `r2`), three sentinels (`s1`–`s3`, quorum 2) and the clients (`c1`, `c2`), each in a network
//! namespace of its own, linked by a veth to a bridge. A partition moves the cut side's veths
//! to a second bridge: packets between the sides are dropped, nothing is killed, no connection
//! is reset; a heal moves them back.
//!
//! The harness reaches every server through its unix socket (the file system is shared across
//! namespaces), so it sees both sides of a partition. Names are unique per test process and
//! per net (`rp<pid>x<n>…`); `Drop` kills the processes and removes namespaces and bridges, and
//! a net being made first removes what an interrupted test process left behind (its pid is no
//! longer alive). Every process is also killed with the test process (`PR_SET_PDEATHSIG`).
//!
//! [`Net::start`] returns `Err` with the reason where namespaces cannot be made (not root, no
//! `ip`, a container without the capability): the tests then say so and pass.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::poll::wait_until;
use super::temp::TempDir;

pub const SERVICE: &str = "svc";
/// Every node, in the order of their addresses.
pub const NODES: [&str; 8] = ["m", "r1", "r2", "s1", "s2", "s3", "c1", "c2"];
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a sentinel waits before it thinks the master down.
pub const DOWN_AFTER_MS: u64 = 1000;

static NETS: AtomicUsize = AtomicUsize::new(0);

pub struct Net {
    prefix: String,
    dir: TempDir,
    processes: Vec<(String, Child)>,
    /// Namespaces and links made so far, to remove on drop.
    namespaces: Vec<String>,
    links: Vec<String>,
}

impl Net {
    /// The namespaces, their links and addresses (10.77.0.11 for `m`, …), and the servers:
    /// master, replicas linked, sentinels agreeing on their quorum and knowing both replicas
    /// and each other.
    pub fn start() -> Result<Net, String> {
        sweep();
        let n = NETS.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("rp{:x}x{:x}", std::process::id(), n % 256);
        let mut net = Net {
            prefix,
            dir: TempDir::new("netns"),
            processes: Vec::new(),
            namespaces: Vec::new(),
            links: Vec::new(),
        };
        net.make_links()?;
        net.start_servers();
        Ok(net)
    }

    fn make_links(&mut self) -> Result<(), String> {
        for side in ["A", "B"] {
            let bridge = format!("{}{side}", self.prefix);
            ip(&["link", "add", &bridge, "type", "bridge"])?;
            self.links.push(bridge.clone());
            ip(&["link", "set", &bridge, "up"])?;
        }
        for (i, node) in NODES.iter().enumerate() {
            let ns = self.ns(node);
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            let veth = self.veth(node);
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            self.links.push(veth.clone());
            ip(&["link", "set", &veth, "master", &self.bridge("A"), "up"])?;
            let addr = format!("{}/24", address(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    fn ns(&self, node: &str) -> String {
        format!("{}{node}", self.prefix)
    }

    fn veth(&self, node: &str) -> String {
        format!("{}v{}", self.prefix, index(node))
    }

    fn bridge(&self, side: &str) -> String {
        format!("{}{side}", self.prefix)
    }

    /// The node's address.
    pub fn ip(&self, node: &str) -> String {
        address(index(node))
    }

    /// `redis+sentinel://` with the three sentinels.
    pub fn url(&self) -> String {
        let sentinels: Vec<String> = ["s1", "s2", "s3"]
            .iter()
            .map(|s| format!("{}:26379", self.ip(s)))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", sentinels.join(","))
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn socket(&self, node: &str) -> PathBuf {
        self.dir.join(&format!("{node}.sock"))
    }

    /// A command run in `node`'s namespace, killed with the test process.
    pub fn command(&self, node: &str, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns(node), program]);
        super::process::dies_with_the_test(&mut command);
        command
    }

    fn spawn(&mut self, node: &str, program: &str, args: &[String]) {
        let log = fs::File::create(self.dir.join(&format!("{node}.out"))).expect("log file");
        let child = self
            .command(node, program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program} in {node}: {e}"));
        self.processes.push((node.to_string(), child));
    }

    fn start_servers(&mut self) {
        let master = self.ip("m");
        for node in ["m", "r1", "r2"] {
            let mut args: Vec<String> = [
                "--bind",
                &self.ip(node),
                "--port",
                "6379",
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--repl-diskless-sync-delay",
                "0",
                "--repl-timeout",
                "5",
            ]
            .iter()
            .map(ToString::to_string)
            .collect();
            args.extend([
                "--unixsocket".to_string(),
                self.socket(node).display().to_string(),
                "--dir".to_string(),
                self.dir().display().to_string(),
                "--dbfilename".to_string(),
                format!("{node}.rdb"),
            ]);
            if node != "m" {
                args.extend(["--replicaof".into(), master.clone(), "6379".into()]);
            }
            self.spawn(node, "redis-server", &args);
        }
        let ids: Vec<String> = (1..=3).map(|i| format!("{i:040x}")).collect();
        for (i, node) in ["s1", "s2", "s3"].iter().enumerate() {
            let mut config = format!(
                "port 26379\nbind {ip}\nprotected-mode no\ndaemonize no\ndir {dir}\n\
                 unixsocket {socket}\nsentinel myid {id}\n\
                 sentinel monitor {SERVICE} {master} 6379 2\n\
                 sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {SERVICE} 4000\n\
                 sentinel known-replica {SERVICE} {r1} 6379\n\
                 sentinel known-replica {SERVICE} {r2} 6379\n",
                ip = self.ip(node),
                dir = self.dir().display(),
                socket = self.socket(node).display(),
                id = ids[i],
                r1 = self.ip("r1"),
                r2 = self.ip("r2"),
            );
            for (j, other) in ["s1", "s2", "s3"].iter().enumerate() {
                if j != i {
                    config.push_str(&format!(
                        "sentinel known-sentinel {SERVICE} {} 26379 {}\n",
                        self.ip(other),
                        ids[j]
                    ));
                }
            }
            let path = self.dir.join(&format!("{node}.conf"));
            fs::write(&path, config).expect("sentinel config");
            self.spawn(node, "redis-sentinel", &[path.display().to_string()]);
        }
        self.wait_until_ready();
    }

    fn wait_until_ready(&self) {
        for replica in ["r1", "r2"] {
            wait_until(&format!("{replica} to sync"), READY_TIMEOUT, || {
                (self.replication(replica, "master_link_status")? == "up").then_some(())
            });
        }
        for sentinel in ["s1", "s2", "s3"] {
            wait_until(
                &format!("{sentinel} to reach its quorum and know the replicas"),
                READY_TIMEOUT,
                || {
                    let quorum: String = self
                        .query(sentinel, &["SENTINEL", "CKQUORUM", SERVICE])
                        .ok()?;
                    let replicas: Vec<Vec<String>> = self
                        .query(sentinel, &["SENTINEL", "REPLICAS", SERVICE])
                        .ok()?;
                    let linked = replicas
                        .iter()
                        .filter(|r| r.join(" ").contains("master-link-status ok"))
                        .count();
                    (quorum.starts_with("OK") && linked == 2).then_some(())
                },
            );
        }
    }

    /// Runs one command on `node`'s server through its unix socket.
    pub fn query<T: redis::FromRedisValue>(
        &self,
        node: &str,
        args: &[&str],
    ) -> redis::RedisResult<T> {
        let url = format!("redis+unix://{}", self.socket(node).display());
        let client = redis::Client::open(url.as_str())?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(2)))?;
        let (name, rest) = args.split_first().expect("a command name");
        redis::cmd(name).arg(rest).query(&mut con)
    }

    /// A field of `INFO replication` on `node`.
    pub fn replication(&self, node: &str, field: &str) -> Option<String> {
        let text: String = self.query(node, &["INFO", "replication"]).ok()?;
        text.lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| *name == field)
            .map(|(_, value)| value.trim().to_owned())
    }

    /// The master `sentinel` names, as a node's name.
    pub fn named_by(&self, sentinel: &str) -> Option<String> {
        let (host, _): (String, String) = self
            .query::<Option<(String, String)>>(
                sentinel,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE],
            )
            .ok()
            .flatten()?;
        (0..NODES.len())
            .find(|&i| address(i) == host)
            .map(|i| NODES[i].to_string())
    }

    /// Cuts `side` off the others: their links move to the second bridge.
    pub fn cut(&self, side: &[&str]) {
        for node in side {
            ip(&["link", "set", &self.veth(node), "master", &self.bridge("B")])
                .expect("move a link to the cut bridge");
        }
    }

    /// Every link back on the first bridge.
    pub fn heal(&self) {
        for node in NODES {
            ip(&["link", "set", &self.veth(node), "master", &self.bridge("A")])
                .expect("move a link back");
        }
    }

    /// Replication that lags by about `ms`: what the master sends its replicas leaves at 1 Mbit/s
    /// (an htb class, the replicas' addresses filtered into it; clients and sentinels keep the
    /// full rate), and a write of `ms` worth of bytes fills that link just before a client's
    /// grant, which then reaches the replicas `ms` late. `false` when `tc` cannot (the caller
    /// says so). Kernels without netem have htb.
    pub fn lag_replication(&self, ms: u64) -> bool {
        let ns = self.ns("m");
        let tc = |args: &str| {
            Command::new("tc")
                .args(["-n", &ns])
                .args(args.split(' '))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let shaped = tc("qdisc add dev eth0 root handle 1: htb default 10")
            && tc("class add dev eth0 parent 1: classid 1:10 htb rate 1gbit")
            && tc("class add dev eth0 parent 1: classid 1:20 htb rate 1mbit ceil 1mbit")
            && ["r1", "r2"].iter().all(|r| {
                tc(&format!(
                    "filter add dev eth0 parent 1: protocol ip u32 match ip dst {}/32 flowid 1:20",
                    self.ip(r)
                ))
            });
        if !shaped {
            return false;
        }
        // 1 Mbit/s is 125 bytes a millisecond.
        let junk = "x".repeat(usize::try_from(ms * 125).unwrap_or(0));
        self.query::<()>("m", &["SET", "junk", &junk]).is_ok()
    }

    /// Waits until a majority of the sentinels name a master other than `m`, and it says it is
    /// one: the failover on the majority side is done. Its name.
    pub fn wait_for_failover(&self, sentinels: &[&str]) -> String {
        wait_until("a failover", READY_TIMEOUT, || {
            let named: Vec<String> = sentinels.iter().filter_map(|s| self.named_by(s)).collect();
            let new = named.iter().find(|n| *n != "m")?;
            (named.iter().filter(|n| *n == new).count() >= 2
                && self.replication(new, "role").as_deref() == Some("master"))
            .then(|| new.clone())
        })
    }

    /// Waits until `node` replicates from `master` with its link up.
    pub fn wait_until_replica_of(&self, node: &str, master: &str) {
        let host = self.ip(master);
        wait_until(
            &format!("{node} to replicate from {master}"),
            READY_TIMEOUT,
            || {
                (self.replication(node, "master_host")? == host
                    && self.replication(node, "master_link_status")? == "up")
                    .then_some(())
            },
        );
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        for link in &self.links {
            let _ = ip(&["link", "del", link]);
        }
    }
}

fn index(node: &str) -> usize {
    NODES
        .iter()
        .position(|n| *n == node)
        .unwrap_or_else(|| panic!("no node {node}"))
}

fn address(i: usize) -> String {
    format!("10.77.0.{}", 11 + i)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Removes the namespaces and links of test processes that are gone (interrupted before their
/// `Drop` ran): their names carry the pid.
fn sweep() {
    let gone = |name: &str| -> bool {
        let Some(rest) = name.strip_prefix("rp") else {
            return false;
        };
        let Some((pid, _)) = rest.split_once('x') else {
            return false;
        };
        u32::from_str_radix(pid, 16)
            .is_ok_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split(' ').next().unwrap_or("");
            if gone(name) {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or("");
            if gone(name) {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}
