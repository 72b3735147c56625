//! `redlock run`: taking the lock, what the command sees, and how it is run.

use std::time::Duration;

use crate::support::{
    LockKeys, Monitor, RedisServer, Redlock, child, companion_key, host_name, is_uuid_v4,
};

#[test]
fn command_runs_and_its_success_is_redlocks_success() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "echo", "hello"])
        .exits_with(0);
    assert_eq!(outcome.stdout, "hello\n");
}

#[test]
fn child_sees_the_key_without_the_prefix() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "--prefix", "staging:", "run", "--key", "nightly", "--ttl", "1s",
        ])
        .args(["-c", child::PRINT_LOCK_ENV])
        .exits_with(0);
    assert_eq!(outcome.printed("key"), "nightly");
}

#[test]
fn child_sees_a_uuid_v4_token() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::PRINT_LOCK_ENV,
        ])
        .exits_with(0);
    let token = outcome.printed("token");
    assert!(is_uuid_v4(&token), "token {token:?} is not a UUID v4");
}

#[test]
fn token_in_the_environment_is_the_value_of_the_lock_key() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "30s",
            "-c",
            child::HOLD_AND_PRINT_TOKEN,
        ])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    assert_eq!(server.get("job"), Some(token));
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn lock_key_has_the_ttl_as_its_expiry() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let pttl = server.pttl("job").expect("the lock key has an expiry");
    assert!(
        pttl > Duration::from_secs(20) && pttl <= Duration::from_secs(30),
        "PTTL {pttl:?} is not close to the 30s TTL"
    );
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn fence_is_a_decimal_that_grows_strictly_across_runs() {
    let server = RedisServer::start();
    let fences: Vec<i64> = (0..3)
        .map(|_| {
            let outcome = Redlock::new(&server)
                .args([
                    "run",
                    "--key",
                    "job",
                    "--ttl",
                    "1s",
                    "-c",
                    child::PRINT_LOCK_ENV,
                ])
                .exits_with(0);
            outcome.printed_fence()
        })
        .collect();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences {fences:?} do not grow strictly"
    );
}

#[test]
fn fence_counter_in_redis_matches_the_childs_fence() {
    let server = RedisServer::start();
    let keys = LockKeys::of("job");
    let outcome = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            child::PRINT_LOCK_ENV,
        ])
        .exits_with(0);
    assert_eq!(server.get(&keys.fence), Some(outcome.printed("fence")));
    // It lives as long as the records after the last take (docs/design.md, "Integrity").
    let kept = server.pttl(&keys.fence).expect("the fence counter expires");
    assert!(
        kept > Duration::from_secs(29 * 24 * 3600),
        "the fence counter expires in {kept:?}"
    );
}

#[test]
fn holder_record_describes_the_running_command() {
    let server = RedisServer::start();
    let keys = LockKeys::of("job");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "30s", "-c"])
        .arg(r#"echo "fence=$REDLOCK_FENCE"; echo "child $$"; echo ready; read _ || true"#)
        .spawn();
    let fence = holder.expect_line_starting("fence=");
    let child_pid = holder.expect_pid("child");
    holder.expect_line("ready");

    let record = server.holder_record("job");
    for field in ["host", "pid", "user", "cmd", "started", "ttl", "fence"] {
        assert!(
            record.contains_key(field),
            "holder record lacks {field}: {record:?}"
        );
    }
    assert_eq!(record["host"], host_name());
    assert!(
        [holder.pid().to_string(), child_pid.to_string()].contains(&record["pid"]),
        "holder pid {} is neither redlock's ({}) nor the command's ({child_pid})",
        record["pid"],
        holder.pid()
    );
    assert_eq!(record["fence"], fence);
    assert!(
        server.pttl(&keys.holder).is_some(),
        "the holder record must expire with the lock"
    );
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn prefix_is_prepended_to_the_key_in_redis() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args([
            "--prefix", "staging:", "run", "--key", "job", "--ttl", "30s",
        ])
        .args(["-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    assert!(server.exists("staging:job"), "staging:job is not held");
    assert!(!server.exists("job"), "the unprefixed key was written");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn prefix_can_come_from_redlock_prefix() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .env("REDLOCK_PREFIX", "env:")
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(server.exists(&companion_key("env:job", "fence")));
    assert!(!server.exists(&companion_key("job", "fence")));
}

#[test]
fn companion_keys_share_the_lock_keys_hash_tag() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "a{t}b", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(
        server.exists("a{t}b:redlock:fence"),
        "a{{t}}b:redlock:fence missing"
    );
    assert!(!server.exists("{a{t}b}:redlock:fence"));
}

#[test]
fn acquire_is_a_single_round_trip() {
    let server = RedisServer::start();
    // A first run loads whatever scripts redlock uses, so the watched run shows the steady
    // state rather than a one-off script load.
    Redlock::new(&server)
        .args(["run", "--key", "one-trip", "--ttl", "30s", "--", "true"])
        .exits_with(0);
    let mut monitor = Monitor::start(&server);
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "one-trip",
            "--ttl",
            "30s",
            "-c",
            child::HOLD,
        ])
        .spawn();
    holder.expect_line("ready");
    let commands = monitor.commands_so_far(&server);
    let sent: Vec<_> = commands
        .iter()
        .filter(|c| !c.is_from_script() && c.mentions("one-trip"))
        .collect();
    assert_eq!(
        sent.len(),
        1,
        "acquiring sent these commands naming the lock: {sent:#?}"
    );
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn global_flags_may_follow_the_subcommand() {
    let server = RedisServer::start();
    Redlock::without_url()
        .args(["run", "--key", "job", "--ttl", "1s", "--url", &server.url()])
        .args(["--", "true"])
        .exits_with(0);
    assert!(server.exists(&companion_key("job", "fence")));
}

#[test]
fn url_can_come_from_redlock_url() {
    let server = RedisServer::start();
    Redlock::without_url()
        .env("REDLOCK_URL", server.url())
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(server.exists(&companion_key("job", "fence")));
}

#[test]
fn url_flag_wins_over_redlock_url() {
    let flagged = RedisServer::start();
    let from_env = RedisServer::start();
    Redlock::new(&flagged)
        .env("REDLOCK_URL", from_env.url())
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(0);
    assert!(flagged.exists(&companion_key("job", "fence")));
    assert!(!from_env.exists(&companion_key("job", "fence")));
}

#[test]
fn unix_socket_url_works() {
    let server = RedisServer::start();
    Redlock::without_url()
        .args([
            "--url",
            &server.unix_url(),
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(0);
    assert!(server.exists(&companion_key("job", "fence")));
}

#[test]
fn shell_command_runs_through_sh() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "echo $((1+2))"])
        .exits_with(0);
    assert_eq!(outcome.stdout, "3\n");
}

#[test]
fn command_after_double_dash_gets_its_arguments_verbatim() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--"])
        .args(["printf", r"%s\n", "a b", "$HOME", "--ttl"])
        .exits_with(0);
    assert_eq!(outcome.stdout, "a b\n$HOME\n--ttl\n");
}

#[test]
fn child_reads_redlocks_stdin() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            r#"read line; echo "got $line""#,
        ])
        .stdin(b"hello\n")
        .exits_with(0);
    assert_eq!(outcome.stdout, "got hello\n");
}

#[test]
fn child_stderr_appears_on_redlocks_stderr() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "echo oops >&2"])
        .exits_with(0);
    assert!(
        outcome.stderr.lines().any(|line| line == "oops"),
        "the child's stderr is missing\n{outcome}"
    );
}

#[test]
fn child_inherits_the_environment_with_the_lock_variables_replaced() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .env("REDLOCK_TEST_INHERITED", "a=b c")
        .env("REDLOCK_FENCE", "1")
        .env("REDLOCK_KEY", "stale")
        .args(["run", "--key", "job", "--ttl", "1s", "-c", "env"])
        .exits_with(0);
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    let named = |name: &str| -> Vec<&str> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .collect()
    };
    assert_eq!(named("REDLOCK_TEST_INHERITED"), ["a=b c"], "{outcome}");
    assert_eq!(named("REDLOCK_KEY"), ["job"], "{outcome}");
    let fences = named("REDLOCK_FENCE");
    assert_eq!(fences.len(), 1, "{outcome}");
    assert_ne!(fences[0], "1", "{outcome}");
    assert_eq!(named("REDLOCK_TOKEN").len(), 1, "{outcome}");
}
