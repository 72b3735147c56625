//! Nested runs: inside a command that redlock runs, a `run` or `acquire` of the same key goes
//! ahead under the outer lease (confirmed by the server), with no second acquisition and no
//! release; a stale token, another key or another prefix is acquired like any other, and so is
//! a run of another shape than the hold it is inside.

use std::time::Duration;

use crate::support::sections::{SECTION, expect_exclusive_sections, read_sections};
use crate::support::{Outcome, RedisQuorum, RedisServer, Redlock, TempDir, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// Expects the counters of `key` (as stored, prefix included) to count exactly one run: one
/// acquisition and one release, whatever ran nested inside it.
fn expect_one_run(server: &RedisServer, key: &str) {
    let stats = server.hgetall(&format!("{{{key}}}:redlock:stats"));
    assert_eq!(
        stats.get("runs").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
}

/// `redlock run --key KEY --ttl 30s -c SCRIPT`, expected to succeed; the script's own redlock
/// calls find the server in `REDLOCK_URL`.
fn outer_run(server: &RedisServer, key: &str, script: &str) -> Outcome {
    Redlock::new(server)
        .env("REDLOCK_URL", server.url())
        .args(["run", "--key", key, "--ttl", "30s", "-c", script])
        .exits_with(0)
}

#[test]
fn a_nested_run_of_the_same_key_runs_at_once_under_the_outer_lease_and_passes_its_status_through() {
    let server = RedisServer::start();
    // The outer command records the lock's state, runs the nested run (which would wait 1 m if
    // it tried to acquire), then records the state again.
    let script = format!(
        r#"echo "outer_token=$REDLOCK_TOKEN"
echo "outer_fence=$REDLOCK_FENCE"
"{BIN}" run --key job --ttl 5s --wait 1m -- sh -c 'echo "inner_token=$REDLOCK_TOKEN"; echo "inner_fence=$REDLOCK_FENCE"; echo "inner_parent=$PPID"; exit 7'
echo "inner_status=$?"
echo "outer_shell=$$""#
    );
    let outcome = outer_run(&server, "job", &script);
    assert_eq!(outcome.printed("inner_status"), "7", "{outcome}");
    assert_eq!(
        outcome.printed("inner_token"),
        outcome.printed("outer_token"),
        "{outcome}"
    );
    assert_eq!(
        outcome.printed("inner_fence"),
        outcome.printed("outer_fence"),
        "{outcome}"
    );
    // The nested redlock became the command: its parent is the outer shell itself.
    assert_eq!(
        outcome.printed("inner_parent"),
        outcome.printed("outer_shell"),
        "the nested command did not replace the nested redlock\n{outcome}"
    );
    // One acquisition and one release in all: the run counter says 1.
    expect_one_run(&server, "job");
    assert!(!server.exists("job"), "the outer run did not release");
}

#[test]
fn the_outer_lease_is_untouched_by_a_nested_run() {
    let server = RedisServer::start();
    let script = format!(
        r#"before=$(redis-cli -p {port} --raw get '{{job}}:redlock:holder')
"{BIN}" run --key job --ttl 1s -- true
echo "nested_status=$?"
echo "held=$(redis-cli -p {port} --raw get job)"
after=$(redis-cli -p {port} --raw get '{{job}}:redlock:holder')
[ "$before" = "$after" ] && echo same=yes || echo "same=no: $before / $after"
echo "pttl=$(redis-cli -p {port} pttl job)""#,
        port = server.port()
    );
    let outcome = outer_run(&server, "job", &script);
    assert_eq!(outcome.printed("nested_status"), "0", "{outcome}");
    assert_eq!(outcome.printed("same"), "yes", "{outcome}");
    let pttl: i64 = outcome.printed("pttl").parse().expect("a PTTL");
    assert!(
        pttl > 5_000,
        "the nested run's 1s TTL shortened the outer lease to {pttl} ms\n{outcome}"
    );
    let holder = server.holder_record("job");
    assert!(holder.is_empty(), "the outer run's release left {holder:?}");
}

#[test]
fn a_nested_acquire_of_the_same_key_prints_the_outer_token_and_fence() {
    let server = RedisServer::start();
    let script = format!(
        r#"echo "outer=$REDLOCK_TOKEN $REDLOCK_FENCE"
echo "inner=$("{BIN}" acquire --key job --ttl 5s | tr '\n' ' ' | sed 's/ $//')"
echo "json=$("{BIN}" acquire --key job --ttl 5s --json)""#
    );
    let outcome = outer_run(&server, "job", &script);
    assert_eq!(
        outcome.printed("inner"),
        outcome.printed("outer"),
        "{outcome}"
    );
    let json = outcome.printed("json");
    let token = outcome.printed("outer");
    let token = token.split(' ').next().expect("a token");
    assert!(
        json.contains(&format!("\"token\":\"{token}\"")),
        "{json} does not name the outer token"
    );
}

#[test]
fn nested_runs_of_different_keys_acquire_each_key_and_release_it() {
    let server = RedisServer::start();
    let script = format!(
        r#""{BIN}" run --key inner --ttl 30s -- sh -c 'echo "inner_token=$REDLOCK_TOKEN"; echo "inner_key=$REDLOCK_KEY"; echo "inner_held=$(redis-cli -p {port} --raw get inner)"'
echo "inner_status=$?"
echo "outer_token=$REDLOCK_TOKEN"
echo "outer_held=$(redis-cli -p {port} --raw get outer)"
echo "inner_left=$(redis-cli -p {port} exists inner)""#,
        port = server.port()
    );
    let outcome = outer_run(&server, "outer", &script);
    assert_eq!(outcome.printed("inner_status"), "0", "{outcome}");
    assert_eq!(outcome.printed("inner_key"), "inner");
    assert_ne!(
        outcome.printed("inner_token"),
        outcome.printed("outer_token")
    );
    assert_eq!(
        outcome.printed("inner_held"),
        outcome.printed("inner_token"),
        "{outcome}"
    );
    assert_eq!(
        outcome.printed("outer_held"),
        outcome.printed("outer_token")
    );
    assert_eq!(outcome.printed("inner_left"), "0", "inner was not released");
}

#[test]
fn a_stale_token_in_the_environment_is_treated_like_any_other_holder() {
    let server = RedisServer::start();
    // Another run holds the key; the environment names a token that does not hold it.
    let holder = Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "30s"])
        .exits_with(0);
    let holding = holder.stdout.lines().next().expect("a token").to_owned();
    Redlock::new(&server)
        .env("REDLOCK_KEY", "job")
        .env("REDLOCK_TOKEN", "0b7e3d2c-3d6f-4c1e-9b8e-2a1f3c4d5e6f")
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(75)
        .error_mentions(&["job", "held by"]);
    Redlock::new(&server)
        .env("REDLOCK_KEY", "job")
        .env("REDLOCK_TOKEN", "0b7e3d2c-3d6f-4c1e-9b8e-2a1f3c4d5e6f")
        .args(["acquire", "--key", "job", "--ttl", "5s"])
        .exits_with(75);
    assert_eq!(
        server.get("job"),
        Some(holding.clone()),
        "the holder lost it"
    );
    // Free now: the run with the stale token acquires it anew, under a token of its own.
    Redlock::new(&server)
        .args(["release", "job", "--token", &holding])
        .exits_with(0);
    let outcome = Redlock::new(&server)
        .env("REDLOCK_KEY", "job")
        .env("REDLOCK_TOKEN", "0b7e3d2c-3d6f-4c1e-9b8e-2a1f3c4d5e6f")
        .args(["run", "--key", "job", "--ttl", "5s", "--", "sh", "-c"])
        .arg("echo \"token=$REDLOCK_TOKEN\"")
        .exits_with(0);
    assert_ne!(
        outcome.printed("token"),
        "0b7e3d2c-3d6f-4c1e-9b8e-2a1f3c4d5e6f",
        "the stale token was taken as the holder"
    );
    expect_one_run(&server, "job");
}

#[test]
fn the_same_key_under_another_prefix_is_another_lock() {
    let server = RedisServer::start();
    let script = format!(
        r#""{BIN}" --prefix other: run --key job --ttl 5s -- sh -c 'echo "inner_token=$REDLOCK_TOKEN"'
echo "inner_status=$?"
echo "outer_token=$REDLOCK_TOKEN""#
    );
    let outcome = outer_run(&server, "job", &script);
    assert_eq!(outcome.printed("inner_status"), "0", "{outcome}");
    assert_ne!(
        outcome.printed("inner_token"),
        outcome.printed("outer_token")
    );
    expect_one_run(&server, "other:job");
}

#[test]
fn a_nested_run_in_a_quorum_goes_ahead_when_a_majority_confirms_the_outer_token() {
    let quorum = RedisQuorum::start(3);
    let script = format!(
        r#""{BIN}" run --key job --ttl 5s -- sh -c 'echo "inner_token=$REDLOCK_TOKEN"; exit 3'
echo "inner_status=$?"
echo "outer_token=$REDLOCK_TOKEN""#
    );
    let outcome = quorum
        .redlock()
        .env("REDLOCK_URL", quorum.url_list())
        .args(["run", "--key", "job", "--ttl", "30s", "-c", &script])
        .exits_with(0);
    assert_eq!(outcome.printed("inner_status"), "3", "{outcome}");
    assert_eq!(
        outcome.printed("inner_token"),
        outcome.printed("outer_token")
    );
    for node in quorum.nodes() {
        expect_one_run(node, "job");
    }
}

#[test]
fn an_exclusive_run_inside_a_shared_hold_is_a_contender_and_never_overlaps_another_shared_holder() {
    let server = RedisServer::start();
    let scratch = TempDir::new("nested-shapes");
    let log = scratch.join("sections.log");
    // Another shared holder runs a critical section for about a second.
    let mut other = Redlock::new(&server)
        .env("STRESS_LOG", &log)
        .env("TICKS", "40")
        .env("TICK", "0.025")
        .args(["run", "--key", "job", "--ttl", "10s", "--shared", "--"])
        .args(SECTION)
        .spawn();
    wait_until(
        "the other holder's section",
        Duration::from_secs(10),
        || read_sections(&log).first().map(|_| ()),
    );
    // A shared run whose command runs an exclusive run of the same key, which must not go
    // ahead beside the other shared holder: it waits its turn, which cannot come while the
    // run it is inside holds the key, and ends busy.
    let script = format!(
        r#""{BIN}" run --key job --ttl 10s --wait 1500ms -- "$@"
echo "inner_status=$?""#
    );
    let outcome = Redlock::new(&server)
        .env("REDLOCK_URL", server.url())
        .env("STRESS_LOG", &log)
        .env("TICKS", "4")
        .env("TICK", "0.01")
        .args(["run", "--key", "job", "--ttl", "10s", "--shared", "--"])
        .args(["bash", "-c", &script, "inner"])
        .args(SECTION)
        .exits_with(0);
    assert_eq!(outcome.printed("inner_status"), "75", "{outcome}");
    assert!(
        outcome
            .stderr
            .contains("only a run of the same shape nests"),
        "{outcome}"
    );
    other.close_stdin();
    other.exits_with(0);
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), 1, "{sections:?}");
}

#[test]
fn a_shared_or_slotted_run_nests_inside_a_hold_of_its_own_shape() {
    let server = RedisServer::start();
    for shape in ["--shared", "--slots 3"] {
        let script = format!(
            r#""{BIN}" run --key job --ttl 5s {shape} -- sh -c 'echo "inner=$REDLOCK_TOKEN $REDLOCK_FENCE"'
echo "outer=$REDLOCK_TOKEN $REDLOCK_FENCE""#
        );
        let outcome = Redlock::new(&server)
            .env("REDLOCK_URL", server.url())
            .args(["run", "--key", "job", "--ttl", "10s"])
            .args(shape.split(' '))
            .args(["-c", &script])
            .exits_with(0);
        assert_eq!(
            outcome.printed("inner"),
            outcome.printed("outer"),
            "{outcome}"
        );
    }
}

#[test]
fn a_nested_acquire_of_several_keys_prints_the_outer_token_and_each_keys_fence() {
    let server = RedisServer::start();
    // `acquire` prints the token, then the fences in the order asked: here b's, then a's.
    let script = format!(
        r#"set -- $REDLOCK_FENCES
echo "outer=$REDLOCK_TOKEN $2 $1"
echo "inner=$("{BIN}" acquire --key b --key a --ttl 5s | tr '\n' ' ' | sed 's/ $//')""#
    );
    let outcome = Redlock::new(&server)
        .env("REDLOCK_URL", server.url())
        .args([
            "run", "--key", "a", "--key", "b", "--ttl", "10s", "-c", &script,
        ])
        .exits_with(0);
    assert_eq!(
        outcome.printed("inner"),
        outcome.printed("outer"),
        "{outcome}"
    );
}
