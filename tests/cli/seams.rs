//! The seam matrix: every way a lock can be held × every reader of a lock's state. Each
//! capability holds on its own elsewhere in the suite; this file is where they meet. Rows are
//! ways of holding a key — an exclusive hold, shared holds, slotted holds, a key held together
//! with another (`--key A --key B`), and a key the reader
//! may not read (an ACL denying its reads) — each held by running commands; columns are the
//! readers: `status` in text and JSON, `metrics`, `check --max-age`, `log`, `pause --drain`
//! (of the key, and of every lock: `--all`), `release --force` and nested runs. Every cell is checked against a real `redis-server`.
//!
//! A new capability adds its row here: a new shape is one entry in `rows!` (a test of its
//! own, run beside the others), a new reader one entry in [`READERS`] that checks every row.
//! Readers run in table order on one fixture per row; `release --force` ends the holds, so the
//! readers after it (nested runs) hold the key themselves.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::redlock::Running;
use crate::support::{Outcome, RedisServer, Redlock, child, says, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");
const PASSWORD: &str = "seams-Pa55";

/// One way of holding a key, and what every reader must say about it.
struct Row {
    /// The flags a run takes this shape with.
    flags: &'static [&'static str],
    /// How many commands hold it at once.
    holders: usize,
    /// `status`'s `shape` line, and the JSON's `shape` and `slots`.
    text: &'static str,
    kind: &'static str,
    slots: Option<i64>,
    /// A run of another shape inside a hold of this one: not nested, a contender.
    other: &'static [&'static str],
    /// The readers run as a user whose ACL denies the reads of a lock's records (HGETALL,
    /// HMGET, ZRANGE, XRANGE): each must fail with its own status, never report a free lock,
    /// "never run" or zero counters.
    denied: bool,
}

/// The key every row holds.
const KEY: &str = "job";

/// A reader's check of one row: it runs the reader against the row's held key and asserts.
type Reader = fn(&Held);

/// The readers, in the order they run on a row's fixture.
const READERS: &[(&str, Reader)] = &[
    ("status (text)", status_text),
    ("status --json", status_json),
    ("metrics", metrics),
    ("check --max-age", check),
    ("log", log),
    ("log --timeline", timeline),
    ("pause --drain", drain),
    ("pause --all --drain", drain_all),
    ("release --force", release_force),
    ("nested runs", nested),
];

macro_rules! rows {
    ($($name:ident: $row:expr,)*) => {
        $(
            #[test]
            fn $name() {
                every_reader(&$row);
            }
        )*
    };
}

rows! {
    exclusive: Row {
        flags: &[],
        holders: 1,
        text: "exclusive",
        kind: "exclusive",
        slots: Some(1),
        other: &["--shared"],
        denied: false,
    },
    shared: Row {
        flags: &["--shared"],
        holders: 2,
        text: "shared",
        kind: "shared",
        slots: None,
        other: &[],
        denied: false,
    },
    three_slots: Row {
        flags: &["--slots", "3"],
        holders: 2,
        text: "3 slots",
        kind: "slots",
        slots: Some(3),
        other: &[],
        denied: false,
    },
    // The key held together with another (`--key job --key job:other`), all or none.
    with_another_key: Row {
        flags: &["--key", "job:other"],
        holders: 1,
        text: "exclusive",
        kind: "exclusive",
        slots: Some(1),
        other: &["--shared"],
        denied: false,
    },
    unreadable: Row {
        flags: &[],
        holders: 1,
        text: "exclusive",
        kind: "exclusive",
        slots: Some(1),
        other: &["--shared"],
        denied: true,
    },
}

/// A row's key, held by its commands.
struct Held<'a> {
    row: &'a Row,
    server: RedisServer,
    holders: Vec<Running>,
    /// Each holder's redlock pid (the pid its record names) and token.
    pids: Vec<u32>,
    tokens: Vec<String>,
}

impl Held<'_> {
    /// redlock as the reader of this row: the default user, or the one denied the reads.
    fn reader(&self) -> Redlock {
        if self.row.denied {
            Redlock::without_url().args(["--url", &self.server.url_with_user("peek", PASSWORD)])
        } else {
            Redlock::new(&self.server)
        }
    }

    /// redlock as the default user, whatever the row.
    fn admin(&self) -> Redlock {
        Redlock::new(&self.server)
    }
}

fn every_reader(row: &Row) {
    let server = RedisServer::start();
    server.acl_setuser(
        "peek",
        &[
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
            "-get",
            "-hgetall",
            "-hmget",
            "-zrange",
        ],
    );
    let mut held = Held {
        row,
        server,
        holders: Vec::new(),
        pids: Vec::new(),
        tokens: Vec::new(),
    };
    for _ in 0..row.holders {
        let mut run = Redlock::new(&held.server)
            .args(["run", "--key", KEY, "--ttl", "3s"])
            .args(row.flags)
            .args(["-c", child::HOLD_AND_PRINT_TOKEN])
            .spawn();
        held.tokens.push(run.expect_line_starting("token="));
        run.expect_line("ready");
        held.pids.push(u32::try_from(run.pid()).expect("a pid"));
        held.holders.push(run);
    }
    for (name, reader) in READERS {
        eprintln!("seams: {} × {name}", row.text);
        reader(&held);
    }
    for mut run in held.holders.drain(..) {
        run.close_stdin();
        let _ = run.wait();
    }
}

/// Expects an unreadable lock's failure: `code`, one `redlock:` line naming the denial, and no
/// state made up for the lock on stdout.
#[track_caller]
fn expect_denied(outcome: &Outcome, code: i32) {
    outcome.expect_code(code);
    outcome.error_mentions(says::DENIED);
    for made_up in [": free", "never run", "counters", "redlock_runs_total{"] {
        if outcome.stdout.contains(made_up) {
            outcome.fail(&format!("an unreadable lock was reported with {made_up:?}"));
        }
    }
}

fn status_text(h: &Held) {
    let outcome = h.reader().args(["status", KEY]).run();
    if h.row.denied {
        expect_denied(&outcome, 77);
        assert!(outcome.stdout.contains("UNKNOWN"), "{outcome}");
        return;
    }
    outcome.expect_code(0);
    let shape = format!("\n  shape     {}\n", h.row.text);
    if !outcome.stdout.contains(&shape) {
        outcome.fail(&format!("status does not name the shape with {shape:?}"));
    }
    for pid in &h.pids {
        if !outcome.stdout.contains(&format!("pid {pid},")) {
            outcome.fail(&format!("status does not show the holder with pid {pid}"));
        }
    }
}

fn status_json(h: &Held) {
    let outcome = h.reader().args(["status", "--json", KEY]).run();
    let document = Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("no JSON document: {e}")));
    let lock = &document.items("locks")[0];
    if h.row.denied {
        expect_denied(&outcome, 77);
        assert_eq!(lock.str("state"), "unknown", "{lock}");
        assert!(lock.str("error").contains("hgetall"), "{lock}");
        assert!(lock.at("counters").is_none(), "{lock}");
        return;
    }
    outcome.expect_code(0);
    assert_eq!(lock.str("state"), "held", "{lock}");
    assert_eq!(lock.str("shape"), h.row.kind, "{lock}");
    assert_eq!(lock.expect("slots").as_i64(), h.row.slots, "{lock}");
    assert!(lock.int("ttl_left_ms") > 0, "{lock}");
    let mut pids: BTreeSet<i64> = lock.items("holders").iter().map(|x| x.int("pid")).collect();
    if let Some(holder) = lock.at("holder").filter(|x| !x.is_null()) {
        pids.insert(holder.int("pid"));
    }
    let expected: BTreeSet<i64> = h.pids.iter().map(|p| i64::from(*p)).collect();
    assert_eq!(pids, expected, "{lock}");
}

fn metrics(h: &Held) {
    let outcome = h.reader().args(["metrics", KEY]).run();
    if h.row.denied {
        expect_denied(&outcome, 77);
        let samples = outcome.stdout.lines().filter(|l| !l.starts_with('#'));
        assert_eq!(samples.count(), 0, "{outcome}");
        return;
    }
    outcome.expect_code(0);
    let value = |name: &str| -> f64 {
        let series = format!("{name}{{key=\"{KEY}\"}} ");
        outcome
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| outcome.fail(&format!("no sample {series}")))
            .parse()
            .expect("a number")
    };
    assert_eq!(value("redlock_held"), 1.0, "{outcome}");
    assert_eq!(value("redlock_holders"), h.row.holders as f64, "{outcome}");
    assert!(value("redlock_ttl_seconds") > 0.0, "{outcome}");
    assert!(value("redlock_lease_age_seconds") >= 0.0, "{outcome}");
}

fn check(h: &Held) {
    if h.row.denied {
        let outcome = h.reader().args(["check", KEY]).run();
        outcome.expect_code(3);
        outcome.error_mentions(says::DENIED);
        assert!(
            outcome.stdout.starts_with("REDLOCK UNKNOWN - "),
            "{outcome}"
        );
        assert!(!outcome.stdout.contains("never run"), "{outcome}");
        return;
    }
    // Every holder has held the key for longer than 10 ms once the oldest has for 50 ms more.
    wait_until("the holders to age", Duration::from_secs(5), || {
        let lock = crate::support::lock_status(&h.server, KEY);
        let youngest = lock
            .items("holders")
            .iter()
            .chain(lock.at("holder").filter(|x| !x.is_null()))
            .map(|x| x.int("age_ms"))
            .min()?;
        (youngest > 50).then_some(())
    });
    let outcome = h.reader().args(["check", KEY, "--max-age", "10ms"]).run();
    outcome.expect_code(2);
    let over = outcome.stdout.matches("over --max-age 10ms").count();
    assert_eq!(over, h.row.holders, "each holder is named\n{outcome}");
    let outcome = h.reader().args(["check", KEY, "--max-age", "1h"]).run();
    outcome.expect_code(0);
    assert!(
        outcome.stdout.contains("first run in progress"),
        "{outcome}"
    );
}

fn log(h: &Held) {
    let outcome = h.reader().args(["log", KEY, "--json"]).run();
    if h.row.denied {
        outcome.expect_code(77);
        outcome.error_mentions(says::DENIED);
        return;
    }
    outcome.expect_code(0);
    let acquired: Vec<Json> = outcome
        .stdout
        .lines()
        .map(|l| Json::parse(l).unwrap_or_else(|e| outcome.fail(&e)))
        .filter(|e| e.str("event") == "acquired")
        .collect();
    assert_eq!(acquired.len(), h.row.holders, "{outcome}");
    for entry in &acquired {
        let shape = entry.at("shape").and_then(Json::as_str);
        match h.row.kind {
            "exclusive" => assert_eq!(shape, None, "{entry}"),
            _ => assert!(shape.is_some(), "{entry}"),
        }
    }
}

/// The timeline draws every held row as still held (`>`), whatever its shape.
fn timeline(h: &Held) {
    let outcome = h
        .reader()
        .args(["log", KEY, "--timeline", "--width", "80"])
        .run();
    if h.row.denied {
        outcome.expect_code(77);
        outcome.error_mentions(says::DENIED);
        return;
    }
    outcome.expect_code(0);
    let held = outcome
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with('>'))
        .count();
    assert!(
        held >= 1 && held <= h.row.holders,
        "each holder's row ends still held\n{outcome}"
    );
    assert!(outcome.stdout.contains("> still held"), "{outcome}");
}

fn drain(h: &Held) {
    let outcome = h.reader().args(["pause", KEY, "--drain", "300ms"]).run();
    if h.row.denied {
        expect_denied(&outcome, 77);
        assert!(!outcome.stdout.contains("drained"), "{outcome}");
    } else {
        outcome.expect_code(75);
        outcome.last_error_mentions(&["still running"]);
        let line = outcome.last_error_line();
        for pid in &h.pids {
            assert!(line.contains(&format!("pid {pid},")), "{pid}: {outcome}");
        }
        assert!(
            outcome
                .stdout
                .contains(&format!("draining: {} still running", h.row.holders)),
            "{outcome}"
        );
    }
    h.admin().args(["resume", KEY]).exits_with(0);
}

/// `pause --all --drain` finds the row's holders in its pass over every lock, and names each
/// (one line per lock it holds).
fn drain_all(h: &Held) {
    let outcome = h
        .reader()
        .args(["pause", "--all", "--drain", "300ms"])
        .run();
    if h.row.denied {
        expect_denied(&outcome, 77);
        assert!(!outcome.stdout.contains("drained"), "{outcome}");
    } else {
        outcome.expect_code(75);
        outcome.last_error_mentions(&["still running"]);
        let line = outcome.last_error_line();
        for pid in &h.pids {
            assert!(line.contains(&format!("pid {pid},")), "{pid}: {outcome}");
        }
        let locks = 1 + h.row.flags.iter().filter(|f| **f == "--key").count();
        assert!(
            outcome.stdout.contains(&format!(
                "draining: {} still running",
                h.row.holders * locks
            )),
            "{outcome}"
        );
    }
    h.admin().args(["resume", "--all"]).exits_with(0);
}

fn release_force(h: &Held) {
    let outcome = h.reader().args(["release", KEY, "--force"]).run();
    if h.row.denied {
        outcome.expect_code(77);
        outcome.error_mentions(says::DENIED);
        h.admin().args(["status", KEY]).exits_with(0);
        return;
    }
    outcome.expect_code(0);
    let removed = outcome.stdout.matches("removed job").count();
    assert_eq!(removed, h.row.holders, "{outcome}");
    // Each holder finds its lease gone at its next renewal and stops.
    let outcome = h.admin().args(["status", KEY]).exits_with(1);
    assert!(outcome.stdout.contains("job: free"), "{outcome}");
    // A key held with others: losing one is losing the lease, and the holder gives back the
    // rest when it stops (at its next renewal), so none of its keys stays taken.
    if let Some(at) = h.row.flags.iter().position(|f| *f == "--key") {
        let other = h.row.flags[at + 1];
        wait_until(
            "the holder to give back its other key",
            Duration::from_secs(10),
            || (!h.server.exists(other)).then_some(()),
        );
    }
}

/// A run of the row's shape inside a hold of it runs at once under that hold (the same token);
/// a run of another shape is a contender: busy, saying why.
fn nested(h: &Held) {
    if h.row.denied {
        let outcome = h
            .reader()
            .env("REDLOCK_KEY", KEY)
            .env("REDLOCK_TOKEN", &h.tokens[0])
            .args(["run", "--key", KEY, "--ttl", "3s", "--", "true"])
            .run();
        outcome.expect_code(77);
        outcome.error_mentions(says::DENIED);
        return;
    }
    let (same, other) = (h.row.flags.join(" "), h.row.other.join(" "));
    let script = format!(
        r#"echo "outer=$REDLOCK_TOKEN"
"{BIN}" run --key {KEY} --ttl 3s {same} -- sh -c 'echo "same=$REDLOCK_TOKEN"'
"{BIN}" run --key {KEY} --ttl 3s {other} -- true
echo "other=$?""#
    );
    let outcome = h
        .admin()
        .env("REDLOCK_URL", h.server.url())
        .args(["run", "--key", KEY, "--ttl", "3s"])
        .args(h.row.flags)
        .args(["-c", &script])
        .exits_with(0);
    assert_eq!(
        outcome.printed("same"),
        outcome.printed("outer"),
        "{outcome}"
    );
    assert_eq!(outcome.printed("other"), "75", "{outcome}");
    assert!(
        outcome
            .stderr
            .contains("only a run of the same shape nests"),
        "{outcome}"
    );
}
