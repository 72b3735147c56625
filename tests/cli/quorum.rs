//! Several `--url`s: a Redlock quorum over independent masters (docs/guide.md, "Beyond one
//! Redis"; its healing and fences in docs/design.md, "Integrity"). A lock is held
//! while a majority holds it; a minority of nodes may be down, stalled or wiped without anyone
//! noticing but a warning; losing the majority stops the command before the lease runs out
//! (76); fences keep growing whichever majority answers; every subcommand speaks to all nodes;
//! and the nodes are distinct servers: URLs that reach one server twice are refused (64) before
//! anything is written.

use std::time::{Duration, Instant};

use crate::support::json::{Document, Json};
use crate::support::redlock::Running;
use crate::support::stress::{CRITICAL_SECTION, expect_serial_sections, sections_started};
use crate::support::{
    LockKeys, Outcome, RedisQuorum, RedisServer, Redlock, TempDir, child, companion_key,
    holds_throughout, says, wait_for_contender, wait_until, wait_until_gone,
};

/// Starts `redlock run --key KEY --ttl TTL` over every node, its command printing its token
/// and `ready`, then holding until the test closes stdin. Returns the run and the token.
fn hold(quorum: &RedisQuorum, key: &str, ttl: &str) -> (Running, String) {
    let mut holder = quorum
        .redlock()
        .args(["run", "--key", key, "--ttl", ttl])
        .args(["-c", child::HOLD_AND_PRINT_TOKEN])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    (holder, token)
}

/// Lets a holder's command finish and expects the run to succeed.
fn finish(mut holder: Running) -> Outcome {
    holder.close_stdin();
    holder.exits_with(0)
}

/// Holds `key` on one node the way another client would.
fn hold_elsewhere(quorum: &RedisQuorum, node: usize, key: &str) {
    let _: () = quorum
        .node(node)
        .query(&["SET", key, "someone-elses-token", "PX", "30000"]);
}

/// The fence counter of `key` on `node`, 0 when it has none.
fn fence_counter(quorum: &RedisQuorum, node: usize, key: &str) -> i64 {
    quorum
        .node(node)
        .get(&LockKeys::of(key).fence)
        .map_or(0, |n| n.parse().expect("the fence counter is an integer"))
}

/// `REDLOCK_FENCE` as the command saw it.
fn fence_of(outcome: &Outcome) -> i64 {
    outcome.printed_fence()
}

/// One short run over the quorum that prints its lock environment; expects it to succeed.
fn run_printing_the_fence(quorum: &RedisQuorum, key: &str) -> Outcome {
    quorum
        .redlock()
        .args([
            "run",
            "--key",
            key,
            "--ttl",
            "2s",
            "-c",
            child::PRINT_LOCK_ENV,
        ])
        .exits_with(0)
}

fn expect_stderr_names(outcome: &Outcome, url: &str) {
    if !outcome.stderr.contains(url) {
        outcome.fail(&format!("stderr does not name the node {url}"));
    }
}

fn expect_on_stdout(outcome: &Outcome, text: &str) {
    if !outcome.stdout.contains(text) {
        outcome.fail(&format!("stdout does not contain {text:?}"));
    }
}

#[test]
fn run_takes_the_lock_on_every_node_with_the_childs_token() {
    let quorum = RedisQuorum::start(3);
    let (holder, token) = hold(&quorum, "job", "2s");
    quorum.expect_held("job", &token, &[]);
    finish(holder);
    quorum.expect_free_on("job", &[0, 1, 2]);
}

#[test]
fn comma_separated_redlock_url_is_a_quorum_too() {
    let quorum = RedisQuorum::start(3);
    let mut holder = Redlock::without_url()
        .env("REDLOCK_URL", quorum.url_list())
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(["-c", child::HOLD_AND_PRINT_TOKEN])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    quorum.expect_held("job", &token, &[]);
    finish(holder);
    quorum.expect_free_on("job", &[0, 1, 2]);
}

#[test]
fn five_nodes_with_two_down_still_run_the_command() {
    let mut quorum = RedisQuorum::start(5);
    quorum.node_mut(1).kill9();
    quorum.node_mut(3).kill9();
    let (holder, token) = hold(&quorum, "job", "2s");
    quorum.expect_held("job", &token, &[1, 3]);
    finish(holder);
    quorum.expect_free_on("job", &[0, 2, 4]);
}

#[test]
fn three_nodes_with_one_down_run_the_command_and_warn_naming_that_node() {
    let mut quorum = RedisQuorum::start(3);
    let down = quorum.node(2).url();
    quorum.node_mut(2).kill9();
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(0);
    expect_on_stdout(&outcome, "started");
    expect_stderr_names(&outcome, &down);
    quorum.expect_free_on("job", &[0, 1]);
}

#[test]
fn three_nodes_with_two_down_exit_69_naming_both_and_leave_nothing_locked() {
    let mut quorum = RedisQuorum::start(3);
    let (first, second) = (quorum.node(0).url(), quorum.node(2).url());
    quorum.node_mut(0).kill9();
    quorum.node_mut(2).kill9();
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(69);
    if outcome.stdout.contains("started") {
        outcome.fail("the command ran without a quorum");
    }
    let line = outcome.error_line();
    for url in [&first, &second] {
        if !line.contains(url.as_str()) {
            outcome.fail(&format!("the error line does not name the down node {url}"));
        }
    }
    outcome.error_mentions(&["quorum"]);
    let keys = LockKeys::of("job");
    quorum.expect_free_on(&keys.lock, &[1]);
    quorum.expect_free_on(&keys.holder, &[1]);
}

#[test]
fn three_nodes_with_two_stalled_exit_69_within_the_ttl_and_leave_nothing_locked() {
    let quorum = RedisQuorum::start(3);
    quorum.node(0).pause();
    quorum.node(1).pause();
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .run();
    quorum.node(0).resume();
    quorum.node(1).resume();
    outcome.expect_code(69);
    if outcome.stdout.contains("started") {
        outcome.fail("the command ran without a quorum");
    }
    if outcome.elapsed >= Duration::from_secs(2) {
        outcome.fail("giving up on two stalled nodes took longer than the 2s TTL");
    }
    // A stalled node may yet execute the SET it was sent; only the answering one is clean now.
    quorum.expect_free_on("job", &[2]);
}

#[test]
fn stalled_minority_node_does_not_hold_up_acquisition() {
    let quorum = RedisQuorum::start(3);
    quorum.node(2).pause();
    let started = Instant::now();
    let mut run = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .spawn();
    let ran = run.expect_line("started");
    let outcome = run.wait();
    quorum.node(2).resume();
    outcome.expect_code(0);
    // The per-node timeout is a tenth of the TTL: 200 ms per round, far below the default
    // 3s command timeout.
    if ran - started >= Duration::from_millis(1500) {
        outcome.fail(&format!(
            "the command started only {:?} after redlock, held up by the stalled node",
            ran - started
        ));
    }
    if outcome.elapsed >= Duration::from_secs(3) {
        outcome.fail("the whole run took as long as the default command timeout");
    }
}

#[test]
fn fences_keep_growing_when_different_majorities_answer() {
    let mut quorum = RedisQuorum::start(3);
    let fence_key = LockKeys::of("job").fence;
    let _: () = quorum.node(0).query(&["SET", &fence_key, "100"]);

    // All three answer: the highest counter wins and is raised everywhere.
    let first = fence_of(&run_printing_the_fence(&quorum, "job"));
    assert!(
        first > 100,
        "fence {first} is not above node 0's counter 100"
    );
    for node in 0..3 {
        let counter = fence_counter(&quorum, node, "job");
        assert!(
            counter >= first,
            "node {node}'s fence counter {counter} is below the fence {first} handed out"
        );
    }

    // Nodes 1 and 2 answer.
    quorum.node_mut(0).kill9();
    let second = fence_of(&run_printing_the_fence(&quorum, "job"));
    assert!(
        second > first,
        "fence went from {first} to {second} without node 0"
    );
    for node in [1, 2] {
        let counter = fence_counter(&quorum, node, "job");
        assert!(
            counter >= second,
            "node {node}'s fence counter {counter} is below the fence {second} handed out"
        );
    }

    // Nodes 0 (back, empty) and 2 answer.
    quorum.node_mut(0).restart();
    quorum.node_mut(1).kill9();
    let third = fence_of(&run_printing_the_fence(&quorum, "job"));
    assert!(
        third > second,
        "fence went from {second} to {third} with node 0 restarted empty and node 1 down"
    );
    for node in [0, 2] {
        let counter = fence_counter(&quorum, node, "job");
        assert!(
            counter >= third,
            "node {node}'s fence counter {counter} is below the fence {third} handed out"
        );
    }
}

#[test]
fn majority_stalled_during_a_run_stops_the_command_before_the_lease_deadline_with_76() {
    let ttl = Duration::from_secs(2);
    let quorum = RedisQuorum::start(3);
    let mut holder = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s"])
        .args(["-c", child::HOLD_PRINTING_PID])
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    quorum.node(0).pause();
    quorum.node(1).pause();
    let paused = Instant::now();
    let gone = wait_until_gone(child, "the command", Duration::from_secs(10));
    let outcome = holder.wait();
    quorum.node(0).resume();
    quorum.node(1).resume();
    outcome.expect_code(76);
    outcome.last_error_mentions(says::LEASE_LOST);
    // The last renewal a majority can have confirmed was sent before the pause.
    if gone - paused >= ttl + Duration::from_millis(100) {
        outcome.fail(&format!(
            "the command ran until {:?} after the majority stalled, past the {ttl:?} lease",
            gone - paused
        ));
    }
    let exited = outcome.exited_at.expect("redlock exited");
    if exited - paused >= Duration::from_secs(5) {
        outcome.fail(&format!(
            "redlock took {:?} to give up on a stalled majority",
            exited - paused
        ));
    }
}

#[test]
fn lock_deleted_on_two_of_three_nodes_ends_the_run_with_76_promptly() {
    let quorum = RedisQuorum::start(3);
    let mut holder = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "1s"])
        .args(["-c", child::HOLD_PRINTING_PID])
        .spawn();
    let child = holder.expect_pid("child");
    holder.expect_line("ready");

    let _: i64 = quorum.node(0).query(&["DEL", "job"]);
    let _: i64 = quorum.node(1).query(&["DEL", "job"]);
    let deleted = Instant::now();
    let outcome = holder.exits_with(76);
    outcome.last_error_mentions(says::LEASE_LOST);
    let exited = outcome.exited_at.expect("redlock exited");
    if exited - deleted >= Duration::from_secs(2) {
        outcome.fail(&format!(
            "redlock took {:?} to notice a lost majority under a 1s TTL",
            exited - deleted
        ));
    }
    wait_until_gone(child, "the command", Duration::from_secs(1));
}

#[test]
fn lock_deleted_on_one_node_only_leaves_the_run_going_to_exit_0() {
    let quorum = RedisQuorum::start(3);
    let (holder, token) = hold(&quorum, "job", "1s");
    let _: i64 = quorum.node(0).query(&["DEL", "job"]);
    // Longer than the TTL: the other two nodes keep being renewed.
    holds_throughout(
        "the lock to stay held on nodes 1 and 2",
        Duration::from_millis(1500),
        || {
            for node in [1, 2] {
                let value = quorum.node(node).get("job");
                if value.as_deref() != Some(token.as_str()) {
                    return Err(format!("node {node} now has {value:?}"));
                }
            }
            Ok(())
        },
    );
    finish(holder);
}

#[test]
fn lock_held_on_the_quorum_makes_another_run_exit_75() {
    let quorum = RedisQuorum::start(3);
    let (holder, token) = hold(&quorum, "job", "2s");
    quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(75)
        .error_mentions(says::BUSY);
    quorum.expect_held("job", &token, &[]);
    finish(holder);
}

#[test]
fn lock_held_by_another_client_on_a_majority_exits_75_and_leaves_the_free_node_free() {
    let quorum = RedisQuorum::start(3);
    hold_elsewhere(&quorum, 0, "job");
    hold_elsewhere(&quorum, 1, "job");
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(75);
    outcome.error_mentions(says::BUSY);
    if outcome.stdout.contains("started") {
        outcome.fail("the command ran although a majority was busy");
    }
    quorum.expect_free_on("job", &[2]);
    quorum.expect_held("job", "someone-elses-token", &[2]);
}

#[test]
fn lock_held_by_another_client_on_one_node_of_three_does_not_block_the_quorum() {
    let quorum = RedisQuorum::start(3);
    hold_elsewhere(&quorum, 0, "job");
    let outcome = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(0);
    expect_on_stdout(&outcome, "started");
    assert_eq!(
        quorum.node(0).get("job").as_deref(),
        Some("someone-elses-token"),
        "the other client's key on node 0 was touched"
    );
}

#[test]
fn waiter_starts_as_soon_as_the_holder_finishes() {
    let quorum = RedisQuorum::start(3);
    let (holder, _) = hold(&quorum, "job", "30s");

    let before = quorum.node(0).script_calls();
    let mut waiter = quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "30s", "--wait", "20s"])
        .args(["-c", "echo started"])
        .spawn();
    wait_for_contender(quorum.node(0), "job", before);

    let released = Instant::now();
    let holder_outcome = finish(holder);
    let started = waiter.expect_line("started");
    waiter.exits_with(0);
    // The holder's keys would have lived 30 s; the waiter must not sit that out.
    let delay = started - released;
    if delay >= Duration::from_secs(2) {
        holder_outcome.fail(&format!(
            "the waiter started {delay:?} after the holder finished"
        ));
    }
}

const CONTENDERS: usize = 16;

#[test]
fn sixteen_contenders_run_one_at_a_time_while_a_node_crashes_and_comes_back() {
    let mut quorum = RedisQuorum::start(3);
    let scratch = TempDir::new("quorum-stress");
    let log = scratch.join("sections.log");
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            quorum
                .redlock()
                .env("STRESS_LOG", &log)
                .args(["run", "--key", "stress", "--ttl", "2s", "--wait", "60s"])
                .args(["-c", CRITICAL_SECTION])
                .timeout(Duration::from_secs(75))
                .spawn()
        })
        .collect();

    wait_until(
        "a few critical sections before the crash",
        Duration::from_secs(60),
        || (sections_started(&log) >= 3).then_some(()),
    );
    quorum.node_mut(2).kill9();
    wait_until(
        "a few critical sections with a node down",
        Duration::from_secs(60),
        || (sections_started(&log) >= 7).then_some(()),
    );
    quorum.node_mut(2).restart();

    for contender in contenders {
        // 76: the run held exactly a majority that included the node that lost its data (a
        // node still releasing the previous holder's key refused it), and its release found
        // fewer than a majority still its own. The sections show whether anyone ran alongside.
        let outcome = contender.wait();
        if !matches!(outcome.code(), Some(0 | 76)) {
            outcome.fail("expected 0, or 76 for a lease the crash took away");
        }
    }

    expect_serial_sections(&log, CONTENDERS);
}

/// The stdout line that starts with `prefix` once its indentation is trimmed.
fn line<'a>(outcome: &'a Outcome, prefix: &str) -> &'a str {
    outcome
        .stdout
        .lines()
        .map(str::trim_start)
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| outcome.fail(&format!("expected a stdout line starting {prefix:?}")))
}

/// The `node` line naming `url`, with the URL and its colon taken off.
fn node_line<'a>(outcome: &'a Outcome, url: &str) -> &'a str {
    let prefix = format!("{url}: ");
    outcome
        .stdout
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("node"))
        .find_map(|rest| rest.trim_start().strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| outcome.fail(&format!("expected a `node {url}: ...` line")))
}

/// `redlock status --json KEY` over the quorum: expects `code` and returns the lock's object.
fn status_json(quorum: &RedisQuorum, key: &str, code: i32) -> (Json, Outcome) {
    let outcome = quorum
        .redlock()
        .args(["status", "--json", key])
        .exits_with(code);
    let document = Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("status --json printed no JSON document: {e}")));
    let lock = match document.items("locks") {
        [lock] => lock.clone(),
        locks => outcome.fail(&format!("expected one lock, found {}", locks.len())),
    };
    (lock, outcome)
}

#[test]
fn status_over_three_nodes_shows_the_verdict_and_each_nodes_view() {
    let quorum = RedisQuorum::start(3);
    let (holder, _) = hold(&quorum, "job", "30s");
    let outcome = quorum.redlock().args(["status", "job"]).exits_with(0);
    line(&outcome, "job: held by ");
    let verdict = line(&outcome, "quorum ");
    for expected in ["3 of 3", "majority 2"] {
        if !verdict.contains(expected) {
            outcome.fail(&format!("the quorum line does not say {expected:?}"));
        }
    }
    for url in quorum.urls() {
        if !node_line(&outcome, &url).starts_with("held") {
            outcome.fail(&format!("node {url} is not shown as held"));
        }
    }
    finish(holder);
}

#[test]
fn status_json_over_three_nodes_has_the_quorum_and_each_nodes_view() {
    let quorum = RedisQuorum::start(3);
    let (holder, _) = hold(&quorum, "job", "30s");
    let (lock, _) = status_json(&quorum, "job", 0);
    assert_eq!(lock.str("state"), "held");
    assert_eq!(lock.int("quorum.nodes"), 3);
    assert_eq!(lock.int("quorum.majority"), 2);
    assert_eq!(lock.int("quorum.holding"), 3);
    let nodes = lock.items("nodes");
    assert_eq!(nodes.len(), 3, "expected three nodes in {lock}");
    let fence = lock.int("fence");
    for (node, url) in nodes.iter().zip(quorum.urls()) {
        assert_eq!(node.str("url"), url, "nodes are not in --url order: {lock}");
        assert_eq!(node.str("state"), "held", "{lock}");
        let left = node.int("ttl_left_ms");
        assert!(
            0 < left && left <= 30_000,
            "node {url} has {left} ms left: {lock}"
        );
        // Every node's counter was raised to the fence handed out.
        assert_eq!(node.int("fence"), fence, "{lock}");
    }
    finish(holder);
}

#[test]
fn status_with_one_node_down_still_answers_0_for_a_held_lock_and_warns() {
    let mut quorum = RedisQuorum::start(3);
    let (holder, _) = hold(&quorum, "job", "30s");
    let down = quorum.node(1).url();
    quorum.node_mut(1).kill9();

    let outcome = quorum.redlock().args(["status", "job"]).exits_with(0);
    expect_stderr_names(&outcome, &down);
    if !node_line(&outcome, &down).starts_with("ERROR") {
        outcome.fail(&format!("the down node {down} is not shown as an error"));
    }
    let verdict = line(&outcome, "quorum ");
    if !verdict.contains("2 of 3") {
        outcome.fail("the quorum line does not say 2 of 3 nodes hold it");
    }

    let (lock, outcome) = status_json(&quorum, "job", 0);
    expect_stderr_names(&outcome, &down);
    assert_eq!(lock.str("state"), "held");
    assert_eq!(lock.int("quorum.holding"), 2);
    let node = lock.expect("nodes.1");
    assert_eq!(node.str("url"), down);
    assert_eq!(node.str("state"), "error", "{lock}");
    assert!(
        !node.str("error").is_empty(),
        "the down node's error is empty: {lock}"
    );
    finish(holder);
}

#[test]
fn status_with_two_nodes_down_exits_69_and_never_says_free() {
    let mut quorum = RedisQuorum::start(3);
    let (first, second) = (quorum.node(0).url(), quorum.node(1).url());
    quorum.node_mut(0).kill9();
    quorum.node_mut(1).kill9();
    let outcome = quorum.redlock().args(["status", "job"]).exits_with(69);
    if outcome.stdout.contains("free") {
        outcome.fail("status says free although it could not ask a majority");
    }
    let line = outcome.last_error_line();
    for url in [&first, &second] {
        if !line.contains(url.as_str()) {
            outcome.fail(&format!("the error line does not name the down node {url}"));
        }
    }
}

#[test]
fn status_of_a_lock_held_on_one_node_of_three_is_free() {
    let quorum = RedisQuorum::start(3);
    hold_elsewhere(&quorum, 2, "job");
    let (lock, _) = status_json(&quorum, "job", 1);
    assert_eq!(lock.str("state"), "free", "{lock}");
    assert_eq!(lock.int("quorum.holding"), 1, "{lock}");
}

/// The token and the fence `acquire` printed on its first two lines.
fn token_and_fence(outcome: &Outcome) -> (String, i64) {
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    let [token, fence, ..] = lines.as_slice() else {
        outcome.fail("expected the token and the fence on stdout");
    };
    let fence = fence
        .parse()
        .unwrap_or_else(|e| outcome.fail(&format!("the fence {fence:?} is no integer: {e}")));
    ((*token).to_owned(), fence)
}

fn acquire(quorum: &RedisQuorum, key: &str, ttl: &str) -> (String, i64) {
    token_and_fence(
        &quorum
            .redlock()
            .args(["acquire", "--key", key, "--ttl", ttl])
            .exits_with(0),
    )
}

/// A waiter's attempt that wins only a minority of the nodes is taken back there, and the
/// undoing wakes nobody: woken by its own undoing, the waiter would try again at once, taking
/// the node again and again (its fence counter and audit log churning) until the holder heals
/// it.
#[test]
fn an_attempt_that_wins_only_a_minority_is_undone_without_waking_anyone() {
    let quorum = RedisQuorum::start(3);
    // Held on every node by `acquire`, which does not renew: node 0 stays free once its key is
    // gone.
    acquire(&quorum, "job", "60s");
    let before = quorum.node(0).script_calls();
    let waiter = quorum
        .redlock()
        .args([
            "run", "--key", "job", "--ttl", "30s", "--wait", "5s", "--", "true",
        ])
        .spawn();
    wait_for_contender(quorum.node(0), "job", before);
    let _: () = quorum.node(0).query(&["DEL", "job"]);
    let _: () = quorum.node(0).query(&["CONFIG", "RESETSTAT"]);
    let audit = companion_key("job", "audit");
    wait_until(
        "two attempts taken on node 0 and given back",
        Duration::from_secs(10),
        || {
            let log: Vec<String> = quorum.node(0).query(&["LRANGE", &audit, "0", "-1"]);
            let taken = log.iter().filter(|e| e.contains("\u{1f}acquired\u{1f}"));
            (taken.count() >= 3).then_some(())
        },
    );
    let commands = quorum.node(0).info("commandstats");
    assert!(!commands.contains_key("cmdstat_publish"), "{commands:?}");
    waiter.exits_with(75);
}

#[test]
fn acquire_over_three_nodes_takes_the_lock_on_every_node() {
    let quorum = RedisQuorum::start(3);
    let before = quorum.node(0).micros();
    let (token, fence) = acquire(&quorum, "job", "30s");
    crate::support::expect_fresh_fence(fence, before);
    quorum.expect_held("job", &token, &[]);
    quorum
        .redlock()
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(75)
        .error_mentions(says::BUSY);
}

#[test]
fn extend_over_three_nodes_renews_the_lease_on_every_node() {
    let quorum = RedisQuorum::start(3);
    let (token, _) = acquire(&quorum, "job", "5s");
    quorum
        .redlock()
        .args(["extend", "--key", "job", "--token", &token, "--ttl", "60s"])
        .exits_with(0);
    for (i, node) in quorum.nodes().iter().enumerate() {
        let left = node
            .pttl("job")
            .unwrap_or_else(|| panic!("node {i} lost the lock"));
        assert!(
            left > Duration::from_secs(50),
            "node {i} has {left:?} left after extending to 60s"
        );
    }
}

#[test]
fn extend_over_three_nodes_with_another_token_exits_1_and_renews_nothing() {
    let quorum = RedisQuorum::start(3);
    let (token, _) = acquire(&quorum, "job", "5s");
    quorum
        .redlock()
        .args([
            "extend",
            "--key",
            "job",
            "--token",
            "not-the-token",
            "--ttl",
        ])
        .arg("60s")
        .exits_with(1);
    quorum.expect_held("job", &token, &[]);
    for (i, node) in quorum.nodes().iter().enumerate() {
        let left = node.pttl("job").expect("the lock is still there");
        assert!(
            left <= Duration::from_secs(5),
            "node {i}'s lease was renewed to {left:?} for the wrong token"
        );
    }
}

#[test]
fn release_with_the_token_over_three_nodes_deletes_the_lock_everywhere() {
    let quorum = RedisQuorum::start(3);
    let (token, _) = acquire(&quorum, "job", "30s");
    quorum
        .redlock()
        .args(["release", "job", "--token", &token])
        .exits_with(0);
    let keys = LockKeys::of("job");
    quorum.expect_free_on(&keys.lock, &[0, 1, 2]);
    quorum.expect_free_on(&keys.holder, &[0, 1, 2]);
}

#[test]
fn release_with_the_token_over_three_nodes_with_one_down_exits_0() {
    let mut quorum = RedisQuorum::start(3);
    let (token, _) = acquire(&quorum, "job", "30s");
    quorum.node_mut(0).kill9();
    quorum
        .redlock()
        .args(["release", "job", "--token", &token])
        .exits_with(0);
    quorum.expect_free_on("job", &[1, 2]);
}

#[test]
fn release_force_over_three_nodes_removes_the_lock_everywhere() {
    let quorum = RedisQuorum::start(3);
    acquire(&quorum, "job", "30s");
    let outcome = quorum
        .redlock()
        .args(["release", "job", "--force"])
        .exits_with(0);
    expect_on_stdout(&outcome, "removed");
    let keys = LockKeys::of("job");
    quorum.expect_free_on(&keys.lock, &[0, 1, 2]);
    quorum.expect_free_on(&keys.holder, &[0, 1, 2]);
}

#[test]
fn release_force_over_three_nodes_stops_a_live_run_with_76() {
    let quorum = RedisQuorum::start(3);
    let (holder, _) = hold(&quorum, "job", "1s");
    quorum
        .redlock()
        .args(["release", "job", "--force"])
        .exits_with(0);
    holder.exits_with(76).last_error_mentions(says::LEASE_LOST);
}

#[test]
fn a_stalled_minority_node_does_not_cost_a_running_lease() {
    let quorum = RedisQuorum::start(3);
    quorum.node(2).pause();
    // Every renewal meets the stalled node; a majority still confirms in time.
    quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "1s", "--", "sleep", "2.5"])
        .exits_with(0);
    quorum.node(2).resume();
}

#[test]
fn status_is_unknown_when_silent_nodes_could_complete_a_majority() {
    let quorum = RedisQuorum::start(3);
    let _: () = quorum
        .node(0)
        .query(&["SET", "job", "someone", "PX", "30000"]);
    quorum.node(2).pause();
    let outcome = quorum.redlock().args(["status", "job"]).exits_with(69);
    assert!(outcome.stdout.contains("UNKNOWN"), "{outcome}");
    assert!(!outcome.stdout.contains("job: free"), "{outcome}");
    quorum.node(2).resume();
}

#[test]
fn a_majority_killed_during_a_run_stops_the_command_before_the_lease_ends() {
    let mut quorum = RedisQuorum::start(3);
    let (holder, _token) = hold(&quorum, "job", "1s");
    let killed = Instant::now();
    quorum.node_mut(0).kill9();
    quorum.node_mut(1).kill9();
    let outcome = holder.exits_with(76);
    // The last renewal was confirmed at most a renewal interval before the kill; the command
    // must be gone within one TTL of it (generous slack for a loaded machine).
    assert!(
        killed.elapsed() < Duration::from_millis(1000 + 500),
        "redlock took {:?} to stop the command:\n{outcome}",
        killed.elapsed()
    );
}

/// The `key` of every lock `status --all --json` lists over the quorum.
fn listed_over(quorum: &RedisQuorum, code: i32) -> (Vec<String>, Outcome) {
    let outcome = quorum
        .redlock()
        .args(["status", "--all", "--json"])
        .exits_with(code);
    let document = Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("status --json printed no JSON document: {e}")));
    let keys = document
        .items("locks")
        .iter()
        .map(|lock| lock.str("key").to_owned())
        .collect();
    (keys, outcome)
}

#[test]
fn all_lists_each_lock_once_whichever_nodes_have_it_and_with_a_node_down() {
    let mut quorum = RedisQuorum::start(3);
    quorum
        .redlock()
        .args(["run", "--key", "everywhere", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    // Locks whose fence counters only some nodes have (a node restarted without persistence,
    // another client's writes).
    for (key, nodes) in [("two", &[1, 2][..]), ("one", &[2][..])] {
        for node in nodes {
            let _: () =
                quorum
                    .node(*node)
                    .query(&["SET", &LockKeys::of(key).fence, "7", "PX", "60000"]);
        }
    }
    let (keys, _) = listed_over(&quorum, 0);
    assert_eq!(keys, ["everywhere", "one", "two"]);
    let metrics = quorum.redlock().args(["metrics", "--all"]).exits_with(0);
    let held: Vec<&str> = metrics
        .stdout
        .lines()
        .filter(|l| l.starts_with("redlock_held{"))
        .collect();
    assert_eq!(
        held,
        [
            "redlock_held{key=\"everywhere\"} 0",
            "redlock_held{key=\"one\"} 0",
            "redlock_held{key=\"two\"} 0"
        ],
        "{metrics}"
    );

    // With the first node down its locks are found on the others, once each.
    let down = quorum.node(0).url();
    quorum.node_mut(0).kill9();
    let (keys, outcome) = listed_over(&quorum, 0);
    assert_eq!(keys, ["everywhere", "one", "two"], "{outcome}");
    expect_stderr_names(&outcome, &down);

    // Two of three down: nobody can tell what is held.
    let second = quorum.node(1).url();
    quorum.node_mut(1).kill9();
    let outcome = quorum
        .redlock()
        .args(["status", "--all", "--json"])
        .exits_with(69);
    for url in [&down, &second] {
        if !outcome.error_line().contains(url.as_str()) {
            outcome.fail(&format!("the error line does not name the down node {url}"));
        }
    }
}

/// `redlock --url URL... ARGS` over a quorum that names one server twice: expects 64, one
/// `redlock:` line naming both URLs (`twice`), a command that never ran, and nothing written on
/// any of `servers`.
fn refused_as_one_server(
    urls: &[String],
    args: &[&str],
    twice: [&str; 2],
    servers: &[&RedisServer],
) {
    let outcome = urls
        .iter()
        .fold(Redlock::without_url(), |redlock, url| {
            redlock.args(["--url", url])
        })
        .args(args)
        .exits_with(64);
    if outcome.stdout.contains("started") {
        outcome.fail("the command ran over a quorum that names one server twice");
    }
    let line = outcome.error_line();
    for url in twice {
        if !line.contains(url) {
            outcome.fail(&format!("the error line does not name {url}"));
        }
    }
    outcome.error_mentions(&["one Redis server"]);
    for server in servers {
        let keys: i64 = server.query(&["DBSIZE"]);
        if keys != 0 {
            outcome.fail(&format!(
                "{} has {keys} keys: something was written",
                server.url()
            ));
        }
    }
}

const RUN: &[&str] = &["run", "--key", "job", "--ttl", "2s", "-c", "echo started"];

#[test]
fn the_same_url_twice_is_refused_with_64_before_anything_is_written() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    refused_as_one_server(
        &[a.url(), a.url(), b.url()],
        RUN,
        [&a.url(), &a.url()],
        &[&a, &b],
    );
}

#[test]
fn localhost_and_127_0_0_1_of_one_port_are_refused_by_every_subcommand_that_writes() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let by_name = format!("redis://localhost:{}", a.port());
    let urls = [a.url(), b.url(), by_name.clone()];
    for args in [
        RUN,
        &["acquire", "--key", "job", "--ttl", "2s"],
        &["extend", "--key", "job", "--token", "t", "--ttl", "2s"],
        &["release", "job", "--token", "t"],
        &["release", "job", "--force"],
        &["pause", "job"],
        &["resume", "job"],
        &["status", "job"],
    ] {
        refused_as_one_server(&urls, args, [&a.url(), &by_name], &[&a, &b]);
    }
}

#[test]
fn names_that_resolve_to_one_address_are_refused_even_while_that_server_does_not_answer() {
    // The server is frozen: it cannot say who it is, so only the names can tell.
    let (a, b, c) = (
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    );
    let by_name = format!("redis://localhost:{}", a.port());
    let short = format!("redis://127.1:{}", a.port());
    let urls = [a.url(), by_name.clone(), short, b.url(), c.url()];
    a.pause();
    refused_as_one_server(&urls, RUN, [&a.url(), &by_name], &[&b, &c]);
    a.resume();
}

#[test]
fn a_servers_unix_socket_and_its_tcp_port_are_one_server() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let urls = [a.unix_url(), b.url(), a.url()];
    refused_as_one_server(&urls, RUN, [&a.unix_url(), &a.url()], &[&a, &b]);
}

#[test]
fn one_server_named_twice_with_its_password_is_refused_without_showing_the_password() {
    let a = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let b = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let urls = [
        format!("redis://:s3cret-pw@localhost:{}", a.port()),
        b.url_with_password("s3cret-pw"),
        a.url_with_password("s3cret-pw"),
    ];
    let outcome = urls
        .iter()
        .fold(Redlock::without_url(), |redlock, url| {
            redlock.args(["--url", url])
        })
        .args(RUN)
        .exits_with(64);
    outcome.never_shows("s3cret-pw");
    outcome.error_mentions(&[&format!("localhost:{}", a.port())]);
    for server in [&a, &b] {
        let keys: i64 = server.query(&["DBSIZE"]);
        assert_eq!(keys, 0, "{}: something was written", server.url());
    }
}

#[test]
fn a_node_out_of_reach_is_no_duplicate_and_a_majority_of_distinct_servers_runs() {
    // The fourth node is out of reach, which says nothing of which server it is: the quorum
    // rules count it as down, and three distinct servers of four are a majority.
    let (a, b, c) = (
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    );
    let nowhere = format!("redis://localhost:{}", crate::support::free_port());
    let outcome = [a.url(), b.url(), c.url(), nowhere.clone()]
        .iter()
        .fold(Redlock::without_url(), |redlock, url| {
            redlock.args(["--url", url])
        })
        .args(RUN)
        .exits_with(0);
    expect_on_stdout(&outcome, "started");
    expect_stderr_names(&outcome, &nowhere);
}
