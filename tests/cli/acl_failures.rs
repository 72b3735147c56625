//! What a user whose ACL lacks one command of the guide's recipe is left with: an attempt
//! refused half way leaves no lock behind, a release that happened is said to have happened,
//! and `doctor` names what is missing.

use crate::acl::{as_user, recipe, server_with_recipes};
use crate::support::RedisServer;

/// The guide's `locker` user, less `commands`, as `name`.
pub(crate) fn locker_without(server: &RedisServer, name: &str, commands: &[&str]) {
    let rules: Vec<String> = recipe("locker")
        .into_iter()
        .filter(|rule| !commands.iter().any(|c| rule == &format!("+{c}")))
        .chain(commands.iter().map(|c| format!("-{c}")))
        .collect();
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    server.acl_setuser(name, &rules);
}

/// The acquire script writes the lock before the audit entry an ACL refuses; the server keeps
/// what a script wrote before it failed, so the run gives the lock back by its token before it
/// exits 77, and the next run with the rights it needs takes the lock at once.
#[test]
fn an_acquire_refused_half_way_leaves_no_lock_behind() {
    let server = server_with_recipes();
    locker_without(&server, "norpush", &["rpush"]);
    as_user(&server, "norpush")
        .args(["run", "--key", "a", "--ttl", "1h", "--", "true"])
        .exits_with(77)
        .error_does_not_mention("may stay held");
    assert!(!server.exists("jobs:a"), "the lock was left behind");
    assert!(!server.exists("{jobs:a}:redlock:holder"));
    for shape in [&["--shared"][..], &["--slots", "3"], &["--key", "b"]] {
        as_user(&server, "norpush")
            .args(["acquire", "--key", "a", "--ttl", "1h"])
            .args(shape)
            .exits_with(77);
        assert!(
            !server.exists("jobs:a"),
            "{shape:?}: the lock was left behind"
        );
        assert!(
            !server.exists("jobs:b"),
            "{shape:?}: the lock was left behind"
        );
        assert_eq!(
            server.query::<i64>(&["ZCARD", "{jobs:a}:redlock:leases"]),
            0,
            "{shape:?}: a lease was left behind"
        );
    }
    as_user(&server, "locker")
        .args(["run", "--key", "a", "--ttl", "1h", "--", "true"])
        .exits_with(0);
}

/// When the lock cannot be given back either (no `del`), the one line says it may stay held
/// and how to free it; the status stays the cause's.
#[test]
fn an_acquire_that_cannot_give_back_says_how_to_free_the_lock() {
    let server = server_with_recipes();
    locker_without(&server, "norpushdel", &["rpush", "del"]);
    as_user(&server, "norpushdel")
        .args(["run", "--key", "a", "--ttl", "1h", "--", "true"])
        .exits_with(77)
        .error_mentions(&["jobs:a may stay held until its TTL (1h) ends"])
        .error_mentions(&["redlock release a --force"]);
    as_user(&server, "locker")
        .args(["release", "a", "--force"])
        .exits_with(0);
    assert!(!server.exists("jobs:a"));
}

/// Without `hmget`, the release script deletes the lock and then fails on its record-keeping:
/// the release happened, and `release --token` says so, with 0 and one warning.
#[test]
fn a_release_refused_after_it_deleted_the_lock_says_it_released() {
    let server = server_with_recipes();
    locker_without(&server, "nohmget", &["hmget"]);
    let out = as_user(&server, "locker")
        .args(["acquire", "--key", "a", "--ttl", "1h"])
        .exits_with(0);
    let token = out.stdout.lines().next().expect("token line").to_owned();
    as_user(&server, "nohmget")
        .args(["release", "a", "--token", &token])
        .exits_with(0)
        .error_mentions(&["released jobs:a (it no longer holds this token), but"])
        .error_does_not_mention("expires by itself");
    assert!(!server.exists("jobs:a"));
    // A run's release refused after its delete (its record of another type) says the same,
    // and the run keeps its command's status.
    server.query::<()>(&["SET", "{jobs:a}:redlock:stats", "not a hash"]);
    as_user(&server, "locker")
        .args(["run", "--key", "a", "--ttl", "1h", "--", "true"])
        .exits_with(0)
        .error_mentions(&["released jobs:a"])
        .error_does_not_mention("expires by itself");
    assert!(!server.exists("jobs:a"));
}

/// `release --token` and `release --force` read a record a run's release does not: doctor's
/// probe ends a hold both ways too, so a user without `hmget` is told what to grant.
#[test]
fn doctor_names_what_release_by_token_and_by_force_need() {
    let server = server_with_recipes();
    locker_without(&server, "nohmget", &["hmget"]);
    let outcome = crate::support::Redlock::without_url()
        .args([
            "--url",
            &server.url_with_user("nohmget", crate::acl::PASSWORD),
        ])
        .args(["--prefix", "jobs:", "doctor"])
        .exits_with(77);
    assert!(
        outcome
            .stdout
            .lines()
            .any(|l| l.starts_with("fail permissions:") && l.contains("ACL SETUSER nohmget +hmget")),
        "{outcome}"
    );
    let keys: Vec<String> = server.query(&["KEYS", "*"]);
    assert!(keys.is_empty(), "the probe left keys behind: {keys:?}");
}

/// The guide's `locker` user, made from the guide's own text, does everything the guide says
/// it can: `run`, `status`, `check`, `log`, `metrics`, `release --force`, `pause`, `resume`.
#[test]
fn the_guides_lock_user_can_do_everything_it_promises() {
    let server = server_with_recipes();
    let locker = || as_user(&server, "locker");
    locker()
        .args(["run", "--key", "a", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    locker().args(["status", "a"]).exits_with(1);
    locker().args(["check", "a"]).exits_with(0);
    let log = locker().args(["log", "a"]).exits_with(0);
    assert!(log.stdout.contains("released"), "{log}");
    locker().args(["metrics", "a"]).exits_with(0);
    locker()
        .args(["acquire", "--key", "a", "--ttl", "5s"])
        .exits_with(0);
    locker().args(["release", "a", "--force"]).exits_with(0);
    locker().args(["pause", "a"]).exits_with(0);
    locker().args(["resume", "a"]).exits_with(0);
    locker().args(["log", "--all"]).exits_with(0);
}

/// A URL that names a user without a password (`redis://USER@host`) means that user: a
/// `nopass` user is let in as itself, any other is refused with 77, never `default` unsaid.
#[test]
fn a_url_naming_a_user_alone_authenticates_as_that_user() {
    let server = server_with_recipes();
    server.acl_setuser("open", &["on", "nopass", "~*", "&*", "+@all"]);
    let url = |user: &str| format!("redis://{user}@127.0.0.1:{}", server.port());
    let doctor = crate::support::Redlock::without_url()
        .args(["--url", &url("open"), "doctor"])
        .run();
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("ok   permissions: user open ")),
        "{doctor}"
    );
    crate::support::Redlock::without_url()
        .args(["--url", &url("locker"), "--prefix", "jobs:", "status", "a"])
        .exits_with(77)
        .error_mentions(&["did not let in the URL's user without a password (WRONGPASS)"])
        .error_does_not_mention("locker");
}

/// Without `rpush`, the force-release script deletes the lock and then fails on its audit
/// entry: the lock is gone, and `release --force` says it removed it, with 0 and one warning.
/// Without `del`, nothing is removed: the error stands (77) and the lock stays held.
#[test]
fn a_forced_release_refused_after_it_deleted_the_lock_says_it_removed_it() {
    let server = server_with_recipes();
    locker_without(&server, "norpush", &["rpush"]);
    locker_without(&server, "nodel", &["del"]);
    as_user(&server, "locker")
        .args(["acquire", "--key", "a", "--ttl", "1h"])
        .exits_with(0);
    as_user(&server, "nodel")
        .args(["release", "a", "--force"])
        .exits_with(77)
        .error_mentions(&["cannot release jobs:a"]);
    assert!(server.exists("jobs:a"), "the lock was removed without del");
    let out = as_user(&server, "norpush")
        .args(["release", "a", "--force"])
        .exits_with(0);
    out.error_mentions(&[
        "removed jobs:a (nothing holds it any more), but the release's records were not all written",
        "rpush",
    ]);
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(!server.exists("jobs:a"));
    // Nothing there: still "not held" (1), not a removal.
    as_user(&server, "norpush")
        .args(["release", "a", "--force"])
        .exits_with(1);
}

/// Without `hset`, the extend script moves the expiry and then fails on the holder record:
/// the lease is renewed, and `extend` says so, with 0 and one warning. Without `pexpire`
/// nothing is renewed: the error names the key and the operation.
#[test]
fn an_extend_refused_after_it_renewed_says_it_renewed() {
    let server = server_with_recipes();
    locker_without(&server, "noset", &["set"]);
    locker_without(&server, "nopexpire", &["pexpire"]);
    let out = as_user(&server, "locker")
        .args(["acquire", "--key", "a", "--ttl", "1m"])
        .exits_with(0);
    let token = out.stdout.lines().next().expect("token line").to_owned();
    as_user(&server, "nopexpire")
        .args(["extend", "--key", "a", "--token", &token, "--ttl", "1h"])
        .exits_with(77)
        .error_mentions(&["cannot extend jobs:a: "]);
    assert!(server.query::<i64>(&["PTTL", "jobs:a"]) <= 60_000);
    let out = as_user(&server, "noset")
        .args(["extend", "--key", "a", "--token", &token, "--ttl", "1h"])
        .exits_with(0);
    out.error_mentions(&[
        "renewed jobs:a for 1h, but the renewal's records were not all written",
        "set",
    ]);
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(server.query::<i64>(&["PTTL", "jobs:a"]) > 3_000_000);
}

/// A pause the user's ACL would refuse half way (without `rpush` the audit entry after the
/// pause record, without `pexpire` the end of a `--for` pause after the record) is refused
/// before anything is written: 77, and no pause in force that `pause` said it could not make.
/// A resume likewise leaves the pause in force; a resume whose wake of the queue is refused
/// (no `lpush`) is a resume all the same, and the waiter goes ahead at its next attempt.
#[test]
fn a_pause_or_resume_the_acl_refuses_changes_nothing() {
    let server = server_with_recipes();
    locker_without(&server, "norpush", &["rpush"]);
    locker_without(&server, "nopexpire", &["pexpire"]);
    locker_without(&server, "nolpush", &["lpush"]);
    for (user, pause, missing) in [
        ("norpush", &["a"][..], "rpush"),
        ("norpush", &["--all"], "rpush"),
        ("nopexpire", &["a", "--for", "1h"], "pexpire"),
    ] {
        let refused = as_user(&server, user)
            .arg("pause")
            .args(pause)
            .exits_with(77);
        refused.error_mentions(&[&format!("'{missing}'")]);
        refused.error_mentions(&["nothing was changed"]);
        for record in ["{jobs:a}:redlock:paused", "{jobs:}:redlock:paused"] {
            assert!(
                !server.exists(record),
                "{user} {pause:?}: {record} was written"
            );
        }
        as_user(&server, "locker")
            .args(["run", "--key", "a", "--ttl", "1h", "--", "true"])
            .exits_with(0);
    }
    for (resume, record) in [
        ("a", "{jobs:a}:redlock:paused"),
        ("--all", "{jobs:}:redlock:paused"),
    ] {
        as_user(&server, "locker")
            .args(["pause", resume])
            .exits_with(0);
        as_user(&server, "norpush")
            .args(["resume", resume])
            .exits_with(77)
            .error_mentions(&["nothing was changed"]);
        assert!(server.exists(record), "a refused resume lifted {record}");
    }
    as_user(&server, "locker")
        .args(["resume", "--all"])
        .exits_with(0);
    as_user(&server, "locker")
        .args(["pause", "a"])
        .exits_with(0);
    let waiter = as_user(&server, "locker")
        .args([
            "run", "--key", "a", "--ttl", "5s", "--wait", "60s", "--", "echo", "ran",
        ])
        .spawn();
    crate::support::wait_until(
        "the waiter to queue",
        std::time::Duration::from_secs(10),
        || (server.query::<usize>(&["ZCARD", "{jobs:a}:redlock:queue"]) == 1).then_some(()),
    );
    let resumed = as_user(&server, "nolpush")
        .args(["resume", "a"])
        .exits_with(0);
    assert_eq!(resumed.stdout, "resumed jobs:a\n", "{resumed}");
    assert_eq!(resumed.stderr, "", "{resumed}");
    let ran = waiter.exits_with(0);
    assert!(ran.stdout.contains("ran"), "{ran}");
}

/// A release whose read of the lock an ACL refuses is the release's error (77), never a lease
/// lost: the lock was the run's, and nothing says another holder had it.
#[test]
fn a_release_the_acl_may_not_read_is_no_lost_lease() {
    let server = server_with_recipes();
    locker_without(&server, "noget", &["get"]);
    let run = as_user(&server, "noget")
        .args(["run", "--key", "g", "--ttl", "1m", "--", "true"])
        .exits_with(0);
    run.error_mentions(&["cannot release jobs:g", "permission denied"])
        .error_does_not_mention("lost");
    let stats = server.lock_record("jobs:g");
    assert_eq!(
        stats.get("lost"),
        None,
        "a lost lease was recorded: {stats:?}"
    );
    let out = as_user(&server, "noget")
        .args(["acquire", "--key", "h", "--ttl", "1m"])
        .exits_with(0);
    let token = out.stdout.lines().next().expect("token line").to_owned();
    as_user(&server, "noget")
        .args(["release", "h", "--token", &token])
        .exits_with(77)
        .error_mentions(&["permission denied"]);
    assert!(
        server.exists("jobs:h"),
        "the refused release freed the lock"
    );
}
