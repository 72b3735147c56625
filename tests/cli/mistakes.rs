//! The mistakes people make on their first day, each with the status it ends with and the
//! words its one `redlock:` line must carry: the real cause and the next step, never a
//! misleading one (a refused connection is not a TLS problem), never a password, never a
//! panic. Every row is run twice: as text, and with `REDLOCK_LOG_FORMAT=json`, where every
//! stderr line must be JSON and the last one must carry the status as `exit`.
//!
//! A row's line is split on spaces, except inside single quotes (`'1h 30m'`, `''`). Lines that
//! name no server (no `--url`, no `REDLOCK_URL`) get `--url` of a plain server first, so that a
//! usage error (64) can be checked to have contacted nothing and written nothing.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::server_kind;
use crate::support::{Certs, Outcome, RedisServer, Redlock, TempDir, free_port};

/// One mistake: the words after `redlock` (placeholders in braces, see [`Servers::fill`]), the
/// environment, the status, words the line must contain (each of them, case-insensitive) and
/// words it must not.
struct Row {
    line: &'static str,
    env: &'static [(&'static str, &'static str)],
    exit: i32,
    says: &'static [&'static str],
    not: &'static [&'static str],
}

const fn row(line: &'static str, exit: i32, says: &'static [&'static str]) -> Row {
    Row {
        line,
        env: &[],
        exit,
        says,
        not: &[],
    }
}

const fn env_row(
    env: &'static [(&'static str, &'static str)],
    line: &'static str,
    says: &'static [&'static str],
    not: &'static [&'static str],
) -> Row {
    Row {
        line,
        env,
        exit: 64,
        says,
        not,
    }
}

/// The password the servers below are set up with, and a wrong one: neither may ever show.
const PASSWORD: &str = "s3cret-pw";
const WRONG: &str = "wr0ng-pw";

/// Mistakes caught before anything is contacted (64).
const USAGE: &[Row] = &[
    // clap's symptoms, rewritten as the mistakes behind them.
    row(
        "run --key job --ttl 5s --wait -- true",
        64,
        &["--wait needs a value"],
    ),
    row(
        "run --key job --ttl 5s --kill-after -- true",
        64,
        &["--kill-after needs a value"],
    ),
    row(
        "run --key job --ttl 5s echo hi",
        64,
        &["put the command after '--'", "'echo'"],
    ),
    row(
        "run --key job --ttl 1h 30m -- true",
        64,
        &["quoted", "--ttl '1h 30m'", "1h30m"],
    ),
    Row {
        not: &["'0s'", "'0ms'"],
        ..row(
            "run --key job --ttl 0 -- true",
            64,
            &["--ttl", "missing unit"],
        )
    },
    Row {
        not: &["'0s'", "'0ms'"],
        ..row("acquire --key job --ttl 0", 64, &["--ttl", "missing unit"])
    },
    row(
        "run --key job --tll 5s -- true",
        64,
        &["unknown option '--tll'", "did you mean '--ttl'"],
    ),
    row(
        "run --key job --ttl 5s --wiat 1s -- true",
        64,
        &["did you mean '--wait'"],
    ),
    row(
        "rnu --key job --ttl 5s -- true",
        64,
        &["unknown subcommand 'rnu'", "did you mean 'run'"],
    ),
    row("stauts job", 64, &["did you mean 'status'"]),
    row("frobnicate job", 64, &["unknown subcommand", "run, status"]),
    row(
        "run --key job --ttl 5s --frobnicate -- true",
        64,
        &["unknown option '--frobnicate'", "redlock run --help"],
    ),
    row(
        "--wait=5s run --key job --ttl 5s -- true",
        64,
        &["--wait is an option of 'run'", "after 'run'"],
    ),
    // Values named as given: the environment variable, not the flag.
    env_row(
        &[("REDLOCK_URL", "http://x")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_URL=http://x", "unsupported scheme"],
        &["--url"],
    ),
    env_row(
        &[("REDLOCK_URL", "redis://:99999")],
        "status job",
        &["REDLOCK_URL="],
        &["--url"],
    ),
    env_row(
        &[("REDLOCK_TIMEOUT", "5")],
        "status job",
        &["REDLOCK_TIMEOUT", "'5s'"],
        &["--timeout"],
    ),
    env_row(
        &[("REDLOCK_TIMEOUT", "fast")],
        "status job",
        &["REDLOCK_TIMEOUT", "not a duration", "'3s'"],
        &["--timeout", "expected number"],
    ),
    env_row(
        &[("REDLOCK_TIMEOUT", "0s")],
        "status job",
        &["REDLOCK_TIMEOUT must be greater than 0"],
        &["--timeout"],
    ),
    env_row(
        &[("REDLOCK_MAX_WAITERS", "2")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_MAX_WAITERS needs --wait"],
        &["--max-waiters"],
    ),
    env_row(
        &[("REDLOCK_MAX_WAITERS", "many")],
        "run --key job --ttl 5s --wait 1s -- true",
        &["REDLOCK_MAX_WAITERS"],
        &["--max-waiters"],
    ),
    env_row(
        &[("REDLOCK_PASSWORD_FILE", "/nonexistent/pw")],
        "status job",
        &["REDLOCK_PASSWORD_FILE=/nonexistent/pw"],
        &["--password-file"],
    ),
    env_row(
        &[("REDLOCK_TLS_CA_FILE", "/nonexistent/ca.crt")],
        "status job",
        &["REDLOCK_TLS_CA_FILE=/nonexistent/ca.crt"],
        &["--tls-ca-file"],
    ),
    env_row(
        &[("REDLOCK_CONTAIN", "jail")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_CONTAIN", "auto, descendants"],
        &["--contain"],
    ),
    env_row(
        &[("REDLOCK_MAX_RUNTIME", "soon")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_MAX_RUNTIME"],
        &["--max-runtime"],
    ),
    env_row(
        &[("REDLOCK_ONCE_PER", "-1h")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_ONCE_PER", "negative"],
        &["--once-per"],
    ),
    env_row(
        &[("REDLOCK_REPLICAS", "some")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_REPLICAS"],
        &["--replicas"],
    ),
    env_row(
        &[("REDLOCK_LOG_FORMAT", "yaml")],
        "status job",
        &["REDLOCK_LOG_FORMAT", "text, json"],
        &["--log-format"],
    ),
    // Durations.
    row("run --key job --ttl 499ms -- true", 64, &["500ms"]),
    row("run --key job --ttl 0s -- true", 64, &["--ttl", "500ms"]),
    row(
        "run --key job --ttl '24h 1s' -- true",
        64,
        &["--ttl", "24h"],
    ),
    // `M` is months, `m` minutes.
    row(
        "run --key job --ttl 5M -- true",
        64,
        &["--ttl", "M is months, m minutes", "5m"],
    ),
    row(
        "run --key job --ttl 5 mins -- true",
        64,
        &["quoted", "--ttl '5 mins'", "5m"],
    ),
    Row {
        not: &["expected number"],
        ..row(
            "log job --since yesterday",
            64,
            &["--since", "not a duration", "'6h'"],
        )
    },
    row(
        "run --key job --ttl -1s -- true",
        64,
        &["--ttl", "negative"],
    ),
    row("run --key job --ttl 30 -- true", 64, &["--ttl", "'30s'"]),
    Row {
        not: &["expected number"],
        ..row(
            "run --key job --ttl soon -- true",
            64,
            &["--ttl", "not a duration", "'3s'"],
        )
    },
    row(
        "run --key job --ttl 99999999999999999999h -- true",
        64,
        &["--ttl"],
    ),
    row(
        "run --key job --ttl 5s --wait -5s -- true",
        64,
        &["--wait", "negative"],
    ),
    row(
        "run --key job --ttl 5s --wait 'a while' -- true",
        64,
        &["--wait"],
    ),
    row(
        "run --key job --ttl 3s --kill-after 1s -- true",
        64,
        &["--kill-after", "raise --ttl"],
    ),
    row(
        "run --key job --ttl 3s --kill-after 0s -- true",
        64,
        &["--kill-after must be greater than 0"],
    ),
    row(
        "run --key job --ttl 5s --hold-at-least x -- true",
        64,
        &["--hold-at-least"],
    ),
    row(
        "run --key job --ttl 5s --once-per 5 -- true",
        64,
        &["--once-per", "'5s'"],
    ),
    row(
        "--timeout 0s status job",
        64,
        &["--timeout must be greater than 0"],
    ),
    // Keys, commands, and what goes together.
    row("run --key '' --ttl 5s -- true", 64, &["--key is empty"]),
    row("run --ttl 5s -- true", 64, &["--key"]),
    row("run --key job -- true", 64, &["--ttl"]),
    row("run --key job --ttl 5s", 64, &["missing command", "--"]),
    row(
        "run --key job --ttl 5s -c true -- true",
        64,
        &["-c", "cannot be used"],
    ),
    row("status", 64, &["<KEY>"]),
    row(
        "run --key job --ttl 5s --conflict-exit-code 256 -- true",
        64,
        &["--conflict-exit-code", "256"],
    ),
    // A negative value reads as an option to clap: said as the value it is.
    Row {
        not: &["unknown option"],
        ..row(
            "run --key job --ttl 5s --conflict-exit-code -1 -- true",
            64,
            &["--conflict-exit-code", "-1", "0..=255"],
        )
    },
    // `release` takes its key as an argument, and --force is the way to end a hold one does
    // not have the token of.
    row("release job", 64, &["--token TOKEN", "--force"]),
    Row {
        not: &["unknown option"],
        ..row(
            "release --key job --token t",
            64,
            &[
                "takes the key as an argument",
                "redlock release KEY",
                "--force",
            ],
        )
    },
    row(
        "run --key job --ttl 5s --max-waiters 1 -- true",
        64,
        &["--max-waiters needs --wait"],
    ),
    // --wait 0s is not to wait: there is no queue to limit.
    row(
        "run --key job --ttl 5s --wait 0s --max-waiters 1 -- true",
        64,
        &["--max-waiters needs --wait longer than 0s"],
    ),
    env_row(
        &[("REDLOCK_MAX_WAITERS", "1")],
        "run --key job --ttl 5s --wait 0s -- true",
        &["REDLOCK_MAX_WAITERS needs --wait longer than 0s"],
        &[],
    ),
    row(
        "run --key job --ttl 5s --replace --no-replace -- true",
        64,
        &["--replace cannot be used with --no-replace"],
    ),
    // A label stands for the command in the records: it says something, as -c must.
    row(
        "run --key job --ttl 5s --label '' -- true",
        64,
        &["--label is empty"],
    ),
    row(
        "run --key job --ttl 5s --label ' ' -- true",
        64,
        &["--label is empty"],
    ),
    row("release job --token ''", 64, &["--token is empty"]),
    row(
        "extend --key job --token ' ' --ttl 5s",
        64,
        &["--token is empty"],
    ),
    env_row(
        &[("REDLOCK_LABEL", "")],
        "run --key job --ttl 5s -- true",
        &["REDLOCK_LABEL is empty"],
        &[],
    ),
    row(
        "acquire --key job --ttl 5s --label ''",
        64,
        &["--label is empty"],
    ),
    // A key given as an argument is named as one.
    Row {
        not: &["--key"],
        ..row("status ''", 64, &["KEY is empty"])
    },
    Row {
        not: &["--key"],
        ..row("release '' --force", 64, &["KEY is empty"])
    },
    Row {
        not: &["--key"],
        ..row("pause job ''", 64, &["KEY is empty"])
    },
    row(
        "run --key job --ttl 5s --wait 1s --max-waiters 0 -- true",
        64,
        &["--max-waiters", "at least 1"],
    ),
    row(
        "run --key job --ttl 5s --replace --shared -- true",
        64,
        &["--replace"],
    ),
    row(
        "run --key job --ttl 5s --shared --slots 2 -- true",
        64,
        &["--shared", "--slots"],
    ),
    row(
        "run --key job --ttl 5s --slots 0 -- true",
        64,
        &["--slots must be at least 1"],
    ),
    row(
        "run --key job --ttl 5s --retry-failed -- true",
        64,
        &["--retry-failed needs --once-per"],
    ),
    row(
        "run --key job --ttl 5s --tls-cert-file /nonexistent -- true",
        64,
        &["--tls-cert-file", "--tls-key-file"],
    ),
    row(
        "run --key job --ttl 5s --sentinel-user locker -- true",
        64,
        &["--sentinel-password-file"],
    ),
    row(
        "--log-format yaml status job",
        64,
        &["--log-format", "text, json"],
    ),
    // URLs.
    row(
        "--url http://x run --key job --ttl 5s -- true",
        64,
        &["--url http://x", "unsupported scheme"],
    ),
    row("--url redis://:99999 status job", 64, &["--url"]),
    row(
        "--url redis+sentinel://127.0.0.1:1 status job",
        64,
        &["service name"],
    ),
    row(
        "--url {url} run --url {url} --key job --ttl 5s -- true",
        64,
        &["--url", "both before and after 'run'"],
    ),
    row(
        "--url {url} --url {url} run --key job --ttl 5s -- true",
        64,
        &["one Redis server"],
    ),
    Row {
        not: &[PASSWORD],
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:99999 status job",
            64,
            &["--url"],
        )
    },
];

/// Mistakes only a server can reveal: each against a real one (or a real absence of one).
const SERVERS: &[Row] = &[
    // Nothing listens: no TLS in the message, whatever the crate calls the error.
    Row {
        not: &["TLS"],
        ..row(
            "--url redis://127.0.0.1:{free} run --key job --ttl 5s -- true",
            69,
            &[
                "nothing listens on 127.0.0.1:{free}",
                "connection refused",
                "redlock doctor",
            ],
        )
    },
    Row {
        not: &["TLS"],
        ..row(
            "--url redis://127.0.0.1:{free} status job",
            69,
            &["nothing listens", "is Redis running"],
        )
    },
    Row {
        not: &["TLS"],
        ..row(
            "--url redis://no-such-host.invalid:6379 run --key job --ttl 5s -- true",
            69,
            &["no-such-host.invalid", "unknown host"],
        )
    },
    // Something takes the connection and never answers.
    Row {
        not: &["TLS"],
        ..row(
            "--timeout 1s --url redis://127.0.0.1:{silent} run --key job --ttl 5s -- true",
            69,
            &[
                "127.0.0.1:{silent}",
                "did not answer within 1s",
                "timed out",
            ],
        )
    },
    // A cluster URL at a server that is no cluster node.
    Row {
        not: &["ClusterConnectionNotFound", "No connections found"],
        ..row(
            "--url redis+cluster://127.0.0.1:{plain} status job",
            69,
            &[
                "127.0.0.1:{plain}",
                "not in cluster mode",
                "use redis://127.0.0.1:{plain}",
            ],
        )
    },
    Row {
        not: &["ClusterConnectionNotFound", "No connections found"],
        ..row(
            "--url redis+cluster://127.0.0.1:{plain} run --key job --ttl 5s -- true",
            69,
            &["not in cluster mode", "for a single server"],
        )
    },
    // rediss:// at a plain port, redis:// at a TLS-only one.
    row(
        "--timeout 1s --url rediss://127.0.0.1:{plain} run --key job --ttl 5s -- true",
        69,
        &["no TLS answer", "plain port", "redis://"],
    ),
    row(
        "--url redis://localhost:{tls} run --key job --ttl 5s -- true",
        69,
        &["closed the connection", "TLS port", "rediss://"],
    ),
    // Passwords: wrong, unknown user, given to a server without one, missing.
    Row {
        not: &[WRONG, PASSWORD],
        ..row(
            "--url redis://:wr0ng-pw@127.0.0.1:{secured} run --key job --ttl 5s -- true",
            77,
            &["refused the password", "check the password"],
        )
    },
    Row {
        not: &[WRONG, PASSWORD],
        ..row(
            "--url redis://nobody:wr0ng-pw@127.0.0.1:{plain} status job",
            77,
            &["refused the password", "user"],
        )
    },
    Row {
        not: &[PASSWORD],
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:{plain} run --key job --ttl 5s -- true",
            77,
            &["has no password set", "drop the password"],
        )
    },
    Row {
        not: &[PASSWORD],
        ..row(
            "--url redis://127.0.0.1:{plain} --password-file {pwfile} status job",
            77,
            &["has no password set", "--password-file"],
        )
    },
    // A password file named in the environment is named by its variable.
    Row {
        env: &[("REDLOCK_PASSWORD_FILE", "{pwfile}")],
        not: &[PASSWORD, "--password-file"],
        ..row(
            "--url redis://127.0.0.1:{plain} status job",
            77,
            &["has no password set", "REDLOCK_PASSWORD_FILE"],
        )
    },
    Row {
        env: &[("REDLOCK_PASSWORD_FILE", "{wrongfile}")],
        not: &[WRONG, "--password-file"],
        ..row(
            "--url redis://127.0.0.1:{secured} run --key job --ttl 5s -- true",
            77,
            &["refused the password", "REDLOCK_PASSWORD_FILE"],
        )
    },
    // A script is a request large enough that the server answers it with a protocol error
    // rather than NOAUTH: the same words, without the protocol's.
    Row {
        not: &["Protocol error", "multibulk", "ResponseError"],
        ..row(
            "--url redis://127.0.0.1:{secured} run --key job --ttl 5s -- true",
            77,
            &[
                "requires a password",
                "--password-file",
                "REDLOCK_PASSWORD_FILE",
                "in the URL",
            ],
        )
    },
    Row {
        not: &["NOAUTH", "+info"],
        ..row(
            "--url redis://127.0.0.1:{secured} status job",
            77,
            &["requires a password", "--password-file"],
        )
    },
    // An ACL user without the commands redlock runs.
    Row {
        not: &["cron-pw"],
        ..row(
            "--url redis://cron:cron-pw@127.0.0.1:{plain} run --key job --ttl 5s -- true",
            77,
            &["permission denied", "redlock doctor"],
        )
    },
    // The lock key is something else already: no lock, said as `status` says it, and what to
    // do; never the script's digest or line.
    Row {
        not: NOT_A_SCRIPT,
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:{secured} run --key taken --ttl 5s -- true",
            78,
            NOT_A_LOCK,
        )
    },
    Row {
        not: NOT_A_SCRIPT,
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:{secured} acquire --key taken --ttl 5s",
            78,
            NOT_A_LOCK,
        )
    },
    Row {
        not: NOT_A_SCRIPT,
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:{secured} extend --key taken --ttl 5s --token t",
            78,
            NOT_A_LOCK,
        )
    },
    Row {
        not: NOT_A_SCRIPT,
        ..row(
            "--url redis://:s3cret-pw@127.0.0.1:{secured} release taken --force",
            78,
            NOT_A_LOCK,
        )
    },
];

/// What a line says of a lock key that holds another type of value, and what it leaves out.
const NOT_A_LOCK: &[&str] = &[
    "taken",
    "another type of value",
    "not a lock",
    "nothing was changed",
    "delete it or choose another key",
];
const NOT_A_SCRIPT: &[&str] = &["script", "Operation against"];

#[test]
fn the_table_has_at_least_fifty_mistakes() {
    let rows = USAGE.len() + SERVERS.len();
    assert!(rows >= 50, "only {rows} mistakes");
}

#[test]
fn usage_mistakes_say_what_to_do_and_contact_nothing() {
    let servers = Servers::plain_only();
    for row in USAGE {
        assert_eq!(row.exit, 64, "{}", row.line);
        let connections = servers.plain.connections_received();
        check(row, &servers);
        assert_eq!(
            servers.plain.connections_received(),
            connections,
            "redlock connected to Redis before refusing `{}`",
            row.line
        );
        assert_eq!(
            servers.plain.query::<i64>(&["DBSIZE"]),
            0,
            "redlock wrote to Redis for `{}`",
            row.line
        );
    }
}

#[test]
fn connection_and_permission_mistakes_name_the_cause() {
    let servers = Servers::all();
    for row in SERVERS {
        if row.line.contains("{tls}") && servers.tls.is_none() {
            server_kind::skip_part(row.line, "TLS");
            continue;
        }
        check(row, &servers);
    }
    assert!(!servers.plain.exists("job"), "a refused run left a lock");
    assert!(
        !servers.secured().exists("job"),
        "a refused run left a lock"
    );
    assert_eq!(
        servers.secured().query::<String>(&["TYPE", "taken"]),
        "hash",
        "redlock touched a key it does not own"
    );
}

#[test]
fn status_without_a_password_says_so_of_replication_too() {
    let secured = RedisServer::start_with(&["--requirepass", PASSWORD]);
    let outcome = Redlock::without_url()
        .args(["--url", &format!("redis://127.0.0.1:{}", secured.port())])
        .args(["status", "job"])
        .exits_with(77);
    let line = outcome
        .stdout
        .lines()
        .find(|l| l.starts_with("replication"))
        .unwrap_or_else(|| outcome.fail("no replication line"));
    assert!(line.contains("requires a password"), "{line}");
    // Granting +info is the fix for an ACL denial, not for a missing password.
    assert!(!line.contains("+info"), "{line}");
}

/// Runs `row` as text and as JSON lines, and checks both.
fn check(row: &Row, servers: &Servers) {
    let says: Vec<String> = row.says.iter().map(|w| servers.fill(w)).collect();
    let text = servers.redlock(row).run();
    text.expect_code(row.exit);
    let line = text.error_line();
    expect_words(&text, line, &says, row.not);
    assert!(
        !text.stderr.contains("panicked"),
        "a panic for `{}`\n{text}",
        row.line
    );
    if row
        .env
        .iter()
        .any(|(name, _)| *name == "REDLOCK_LOG_FORMAT")
    {
        return;
    }
    let json = servers.redlock(row).env("REDLOCK_LOG_FORMAT", "json").run();
    json.expect_code(row.exit);
    let lines: Vec<Json> = json
        .stderr
        .lines()
        .map(|l| Json::parse(l).unwrap_or_else(|e| json.fail(&format!("not JSON ({e}): {l}"))))
        .collect();
    let Some(last) = lines.last() else {
        json.fail("no line on stderr");
    };
    assert_eq!(last.str("level"), "error", "{json}");
    assert_eq!(last.int("exit"), i64::from(row.exit), "{json}");
    expect_words(&json, last.str("msg"), &says, row.not);
}

fn expect_words(outcome: &Outcome, line: &str, says: &[String], not: &[&str]) {
    let lower = line.to_lowercase();
    for word in says {
        if !lower.contains(&word.to_lowercase()) {
            outcome.fail(&format!("the message does not say {word:?}"));
        }
    }
    for word in not.iter().chain(&[PASSWORD, WRONG]) {
        let word = word.to_lowercase();
        // The password rows' own secrets, and "TLS" for a refused connection: never said.
        if lower.contains(&word) {
            outcome.fail(&format!("the message says {word:?}"));
        }
    }
    outcome.never_shows(PASSWORD).never_shows(WRONG);
}

/// The servers the rows name: `{url}`/`{plain}` a plain one (with an ACL user `cron` that
/// may not run scripts), `{secured}` one with a password, `{tls}` a TLS-only one, `{free}` a
/// port nobody listens on, `{silent}` a listener that takes connections and never answers,
/// `{pwfile}` a file holding the password, `{wrongfile}` one holding a wrong one.
struct Servers {
    plain: RedisServer,
    secured: Option<RedisServer>,
    tls: Option<(RedisServer, Certs)>,
    silent: Option<Silent>,
    free: u16,
    scratch: TempDir,
}

impl Servers {
    fn plain_only() -> Servers {
        Servers {
            plain: RedisServer::start(),
            secured: None,
            tls: None,
            silent: None,
            free: free_port(),
            scratch: TempDir::new("mistakes"),
        }
    }

    fn all() -> Servers {
        let mut servers = Servers::plain_only();
        servers.plain.acl_setuser(
            "cron",
            &["on", ">cron-pw", "~*", "&*", "+@all", "-evalsha", "-eval"],
        );
        let secured = RedisServer::start_with(&["--requirepass", PASSWORD]);
        let _: i64 = secured.query(&["HSET", "taken", "field", "value"]);
        servers.secured = Some(secured);
        if server_kind::has_tls() {
            let certs = Certs::new();
            servers.tls = Some((RedisServer::start_tls_only(&certs, &[]), certs));
        }
        servers.silent = Some(Silent::start());
        std::fs::write(servers.scratch.join("pw"), format!("{PASSWORD}\n")).expect("write pw");
        std::fs::write(servers.scratch.join("wrong"), format!("{WRONG}\n")).expect("write pw");
        servers
    }

    fn secured(&self) -> &RedisServer {
        self.secured.as_ref().expect("started")
    }

    /// `text` with its placeholders filled in.
    fn fill(&self, text: &str) -> String {
        let mut text = text
            .replace("{url}", &self.plain.url())
            .replace("{plain}", &self.plain.port().to_string())
            .replace("{free}", &self.free.to_string())
            .replace("{pwfile}", &self.scratch.join("pw").to_string_lossy())
            .replace("{wrongfile}", &self.scratch.join("wrong").to_string_lossy());
        if let Some(secured) = &self.secured {
            text = text.replace("{secured}", &secured.port().to_string());
        }
        if let Some((tls, _)) = &self.tls {
            text = text.replace("{tls}", &tls.port().to_string());
        }
        if let Some(silent) = &self.silent {
            text = text.replace("{silent}", &silent.port.to_string());
        }
        text
    }

    /// redlock with the row's line and environment; `--url` of the plain server first when
    /// the row names none.
    fn redlock(&self, row: &Row) -> Redlock {
        let words = split(&self.fill(row.line));
        let named = words.iter().any(|w| w.starts_with("--url"))
            || row.env.iter().any(|(name, _)| *name == "REDLOCK_URL");
        let mut redlock = if named {
            Redlock::without_url()
        } else {
            Redlock::new(&self.plain)
        };
        for (name, value) in row.env {
            redlock = redlock.env(name, self.fill(value));
        }
        redlock.args(words).timeout(Duration::from_secs(15))
    }
}

/// A listener that accepts every connection and never says a word.
struct Silent {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut taken = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => taken.push(stream),
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Silent {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Words split on spaces, a single-quoted part kept whole (quotes dropped; `''` is empty).
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            ' ' if !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}
