//! `redlock log KEY --timeline`: the chart of a log made by real runs on three hosts (each
//! redlock in a UTS namespace of its own, so the log names its host), drawn within the width
//! asked, in plain ASCII when stdout is not a terminal.

use std::time::Duration;

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
    assert!(during.iter().any(|l| l.contains(". waiting")));

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
    // web-3's wait is in its take (waited_ms): drawn before its hold, and said by `log`.
    let web3 = row(&after, "web-3");
    assert!(
        web3.find('.')
            .is_some_and(|w| web3.find('[').is_some_and(|t| w < t)),
        "web-3 waited, then held:\n{chart}"
    );
    let log = Redlock::new(&server).args(["log", "report"]).exits_with(0);
    assert!(
        log.stdout
            .lines()
            .any(|l| l.contains("acquired  web-3") && l.contains(", after waiting ")),
        "{log}"
    );
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

/// How long the key's holder has held it, from `status --json` (ms).
fn held_for_ms(server: &RedisServer, key: &str) -> i64 {
    let out = Redlock::new(server)
        .args(["status", key, "--json"])
        .exits_with(0)
        .stdout;
    let doc: serde_json::Value = serde_json::from_str(&out).expect("status --json");
    doc["locks"][0]["holder"]["age_ms"].as_i64().unwrap_or(0)
}

#[test]
fn since_draws_the_window_asked_with_the_holds_that_began_before_it() {
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .on_host("web-1")
        .args(["run", "--key", "report", "--ttl", "6s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    // The hold is older than the window drawn.
    crate::support::wait_until("the hold to age", Duration::from_secs(10), || {
        (held_for_ms(&server, "report") >= 1500).then_some(())
    });
    Redlock::new(&server)
        .on_host("web-2")
        .args(["run", "--key", "report", "--ttl", "6s", "--", "true"])
        .exits_with(75);
    let lines = timeline(&server, 60, &["--since", "1s", "--width", "60"]);
    let chart = lines.join("\n");
    let web1 = row(&lines, "web-1");
    let bar = web1["web-1".len()..].trim_start();
    assert!(
        bar.starts_with('=') && !bar.contains('[') && bar.ends_with('>'),
        "the hold drawn from the window's left edge, still held:\n{chart}"
    );
    // The bar starts in the first column: the chart starts where the window does.
    let column = lines[1].find('|').expect("an axis");
    assert_eq!(web1.find('='), Some(column), "{chart}");
    assert!(row(&lines, "web-2").contains('B'), "{chart}");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn columns_is_used_when_it_is_a_positive_number_and_ignored_otherwise() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "report", "--ttl", "3s", "--", "true"])
        .exits_with(0);
    let widest = |columns: Option<&str>| -> usize {
        let mut cmd = Redlock::new(&server).args(["log", "report", "--timeline"]);
        if let Some(c) = columns {
            cmd = cmd.env("COLUMNS", c);
        }
        let out = cmd.exits_with(0).stdout;
        out.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    };
    // Not a terminal: without COLUMNS, 80; what COLUMNS cannot mean is as if unset.
    let unset = widest(None);
    assert!(unset > 48 && unset <= 80, "{unset}");
    for nonsense in ["abc", "-5", "0", "", "4x"] {
        assert_eq!(widest(Some(nonsense)), unset, "COLUMNS={nonsense:?}");
    }
    // A number below the 40-column minimum gets 40.
    for narrow in ["10", "39", "40"] {
        assert!(widest(Some(narrow)) <= 40, "COLUMNS={narrow}");
    }
    assert!(widest(Some("48")) <= 48);
}

#[test]
fn a_resume_after_the_pause_ran_out_is_drawn_and_an_empty_key_is_named_as_an_argument() {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["pause", "report", "--for", "1s"])
        .exits_with(0);
    crate::support::wait_until("the pause to run out", Duration::from_secs(10), || {
        let out = Redlock::new(&server).args(["status", "report"]).run();
        out.stdout.contains("LAPSED").then_some(()).or_else(|| {
            // Still in force: poll again a little later.
            std::thread::sleep(Duration::from_millis(100));
            None
        })
    });
    Redlock::new(&server)
        .args(["resume", "report"])
        .exits_with(0);
    let lines = timeline(&server, 80, &["--width", "80"]);
    let chart = lines.join("\n");
    assert!(row(&lines, "(paused)").contains('U'), "{chart}");
    assert!(
        chart.contains("U resumed after the pause ran out"),
        "{chart}"
    );

    let out = Redlock::new(&server)
        .args(["log", "", "--timeline"])
        .exits_with(64);
    assert!(
        out.stderr.starts_with("redlock: KEY is empty") && !out.stderr.contains("--key"),
        "{}",
        out.stderr
    );
}
