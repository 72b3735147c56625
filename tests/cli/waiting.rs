//! The seam matrix, waiting half: every way of waiting × every fault of a waiter.
//!
//! Ways of waiting ([`Way`]): on one server, where the next attempt of the waiter at the head
//! of the queue waits on the server behind its grant list and the release runs it; the same
//! through Sentinel; woken on a channel (a Cluster); and a quorum's queue. Faults of the
//! waiter at the head of the queue when the lock frees ([`Fault`]): killed (SIGKILL), frozen
//! (SIGSTOP, its connections left open, as when its host dies), its connections dropped by
//! the server (`CLIENT KILL`), and Redis restarted under the queue.
//!
//! What holds in every cell: the waiters' commands never overlap and their fences grow (the
//! sections oracle); every waiter that was not killed runs; and the first command after the
//! release starts within the documented bound of it, whether a killed or frozen head held the
//! others up, or the waiters had to reconnect.
//!
//! A bounded queue (`--max-waiters N`) is a row of its own, on every way of waiting: a frozen
//! waiter counts until its entry lapses, a full queue refuses at once (75, counted once), and
//! the queue then has room again (in a quorum, when a majority of the nodes says so).
//!
//! Waiting as a replacer (`--replace`) is another row, on every way that supports it (not a
//! quorum): the holder hears the request (on its stop list, or at its next renewal on a
//! Cluster), stops its tree and exits 79, and the replacer's section follows the old one.
//!
//! Every cell is played twice: for a claim of one key, and of two keys at once (`--key job
//! --key {job}:second`, all or none, the waiters asking in alternating orders; [`Claim`]).
//!
//! A new way of waiting, or a new fault a waiter can meet, adds its row or column here: a
//! variant and its arm in `Place`/`apply`, and one test per new cell (ARCHITECTURE.md,
//! "Seams").

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::redlock::Running;
use crate::support::sections::{SECTION, expect_exclusive_sections, read_sections};
use crate::support::{
    RedisCluster, RedisQuorum, RedisSentinel, RedisServer, Redlock, TempDir, child, companion_key,
    wait_until,
};

/// The longest a dead or frozen head holds up the queue after the release (README, "Waiting
/// is a fair queue"), and the slack a loaded test machine gets on top.
const BOUND: Duration = Duration::from_secs(2);
const SLACK: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
enum Way {
    /// One server: the head's next attempt waits on the server.
    Server,
    /// The master Sentinel names: the same, found through the sentinel.
    Sentinel,
    /// A Cluster: woken on its own channel, trying again itself.
    Cluster,
    /// Three independent masters: a majority's queue, woken on channels.
    Quorum,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Kill,
    Freeze,
    Disconnect,
    Restart,
}

/// The servers of one way of waiting.
enum Place {
    Server(Box<RedisServer>),
    Sentinel(Box<RedisSentinel>),
    Cluster(Box<RedisCluster>),
    Quorum(Box<RedisQuorum>),
}

impl Place {
    fn start(way: Way) -> Place {
        match way {
            Way::Server => Place::Server(Box::new(RedisServer::start())),
            Way::Sentinel => Place::Sentinel(Box::new(RedisSentinel::start())),
            Way::Cluster => Place::Cluster(Box::new(RedisCluster::start())),
            Way::Quorum => Place::Quorum(Box::new(RedisQuorum::start(3))),
        }
    }

    fn redlock(&self) -> Redlock {
        match self {
            Place::Server(server) => Redlock::new(server),
            Place::Sentinel(sentinel) => Redlock::without_url().args(["--url", &sentinel.url()]),
            Place::Cluster(cluster) => Redlock::without_url().args(["--url", &cluster.url()]),
            Place::Quorum(quorum) => quorum.redlock(),
        }
    }

    /// Every server that holds data (for `CLIENT KILL`).
    fn servers(&self) -> Vec<&RedisServer> {
        match self {
            Place::Server(server) => vec![server],
            Place::Sentinel(sentinel) => vec![sentinel.master(), sentinel.replica()],
            Place::Cluster(cluster) => cluster.nodes().iter().collect(),
            Place::Quorum(quorum) => quorum.nodes().iter().collect(),
        }
    }

    /// The server whose queue for `job` the test watches.
    fn queue_server(&self) -> &RedisServer {
        match self {
            Place::Server(server) => server,
            Place::Sentinel(sentinel) => sentinel.master(),
            Place::Cluster(cluster) => cluster.owner_node("job"),
            Place::Quorum(quorum) => quorum.node(0),
        }
    }

    fn queue_len(&self) -> usize {
        queue_len(self.queue_server())
    }

    /// The fewest waiters any node's queue for `job` counts: in a quorum, a waiter frozen once
    /// node 0 counts it may not have joined the others yet.
    fn queued_everywhere(&self) -> usize {
        match self {
            Place::Quorum(quorum) => quorum.nodes().iter().map(queue_len).min().unwrap_or(0),
            _ => self.queue_len(),
        }
    }

    /// Clients blocked on the queue's server: waiters whose attempt waits there.
    fn blocked(&self) -> u64 {
        self.queue_server()
            .info_number("clients", "blocked_clients")
    }

    /// Restarts, empty, the server (a quorum: the first node) that holds `job`.
    fn restart(&mut self) {
        match self {
            Place::Server(server) => server.restart(),
            Place::Sentinel(sentinel) => sentinel.master_mut().restart(),
            Place::Cluster(cluster) => {
                let owner = cluster.owner("job");
                cluster.node_mut(owner).restart();
            }
            Place::Quorum(quorum) => quorum.node_mut(0).restart(),
        }
    }
}

fn queue_len(server: &RedisServer) -> usize {
    server
        .try_query::<usize>(&["ZCARD", &companion_key("job", "queue")])
        .unwrap_or(0)
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What a cell's holder and waiters ask for: `job` alone, or `job` and a second key in its
/// hash slot (all or none), the waiters asking in alternating orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    One,
    Two,
}

/// The second key of [`Claim::Two`]: its hash tag puts it in `job`'s slot on a Cluster.
const SECOND: &str = "{job}:second";

impl Claim {
    /// The `--key` arguments; `turn` alternates the order of two keys.
    fn keys(self, turn: usize) -> Vec<&'static str> {
        match (self, turn % 2) {
            (Claim::One, _) => vec!["--key", "job"],
            (Claim::Two, 0) => vec!["--key", "job", "--key", SECOND],
            (Claim::Two, _) => vec!["--key", SECOND, "--key", "job"],
        }
    }
}

/// A waiter on `job` (and, for [`Claim::Two`], the second key) running a stamped section;
/// returns once `job`'s queue counts `place`.
fn queue_up(place: &Place, claim: Claim, log: &Path, place_in_line: usize) -> Running {
    let waiter = place
        .redlock()
        .env("STRESS_LOG", log)
        .env("TICKS", "3")
        .env("TICK", "0.05")
        .arg("run")
        .args(claim.keys(place_in_line))
        .args(["--ttl", "10s", "--wait", "60s", "--"])
        .args(SECTION)
        .spawn();
    wait_until(
        &format!("waiter {place_in_line} to join the queue"),
        Duration::from_secs(15),
        || (place.queue_len() >= place_in_line).then_some(()),
    );
    waiter
}

/// Holds `job`, queues three waiters, applies `fault` to the first (or to all of them, or to
/// the servers), releases, and checks the cell's promises.
fn cell(way: Way, fault: Fault) {
    cell_of(way, fault, Claim::One);
}

/// [`cell`] for a claim of one key or two.
fn cell_of(way: Way, fault: Fault, claim: Claim) {
    let mut place = Place::start(way);
    let scratch = TempDir::new("waiting");
    let log = scratch.join("sections.log");
    let mut holder = place
        .redlock()
        .arg("run")
        .args(claim.keys(0))
        .args(["--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let mut head = queue_up(&place, claim, &log, 1);
    let second = queue_up(&place, claim, &log, 2);
    let third = queue_up(&place, claim, &log, 3);
    if matches!(way, Way::Server | Way::Sentinel) {
        // Each waiter's next attempt waits on the server behind its grant list.
        wait_until(
            "the waiters' attempts to wait on the server",
            Duration::from_secs(10),
            || (place.blocked() >= 3).then_some(()),
        );
    }
    match fault {
        Fault::Kill => head.kill9(),
        Fault::Freeze => {
            head.signal(libc::SIGSTOP);
            wait_until("the head waiter to stop", Duration::from_secs(5), || {
                crate::support::process::is_stopped(head.pid()).then_some(())
            });
        }
        Fault::Disconnect => {
            for server in place.servers() {
                let _: redis::RedisResult<i64> =
                    server.try_query(&["CLIENT", "KILL", "TYPE", "normal"]);
            }
        }
        Fault::Restart => place.restart(),
    }
    holder.close_stdin();
    let held = holder.wait();
    // After a restart the holder's key is gone: its lease is lost (76), or it released first.
    assert!(
        held.code() == Some(0) || fault == Fault::Restart && held.code() == Some(76),
        "{way:?} × {fault:?} × {claim:?}: the holder\n{held}"
    );
    let released = now_micros();
    second.exits_with(0);
    third.exits_with(0);
    match fault {
        Fault::Freeze => {
            head.signal(libc::SIGCONT);
            // Awake again, it finds its grant (if it had one) lapsed, queues again and runs.
            head.exits_with(0);
        }
        Fault::Kill => {
            let _ = head.wait();
        }
        Fault::Disconnect | Fault::Restart => {
            head.exits_with(0);
        }
    }
    let sections = expect_exclusive_sections(&log);
    let survivors = if fault == Fault::Kill { 2 } else { 3 };
    assert_eq!(
        sections.len(),
        survivors,
        "{way:?} × {fault:?} × {claim:?}: {sections:?}"
    );
    // Every fault: the queue goes on within the bound of the release. After a restart or a
    // dropped connection, too: a waiter that reconnects learns at once where it stands, rather
    // than waiting on the server for a push that the lost queue will never send.
    {
        let first = read_sections(&log)
            .first()
            .map(|s| s.first)
            .expect("a section ran");
        let waited = Duration::from_micros(first.saturating_sub(released));
        assert!(
            waited <= BOUND + SLACK,
            "{way:?} × {fault:?} × {claim:?}: the first command started {waited:?} after the release"
        );
    }
}

#[test]
fn on_one_server_a_killed_head_waiter() {
    cell(Way::Server, Fault::Kill);
}

#[test]
fn on_one_server_a_frozen_head_waiter() {
    cell(Way::Server, Fault::Freeze);
}

#[test]
fn on_one_server_waiters_whose_connections_drop() {
    cell(Way::Server, Fault::Disconnect);
}

#[test]
fn on_one_server_waiters_whose_redis_restarts() {
    cell(Way::Server, Fault::Restart);
}

#[test]
fn through_sentinel_a_killed_head_waiter() {
    cell(Way::Sentinel, Fault::Kill);
}

#[test]
fn through_sentinel_a_frozen_head_waiter() {
    cell(Way::Sentinel, Fault::Freeze);
}

#[test]
fn through_sentinel_waiters_whose_connections_drop() {
    cell(Way::Sentinel, Fault::Disconnect);
}

#[test]
fn through_sentinel_waiters_whose_master_restarts() {
    cell(Way::Sentinel, Fault::Restart);
}

#[test]
fn on_a_cluster_a_killed_head_waiter() {
    cell(Way::Cluster, Fault::Kill);
}

#[test]
fn on_a_cluster_a_frozen_head_waiter() {
    cell(Way::Cluster, Fault::Freeze);
}

#[test]
fn on_a_cluster_waiters_whose_connections_drop() {
    cell(Way::Cluster, Fault::Disconnect);
}

#[test]
fn on_a_cluster_waiters_whose_node_restarts() {
    cell(Way::Cluster, Fault::Restart);
}

#[test]
fn in_a_quorum_a_killed_head_waiter() {
    cell(Way::Quorum, Fault::Kill);
}

#[test]
fn in_a_quorum_a_frozen_head_waiter() {
    cell(Way::Quorum, Fault::Freeze);
}

#[test]
fn in_a_quorum_waiters_whose_connections_drop() {
    cell(Way::Quorum, Fault::Disconnect);
}

#[test]
fn in_a_quorum_waiters_whose_node_restarts() {
    cell(Way::Quorum, Fault::Restart);
}

#[test]
fn on_one_server_a_killed_head_waiter_for_two_keys() {
    cell_of(Way::Server, Fault::Kill, Claim::Two);
}

#[test]
fn on_one_server_a_frozen_head_waiter_for_two_keys() {
    cell_of(Way::Server, Fault::Freeze, Claim::Two);
}

#[test]
fn on_one_server_waiters_whose_connections_drop_for_two_keys() {
    cell_of(Way::Server, Fault::Disconnect, Claim::Two);
}

#[test]
fn on_one_server_waiters_whose_redis_restarts_for_two_keys() {
    cell_of(Way::Server, Fault::Restart, Claim::Two);
}

#[test]
fn through_sentinel_a_killed_head_waiter_for_two_keys() {
    cell_of(Way::Sentinel, Fault::Kill, Claim::Two);
}

#[test]
fn through_sentinel_a_frozen_head_waiter_for_two_keys() {
    cell_of(Way::Sentinel, Fault::Freeze, Claim::Two);
}

#[test]
fn through_sentinel_waiters_whose_connections_drop_for_two_keys() {
    cell_of(Way::Sentinel, Fault::Disconnect, Claim::Two);
}

#[test]
fn through_sentinel_waiters_whose_master_restarts_for_two_keys() {
    cell_of(Way::Sentinel, Fault::Restart, Claim::Two);
}

#[test]
fn on_a_cluster_a_killed_head_waiter_for_two_keys() {
    cell_of(Way::Cluster, Fault::Kill, Claim::Two);
}

#[test]
fn on_a_cluster_a_frozen_head_waiter_for_two_keys() {
    cell_of(Way::Cluster, Fault::Freeze, Claim::Two);
}

#[test]
fn on_a_cluster_waiters_whose_connections_drop_for_two_keys() {
    cell_of(Way::Cluster, Fault::Disconnect, Claim::Two);
}

#[test]
fn on_a_cluster_waiters_whose_node_restarts_for_two_keys() {
    cell_of(Way::Cluster, Fault::Restart, Claim::Two);
}

#[test]
fn in_a_quorum_a_killed_head_waiter_for_two_keys() {
    cell_of(Way::Quorum, Fault::Kill, Claim::Two);
}

#[test]
fn in_a_quorum_a_frozen_head_waiter_for_two_keys() {
    cell_of(Way::Quorum, Fault::Freeze, Claim::Two);
}

#[test]
fn in_a_quorum_waiters_whose_connections_drop_for_two_keys() {
    cell_of(Way::Quorum, Fault::Disconnect, Claim::Two);
}

#[test]
fn in_a_quorum_waiters_whose_node_restarts_for_two_keys() {
    cell_of(Way::Quorum, Fault::Restart, Claim::Two);
}

/// `--max-waiters 1` on `way`: a frozen waiter fills the queue until its entry lapses (at the
/// release, within the bound); meanwhile a newcomer is busy at once; after it, a newcomer
/// queues and runs, and the waiter, continued, runs too. No two sections overlap.
fn bounded(way: Way) {
    let place = Place::start(way);
    let scratch = TempDir::new("bounded");
    let log = scratch.join("sections.log");
    let contender = || {
        place
            .redlock()
            .env("STRESS_LOG", &log)
            .env("TICKS", "2")
            .env("TICK", "0.05")
            .args(["run", "--key", "job", "--ttl", "10s", "--wait", "60s"])
            .args(["--max-waiters", "1", "--"])
            .args(SECTION)
    };
    let mut holder = place
        .redlock()
        .args(["run", "--key", "job", "--ttl", "10s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let frozen = contender().spawn();
    wait_until("the waiter to queue", Duration::from_secs(15), || {
        (place.queued_everywhere() == 1).then_some(())
    });
    frozen.signal(libc::SIGSTOP);
    wait_until("the waiter to stop", Duration::from_secs(5), || {
        crate::support::process::is_stopped(frozen.pid()).then_some(())
    });
    contender()
        .exits_with(75)
        .error_mentions(&["queue is full", "--max-waiters 1"]);
    holder.close_stdin();
    holder.exits_with(0);
    // The release put the frozen head on notice: its entry lapses, and the queue has room.
    wait_until(
        "a newcomer to find room in the queue",
        BOUND + SLACK + Duration::from_secs(5),
        || (contender().run().code() == Some(0)).then_some(()),
    );
    frozen.signal(libc::SIGCONT);
    frozen.exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2, "{way:?}: {sections:?}");
}

#[test]
fn on_one_server_a_bounded_queue_with_a_frozen_waiter() {
    bounded(Way::Server);
}

#[test]
fn through_sentinel_a_bounded_queue_with_a_frozen_waiter() {
    bounded(Way::Sentinel);
}

#[test]
fn on_a_cluster_a_bounded_queue_with_a_frozen_waiter() {
    bounded(Way::Cluster);
}

#[test]
fn in_a_quorum_a_bounded_queue_with_a_frozen_waiter() {
    bounded(Way::Quorum);
}

/// `--replace` on `way`: a live holder (a section that ticks until stopped) is asked to stop,
/// exits 79, and the replacer's section starts after the old one's last line.
fn replacing(way: Way) {
    let place = Place::start(way);
    let scratch = TempDir::new("replacing");
    let log = scratch.join("sections.log");
    let run = |ticks: &str, extra: &[&str]| {
        place
            .redlock()
            .env("STRESS_LOG", &log)
            .env("TICKS", ticks)
            .env("TICK", "0.05")
            .args(["run", "--key", "job", "--ttl", "3s"])
            .args(extra)
            .arg("--")
            .args(SECTION)
    };
    let holder = run("1000", &[]).spawn();
    wait_until(
        "the holder's section to start",
        Duration::from_secs(15),
        || (!read_sections(&log).is_empty()).then_some(()),
    );
    run("2", &["--replace"]).exits_with(0);
    holder.exits_with(79);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 2, "{way:?}: {sections:?}");
}

#[test]
fn on_one_server_a_replacer() {
    replacing(Way::Server);
}

#[test]
fn through_sentinel_a_replacer() {
    replacing(Way::Sentinel);
}

#[test]
fn on_a_cluster_a_replacer() {
    replacing(Way::Cluster);
}
