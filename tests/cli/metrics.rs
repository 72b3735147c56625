//! `redlock metrics` and `run --metrics-file`: Prometheus text exposition whose values follow
//! real runs, that promtool accepts, written atomically when a run ends.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{RedisServer, Redlock, TempDir, child, wait_until};

/// `promtool check metrics` on `text`: promtool's verdict, or a panic when it is missing
/// (`.ci/run` installs Debian's `prometheus` package, which ships it).
#[track_caller]
fn expect_promtool_accepts(text: &str) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is not installed (apt-get install prometheus; .ci/run does)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let out = promtool.wait_with_output().expect("promtool ran");
    assert!(
        out.status.success(),
        "promtool rejected the metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The samples of an exposition, `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("sample");
            (name.to_owned(), value.parse().expect("number"))
        })
        .collect()
}

fn metrics(server: &RedisServer, args: &[&str]) -> String {
    let outcome = Redlock::new(server).arg("metrics").args(args).exits_with(0);
    expect_promtool_accepts(&outcome.stdout);
    outcome.stdout
}

#[track_caller]
fn value(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("no sample {name} in {samples:#?}"))
}

#[test]
fn metrics_follow_real_runs_and_pass_promtool() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "3s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let during = samples(&metrics(&server, &["job"]));
    assert_eq!(value(&during, "redlock_held{key=\"job\"}"), 1.0);
    assert_eq!(value(&during, "redlock_holders{key=\"job\"}"), 1.0);
    let ttl = value(&during, "redlock_ttl_seconds{key=\"job\"}");
    assert!(ttl > 0.0 && ttl <= 3.0, "{ttl}");
    assert!(value(&during, "redlock_lease_age_seconds{key=\"job\"}") >= 0.0);
    assert!(value(&during, "redlock_fence{key=\"job\"}") > 0.0);
    // A refused run, then the holder's lease is forced away: lease lost.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "3s", "--", "true"])
        .exits_with(75);
    Redlock::new(&server)
        .args(["release", "job", "--force"])
        .exits_with(0);
    holder.exits_with(76);
    Redlock::new(&server)
        .args([
            "run", "--key", "job", "--ttl", "3s", "--", "sh", "-c", "exit 3",
        ])
        .exits_with(3);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "3s", "--", "true"])
        .exits_with(0);
    let after = samples(&metrics(&server, &["job"]));
    for (name, expected) in [
        ("redlock_held", 0.0),
        ("redlock_holders", 0.0),
        ("redlock_ttl_seconds", 0.0),
        ("redlock_queue_length", 0.0),
        ("redlock_paused", 0.0),
        ("redlock_runs_total", 3.0),
        ("redlock_busy_total", 1.0),
        ("redlock_lease_lost_total", 1.0),
        ("redlock_failed_total", 1.0),
        ("redlock_forced_releases_total", 1.0),
        ("redlock_last_run_exit_status", 0.0),
    ] {
        assert_eq!(
            value(&after, &format!("{name}{{key=\"job\"}}")),
            expected,
            "{name}"
        );
    }
    assert_eq!(
        value(
            &after,
            "redlock_last_run_outcome{key=\"job\",outcome=\"ok\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &after,
            "redlock_last_run_outcome{key=\"job\",outcome=\"lease lost\"}"
        ),
        0.0
    );
    assert!(!after.contains_key("redlock_lease_age_seconds{key=\"job\"}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for name in [
        "redlock_last_run_start_timestamp_seconds",
        "redlock_last_success_timestamp_seconds",
    ] {
        let at = value(&after, &format!("{name}{{key=\"job\"}}"));
        assert!((now - at).abs() < 60.0, "{name} {at} vs {now}");
    }
}

#[test]
fn pause_shows_in_the_metrics_and_all_finds_every_lock() {
    let server = RedisServer::start();
    for key in ["a", "b"] {
        Redlock::new(&server)
            .args([
                "--prefix", "p:", "run", "--key", key, "--ttl", "3s", "--", "true",
            ])
            .exits_with(0);
    }
    Redlock::new(&server)
        .args(["--prefix", "p:", "pause", "b"])
        .exits_with(0);
    let all = samples(&metrics(&server, &["--prefix", "p:", "--all"]));
    assert_eq!(value(&all, "redlock_paused{key=\"p:a\"}"), 0.0);
    assert_eq!(value(&all, "redlock_paused{key=\"p:b\"}"), 1.0);
    assert_eq!(value(&all, "redlock_runs_total{key=\"p:a\"}"), 1.0);
}

#[test]
fn label_values_are_escaped_so_promtool_accepts_any_key() {
    let server = RedisServer::start();
    let key = r#"odd "quoted" \ key"#;
    Redlock::new(&server)
        .args(["run", "--key", key, "--ttl", "3s", "--", "true"])
        .exits_with(0);
    let text = metrics(&server, &[key]);
    assert!(
        text.contains(r#"redlock_runs_total{key="odd \"quoted\" \\ key"} 1"#),
        "{text}"
    );
}

/// The output is complete or absent (a textfile collector would read half a file): a lock
/// that cannot be read (a record of another type or layout, an ACL denial) or a key that is no
/// lock prints nothing on stdout, not even the HELP and TYPE lines, and fails with its status,
/// one `redlock:` line per such lock; with `--all` too.
#[test]
fn a_lock_it_cannot_read_or_no_lock_prints_nothing_and_fails_with_its_status() {
    let server = RedisServer::start();
    for key in ["good", "bad", "later"] {
        Redlock::new(&server)
            .args(["run", "--key", key, "--ttl", "3s", "--", "true"])
            .exits_with(0);
    }
    let _: () = server.query(&["DEL", "{bad}:redlock:stats"]);
    let _: () = server.query(&["SET", "{bad}:redlock:stats", "not a hash"]);
    let _: i64 = server.query(&["HSET", "{later}:redlock:stats", "v", "2"]);
    let _: i64 = server.query(&["HSET", "a-hash", "f", "v"]);
    let cases: [(&[&str], &[&str]); 5] = [
        (&["good", "bad"], &["{bad}:redlock:stats"]),
        (&["later"], &["layout \"2\""]),
        (&["a-hash"], &["a-hash holds another type"]),
        (
            &["bad", "good", "later"],
            &["{bad}:redlock:stats", "layout \"2\""],
        ),
        (&["--all"], &["{bad}:redlock:stats", "layout \"2\""]),
    ];
    for (args, named) in cases {
        let outcome = Redlock::new(&server)
            .arg("metrics")
            .args(args)
            .exits_with(78);
        assert_eq!(outcome.stdout, "", "{outcome}");
        let lines: Vec<&str> = outcome
            .stderr
            .lines()
            .filter(|l| l.starts_with("redlock:"))
            .collect();
        assert_eq!(lines.len(), named.len(), "one line per lock: {outcome}");
        for name in named {
            assert!(lines.iter().any(|l| l.contains(name)), "{name}: {outcome}");
        }
    }
    let good = metrics(&server, &["good"]);
    assert_eq!(
        value(&samples(&good), "redlock_runs_total{key=\"good\"}"),
        1.0
    );
    // A user denied the reads: 77, and nothing printed.
    server.acl_setuser(
        "peek",
        &["on", ">pw", "~*", "&*", "+@all", "-hgetall", "-hmget"],
    );
    let denied = Redlock::without_url()
        .args([
            "--url",
            &server.url_with_user("peek", "pw"),
            "metrics",
            "good",
        ])
        .exits_with(77);
    denied.error_mentions(&["permission", "noperm"]);
    assert_eq!(denied.stdout, "", "{denied}");
}

#[test]
fn the_metrics_file_appears_only_when_the_run_ends_with_its_final_record() {
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-file");
    let path = dir.join("job.prom");
    let mut run = Redlock::new(&server)
        .arg("run")
        .args(["--key", "job", "--ttl", "3s", "--metrics-file"])
        .arg(&path)
        .args(["-c", child::HOLD])
        .spawn();
    run.expect_line("ready");
    assert!(!path.exists(), "the file was written before the run ended");
    run.close_stdin();
    run.exits_with(0);
    let text = std::fs::read_to_string(&path).expect("the metrics file");
    expect_promtool_accepts(&text);
    let written = samples(&text);
    // After the release: free, and this run counted.
    assert_eq!(value(&written, "redlock_held{key=\"job\"}"), 0.0);
    assert_eq!(value(&written, "redlock_runs_total{key=\"job\"}"), 1.0);
    // Written under a temporary name and renamed: nothing else is left in the directory.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["job.prom"]);
    // A busy run writes it too (its refusal is counted).
    Redlock::new(&server).args(["pause", "job"]).exits_with(0);
    Redlock::new(&server)
        .arg("run")
        .args(["--key", "job", "--ttl", "3s", "--metrics-file"])
        .arg(&path)
        .args(["--", "true"])
        .exits_with(75);
    let written = samples(&std::fs::read_to_string(&path).unwrap());
    assert_eq!(value(&written, "redlock_busy_total{key=\"job\"}"), 1.0);
    assert_eq!(value(&written, "redlock_paused{key=\"job\"}"), 1.0);
}

#[test]
fn a_metrics_file_that_cannot_be_written_is_a_warning_not_a_new_status() {
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-file-missing");
    let path = dir.join("no-such-dir/job.prom");
    let outcome = Redlock::new(&server)
        .arg("run")
        .args(["--key", "job", "--ttl", "3s", "--metrics-file"])
        .arg(&path)
        .args(["--", "sh", "-c", "exit 5"])
        .exits_with(5);
    outcome.last_error_mentions(&["metrics-file"]);
    // The run itself went on as usual.
    wait_until("the run's record", Duration::from_secs(5), || {
        server
            .lock_record("job")
            .get("exit")
            .filter(|e| *e == "5")
            .map(|_| ())
    });
}

#[test]
fn runs_sharing_a_metrics_file_never_make_a_counter_go_backwards() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-file-shared");
    let path = dir.join("job.prom");
    let done = AtomicBool::new(false);
    let (runs, reads) = std::thread::scope(|scope| {
        // A collector reading the file as fast as it can, every read kept.
        let reader = scope.spawn(|| {
            let mut seen: Vec<(f64, f64)> = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    let s = samples(&text);
                    seen.push((
                        value(&s, "redlock_runs_total{key=\"job\"}"),
                        value(&s, "redlock_busy_total{key=\"job\"}"),
                    ));
                }
            }
            seen
        });
        // Six loops of shared runs (they hold the key together) and one of exclusive runs that
        // are often busy, all writing the one file when they end.
        let writers: Vec<_> = (0..7)
            .map(|w| {
                let (server, path) = (&server, &path);
                scope.spawn(move || {
                    for _ in 0..6 {
                        let shape: &[&str] = if w == 0 { &[] } else { &["--shared"] };
                        Redlock::new(server)
                            .args(["run", "--key", "job", "--ttl", "5s", "--metrics-file"])
                            .arg(path)
                            .args(shape)
                            .args(["--", "true"])
                            .run();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("a writer");
        }
        done.store(true, Ordering::Relaxed);
        (7 * 6, reader.join().expect("the reader"))
    });
    assert!(!reads.is_empty(), "the file was never read");
    for pair in reads.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0 && pair[1].1 >= pair[0].1,
            "a counter went backwards between two reads of the file: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    // The last write saw every run.
    let last = samples(&std::fs::read_to_string(&path).unwrap());
    let counted = value(&last, "redlock_runs_total{key=\"job\"}")
        + value(&last, "redlock_busy_total{key=\"job\"}");
    assert_eq!(counted, f64::from(runs), "{last:?}");
}

#[test]
fn a_replaced_run_is_its_own_outcome_and_counted_in_metrics_and_its_metrics_file() {
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-replaced");
    let path = dir.join("job.prom");
    let mut holder = Redlock::new(&server)
        .arg("run")
        .args(["--key", "job", "--ttl", "10s", "--metrics-file"])
        .arg(&path)
        .args(["-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let mut replacer = Redlock::replacing(&server, "job")
        .args(["-c", child::HOLD])
        .spawn();
    holder.exits_with(79);
    replacer.expect_line("ready");
    // The replaced run's own file, written at its end (the replacer has not ended yet).
    let written = std::fs::read_to_string(&path).expect("the metrics file");
    expect_promtool_accepts(&written);
    let written = samples(&written);
    assert_eq!(
        value(
            &written,
            "redlock_last_run_outcome{key=\"job\",outcome=\"replaced\"}"
        ),
        1.0
    );
    assert_eq!(value(&written, "redlock_replaced_total{key=\"job\"}"), 1.0);
    // The replacer's run is the last now; the replaced one stays counted.
    replacer.close_stdin();
    replacer.exits_with(0);
    let text = metrics(&server, &["job"]);
    expect_promtool_accepts(&text);
    let after = samples(&text);
    assert_eq!(value(&after, "redlock_replaced_total{key=\"job\"}"), 1.0);
    assert_eq!(value(&after, "redlock_failed_total{key=\"job\"}"), 0.0);
    assert_eq!(value(&after, "redlock_runs_total{key=\"job\"}"), 2.0);
    for (outcome, expected) in [("ok", 1.0), ("replaced", 0.0)] {
        assert_eq!(
            value(
                &after,
                &format!("redlock_last_run_outcome{{key=\"job\",outcome=\"{outcome}\"}}")
            ),
            expected,
            "{outcome}"
        );
    }
}

#[test]
fn a_frozen_holders_renewals_fall_behind_its_lease_and_a_lapsed_pause_shows() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "3s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let ratio = |s: &BTreeMap<String, f64>| {
        value(s, "redlock_lease_renewal_age_seconds{key=\"job\"}")
            / value(s, "redlock_lease_length_seconds{key=\"job\"}")
    };
    // A live holder renews: its renewal is younger than its hold.
    wait_until("a renewal", Duration::from_secs(10), || {
        let s = samples(&metrics(&server, &["job"]));
        assert_eq!(value(&s, "redlock_lease_length_seconds{key=\"job\"}"), 3.0);
        (value(&s, "redlock_lease_renewal_age_seconds{key=\"job\"}")
            < value(&s, "redlock_lease_age_seconds{key=\"job\"}"))
        .then_some(())
    });
    // Frozen, it stops renewing: past half its lease while the key is still held.
    holder.signal(libc::SIGSTOP);
    wait_until(
        "the renewal to fall behind",
        Duration::from_secs(10),
        || {
            let s = samples(&metrics(&server, &["job"]));
            assert_eq!(value(&s, "redlock_held{key=\"job\"}"), 1.0, "{s:#?}");
            (ratio(&s) > 0.5).then_some(())
        },
    );
    wait_until("the lease to lapse", Duration::from_secs(10), || {
        (!server.exists("job")).then_some(())
    });
    holder.signal(libc::SIGCONT);
    holder.exits_with(76);
    let free = samples(&metrics(&server, &["job"]));
    assert!(!free.contains_key("redlock_lease_renewal_age_seconds{key=\"job\"}"));
    assert!(!free.contains_key("redlock_lease_length_seconds{key=\"job\"}"));

    // A pause whose --for runs out without a resume, until the resume.
    Redlock::new(&server)
        .args(["pause", "job", "--for", "1s"])
        .exits_with(0);
    let lapsed = |s: &BTreeMap<String, f64>| value(s, "redlock_pause_lapsed{key=\"job\"}");
    let s = samples(&metrics(&server, &["job"]));
    assert_eq!(
        (value(&s, "redlock_paused{key=\"job\"}"), lapsed(&s)),
        (1.0, 0.0)
    );
    wait_until("the pause to lapse", Duration::from_secs(10), || {
        let s = samples(&metrics(&server, &["job"]));
        (value(&s, "redlock_paused{key=\"job\"}") == 0.0).then_some(s)
    });
    assert_eq!(lapsed(&samples(&metrics(&server, &["job"]))), 1.0);
    Redlock::new(&server).args(["resume", "job"]).exits_with(0);
    assert_eq!(lapsed(&samples(&metrics(&server, &["job"]))), 0.0);
}

/// A hold no redlock renews — a run whose first lease already covers its --max-runtime, a
/// script's `acquire` — has no renewal age: past half its lease it is not late, and `status`
/// does not call it NOT RENEWED either.
#[test]
fn holds_that_are_never_renewed_have_no_renewal_age() {
    let server = RedisServer::start();
    let mut capped = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "capped",
            "--ttl",
            "1m",
            "--max-runtime",
            "8s",
        ])
        .args(["--kill-after", "1s", "-c", child::HOLD])
        .spawn();
    capped.expect_line("ready");
    Redlock::new(&server)
        .args(["acquire", "--key", "scripted", "--ttl", "8s"])
        .exits_with(0);
    // Past half of either lease (about 10 s and 8 s), both still held.
    let s = wait_until("half the leases to pass", Duration::from_secs(30), || {
        let s = samples(&metrics(&server, &["capped", "scripted"]));
        let age = |k: &str| value(&s, &format!("redlock_lease_age_seconds{{key=\"{k}\"}}"));
        (age("capped") > 5.5 && age("scripted") > 4.5).then_some(s)
    });
    for key in ["capped", "scripted"] {
        assert_eq!(value(&s, &format!("redlock_held{{key=\"{key}\"}}")), 1.0);
        assert!(
            !s.contains_key(&format!(
                "redlock_lease_renewal_age_seconds{{key=\"{key}\"}}"
            )),
            "{key}: {s:#?}"
        );
        let status = Redlock::new(&server).args(["status", key]).run().stdout;
        assert!(
            status.contains("taken to last without renewals") && !status.contains("NOT RENEWED"),
            "{status}"
        );
    }
    capped.close_stdin();
    capped.exits_with(0);
}

/// A holder that dies mid-run (frozen, then killed) writes no end; once its lease lapses,
/// `metrics` reports the last run as `lease lost`, as `log` infers its end, until a later
/// run ends.
#[test]
fn a_holder_that_died_mid_run_is_the_last_run_and_lost_its_lease() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    holder.signal(libc::SIGSTOP);
    holder.kill9();
    let s = wait_until("the lease to lapse", Duration::from_secs(15), || {
        let s = samples(&metrics(&server, &["job"]));
        (value(&s, "redlock_held{key=\"job\"}") == 0.0).then_some(s)
    });
    let outcome = |s: &BTreeMap<String, f64>, o: &str| {
        value(
            s,
            &format!("redlock_last_run_outcome{{key=\"job\",outcome=\"{o}\"}}"),
        )
    };
    assert_eq!(outcome(&s, "lease lost"), 1.0, "{s:#?}");
    assert_eq!(outcome(&s, "ok"), 0.0, "{s:#?}");
    let started = value(&s, "redlock_last_run_start_timestamp_seconds{key=\"job\"}");
    assert_eq!(
        value(&s, "redlock_last_run_end_timestamp_seconds{key=\"job\"}"),
        started
    );
    assert!(!s.contains_key("redlock_last_run_exit_status{key=\"job\"}"));
    // `--all` says the same.
    let all = samples(&metrics(&server, &["--all"]));
    assert_eq!(outcome(&all, "lease lost"), 1.0, "{all:#?}");
    assert!(
        all.keys()
            .any(|k| k.starts_with("redlock_metrics_timestamp_seconds{"))
    );
    // A later run ends it.
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    let s = samples(&metrics(&server, &["job"]));
    assert_eq!(outcome(&s, "ok"), 1.0, "{s:#?}");
    assert!(value(&s, "redlock_last_run_end_timestamp_seconds{key=\"job\"}") >= started);
    assert!(
        !s.keys()
            .any(|k| k.starts_with("redlock_metrics_timestamp_seconds"))
    );
}

/// A key paused before it was ever taken has no fence: `--all` finds it by its pause, in
/// `metrics` and in `status`; a pause with an end exports it, one without does not.
#[test]
fn all_finds_keys_paused_before_they_were_taken() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["pause", "never-run", "--reason", "migration"])
        .exits_with(0);
    Redlock::new(&server)
        .args(["pause", "planned", "--for", "1h"])
        .exits_with(0);
    let s = samples(&metrics(&server, &["--all"]));
    assert_eq!(
        value(&s, "redlock_paused{key=\"never-run\"}"),
        1.0,
        "{s:#?}"
    );
    assert_eq!(value(&s, "redlock_paused{key=\"planned\"}"), 1.0, "{s:#?}");
    assert!(!s.contains_key("redlock_pause_end_timestamp_seconds{key=\"never-run\"}"));
    assert!(value(&s, "redlock_pause_end_timestamp_seconds{key=\"planned\"}") > 0.0);
    let status = Redlock::new(&server).args(["status", "--all"]).run().stdout;
    assert!(
        status.contains("never-run: free") && status.contains("planned: free"),
        "{status}"
    );
}

/// Every process below `pid` (its children, theirs, …), from `/proc`.
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&child) && found.len() < 64 {
                    found.push(child);
                    next.push(child);
                }
            }
        }
    }
    found
}

/// A holder killed mid-run (redlock, its keeper and its command, each in its own process
/// group) writes no end, and a waiter takes the lock at the lapse and ends ok: the last run's
/// outcome is the waiter's, and the lapse shows as a recent `redlock_last_lapse_timestamp_seconds`
/// in `metrics` and in the waiter's `--metrics-file`.
#[test]
fn a_holder_killed_mid_run_shows_as_a_recent_lapse_after_a_waiter_ends_ok() {
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-lapse");
    let path = dir.join("job.prom");
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let waiter = Redlock::new(&server)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "2s",
            "--wait",
            "30s",
            "--metrics-file",
        ])
        .arg(&path)
        .args(["--", "true"])
        .spawn();
    wait_until("the waiter to queue", Duration::from_secs(15), || {
        let s = samples(&metrics(&server, &["job"]));
        (value(&s, "redlock_queue_length{key=\"job\"}") == 1.0).then_some(())
    });
    // Freeze the whole tree first, so that nothing of it reacts, then kill every process.
    holder.signal(libc::SIGSTOP);
    let mut tree = descendants(holder.pid());
    for &p in &tree {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(p, libc::SIGSTOP) };
    }
    tree.extend(descendants(holder.pid()));
    for &p in &tree {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    holder.kill9();
    waiter.exits_with(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let s = samples(&metrics(&server, &["job"]));
    assert_eq!(
        value(&s, "redlock_last_run_outcome{key=\"job\",outcome=\"ok\"}"),
        1.0,
        "{s:#?}"
    );
    let lapse = value(&s, "redlock_last_lapse_timestamp_seconds{key=\"job\"}");
    assert!(
        (now - 120.0..=now + 5.0).contains(&lapse),
        "{lapse} vs now {now}"
    );
    // The waiter's own file carries it too.
    let text = std::fs::read_to_string(&path).expect("the metrics file");
    expect_promtool_accepts(&text);
    let written = samples(&text);
    assert_eq!(
        value(
            &written,
            "redlock_last_lapse_timestamp_seconds{key=\"job\"}"
        ),
        lapse
    );
    let all = samples(&metrics(&server, &["--all"]));
    assert_eq!(
        value(&all, "redlock_last_lapse_timestamp_seconds{key=\"job\"}"),
        lapse
    );
}

/// A `--metrics-file` that names a device or a FIFO is neither read (/dev/full never ends, a
/// FIFO blocks) nor replaced: a warning, and the run exits with its command's status. A
/// regular file too large to be a metrics file is not read either: written anew, with a
/// warning.
#[test]
fn a_metrics_file_that_is_no_regular_file_or_too_large_is_not_read() {
    use std::os::unix::fs::FileTypeExt as _;
    let server = RedisServer::start();
    let dir = TempDir::new("metrics-file-special");
    let fifo = dir.join("fifo.prom");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(2) with a NUL-terminated path this function owns.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    for special in [std::path::Path::new("/dev/full"), &fifo] {
        let outcome = Redlock::new(&server)
            .arg("run")
            .args(["--key", "job", "--ttl", "3s", "--metrics-file"])
            .arg(special)
            .args(["--", "sh", "-c", "exit 3"])
            .exits_with(3);
        outcome.last_error_mentions(&["no regular file"]);
    }
    assert!(
        std::fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let large = dir.join("large.prom");
    std::fs::write(&large, vec![b'#'; 5 * 1024 * 1024]).unwrap();
    let outcome = Redlock::new(&server)
        .arg("run")
        .args(["--key", "job", "--ttl", "3s", "--metrics-file"])
        .arg(&large)
        .args(["--", "true"])
        .exits_with(0);
    outcome.last_error_mentions(&["larger than 4 MiB"]);
    let written = samples(&std::fs::read_to_string(&large).unwrap());
    assert_eq!(value(&written, "redlock_runs_total{key=\"job\"}"), 3.0);
}
