//! The rules doctor suggests and the refusals it reads, without a server.

use super::*;
use crate::report::error::server_error;

#[test]
fn refusals_name_what_is_missing() {
    let noperm =
        server_error("NOPERM this user has no permissions to run the 'config|get' command");
    assert!(is_denied(&noperm));
    assert_eq!(
        what_is_missing(&noperm, "CONFIG", Need::Run),
        Missing::Command("config|get".into(), Need::Run)
    );
    let keys = server_error(
        "NOPERM this user has no permissions to access one of the keys used as arguments",
    );
    assert_eq!(what_is_missing(&keys, "GET", Need::Run), Missing::Keys);
    let channels = server_error(
        "NOPERM this user has no permissions to access one of the channels used as arguments",
    );
    assert_eq!(
        what_is_missing(&channels, "PUBLISH", Need::Run),
        Missing::Channels
    );
    let script = server_error(
        "ERR The user executing the script can't run this command or subcommand script: abc",
    );
    assert!(is_denied(&script));
    assert!(!is_denied(&server_error("NOSCRIPT No matching script")));
}

#[test]
fn valkeys_refusals_name_what_is_missing_too() {
    for (reply, missing) in [
        (
            "NOPERM User peek has no permissions to run the 'hmget' command",
            Missing::Command("hmget".into(), Need::Run),
        ),
        (
            "ERR ACL failure in script: User peek has no permissions to run the 'hmget' \
             command script: on @user_script:1.",
            Missing::Command("hmget".into(), Need::Run),
        ),
        ("NOPERM No permissions to access a key", Missing::Keys),
        (
            "ERR ACL failure in script: No permissions to access a key script: on \
             @user_script:1.",
            Missing::Keys,
        ),
        (
            "NOPERM No permissions to access a channel",
            Missing::Channels,
        ),
    ] {
        let err = server_error(reply);
        assert!(is_denied(&err), "{reply}");
        assert_eq!(
            what_is_missing(&err, "EVALSHA", Need::Run),
            missing,
            "{reply}"
        );
    }
}

#[test]
fn the_user_comes_from_the_redacted_url() {
    assert_eq!(user_in_url("redis://cron:***@host:6379/0"), "cron");
    assert_eq!(user_in_url("redis://host:6379"), "default");
    assert_eq!(user_in_url("redis://:***@host"), "default");
    assert_eq!(user_in_url("redis://***@host"), "USER");
    assert_eq!(user_in_url("redis+unix:///tmp/r.sock"), "default");
}

#[test]
fn patterns_cover_the_companion_keys_hash_tags() {
    assert_eq!(key_patterns(""), "~*");
    assert_eq!(key_patterns("prod:"), "~prod:* ~{prod:*");
    assert_eq!(channel_patterns("prod:"), "&prod:* &{prod:*");
}

#[test]
fn every_key_is_the_lock_and_its_companions() {
    for key in ["report:daily", "jobs:{report}:daily"] {
        let keys = Keys::new("prod:", key).unwrap();
        assert_eq!(
            every_key(&keys),
            [
                keys.lock.clone(),
                keys.fence.clone(),
                keys.holder.clone(),
                keys.stats.clone(),
                keys.queue.clone(),
                keys.alive.clone(),
                keys.waiters.clone(),
                keys.paused.clone(),
                keys.leases.clone(),
                keys.holders.clone(),
                keys.once.clone(),
                keys.log.clone()
            ]
        );
    }
}

/// Whether an ACL pattern list (`~a* ~{a*`, `&a*`) lets a name through.
fn allows(patterns: &str, name: &str) -> bool {
    patterns.split_whitespace().any(|pattern| {
        let glob = &pattern[1..];
        match glob.strip_suffix('*') {
            Some(start) => name.starts_with(start),
            None => name == glob,
        }
    })
}

#[test]
fn the_patterns_let_through_every_name_of_a_lock_under_the_prefix() {
    for key in ["report:daily", "jobs:{report}:daily", "{report}"] {
        let keys = Keys::new("prod:", key).unwrap();
        for name in every_key(&keys) {
            assert!(allows(&key_patterns("prod:"), &name), "{name}");
        }
        assert!(allows(&channel_patterns("prod:"), &keys.channel));
    }
    assert!(!allows(&key_patterns("prod:"), "staging:report"));
}

#[test]
fn diagnose_tries_every_command_a_script_calls() {
    let keys = Keys::new("prod:", "report").unwrap();
    let every = every_key(&keys);
    let tries = tries(&keys, &every, "2000");
    for command in scripts::commands() {
        assert!(
            tries
                .iter()
                .any(|(need, name, _)| *name == command && *need != Need::Status),
            "diagnose does not try {command}, which a script calls"
        );
    }
    for rule in run_rules().split(' ').chain(STATUS_RULES.split(' ')) {
        let command = rule[1..].split('|').next().unwrap().to_uppercase();
        assert!(
            tries.iter().any(|(_, name, _)| *name == command) || command == "SUBSCRIBE",
            "diagnose does not try {command}"
        );
    }
}

/// The guide's `ACL SETUSER NAME ...` line ("Least-privilege ACL users").
fn guide_recipe(user: &str) -> String {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md"))
        .expect("read docs/guide.md");
    let start = format!("ACL SETUSER {user} ");
    guide
        .lines()
        .find(|line| line.starts_with(&start))
        .unwrap_or_else(|| panic!("docs/guide.md has no line starting with {start:?}"))
        .to_owned()
}

#[test]
fn the_guide_recipes_grant_what_run_and_status_need() {
    let locker = guide_recipe("locker");
    let rules: Vec<&str> = locker.split_whitespace().collect();
    for rule in run_rules().split(' ').chain(STATUS_RULES.split(' ')) {
        assert!(
            rules.contains(&rule),
            "docs/guide.md's locker recipe lacks {rule}, which redlock needs: {locker}"
        );
    }
    for pattern in key_patterns("jobs:")
        .split(' ')
        .chain(channel_patterns("jobs:").split(' '))
    {
        assert!(rules.contains(&pattern), "{pattern}: {locker}");
    }
    let reader = guide_recipe("lockreader");
    let rules: Vec<&str> = reader.split_whitespace().collect();
    for rule in STATUS_RULES.split(' ').chain(["+pttl"]) {
        assert!(rules.contains(&rule), "{rule}: {reader}");
    }
}
