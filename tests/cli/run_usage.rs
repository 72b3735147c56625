//! Usage errors: rejected with 64 before Redis is contacted at all.

use crate::support::{Outcome, RedisServer, Redlock, TempDir};

/// Runs `redlock --url ADDRESS run ARGS...`, expects 64 with one `redlock:` line, and checks
/// that nothing even connected to ADDRESS: a listener of the test's own stands where Redis
/// would (a server's count of connections also counts its start-up probes, which a loaded
/// machine may accept late).
fn rejected(args: &[&str]) -> Outcome {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener
        .set_nonblocking(true)
        .expect("a listener that does not block");
    let url = format!("redis://{}", listener.local_addr().expect("its address"));
    let outcome = Redlock::without_url()
        .args(["--url", &url, "run"])
        .args(args)
        .exits_with(64);
    outcome.error_line();
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!(
            "redlock connected before rejecting its arguments ({:?})\n{outcome}",
            other.map(|(_, peer)| peer)
        ),
    }
    outcome
}

/// Runs `redlock run ARGS...` and expects it to be accepted (the command ran, exit 0).
fn accepted(args: &[&str]) {
    let server = RedisServer::start();
    Redlock::new(&server).arg("run").args(args).exits_with(0);
}

#[test]
fn ttl_below_500ms_is_rejected() {
    rejected(&["--key", "job", "--ttl", "499ms", "--", "true"]);
}

#[test]
fn ttl_of_500ms_is_accepted() {
    accepted(&["--key", "job", "--ttl", "500ms", "--", "true"]);
}

#[test]
fn ttl_above_24h_is_rejected() {
    rejected(&["--key", "job", "--ttl", "24h 1s", "--", "true"]);
}

#[test]
fn ttl_in_months_is_rejected() {
    rejected(&["--key", "job", "--ttl", "5M", "--", "true"]);
}

#[test]
fn ttl_of_24h_is_accepted() {
    accepted(&["--key", "job", "--ttl", "24h", "--", "true"]);
}

#[test]
fn zero_ttl_is_rejected() {
    rejected(&["--key", "job", "--ttl", "0s", "--", "true"]);
}

#[test]
fn negative_ttl_is_rejected() {
    rejected(&["--key", "job", "--ttl", "-1s", "--", "true"]);
}

#[test]
fn ttl_without_a_unit_is_rejected() {
    rejected(&["--key", "job", "--ttl", "30", "--", "true"]);
}

#[test]
fn garbage_ttl_is_rejected() {
    rejected(&["--key", "job", "--ttl", "soon", "--", "true"]);
}

#[test]
fn overflowing_ttl_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "99999999999999999999h",
        "--",
        "true",
    ]);
}

#[test]
fn negative_wait_is_rejected() {
    rejected(&["--key", "job", "--ttl", "1s", "--wait", "-5s", "--", "true"]);
}

#[test]
fn garbage_wait_is_rejected() {
    rejected(&[
        "--key", "job", "--ttl", "1s", "--wait", "a while", "--", "true",
    ]);
}

#[test]
fn overflowing_wait_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "1s",
        "--wait",
        "99999999999999999999h",
        "--",
        "true",
    ]);
}

#[test]
fn garbage_hold_at_least_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "1s",
        "--hold-at-least",
        "x",
        "--",
        "true",
    ]);
}

#[test]
fn kill_after_leaving_no_time_to_renew_is_rejected() {
    // TTL 3s: TTL/3 = 1000ms, drift = 32ms, so at most 936ms.
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "3s",
        "--kill-after",
        "1s",
        "--",
        "true",
    ]);
}

#[test]
fn kill_after_that_leaves_time_to_renew_is_accepted() {
    accepted(&[
        "--key",
        "job",
        "--ttl",
        "3s",
        "--kill-after",
        "900ms",
        "--",
        "true",
    ]);
}

#[test]
fn negative_kill_after_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "3s",
        "--kill-after",
        "-1s",
        "--",
        "true",
    ]);
}

#[test]
fn empty_key_is_rejected() {
    rejected(&["--key", "", "--ttl", "1s", "--", "true"]);
}

#[test]
fn missing_key_is_rejected() {
    rejected(&["--ttl", "1s", "--", "true"]);
}

#[test]
fn missing_ttl_is_rejected() {
    rejected(&["--key", "job", "--", "true"]);
}

#[test]
fn missing_command_is_rejected() {
    rejected(&["--key", "job", "--ttl", "1s"]);
}

#[test]
fn shell_command_and_command_together_are_rejected() {
    rejected(&["--key", "job", "--ttl", "1s", "-c", "true", "--", "true"]);
}

#[test]
fn conflict_exit_code_out_of_range_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "1s",
        "--conflict-exit-code",
        "256",
        "--",
        "true",
    ]);
}

#[test]
fn unknown_flag_is_rejected() {
    rejected(&["--key", "job", "--ttl", "1s", "--frobnicate", "--", "true"]);
}

#[test]
fn unreadable_password_file_is_rejected() {
    let scratch = TempDir::new("pwfile");
    let missing = scratch.join("no-such-file");
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "1s",
        "--password-file",
        missing.to_str().expect("utf-8 path"),
        "--",
        "true",
    ]);
}

#[test]
fn url_with_another_scheme_is_rejected() {
    Redlock::without_url()
        .args([
            "--url", "http://x", "run", "--key", "job", "--ttl", "1s", "--", "true",
        ])
        .exits_with(64)
        .error_line();
}

#[test]
fn url_with_an_impossible_port_is_rejected() {
    Redlock::without_url()
        .args([
            "--url",
            "redis://:99999",
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
        ])
        .args(["--", "true"])
        .exits_with(64)
        .error_line();
}

#[test]
fn malformed_url_in_redlock_url_is_rejected() {
    Redlock::without_url()
        .env("REDLOCK_URL", "not a url")
        .args(["run", "--key", "job", "--ttl", "1s", "--", "true"])
        .exits_with(64)
        .error_line();
}

#[test]
fn a_missing_option_is_named_on_the_one_line() {
    let outcome = rejected(&["--key", "job", "--", "true"]);
    let line = outcome.error_line();
    assert!(line.contains("--ttl"), "{line}");
    let outcome = rejected(&["--", "true"]);
    let line = outcome.error_line();
    assert!(line.contains("--key") && line.contains("--ttl"), "{line}");
}

#[test]
fn an_option_of_run_before_the_word_run_is_refused() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .args([
            "--wait=5s",
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--",
            "true",
        ])
        .exits_with(64);
    let line = outcome.error_line();
    assert!(line.contains("--wait"), "{line}");
}

#[test]
fn a_client_certificate_without_its_key_is_refused_by_name() {
    for flag in ["--tls-cert-file", "--tls-key-file"] {
        let outcome = rejected(&[
            flag,
            "/nonexistent",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--",
            "true",
        ]);
        let line = outcome.error_line();
        assert!(
            line.contains("--tls-cert-file") && line.contains("--tls-key-file"),
            "{line}"
        );
    }
}

#[test]
fn a_sentinel_user_without_the_sentinels_password_is_refused_by_name() {
    let outcome = rejected(&[
        "--sentinel-user",
        "locker",
        "--key",
        "job",
        "--ttl",
        "5s",
        "--",
        "true",
    ]);
    let line = outcome.error_line();
    assert!(line.contains("--sentinel-password-file"), "{line}");
}

#[test]
fn a_global_option_on_both_sides_of_run_is_refused_rather_than_half_read() {
    // `--url A run --url B` read by clap alone would keep B and drop A without a word: a
    // quorum of three would silently become one of two.
    let server = RedisServer::start();
    let other = RedisServer::start();
    let connections = server.connections_received();
    let outcome = Redlock::new(&server)
        .args([
            "run",
            "--url",
            &other.url(),
            "--key",
            "job",
            "--ttl",
            "5s",
            "--",
            "true",
        ])
        .exits_with(64);
    let line = outcome.error_line();
    assert!(line.contains("--url") && line.contains("run"), "{line}");
    assert_eq!(server.connections_received(), connections, "{outcome}");
}

#[test]
fn max_waiters_without_wait_is_rejected_naming_the_flag() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--max-waiters",
        "1",
        "--",
        "true",
    ])
    .error_mentions(&["--max-waiters", "--wait"]);
}

#[test]
fn max_waiters_from_the_environment_without_wait_is_rejected() {
    let server = RedisServer::start();
    let outcome = Redlock::new(&server)
        .env("REDLOCK_MAX_WAITERS", "2")
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(64);
    outcome.error_mentions(&["--max-waiters", "--wait"]);
    assert_eq!(
        server.query::<i64>(&["DBSIZE"]),
        0,
        "redlock wrote to Redis"
    );
}

#[test]
fn max_waiters_of_zero_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--wait",
        "1s",
        "--max-waiters",
        "0",
        "--",
        "true",
    ])
    .error_mentions(&["--max-waiters", "at least 1"]);
}

#[test]
fn max_waiters_that_is_not_a_number_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--wait",
        "1s",
        "--max-waiters",
        "one",
        "--",
        "true",
    ]);
}

#[test]
fn replace_with_a_shared_or_slotted_hold_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--replace",
        "--shared",
        "--",
        "true",
    ]);
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--replace",
        "--slots",
        "2",
        "--",
        "true",
    ]);
}

#[test]
fn replace_with_once_per_is_rejected() {
    rejected(&[
        "--key",
        "job",
        "--ttl",
        "5s",
        "--replace",
        "--once-per",
        "1h",
        "--",
        "true",
    ]);
}

#[test]
fn replace_in_a_quorum_is_rejected_with_a_reason() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let outcome = Redlock::without_url()
        .args(["--url", &a.url(), "--url", &b.url()])
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--replace",
            "--",
            "true",
        ])
        .exits_with(64);
    outcome.error_mentions(&["--replace", "quorum"]);
    for server in [&a, &b] {
        assert_eq!(
            server.query::<i64>(&["DBSIZE"]),
            0,
            "redlock wrote to Redis"
        );
    }
}

/// The command's words reach it as they were given, whatever their bytes (a cron line or a
/// file name need not be UTF-8): after `--`, its program's name too, and `-c`'s text. The
/// records keep a form a shell reads back as the same bytes. A key or an option's value that
/// is not UTF-8 is a usage error (64) that names it, before Redis is asked.
#[test]
fn a_command_word_that_is_not_utf8_is_passed_on_as_it_is() {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let server = RedisServer::start();
    let dir = TempDir::new("bytes");
    let odd = |bytes: &[u8]| OsString::from_vec(bytes.to_vec());
    let made = dir.path().join(odd(b"caf\xe9 \xff"));
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "touch"])
        .arg(&made)
        .exits_with(0);
    assert!(made.exists(), "touch was not given the file's bytes");
    let last = Redlock::new(&server)
        .args(["status", "--json", "job"])
        .exits_with(1);
    let shown = format!("touch $'{}/caf\\xe9 \\xff'", dir.path().display());
    assert!(
        last.stdout.contains(&shown.replace('\\', "\\\\")),
        "the record does not show {shown}: {last}"
    );

    // A program whose name is not UTF-8, and `-c`'s text.
    let program = dir.path().join(odd(b"job-\xfe"));
    std::fs::write(&program, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--"])
        .arg(&program)
        .exits_with(3);
    let mut shell = b"touch '".to_vec();
    shell.extend_from_slice(dir.path().as_os_str().as_bytes());
    shell.extend_from_slice(b"/\xfd'");
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "-c"])
        .arg(odd(&shell))
        .exits_with(0);
    assert!(
        dir.path().join(odd(b"\xfd")).exists(),
        "-c was not given its bytes"
    );

    // A key or an option's value: named, before Redis is asked.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("redis://{}", listener.local_addr().expect("its address"));
    for (args, named) in [
        (
            vec![odd(b"--key"), odd(b"job\xff")],
            "argument 7 (job\\xff), the value of --key",
        ),
        (vec![odd(b"--key=job\xff")], "--key"),
    ] {
        let refused = Redlock::without_url()
            .args(["--url", &url, "run", "--ttl", "5s"])
            .args(args)
            .args(["--", "true"])
            .exits_with(64);
        refused
            .error_mentions(&[named])
            .error_mentions(&["not UTF-8"]);
    }
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "redlock connected before refusing"
    );
}

/// Flags that cannot go together, or values that say nothing, are refused whichever reader
/// reads the line: the usual form is read by hand, and the same line with an empty `--prefix=`
/// (a value the hand reader leaves to clap) by clap; both say the same one line.
#[test]
fn contradictory_or_empty_flags_are_refused_by_either_reader() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--wait", "0s", "--max-waiters", "1"],
            "--max-waiters needs --wait longer than 0s",
        ),
        (
            &["--replace", "--no-replace"],
            "--replace cannot be used with --no-replace",
        ),
        (&["--label", ""], "--label is empty"),
        (&["--label", " "], "--label is empty"),
        (&["--label="], "--label is empty"),
    ];
    for (flags, says) in cases {
        let by_hand = [&["--key", "job", "--ttl", "5s"][..], flags, &["--", "true"]].concat();
        let by_clap = [&["--prefix="][..], &by_hand].concat();
        let lines: Vec<String> = [by_hand, by_clap]
            .iter()
            .map(|args| {
                let outcome = rejected(args);
                outcome.error_mentions(&[says]);
                outcome.error_line().to_owned()
            })
            .collect();
        assert_eq!(lines[0], lines[1], "{flags:?}");
    }
}

#[test]
fn an_empty_key_argument_is_named_as_the_argument() {
    let server = RedisServer::start();
    for args in [
        &["status", ""][..],
        &["release", "", "--force"],
        &["log", ""],
    ] {
        let outcome = Redlock::new(&server).args(args).exits_with(64);
        outcome.error_mentions(&["KEY is empty"]);
        outcome.error_does_not_mention("--key");
    }
    assert_eq!(
        server.query::<i64>(&["DBSIZE"]),
        0,
        "redlock wrote to Redis"
    );
}
