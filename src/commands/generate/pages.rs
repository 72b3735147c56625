//! The words of each man page that clap cannot know about: ENVIRONMENT, EXAMPLES and SEE ALSO,
//! per page. Options and descriptions come from `cli.rs`, EXIT STATUS from the table in
//! `exit.rs`; `mod.rs` renders all of it.

/// What clap cannot know: the words for the sections after OPTIONS and EXIT STATUS.
pub(super) struct Prose {
    /// Said before the variables (`""`: nothing).
    pub env_intro: &'static str,
    /// (variable, what it means); an empty list leaves the section out.
    pub env: &'static [(&'static str, &'static str)],
    /// (what it does, the command lines)
    pub examples: &'static [(&'static str, &'static str)],
    pub see_also: &'static [&'static str],
}

const SEE_ALSO_ALL: &[&str] = &[
    "redlock(1)",
    "redlock-run(1)",
    "redlock-status(1)",
    "redlock-release(1)",
    "redlock-acquire(1)",
    "redlock-extend(1)",
    "redlock-doctor(1)",
    "redlock-pause(1)",
    "redlock-resume(1)",
    "redlock-metrics(1)",
    "redlock-check(1)",
    "redlock-log(1)",
    "crontab(5)",
];

/// The words for the main page (`None`) or a subcommand's.
pub(super) fn prose(sub: Option<&str>) -> Prose {
    let see_also = |me: &str| -> &'static [&'static str] {
        // Every page but its own; the list is short enough to spell out.
        match me {
            "run" => &SEE_ALSO_RUN,
            "status" => &SEE_ALSO_STATUS,
            "release" => &SEE_ALSO_RELEASE,
            "acquire" => &SEE_ALSO_ACQUIRE,
            "extend" => &SEE_ALSO_EXTEND,
            "doctor" => &SEE_ALSO_DOCTOR,
            "pause" => &SEE_ALSO_PAUSE,
            "resume" => &SEE_ALSO_RESUME,
            "metrics" => &SEE_ALSO_METRICS,
            "check" => &SEE_ALSO_CHECK,
            "log" => &SEE_ALSO_LOG,
            _ => &SEE_ALSO_ALL[1..],
        }
    };
    match sub {
        None => Prose {
            env_intro: "Each global option has an environment fallback; a flag on the command \
                line wins over it.",
            env: &[
                (
                    "REDLOCK_URL",
                    "Redis URL(s), comma-separated: redis://, rediss:// (certificates are \
                     verified) or redis+unix://. Several URLs form a quorum over independent \
                     masters. Or one redis+cluster://HOST:PORT[,HOST:PORT...] or \
                     redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB], over TLS as \
                     rediss+cluster:// and rediss+sentinel:// (TLS to the sentinels and to the \
                     master). Default redis://127.0.0.1:6379. Same as --url.",
                ),
                (
                    "REDLOCK_PASSWORD_FILE",
                    "A file whose first line is the Redis password, kept out of argv, crontabs \
                     and ps; it wins over a password in the URL. With Sentinel, the master's. \
                     Same as --password-file.",
                ),
                (
                    "REDLOCK_SENTINEL_PASSWORD_FILE",
                    "A file whose first line is the sentinels' own password (their \
                     requirepass), apart from the master's; Sentinel URLs only. A wrong one \
                     exits 77. Same as --sentinel-password-file.",
                ),
                (
                    "REDLOCK_SENTINEL_USER",
                    "The ACL user the sentinels know redlock as, with \
                     REDLOCK_SENTINEL_PASSWORD_FILE. Same as --sentinel-user.",
                ),
                (
                    "REDLOCK_PREFIX",
                    "Namespace prepended to every key, so staging never blocks production. Same \
                     as --prefix.",
                ),
                (
                    "REDLOCK_TIMEOUT",
                    "Connect and command timeout for talking to Redis outside the heartbeat \
                     (default 3s). Same as --timeout.",
                ),
                (
                    "REDLOCK_LOG_FORMAT",
                    "text (redlock: lines) or json (one object per line) for redlock's own \
                     messages on stderr. Same as --log-format.",
                ),
                (
                    "REDLOCK_KEY",
                    "Set for the command redlock run starts: the key as given, without the \
                     prefix, so redlock extend --key \"$REDLOCK_KEY\" works under the same \
                     REDLOCK_PREFIX.",
                ),
                (
                    "REDLOCK_TOKEN",
                    "Set for the command: the lock's token, for redlock extend and redlock \
                     release --token.",
                ),
                (
                    "REDLOCK_FENCE",
                    "Set for the command: the fencing token, a decimal integer larger than every \
                     fence handed out before for the key, even after the server lost its data \
                     (it is at least the server's clock in microseconds). Storage that remembers \
                     the highest fence it saw can reject the writes of a holder that lost its \
                     lease. With several --key, the first key's.",
                ),
                (
                    "REDLOCK_KEYS",
                    "Set for the command: every key given with --key, one a line, in order (one \
                     line for one key).",
                ),
                (
                    "REDLOCK_FENCES",
                    "Set for the command: each key's fence, one a line, in the order of \
                     REDLOCK_KEYS; each key has its own counter.",
                ),
            ],
            examples: &[
                (
                    "The same crontab on every host: exactly one host runs the job each time, \
                     the others exit 0 and print nothing (cron mails any output), and a crashed \
                     host frees the lock within a minute. Cron's PATH is /usr/bin:/bin: name the \
                     binary by its path.",
                    "REDLOCK_URL=redis://locks.internal:6379\n\
                     REDLOCK_PASSWORD_FILE=/etc/redlock/pass\n\
                     */10 * * * * /usr/local/bin/redlock -q run --key billing-sync --ttl 1m --conflict-exit-code 0 -- /usr/local/bin/billing-sync",
                ),
                (
                    "Count a run skipped because another host holds the lock as a success \
                     instead of 75:",
                    "redlock run --key billing-sync --ttl 1m --conflict-exit-code 0 -- /usr/local/bin/billing-sync",
                ),
                (
                    "Run a shell pipeline with -c, waiting up to five minutes for the lock:",
                    "redlock run --key backup --ttl 30s --wait 5m -c 'pg_dump app | gzip > /var/backups/app.sql.gz'",
                ),
                (
                    "Hold a lock across the steps of a shell script: acquire prints the token \
                     on its first line, extend renews it, release ends it.",
                    "lock=$(redlock acquire --key deploy --ttl 10m) || exit\n\
                     token=$(echo \"$lock\" | head -n 1)\n\
                     trap 'redlock release deploy --token \"$token\"' EXIT\n\
                     ./migrate\n\
                     redlock extend --key deploy --token \"$token\" --ttl 10m || exit\n\
                     ./switch-traffic",
                ),
                (
                    "Who holds a lock, since when, and whether the holder is alive; then the \
                     same as JSON, for every lock under the prefix:",
                    "redlock status billing-sync\n\
                     redlock status --all --json | jq '.locks[] | {key, state, holder}'",
                ),
                (
                    "Check that the server is fit for locks (eviction policy, persistence, \
                     replica, clock, ACL permissions):",
                    "redlock doctor",
                ),
            ],
            see_also: see_also(""),
        },
        Some("run") => Prose {
            env_intro: "The command runs in its own process group (and, where redlock may make \
                one, in a cgroup of its own), with redlock's stdin, stdout and stderr and its \
                environment plus:",
            env: &[
                (
                    "REDLOCK_KEY",
                    "The key as given, without the prefix (the first, with several --key).",
                ),
                (
                    "REDLOCK_TOKEN",
                    "The lock's token (a UUID), one for all the keys.",
                ),
                (
                    "REDLOCK_FENCE",
                    "The fencing token: a decimal integer that only grows with each acquisition \
                     of the key (the first key's, with several --key).",
                ),
                (
                    "REDLOCK_KEYS",
                    "Every key given with --key, one a line, in order.",
                ),
                (
                    "REDLOCK_FENCES",
                    "Each key's fence, one a line, in the order of REDLOCK_KEYS.",
                ),
                (
                    "REDLOCK_SLOT",
                    "With --slots N: this holder's slot, 0 to N-1, unique among the key's \
                     current holders (0 with --slots 1). Not set otherwise.",
                ),
            ],
            examples: &[
                (
                    "A crontab line for every host; the others exit 75 while one runs the job \
                     (cron's PATH is /usr/bin:/bin: name the binary by its path):",
                    "*/10 * * * * /usr/local/bin/redlock run --key billing-sync --ttl 1m -- /usr/local/bin/billing-sync",
                ),
                (
                    "The same, counting a skipped run as success and printing nothing for it, \
                     so that cron mails nobody:",
                    "*/10 * * * * /usr/local/bin/redlock -q run --key billing-sync --ttl 1m --conflict-exit-code 0 -- /usr/local/bin/billing-sync",
                ),
                (
                    "A shell command, waiting up to five minutes for the lock:",
                    "redlock run --key backup --ttl 30s --wait 5m -c 'pg_dump app | gzip > /var/backups/app.sql.gz'",
                ),
                (
                    "Run each tick of a schedule once even when the hosts' clocks differ by \
                     seconds: the lock stays taken for four minutes, so a host whose clock lags \
                     finds it busy, and is free again for the next tick.",
                    "*/5 * * * * /usr/local/bin/redlock -q run --key heartbeat-mail --ttl 30s --hold-at-least 4m --conflict-exit-code 0 -- send-heartbeat",
                ),
                (
                    "A rolling restart across hosts: at most two hosts restart at once, each \
                     waiting its turn; REDLOCK_SLOT says which of the two places it has:",
                    "redlock run --key restart:web --slots 2 --ttl 1m --wait 30m -- \\\n    \
                     sh -c 'echo \"slot $REDLOCK_SLOT\"; systemctl restart web && ./wait-healthy'",
                ),
                (
                    "Readers share a lock; the backup takes it alone (it waits for the readers \
                     to finish, and readers that come later wait for it):",
                    "redlock run --key db:prod --shared --ttl 30s -- ./report.sh\n\
                     redlock run --key db:prod --ttl 30s --wait 1h -- ./backup.sh",
                ),
                (
                    "As a Kubernetes CronJob's entrypoint, configured from the environment and \
                     a Secret mounted as a file:",
                    "command: [redlock, run, --key, nightly-report, --ttl, 2m, --, python, -m, report]\n\
                     env:\n\
                     - {name: REDLOCK_URL, value: \"rediss://redis.prod:6380\"}\n\
                     - {name: REDLOCK_PASSWORD_FILE, value: /run/secrets/redis/password}",
                ),
            ],
            see_also: see_also("run"),
        },
        Some("status") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Who holds a lock, since when, whether the holder still renews it, and how \
                     the last run ended:",
                    "redlock status billing-sync",
                ),
                (
                    "In a script: is the lock held?",
                    "if redlock status -q billing-sync > /dev/null; then echo busy; fi",
                ),
                (
                    "Every lock under the prefix, as one JSON document:",
                    "redlock status --all --json | jq '.locks[] | {key, state, holder}'",
                ),
                (
                    "Include the holder's token, to release it by token:",
                    "redlock status --show-token billing-sync",
                ),
            ],
            see_also: see_also("status"),
        },
        Some("release") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Release a lock taken with redlock acquire, only if it is still ours:",
                    "redlock release deploy --token \"$token\"",
                ),
                (
                    "During an incident, remove a stuck lock whoever holds it, and print whom \
                     it removed:",
                    "redlock status billing-sync\nredlock release billing-sync --force",
                ),
                (
                    "A shared or slotted lock: --force removes every holder (one line each); \
                     --token ends only that holder's hold:",
                    "redlock release render --force\nredlock release render --token \"$token\"",
                ),
            ],
            see_also: see_also("release"),
        },
        Some("acquire") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Hold a lock across several steps of a script; nothing renews it but \
                     extend, so it expires by itself if the script dies:",
                    "lock=$(redlock acquire --key deploy --ttl 10m) || exit\n\
                     token=$(echo \"$lock\" | head -n 1)\n\
                     trap 'redlock release deploy --token \"$token\"' EXIT\n\
                     ./migrate\n\
                     redlock extend --key deploy --token \"$token\" --ttl 10m || exit\n\
                     ./switch-traffic",
                ),
                (
                    "The token, fence and deadline as JSON:",
                    "redlock acquire --key deploy --ttl 10m --json | jq -r .token",
                ),
                (
                    "Take one of three slots; the slot is the third line:",
                    "lock=$(redlock acquire --key render --slots 3 --ttl 10m) || exit\n\
                     slot=$(echo \"$lock\" | sed -n 3p)",
                ),
            ],
            see_also: see_also("acquire"),
        },
        Some("extend") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Renew between two long steps of a script, and stop if the lock is lost:",
                    "redlock extend --key deploy --token \"$token\" --ttl 10m || exit",
                ),
                (
                    "From inside a command started by redlock run (which renews by itself; \
                     this stretches the lease further):",
                    "redlock extend --key \"$REDLOCK_KEY\" --token \"$REDLOCK_TOKEN\" --ttl 5m",
                ),
            ],
            see_also: see_also("extend"),
        },
        Some("doctor") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Check the server cron jobs use, as the user they use:",
                    "REDLOCK_URL=redis://cron@locks.internal:6379 REDLOCK_PASSWORD_FILE=/etc/redlock/pass redlock doctor",
                ),
                (
                    "A server without persistence, where a restart would forget every lock:",
                    "$ redlock doctor\n\
                     ok   version: Redis 7.0.15\n\
                     ok   role: primary\n\
                     ok   maxmemory-policy: noeviction\n\
                     warn persistence: neither AOF nor RDB snapshots are on: ...; fix: ...\n\
                     ok   latency: median round trip 0.09ms over 10 PINGs (slowest 0.20ms)\n\
                     ok   clock: this host's clock and the server's agree within 1ms ...\n\
                     ok   permissions: user cron can acquire, extend and release a lock ...\n\
                     redlock: 1 warning; see the fix on each line above",
                ),
                (
                    "Check only the namespace a deployment uses:",
                    "redlock doctor --prefix prod:",
                ),
            ],
            see_also: see_also("doctor"),
        },
        Some("pause") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "Before a database migration: stop new nightly runs for up to two hours, and \
                     wait up to 10 minutes for the ones running now:",
                    "redlock pause billing-sync report-daily --for 2h --reason 'DB migration, ops-123' --drain 10m",
                ),
                (
                    "Pause every lock under the prefix until resumed:",
                    "redlock --prefix prod: pause --all --reason 'datacenter switch'",
                ),
                (
                    "What a refused run prints:",
                    "$ redlock run --key billing-sync --ttl 1m -- ./sync\n\
                     redlock: billing-sync is paused by ops-1 (user alice) since \
                     2026-11-23T02:00:00Z: \"DB migration, ops-123\", until 2026-11-23T04:00:00Z \
                     (in 1h 59m); not running the command",
                ),
            ],
            see_also: see_also("pause"),
        },
        Some("resume") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "After the maintenance:",
                    "redlock resume billing-sync report-daily",
                ),
                (
                    "Lift the prefix-wide pause and every key's own pause under the prefix:",
                    "redlock --prefix prod: resume --all",
                ),
            ],
            see_also: see_also("resume"),
        },
        Some("metrics") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "For node_exporter's textfile collector, every minute from cron (the file is \
                     renamed into place, so the collector never reads half of it):",
                    "* * * * * redlock metrics --all --prefix prod: > /var/lib/node_exporter/redlock.prom.$$ && mv /var/lib/node_exporter/redlock.prom.$$ /var/lib/node_exporter/redlock.prom",
                ),
                (
                    "Or from the run itself, written when it ends:",
                    "redlock run --key billing-sync --ttl 1m --metrics-file /var/lib/node_exporter/billing-sync.prom -- ./sync",
                ),
            ],
            see_also: see_also("metrics"),
        },
        Some("check") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "A nightly job that must succeed at least once a day and never run for more \
                     than two hours:",
                    "$ redlock check billing-sync --max-age 2h --max-since-success 26h\n\
                     REDLOCK OK - billing-sync is fine",
                ),
                (
                    "An Icinga 2 CheckCommand:",
                    "object CheckCommand \"redlock\" {\n\
                     \x20 command = [ \"/usr/bin/redlock\", \"check\", \"$redlock_key$\", \"--max-since-success\", \"$redlock_max_since_success$\" ]\n\
                     \x20 env.REDLOCK_URL = \"$redlock_url$\"\n\
                     }",
                ),
                (
                    "Nagios (commands.cfg):",
                    "define command {\n\
                     \x20 command_name check_redlock\n\
                     \x20 command_line REDLOCK_URL=$ARG1$ /usr/bin/redlock check $ARG2$ --max-since-success $ARG3$\n\
                     }",
                ),
            ],
            see_also: see_also("check"),
        },
        Some("log") => Prose {
            env_intro: "",
            env: &[],
            examples: &[
                (
                    "During an incident, what happened to a lock in the last two hours:",
                    "redlock log report:daily --since 2h",
                ),
                (
                    "Watch every lock under a prefix as things happen (Ctrl-C to stop):",
                    "redlock --prefix prod: log --all --follow",
                ),
                (
                    "Feed a log shipper one JSON object per line:",
                    "redlock log --all --follow --json | vector --config ship.toml",
                ),
            ],
            see_also: see_also("log"),
        },
        Some(_) => Prose {
            env_intro: "",
            env: &[],
            examples: &[],
            see_also: see_also(""),
        },
    }
}

const SEE_ALSO_RUN: [&str; 4] = [
    "redlock(1)",
    "redlock-status(1)",
    "redlock-doctor(1)",
    "crontab(5)",
];
const SEE_ALSO_STATUS: [&str; 3] = ["redlock(1)", "redlock-release(1)", "redlock-run(1)"];
const SEE_ALSO_RELEASE: [&str; 3] = ["redlock(1)", "redlock-status(1)", "redlock-acquire(1)"];
const SEE_ALSO_ACQUIRE: [&str; 3] = ["redlock(1)", "redlock-extend(1)", "redlock-release(1)"];
const SEE_ALSO_EXTEND: [&str; 3] = ["redlock(1)", "redlock-acquire(1)", "redlock-release(1)"];
const SEE_ALSO_DOCTOR: [&str; 3] = ["redlock(1)", "redlock-run(1)", "redlock-status(1)"];
const SEE_ALSO_PAUSE: [&str; 4] = [
    "redlock(1)",
    "redlock-resume(1)",
    "redlock-status(1)",
    "redlock-check(1)",
];
const SEE_ALSO_RESUME: [&str; 3] = ["redlock(1)", "redlock-pause(1)", "redlock-status(1)"];
const SEE_ALSO_METRICS: [&str; 3] = ["redlock(1)", "redlock-status(1)", "redlock-check(1)"];
const SEE_ALSO_CHECK: [&str; 3] = ["redlock(1)", "redlock-metrics(1)", "redlock-pause(1)"];
const SEE_ALSO_LOG: [&str; 3] = ["redlock(1)", "redlock-status(1)", "redlock-release(1)"];

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;
    use crate::report::exit::Status;

    #[test]
    fn every_visible_subcommand_has_its_own_exit_status_and_examples() {
        let mut cmd = Cli::command();
        cmd.build();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let text = prose(Some(sub.get_name()));
            assert!(
                Status::of(Some(sub.get_name())).count() > 2,
                "{} has no EXIT STATUS",
                sub.get_name()
            );
            assert!(
                !text.examples.is_empty(),
                "{} has no EXAMPLES",
                sub.get_name()
            );
        }
    }
}
