//! `redlock log KEY --timeline`: the chart of a log made by real runs on three hosts (each
//! redlock in a UTS namespace of its own, so the log names its host), drawn within the width
//! asked, in plain ASCII when stdout is not a terminal.

use crate::support::{RedisServer, Redlock, child};

/// The timeline's lines, each checked to fit `width` and to be ASCII (stdout is a pipe here).
#[track_caller]
fn timeline(server: &RedisServer, width: usize, args: &[&str]) -> Vec<String> {
    let out = Redlock::new(server)
        .args(["log", "report", "--timeline"])
        .args(args)
        .exits_with(0)
        .stdout;
    assert!(out.is_ascii(), "not a terminal, so plain ASCII:\n{out}");
    for line in out.lines() {
        assert!(line.len() <= width, "a line wider than {width}:\n{out}");
    }
    out.lines().map(str::to_owned).collect()
}

#[track_caller]
fn row<'a>(lines: &'a [String], host: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("{host} ")))
        .unwrap_or_else(|| panic!("no row for {host}:\n{}", lines.join("\n")))
}

#[test]
fn a_timeline_draws_real_runs_on_three_hosts_within_the_width() {
    let server = RedisServer::start();
    let run = |host: &str| {
        Redlock::new(&server)
            .on_host(host)
            .args(["run", "--key", "report", "--ttl", "6s"])
    };
    // web-1 holds; web-2 is refused; web-3 waits for it.
    let mut first = run("web-1").args(["-c", child::HOLD]).spawn();
    first.expect_line("ready");
    run("web-2").args(["--", "true"]).exits_with(75);
    let waiter = run("web-3")
        .args(["--wait", "20s", "--", "sh", "-c", "exit 2"])
        .spawn();
    server.wait_until_waiting_on_server("report", 1);
    let during = timeline(&server, 72, &["--width", "72"]);
    assert!(
        row(&during, "web-1").ends_with('>'),
        "still held:\n{during:#?}"
    );
    assert!(row(&during, "web-2").contains('B'), "{during:#?}");
    assert!(
        row(&during, "web-3").ends_with('.'),
        "waiting now:\n{during:#?}"
    );
    assert!(during.iter().any(|l| l.contains(". waiting now")));

    // web-1 ends ok, web-3 runs and fails; web-2 then holds until an operator forces it away.
    first.close_stdin();
    first.exits_with(0);
    waiter.exits_with(2);
    let mut second = run("web-2").args(["-c", child::HOLD]).spawn();
    second.expect_line("ready");
    Redlock::new(&server)
        .args(["release", "report", "--force"])
        .exits_with(0);
    second.exits_with(76);

    let after = timeline(&server, 72, &["--width", "72"]);
    let chart = after.join("\n");
    assert!(after[0].starts_with("report  "), "{chart}");
    assert!(
        row(&after, "web-1").contains('[') && row(&after, "web-1").contains(']'),
        "{chart}"
    );
    assert!(
        row(&after, "web-2").contains('B') && row(&after, "web-2").ends_with('F'),
        "{chart}"
    );
    assert!(row(&after, "web-3").contains('X'), "{chart}");
    assert!(!chart.contains(". waiting now"), "{chart}");
    for said in [
        "] released",
        "X failed",
        "F forced release",
        "B refused: busy",
    ] {
        assert!(chart.contains(said), "legend: {said}\n{chart}");
    }
    // The hosts come in the order they first appear in the log.
    let hosts: Vec<&str> = after
        .iter()
        .filter_map(|l| l.split(' ').next().filter(|h| h.starts_with("web-")))
        .collect();
    assert_eq!(hosts, ["web-1", "web-2", "web-3"], "{chart}");

    // $COLUMNS when no --width is given; and a narrow chart is still whole.
    let narrow = Redlock::new(&server)
        .args(["log", "report", "--timeline"])
        .env("COLUMNS", "48")
        .exits_with(0)
        .stdout;
    assert!(narrow.lines().all(|l| l.len() <= 48), "{narrow}");
    assert!(narrow.contains("web-3 "), "{narrow}");
    eprintln!("{chart}");
}

#[test]
fn a_timeline_refuses_what_it_cannot_draw() {
    let server = RedisServer::start();
    for args in [
        &["log", "--all", "--timeline"][..],
        &["log", "report", "--timeline", "--json"],
        &["log", "report", "--timeline", "--follow"],
        &["log", "report", "--width", "80"],
        &["log", "report", "--timeline", "--width", "20"],
    ] {
        let out = Redlock::new(&server).args(args).exits_with(64);
        assert!(
            out.stderr.starts_with("redlock: "),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
    }
}
