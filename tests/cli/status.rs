//! `redlock status`: who holds a lock and whether it is alive, how the last run ended and how
//! often runs were refused, in text and as JSON; never "free" when it could not ask; read-only
//! by construction. Also what a run leaves behind for status to read, and that it expires.

use crate::support::json::{Document, Json};
use crate::support::redlock::Running;
use crate::support::{
    LockKeys, Monitor, Outcome, RedisServer, Redlock, TempDir, child, companion_key, free_port,
    host_name, lock_status, says, status_document,
};

/// `$USER` for a holder: the record names the user from the password database instead.
const USER: &str = "night-ops";

/// The name of the user the tests run as, as `id -un` says.
fn user_name() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A `redlock run` holding `key` with `ttl`, as `USER`, its command waiting on stdin.
fn hold(server: &RedisServer, key: &str, ttl: &str) -> Running {
    let mut holder = Redlock::new(server)
        .env("USER", USER)
        .args(["run", "--key", key, "--ttl", ttl, "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    holder
}

/// Lets a holder's command finish and expects the run to succeed.
fn finish(mut holder: Running) {
    holder.close_stdin();
    holder.exits_with(0);
}

/// Holds `key` the way another client would: a plain string with an expiry, no holder record.
fn hold_elsewhere(server: &RedisServer, key: &str) {
    let _: () = server.query(&["SET", key, "someone-elses-token", "PX", "30000"]);
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

fn expect_contains(outcome: &Outcome, text: &str, expected: &str) {
    if !text.contains(expected) {
        outcome.fail(&format!("expected {text:?} to contain {expected:?}"));
    }
}

fn expect_not_on_stdout(outcome: &Outcome, unexpected: &str) {
    if outcome.stdout.contains(unexpected) {
        outcome.fail(&format!("stdout shows {unexpected:?}"));
    }
}

#[test]
fn held_lock_shows_holder_command_since_lease_and_fence_and_exits_0() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "30s");
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    let head = line(&outcome, "job: held by ");
    expect_contains(
        &outcome,
        head,
        &format!(
            "held by {} (pid {}, user {})",
            host_name(),
            holder.pid(),
            user_name()
        ),
    );
    let fence = server
        .get(&LockKeys::of("job").fence)
        .expect("a fence counter");
    expect_contains(&outcome, head, &format!("fence {fence}"));
    expect_contains(&outcome, line(&outcome, "command "), "read _");
    line(&outcome, "since ");
    let lease = line(&outcome, "lease ");
    for word in ["alive", "renewed", "expires in"] {
        expect_contains(&outcome, lease, word);
    }
    let fence_line = line(&outcome, "fence ");
    if fence_line.split_whitespace().nth(1) != Some(fence.as_str()) {
        outcome.fail(&format!("expected the fence line to show fence {fence}"));
    }
    line(&outcome, "counters ");
    finish(holder);
}

#[test]
fn free_key_exits_1_and_says_free() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    line(&outcome, "job: free");
}

#[test]
fn several_keys_exit_1_when_one_of_them_is_free() {
    let server = RedisServer::start();
    let holder = hold(&server, "held", "30s");
    let outcome = Redlock::new(&server)
        .args(["status", "held", "loose"])
        .exits_with(1);
    line(&outcome, "held: held by ");
    line(&outcome, "loose: free");
    finish(holder);
}

#[test]
fn several_keys_exit_0_when_all_are_held() {
    let server = RedisServer::start();
    let first = hold(&server, "first", "30s");
    let second = hold(&server, "second", "30s");
    Redlock::new(&server)
        .args(["status", "first", "second"])
        .exits_with(0);
    finish(first);
    finish(second);
}

#[test]
fn lock_taken_by_another_client_is_held_without_a_holder_record() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    expect_contains(&outcome, line(&outcome, "job: held by "), "expires in");
}

#[test]
fn finished_run_shows_last_run_ok_with_exit_0() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    let last = line(&outcome, "last run ");
    expect_contains(&outcome, last, "ok (exit 0)");
    expect_contains(&outcome, last, &host_name());
    expect_contains(&outcome, line(&outcome, "counters "), "runs 1,");
}

#[test]
fn failing_run_shows_last_run_failed_with_its_exit_status() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "exit 3"])
        .exits_with(3);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    expect_contains(&outcome, line(&outcome, "last run "), "failed (exit 3)");
    expect_contains(&outcome, line(&outcome, "counters "), "failed 1,");

    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.outcome"), "failed");
    assert_eq!(lock.int("last_run.exit"), 3);
    assert_eq!(lock.int("counters.failed"), 1);
    assert_eq!(lock.int("counters.runs"), 1);
}

#[test]
fn lost_lease_shows_last_run_lease_lost_and_counts_it() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "1s");
    let _: i64 = server.query(&["DEL", "job"]);
    holder.exits_with(76);

    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    expect_contains(&outcome, line(&outcome, "last run "), "lease lost");
    expect_contains(&outcome, line(&outcome, "counters "), "lease lost 1,");

    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.outcome"), "lease lost");
    assert_eq!(lock.int("counters.lost"), 1);
    assert_eq!(lock.int("counters.runs"), 1);
}

#[test]
fn a_replaced_run_shows_as_replaced_and_is_counted() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "10s");
    Redlock::replacing(&server, "job")
        .args(["--", "sh", "-c", "exit 3"])
        .exits_with(3);
    holder.exits_with(79);
    // The replacer failed after it: the replaced run stays counted as replaced, not failed.
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    expect_contains(&outcome, line(&outcome, "counters "), ", replaced 1");
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.outcome"), "failed");
    assert_eq!(lock.int("counters.replaced"), 1);
    assert_eq!(lock.int("counters.failed"), 1);
    assert_eq!(lock.int("counters.runs"), 2);
    // While the replacer runs, the replaced run is the last one.
    let holder = hold(&server, "job", "10s");
    let mut replacer = Redlock::replacing(&server, "job")
        .args(["-c", child::HOLD])
        .spawn();
    replacer.expect_line("ready");
    holder.exits_with(79);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    expect_contains(&outcome, line(&outcome, "last run "), "replaced");
    let lock = lock_status(&server, "job");
    assert_eq!(lock.str("last_run.outcome"), "replaced");
    assert_eq!(lock.int("counters.replaced"), 2);
    finish(replacer);
}

#[test]
fn busy_refusals_are_counted_once_per_refused_run() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    for _ in 0..2 {
        Redlock::new(&server)
            .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
            .exits_with(75);
    }
    let lock = lock_status(&server, "job");
    assert_eq!(lock.int("counters.busy"), 2);
    assert_eq!(lock.int("counters.runs"), 0);
}

#[test]
fn busy_refusal_after_a_wait_that_runs_out_is_counted_once() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--wait", "300ms"])
        .args(["--", "true"])
        .exits_with(75);
    assert_eq!(lock_status(&server, "job").int("counters.busy"), 1);
}

#[test]
fn busy_refusal_with_conflict_exit_code_0_is_still_counted() {
    let server = RedisServer::start();
    hold_elsewhere(&server, "job");
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "--conflict-exit-code",
            "0",
        ])
        .args(["--", "true"])
        .exits_with(0);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    expect_contains(&outcome, line(&outcome, "counters "), "busy 1,");
}

#[test]
fn json_of_a_held_lock_names_the_holder_its_ttl_and_fence() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "30s");
    let document = status_document(&server, &["job"], 0);
    assert!(document.int("now_ms") > 0);
    let lock = document.expect("locks.0");
    assert_eq!(lock.str("key"), "job");
    assert_eq!(lock.str("redis_key"), "job");
    assert_eq!(lock.str("state"), "held");
    assert_eq!(lock.str("type"), "string");
    let ttl_left = lock.int("ttl_left_ms");
    assert!(
        0 < ttl_left && ttl_left <= 30_000,
        "ttl_left_ms {ttl_left} for a 30s lease"
    );
    let fence: i64 = server
        .get(&LockKeys::of("job").fence)
        .and_then(|f| f.parse().ok())
        .expect("a fence counter");
    assert_eq!(lock.int("fence"), fence);
    assert_eq!(lock.str("holder.host"), host_name());
    assert_eq!(lock.int("holder.pid"), i64::from(holder.pid()));
    assert_eq!(lock.str("holder.user"), user_name());
    assert!(lock.str("holder.command").contains("read _"), "{lock}");
    assert_eq!(lock.int("holder.fence"), fence);
    assert!(
        lock.expect("holder.pid_alive").as_bool() == Some(true),
        "{lock}"
    );
    assert_eq!(lock.int("holder.ttl_ms"), 30_000);
    assert!(lock.int("holder.started_ms") <= lock.int("holder.renewed_ms"));
    assert!(lock.expect("last_run").is_null(), "{lock}");
    for counter in ["runs", "busy", "lost", "failed", "forced"] {
        assert_eq!(lock.int(&format!("counters.{counter}")), 0, "{counter}");
    }
    finish(holder);
}

#[test]
fn json_after_a_run_shows_a_free_lock_with_its_last_run_and_counters() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    let lock = status_document(&server, &["job"], 1)
        .expect("locks.0")
        .clone();
    assert_eq!(lock.str("state"), "free");
    assert_eq!(lock.str("type"), "none");
    assert!(lock.expect("ttl_left_ms").is_null(), "{lock}");
    assert!(lock.expect("holder").is_null(), "{lock}");
    let fence = lock.int("fence");
    assert_eq!(lock.str("last_run.outcome"), "ok");
    assert_eq!(lock.int("last_run.exit"), 0);
    assert_eq!(lock.str("last_run.host"), host_name());
    assert_eq!(lock.int("last_run.fence"), fence);
    assert_eq!(lock.int("counters.runs"), 1);
    assert_eq!(lock.int("counters.busy"), 0);
}

#[test]
fn json_keys_are_named_without_the_prefix_and_in_redis_with_it() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["--prefix", "prod:", "run", "--key", "job", "--ttl", "1s"])
        .args(["--", "true"])
        .exits_with(0);
    let document = status_document(&server, &["--prefix", "prod:", "job"], 1);
    assert_eq!(document.str("locks.0.key"), "job");
    assert_eq!(document.str("locks.0.redis_key"), "prod:job");
    assert_eq!(document.str("locks.0.last_run.outcome"), "ok");
}

#[test]
fn token_is_shown_neither_in_text_nor_in_json_without_show_token() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "30s");
    let token = server.get("job").expect("the lock is held");
    let text = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    text.never_shows(&token);
    let json = Redlock::new(&server)
        .args(["status", "--json", "job"])
        .exits_with(0);
    json.never_shows(&token);
    if json.stdout.contains("\"token\"") {
        json.fail("status --json has a token field without --show-token");
    }
    finish(holder);
}

#[test]
fn show_token_prints_the_token_that_is_in_redis() {
    let server = RedisServer::start();
    let holder = hold(&server, "job", "30s");
    let token = server.get("job").expect("the lock is held");
    let text = Redlock::new(&server)
        .args(["status", "--show-token", "job"])
        .exits_with(0);
    assert_eq!(
        line(&text, "token ").split_whitespace().nth(1),
        Some(&*token)
    );
    let document = status_document(&server, &["--show-token", "job"], 0);
    assert_eq!(document.str("locks.0.token"), token);
    finish(holder);
}

#[test]
fn key_of_another_type_is_not_a_lock_and_exits_78_never_free() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(78);
    expect_contains(&outcome, line(&outcome, "job: "), "NOT A LOCK");
    expect_not_on_stdout(&outcome, "free");
    outcome.error_mentions(says::WRONG_TYPE);
    assert_eq!(server.query::<String>(&["TYPE", "job"]), "hash");
}

#[test]
fn key_of_another_type_is_wrong_type_in_json() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    let document = status_document(&server, &["job"], 78);
    assert_eq!(document.str("locks.0.state"), "wrong_type");
    assert_eq!(document.str("locks.0.type"), "hash");
    assert!(document.expect("locks.0.holder").is_null(), "{document}");
}

#[test]
fn key_of_another_type_among_free_keys_exits_78() {
    let server = RedisServer::start();
    let _: i64 = server.query(&["HSET", "job", "field", "value"]);
    let outcome = Redlock::new(&server)
        .args(["status", "loose", "job"])
        .exits_with(78);
    line(&outcome, "loose: free");
    expect_contains(&outcome, line(&outcome, "job: "), "NOT A LOCK");
}

#[test]
fn unreachable_server_exits_69_and_never_says_free() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    for json in [false, true] {
        let outcome = Redlock::without_url()
            .args(["--url", &url, "status"])
            .args(json.then_some("--json"))
            .arg("job")
            .exits_with(69);
        outcome.error_mentions(says::UNAVAILABLE);
        if outcome.stdout.to_lowercase().contains("free") {
            outcome.fail("status says free although it could not ask");
        }
    }
}

/// A user that may only read: `+@read` and nothing else.
fn add_reader(server: &RedisServer) -> String {
    server.acl_setuser(
        "reader",
        &["on", ">pw", "~*", "resetchannels", "-@all", "+@read"],
    );
    server.url_with_user("reader", "pw")
}

#[test]
fn read_only_acl_user_sees_a_held_lock() {
    let server = RedisServer::start();
    let reader = add_reader(&server);
    let holder = hold(&server, "job", "30s");
    let outcome = Redlock::without_url()
        .args(["--url", &reader, "status", "job"])
        .exits_with(0);
    expect_contains(
        &outcome,
        line(&outcome, "job: held by "),
        &format!("pid {}", holder.pid()),
    );
    let listed = Redlock::without_url()
        .args(["--url", &reader, "status", "--json", "--all"])
        .exits_with(0);
    let document = Json::parse(listed.stdout.trim_end())
        .unwrap_or_else(|e| listed.fail(&format!("status --json printed no JSON document: {e}")));
    assert_eq!(document.str("locks.0.state"), "held", "{document}");
    finish(holder);
}

#[test]
fn read_only_acl_user_cannot_run_a_command_and_exits_77() {
    let server = RedisServer::start();
    let reader = add_reader(&server);
    let scratch = TempDir::new("reader");
    let marker = scratch.join("started");
    Redlock::without_url()
        .args(["--url", &reader, "run", "--key", "job", "--ttl", "1s"])
        .args(["--", "touch"])
        .arg(&marker)
        .exits_with(77)
        .error_mentions(says::DENIED);
    assert!(!marker.exists(), "the command ran");
    assert!(!server.exists("job"));
}

/// Runs once under prefix `a:` (keys `x` and `y`, via `REDLOCK_PREFIX`) and once under `b:`
/// (key `z`, via `--prefix`), and leaves `a:x` held by `holder`.
fn locks_under_two_prefixes(server: &RedisServer) -> Running {
    Redlock::new(server)
        .env("REDLOCK_PREFIX", "a:")
        .args(["run", "--key", "y", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    Redlock::new(server)
        .args([
            "--prefix", "b:", "run", "--key", "z", "--ttl", "1s", "--", "true",
        ])
        .exits_with(0);
    let mut holder = Redlock::new(server)
        .env("REDLOCK_PREFIX", "a:")
        .args(["run", "--key", "x", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    holder
}

/// The `key` of every lock `status --all --json` lists.
fn listed_keys(server: &RedisServer, prefix: &str) -> Vec<String> {
    let document = status_document(server, &["--all", "--prefix", prefix], 0);
    document
        .items("locks")
        .iter()
        .map(|lock| lock.str("key").to_owned())
        .collect()
}

#[test]
fn status_all_lists_the_locks_under_its_prefix_only() {
    let server = RedisServer::start();
    let holder = locks_under_two_prefixes(&server);

    let a = Redlock::new(&server)
        .args(["status", "--all", "--prefix", "a:"])
        .exits_with(0);
    line(&a, "a:x: held by ");
    line(&a, "a:y: free");
    expect_not_on_stdout(&a, "b:z");

    let b = Redlock::new(&server)
        .env("REDLOCK_PREFIX", "b:")
        .args(["status", "--all"])
        .exits_with(0);
    line(&b, "b:z: free");
    expect_not_on_stdout(&b, "a:x");
    expect_not_on_stdout(&b, "a:y");

    assert_eq!(listed_keys(&server, "a:"), ["x", "y"]);
    assert_eq!(listed_keys(&server, "b:"), ["z"]);
    finish(holder);
}

#[test]
fn status_all_under_a_prefix_without_locks_exits_0() {
    let server = RedisServer::start();
    let holder = locks_under_two_prefixes(&server);
    assert!(listed_keys(&server, "c:").is_empty());
    finish(holder);
}

#[test]
fn status_all_uses_scan_and_never_keys() {
    let server = RedisServer::start();
    let holder = locks_under_two_prefixes(&server);
    let _: () = server.query(&["CONFIG", "RESETSTAT"]);
    Redlock::new(&server)
        .args(["status", "--all", "--prefix", "a:"])
        .exits_with(0);
    let stats = server.info("commandstats");
    assert!(
        stats.contains_key("cmdstat_scan"),
        "status --all did not SCAN: {stats:?}"
    );
    assert!(
        !stats.contains_key("cmdstat_keys"),
        "status --all called KEYS: {stats:?}"
    );
    finish(holder);
}

#[test]
fn nothing_a_run_writes_lives_without_a_ttl() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    let keys = LockKeys::of("job");
    let pttl = |key: &str| server.query::<i64>(&["PTTL", key]);
    assert_eq!(pttl(&keys.lock), -2, "the lock outlived the run");
    assert_eq!(pttl(&keys.holder), -2, "the holder record outlived the run");
    for name in ["stats", "audit", "fence"] {
        let key = companion_key("job", name);
        assert!(
            pttl(&key) > 0,
            "{key} has PTTL {}: it would live forever",
            pttl(&key)
        );
    }
    let keys_left: Vec<String> = server.query(&["KEYS", "*"]);
    for key in keys_left {
        assert!(pttl(&key) > 0, "{key} would live forever");
    }
}

#[test]
fn warm_run_talks_to_redis_in_two_commands_acquire_and_release() {
    let server = RedisServer::start();
    // The first run loads the scripts; from then on each is called by its SHA.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--", "true"])
        .exits_with(0);
    let mut monitor = Monitor::start(&server);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "--", "true"])
        .exits_with(0);
    let commands = monitor.commands_so_far(&server);
    let sent: Vec<_> = commands.iter().filter(|c| !c.is_from_script()).collect();
    let names: Vec<String> = sent.iter().map(|c| c.args[0].to_uppercase()).collect();
    assert_eq!(names, ["EVALSHA", "EVALSHA"], "a run sent: {sent:#?}");
    assert!(
        sent.iter().all(|c| c.mentions("job")),
        "a command did not name the lock: {sent:#?}"
    );
    assert_ne!(
        sent[0].args[1], sent[1].args[1],
        "acquire and release ran one script"
    );
}

#[test]
fn a_companion_key_of_another_type_does_not_hide_the_other_locks_nor_read_as_free() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "good", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    let _: () = server.query(&["SET", "{bad}:redlock:fence", "1"]);
    let _: () = server.query(&["SET", "{bad}:redlock:stats", "not a hash"]);
    let outcome = Redlock::new(&server)
        .args(["status", "good", "bad"])
        .exits_with(78);
    assert!(outcome.stdout.contains("good: free"), "{outcome}");
    assert!(
        outcome.stdout.contains("bad: UNKNOWN: could not be read"),
        "{outcome}"
    );
    assert!(!outcome.stdout.contains("bad: free"), "{outcome}");
    outcome.error_mentions(&["{bad}:redlock:stats"]);
    outcome.error_mentions(says::WRONG_TYPE);
    // Every lock under the prefix is still listed, the unreadable one as such.
    let all = Redlock::new(&server)
        .args(["status", "--all", "--json"])
        .exits_with(78);
    let document = Json::parse(all.stdout.trim_end()).expect("a JSON document");
    let states: Vec<(&str, &str)> = document
        .items("locks")
        .iter()
        .map(|l| (l.str("key"), l.str("state")))
        .collect();
    assert!(states.contains(&("good", "free")), "{all}");
    assert!(states.contains(&("bad", "unknown")), "{all}");
}

#[test]
fn status_into_a_pipe_that_closes_early_does_not_panic() {
    let server = RedisServer::start();
    for key in ["a", "b", "c"] {
        Redlock::new(&server)
            .args(["run", "--key", key, "--ttl", "1s", "--", "true"])
            .exits_with(0);
    }
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} --url {} status --all | true; echo ${{PIPESTATUS[0]}}",
            env!("CARGO_BIN_EXE_redlock"),
            server.url()
        ))
        .output()
        .expect("bash");
    let status = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(
        status,
        "0",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `redlock acquire --key KEY` as uid 4242, which the password file does not list, with the
/// given environment; returns the user the holder record names.
fn recorded_user_of_uid_4242(server: &RedisServer, key: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid", "4242", "--regid", "4242", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_redlock"))
        .args([
            "--url",
            &server.url(),
            "acquire",
            "--key",
            key,
            "--ttl",
            "30s",
        ])
        .env_remove("USER")
        .env_remove("LOGNAME");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd.output().expect("setpriv runs (util-linux)");
    assert!(
        out.status.success(),
        "acquire as uid 4242: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.holder_record(key).remove("user").unwrap_or_default()
}

#[test]
fn a_user_the_password_file_does_not_know_is_named_by_user_or_logname_then_by_uid() {
    let server = RedisServer::start();
    assert_eq!(
        recorded_user_of_uid_4242(&server, "a", &[("USER", "ldap-ann"), ("LOGNAME", "x")]),
        "ldap-ann"
    );
    assert_eq!(
        recorded_user_of_uid_4242(&server, "b", &[("LOGNAME", "ldap-bob")]),
        "ldap-bob"
    );
    assert_eq!(recorded_user_of_uid_4242(&server, "c", &[]), "uid 4242");
}

/// A label and a pause reason with a newline and an escape character: status shows each on
/// its own line with those characters escaped the way `log` does, and so does a refused run's
/// busy line.
#[test]
fn recorded_values_with_control_characters_show_escaped_on_one_line() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "30s",
            "--label",
            "lab\nfake: line\x1b[2K",
            "-c",
            child::HOLD,
        ])
        .spawn();
    holder.expect_line("ready");
    Redlock::new(&server)
        .args(["pause", "job", "--reason", "r\nLINE2\x1b[31m"])
        .exits_with(0);
    let outcome = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    expect_not_on_stdout(&outcome, "\x1b");
    expect_not_on_stdout(&outcome, "\nfake");
    expect_not_on_stdout(&outcome, "\nLINE2");
    expect_contains(
        &outcome,
        line(&outcome, "command "),
        r"lab\nfake: line\x1b[2K",
    );
    expect_contains(
        &outcome,
        line(&outcome, "paused "),
        r#": "r\nLINE2\x1b[31m""#,
    );
    let busy = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(75);
    if busy.stderr.contains('\x1b') || busy.stderr.contains("\nLINE2") {
        busy.fail("the busy line shows the reason raw");
    }
    if !busy.stderr.contains(r#": "r\nLINE2\x1b[31m""#) {
        busy.fail("the busy line shows the reason escaped");
    }
    finish(holder);
}
