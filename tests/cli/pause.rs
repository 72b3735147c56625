//! `redlock pause` / `resume`: a paused key refuses new runs and acquires with the busy status
//! and a line naming who paused it, why and until when; holders and nested runs are left alone;
//! `--for` lifts by itself; `--all` covers every key under the prefix; `--drain` waits for the
//! running holders; waiters keep their place until the pause is lifted.

use std::time::{Duration, Instant};

use crate::support::json::Document;
use crate::support::{
    RedisServer, Redlock, child, companion_key, host_name, lock_status, wait_until,
};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

fn pause(server: &RedisServer, args: &[&str]) {
    Redlock::new(server).arg("pause").args(args).exits_with(0);
}

fn run_quick(server: &RedisServer, key: &str) -> crate::support::Outcome {
    Redlock::new(server)
        .args(["run", "--key", key, "--ttl", "5s", "--", "true"])
        .run()
}

#[test]
fn a_paused_key_refuses_new_runs_and_acquires_naming_who_why_and_until_when() {
    let server = RedisServer::start();
    pause(
        &server,
        &["job", "--for", "1h", "--reason", "db migration 42"],
    );
    let refused = run_quick(&server, "job");
    refused.expect_code(75);
    refused.error_mentions(&["paused"]);
    for word in ["db migration 42", "until", &host_name()] {
        assert!(
            refused.error_line().contains(word),
            "the refusal does not say {word:?}\n{refused}"
        );
    }
    Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--conflict-exit-code",
            "3",
        ])
        .args(["--", "true"])
        .exits_with(3);
    Redlock::new(&server)
        .args(["acquire", "--key", "job", "--ttl", "5s"])
        .exits_with(75)
        .error_mentions(&["paused"]);
    assert!(!server.exists("job"), "a paused key was taken");
    // Each refusal counts as busy; nothing ran.
    let stats = server.lock_record("job");
    assert_eq!(
        stats.get("busy").map(String::as_str),
        Some("3"),
        "{stats:?}"
    );
    assert_eq!(stats.get("runs"), None, "{stats:?}");
    // Other keys are not paused.
    run_quick(&server, "other").expect_code(0);
}

#[test]
fn a_pause_leaves_the_running_holder_and_its_nested_runs_alone() {
    let server = RedisServer::start();
    // The holder's command waits, then runs a nested run of its own key.
    let script =
        format!(r#"echo ready; read _; "{BIN}" run --key job --ttl 5s -- sh -c 'echo nested-ran'"#);
    let mut holder = Redlock::new(&server)
        .env("REDLOCK_URL", server.url())
        .args(["run", "--key", "job", "--ttl", "3s", "-c", &script])
        .spawn();
    holder.expect_line("ready");
    pause(&server, &["job", "--reason", "maintenance"]);
    // Renewals go on while paused (several TTL/3 periods).
    let token = server.get("job").expect("held");
    run_quick(&server, "job").expect_code(75);
    wait_until("a renewal after the pause", Duration::from_secs(10), || {
        let record = server.holder_record("job");
        let field = |name| record.get(name).and_then(|v| v.parse::<i64>().ok());
        (field("renewed")
            .zip(field("started"))
            .is_some_and(|(r, s)| r > s + 1500))
        .then_some(())
    });
    assert_eq!(server.get("job").as_deref(), Some(token.as_str()));
    holder.close_stdin();
    let outcome = holder.exits_with(0);
    assert!(outcome.stdout.contains("nested-ran"), "{outcome}");
}

#[test]
fn a_pause_for_a_while_lifts_by_itself() {
    let server = RedisServer::start();
    pause(&server, &["job", "--for", "1s"]);
    run_quick(&server, "job").expect_code(75);
    wait_until("the pause to lapse", Duration::from_secs(10), || {
        (!lock_status(&server, "job")["paused"]
            .as_bool()
            .unwrap_or(true))
        .then_some(())
    });
    run_quick(&server, "job").expect_code(0);
    // The lapsed record is kept (for `check`), marked as no longer in force.
    let status = lock_status(&server, "job");
    assert_eq!(status["pauses"][0]["in_force"], false, "{status}");
}

#[test]
fn resume_lifts_the_pause_and_the_waiter_that_kept_its_place_goes_ahead() {
    let server = RedisServer::start();
    pause(&server, &["job"]);
    let waiter = Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--wait", "60s", "--", "echo", "waited",
        ])
        .spawn();
    wait_until("the waiter to queue", Duration::from_secs(10), || {
        (server.query::<usize>(&["ZCARD", &companion_key("job", "queue")]) == 1).then_some(())
    });
    let resumed = Redlock::new(&server).args(["resume", "job"]).exits_with(0);
    assert!(resumed.stdout.contains("resumed job"), "{resumed}");
    let outcome = waiter.exits_with(0);
    assert!(outcome.stdout.contains("waited"), "{outcome}");
    // Nothing left to resume: 1, a warning.
    Redlock::new(&server)
        .args(["resume", "job"])
        .exits_with(1)
        .error_mentions(&["not paused"]);
}

#[test]
fn a_waiter_whose_wait_runs_out_while_paused_is_busy() {
    let server = RedisServer::start();
    pause(&server, &["job", "--reason", "later"]);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--wait", "1s", "--", "true",
        ])
        .exits_with(75)
        .error_mentions(&["paused"]);
    assert_eq!(
        server.query::<usize>(&["ZCARD", &companion_key("job", "queue")]),
        0,
        "the waiter did not leave the queue"
    );
}

#[test]
fn pause_all_refuses_every_key_under_the_prefix_and_resume_all_lifts_it() {
    let server = RedisServer::start();
    let under = |key: &str| {
        Redlock::new(&server)
            .args([
                "--prefix", "prod:", "run", "--key", key, "--ttl", "5s", "--", "true",
            ])
            .run()
    };
    under("a").expect_code(0);
    Redlock::new(&server)
        .args(["--prefix", "prod:", "pause", "--all", "--reason", "switch"])
        .exits_with(0);
    // Also a key that never ran, and one with its own pause too.
    pause(&server, &["--prefix", "prod:", "b"]);
    for key in ["a", "never"] {
        let refused = under(key);
        refused.expect_code(75);
        refused.error_mentions(&["every lock under its prefix"]);
    }
    // A key's own pause is named first.
    let own = under("b");
    own.expect_code(75);
    own.error_mentions(&["paused by"]);
    // Another prefix is not paused.
    Redlock::new(&server)
        .args([
            "--prefix", "staging:", "run", "--key", "a", "--ttl", "5s", "--", "true",
        ])
        .exits_with(0);
    // Resuming one key leaves the prefix-wide pause, and says so.
    Redlock::new(&server)
        .args(["--prefix", "prod:", "resume", "a"])
        .exits_with(1)
        .last_error_mentions(&["resume --all"]);
    let resumed = Redlock::new(&server)
        .args(["--prefix", "prod:", "resume", "--all"])
        .exits_with(0);
    assert!(resumed.stdout.contains("prod:b"), "{resumed}");
    for key in ["a", "b", "never"] {
        under(key).expect_code(0);
    }
}

/// `resume --all` wakes the head of every queue under the prefix at once, as `resume KEY` wakes
/// its own: the waiters queued under the prefix-wide pause go ahead well before their own next
/// attempt (5 s apart while paused).
#[test]
fn resume_all_wakes_the_waiters_of_every_queued_lock_at_once() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["--prefix", "p:", "pause", "--all"])
        .exits_with(0);
    let keys = ["a", "b"];
    let waiters: Vec<_> = keys
        .iter()
        .map(|key| {
            Redlock::new(&server)
                .args(["--prefix", "p:", "run", "--key", key, "--ttl", "5s"])
                .args(["--wait", "60s", "--", "echo", "ran"])
                .spawn()
        })
        .collect();
    for key in keys {
        let queue = companion_key(&format!("p:{key}"), "queue");
        wait_until("the waiter to queue", Duration::from_secs(10), || {
            (server.query::<usize>(&["ZCARD", &queue]) == 1).then_some(())
        });
    }
    let resumed = Instant::now();
    Redlock::new(&server)
        .args(["--prefix", "p:", "resume", "--all"])
        .exits_with(0);
    for mut waiter in waiters {
        let ran = waiter.expect_line("ran");
        assert!(
            ran - resumed < Duration::from_millis(2500),
            "a waiter went ahead {:?} after resume --all: at its own next attempt, not woken",
            ran - resumed
        );
        waiter.exits_with(0);
    }
}

/// A pause or resume that the server would refuse half way (here an audit log of another type;
/// an ACL lacking a command is in acl_failures.rs) is refused before anything is written: the
/// status is the cause's, and the pause is as it was, not in force although `pause` failed.
#[test]
fn a_pause_or_resume_the_server_refuses_changes_nothing() {
    let server = RedisServer::start();
    for (args, lock) in [(&["job"][..], "job"), (&["--all"][..], "")] {
        let log = companion_key(lock, "audit");
        let record = companion_key(lock, "paused");
        let _: () = server.query(&["SET", &log, "not a list"]);
        let refused = Redlock::new(&server).arg("pause").args(args).exits_with(78);
        refused.error_mentions(&[&log]);
        refused.error_mentions(&["nothing was changed"]);
        assert!(
            !server.exists(&record),
            "{args:?}: a refused pause is in force"
        );
        let _: i64 = server.query(&["DEL", &log]);
        run_quick(&server, "job").expect_code(0);
        Redlock::new(&server).arg("pause").args(args).exits_with(0);
        let _: i64 = server.query(&["DEL", &log]);
        let _: () = server.query(&["SET", &log, "not a list"]);
        Redlock::new(&server)
            .arg("resume")
            .args(args)
            .exits_with(78)
            .error_mentions(&["nothing was changed"]);
        assert!(
            server.exists(&record),
            "{args:?}: a refused resume lifted the pause"
        );
        let _: i64 = server.query(&["DEL", &log]);
        Redlock::new(&server).arg("resume").args(args).exits_with(0);
    }
}

/// pause and resume act on the pause records alone (docs/design.md, "Data layout 1"): a lock
/// whose fence counter is of a later layout, or whose other records hold another type, is
/// resumed with 0 and its one stdout line (1 and one warning when it was not paused).
#[test]
fn resume_acts_on_the_pause_records_whatever_the_lock_s_other_records_hold() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["acquire", "--key", "v", "--ttl", "60s"])
        .exits_with(0);
    let _: () = server.query(&["SET", &companion_key("v", "fence"), "2:1", "KEEPTTL"]);
    for name in ["stats", "queue", "once", "waiters"] {
        let _: () = server.query(&["SET", &companion_key("w", name), "not a record"]);
    }
    for key in ["v", "w"] {
        pause(&server, &[key]);
        let resumed = Redlock::new(&server).args(["resume", key]).exits_with(0);
        assert_eq!(resumed.stdout, format!("resumed {key}\n"), "{resumed}");
        assert_eq!(resumed.stderr, "", "{resumed}");
        let again = Redlock::new(&server).args(["resume", key]).exits_with(1);
        again.error_mentions(&["not paused"]);
        again.error_does_not_mention("layout");
    }
    // And all at once, the prefix-wide pause with them (which wakes the queued locks: w's
    // queue is of another type, which the wake passes over).
    pause(&server, &["--all"]);
    pause(&server, &["v", "w"]);
    let resumed = Redlock::new(&server)
        .args(["resume", "--all"])
        .exits_with(0);
    assert_eq!(
        resumed.stdout, "resumed every lock under prefix \"\"\nresumed v\nresumed w\n",
        "{resumed}"
    );
    assert_eq!(resumed.stderr, "", "{resumed}");
}

#[test]
fn drain_waits_for_the_running_holder_and_says_who_it_is() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let mut drain = Redlock::new(&server)
        .args(["pause", "job", "--drain", "60s"])
        .spawn();
    let line = drain.expect_line_starting("draining: 1 still running: job held by ");
    assert!(line.contains(&host_name()), "{line}");
    holder.close_stdin();
    holder.exits_with(0);
    let outcome = drain.exits_with(0);
    assert!(outcome.stdout.contains("drained"), "{outcome}");
    run_quick(&server, "job").expect_code(75);
}

/// `pause --all --drain` over many locks reads each once, then only the one that runs: its
/// polls cost the server a lock's reads, not the prefix's. Before it says drained it reads
/// them all once more, and waits for a holder that started anyway (a client that does not
/// read pauses).
#[test]
fn drain_all_reads_every_lock_once_then_only_those_running() {
    const LOCKS: usize = 2000;
    let server = RedisServer::start();
    let mut pipe = redis::pipe();
    for n in 0..LOCKS {
        pipe.cmd("SET")
            .arg(crate::support::companion_key(&format!("idle{n}"), "fence"))
            .arg("1")
            .ignore();
    }
    let _: () = pipe
        .query(&mut server.client())
        .expect("make the idle locks");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let mut drain = Redlock::new(&server)
        .args(["pause", "--all", "--drain", "60s"])
        .spawn();
    drain.expect_line_starting("draining: 1 still running: job held by ");
    // The pass over every lock is done; from here the server's every command is watched.
    let monitor = Monitor::start(&server);
    crate::support::wait_until("three polls of job", Duration::from_secs(30), || {
        (monitor.count("\"PTTL\" \"job\"") >= 3).then_some(())
    });
    let idle_reads = monitor.count("idle");
    assert_eq!(
        idle_reads, 0,
        "the idle locks were read again while job ran"
    );
    // A client that does not read pauses takes an idle lock: the last pass finds it.
    let _: () = server.query(&["SET", "idle5", "foreign", "PX", "60000"]);
    holder.close_stdin();
    holder.exits_with(0);
    drain.expect_line_starting("draining: 1 still running: idle5 ");
    let _: i64 = server.query(&["DEL", "idle5"]);
    let outcome = drain.exits_with(0);
    assert!(outcome.stdout.contains("drained"), "{outcome}");
    run_quick(&server, "idle7").expect_code(75);
}

/// The server's commands as MONITOR reports them, from a connection of the test's own.
struct Monitor {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Monitor {
    fn start(server: &RedisServer) -> Monitor {
        use std::io::{BufRead, BufReader, Write};
        let mut stream =
            std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect MONITOR");
        stream.write_all(b"MONITOR\r\n").expect("send MONITOR");
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        reader.read_line(&mut ok).expect("MONITOR's +OK");
        assert!(ok.starts_with("+OK"), "MONITOR answered {ok:?}");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        // Ends when the server does (the test's end kills it).
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                sink.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(line);
            }
        });
        Monitor { lines }
    }

    /// How many commands so far mention `part`.
    fn count(&self, part: &str) -> usize {
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.iter().filter(|l| l.contains(part)).count()
    }
}

#[test]
fn drain_exits_busy_naming_the_holders_that_still_run_and_leaves_them_alone() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let outcome = Redlock::new(&server)
        .args(["pause", "job", "--drain", "1s"])
        .exits_with(75);
    outcome.last_error_mentions(&["still running", &host_name()]);
    assert!(server.exists("job"), "the holder was touched");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn drain_waits_for_shared_holders_but_not_for_one_whose_command_ended() {
    let server = RedisServer::start();
    // One shared holder ended, its hold kept by --hold-at-least; another still runs.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--shared"])
        .args(["--hold-at-least", "30s", "--", "true"])
        .exits_with(0);
    let mut holder = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--shared",
            "-c",
            child::HOLD,
        ])
        .spawn();
    holder.expect_line("ready");
    let status = Redlock::new(&server).args(["status", "job"]).exits_with(0);
    assert!(
        status
            .stdout
            .contains("command finished (kept by --hold-at-least)"),
        "{status}"
    );
    let metrics = Redlock::new(&server).args(["metrics", "job"]).exits_with(0);
    assert!(
        metrics.stdout.contains("redlock_holders{key=\"job\"} 1\n"),
        "{metrics}"
    );
    let mut drain = Redlock::new(&server)
        .args(["pause", "job", "--drain", "60s"])
        .spawn();
    let line = drain.expect_line_starting("draining: 1 still running: job held shared by ");
    assert!(line.contains(&format!("pid {},", holder.pid())), "{line}");
    holder.close_stdin();
    holder.exits_with(0);
    let outcome = drain.exits_with(0);
    assert!(outcome.stdout.contains("drained"), "{outcome}");
    // The kept hold is still there: drained means nothing runs, not that the key is free.
    assert_eq!(lock_status(&server, "job").str("state"), "held");
}

#[test]
fn status_shows_the_pause_in_text_and_json() {
    let server = RedisServer::start();
    pause(&server, &["job", "--reason", "upgrade"]);
    let text = Redlock::new(&server).args(["status", "job"]).exits_with(1);
    assert!(text.stdout.contains("paused by"), "{text}");
    assert!(text.stdout.contains("until resumed"), "{text}");
    let status = lock_status(&server, "job");
    assert_eq!(status["paused"], true, "{status}");
    assert_eq!(status.str("pauses.0.reason"), "upgrade");
    assert_eq!(status.str("pauses.0.scope"), "key");
    assert!(status.expect("pauses.0.until_ms").is_null(), "{status}");
}

#[test]
fn bad_pause_arguments_are_usage_errors_that_write_nothing() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["pause", "job", "--for", "0s"])
        .exits_with(64)
        .error_mentions(&["--for"]);
    Redlock::new(&server)
        .args(["pause", "job", "--for", "5"])
        .exits_with(64)
        .error_mentions(&["--for"]);
    Redlock::new(&server).args(["pause"]).exits_with(64);
    assert!(!server.exists(&companion_key("job", "paused")));
}

#[test]
fn a_quorum_pauses_on_every_node_and_a_node_down_changes_nothing() {
    let mut quorum = crate::support::RedisQuorum::start(3);
    quorum
        .redlock()
        .args(["pause", "job", "--reason", "quorum"])
        .exits_with(0);
    for node in quorum.nodes() {
        assert!(node.exists(&companion_key("job", "paused")));
    }
    quorum.node_mut(0).kill9();
    quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(75)
        .error_mentions(&["quorum"]);
    let metrics = quorum.redlock().args(["metrics", "job"]).exits_with(0);
    assert!(
        metrics.stdout.contains("redlock_paused{key=\"job\"} 1"),
        "{metrics}"
    );
    quorum.redlock().args(["resume", "job"]).exits_with(0);
    quorum
        .redlock()
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
}
