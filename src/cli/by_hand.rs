//! `redlock run`'s command line, read by hand in the common case.
//!
//! clap builds its whole definition of the options (every one with its help text, in heap
//! memory, for every subcommand) before it reads a word, then matches, defaults, validates and
//! copies values through its own maps: the largest piece of redlock's own work before it
//! contacts Redis, on the path cron takes thousands of times a day. It earns its keep: a run
//! launched from a shell costs over 5% more through clap (docs/performance.md has the figure,
//! and the command that measures it again). This reader takes the command lines cron jobs and
//! container entrypoints actually use (long options with their value as the next word or
//! after `=`, `-v`, `-q`, `-c CMD`, `--` and the command, the documented environment
//! variables) and gives exactly what clap gives for them. Anything else it declines — help
//! and version, a repeated or unknown option, a global option on both sides of `run`, a value
//! that starts with `-` or is empty, a conflict, a missing or malformed value, an environment
//! variable that is set but empty or not as clap reads it — and clap reads the line, so every
//! message and every edge case stays clap's.
//!
//! Tests hold it to that: they compare it with clap on every option and environment variable
//! of `run` and the global options, in every form above, and fail when clap's definition has
//! an option or a variable this reader does not know (a new option would otherwise be declined
//! harmlessly, but a new variable would be silently ignored).
use std::ffi::OsString;
use std::path::PathBuf;

use super::{Cli, Command, Contain, Global, LogFormat, RunArgs, parse_duration};

/// An option this reader knows: its long name, its short name, whether it takes a value, and
/// whether it may be given more than once (its values add up).
pub(super) struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    pub value: bool,
    pub repeats: bool,
}

const fn opt(long: &'static str, value: bool) -> Opt {
    Opt {
        long,
        short: None,
        value,
        repeats: false,
    }
}

// Indexes into OPTS.
const URL: usize = 0;
const PASSWORD_FILE: usize = 1;
const SENTINEL_PASSWORD_FILE: usize = 2;
const SENTINEL_USER: usize = 3;
const PREFIX: usize = 4;
const TIMEOUT: usize = 5;
const TLS_CA_FILE: usize = 6;
const TLS_CERT_FILE: usize = 7;
const TLS_KEY_FILE: usize = 8;
const TLS_INSECURE: usize = 9;
const VERBOSE: usize = 10;
const QUIET: usize = 11;
const LOG_FORMAT: usize = 12;
const KEY: usize = 13;
const TTL: usize = 14;
const WAIT: usize = 15;
const CONFLICT_EXIT_CODE: usize = 16;
const KILL_AFTER: usize = 17;
const HOLD_AT_LEAST: usize = 18;
const SHARED: usize = 19;
const SLOTS: usize = 20;
const MAX_RUNTIME: usize = 21;
const ONCE_PER: usize = 22;
const RETRY_FAILED: usize = 23;
const CONTAIN: usize = 24;
const LABEL: usize = 25;
const METRICS_FILE: usize = 26;
const REPLICAS: usize = 27;
const MAX_WAITERS: usize = 28;
const REPLACE: usize = 29;
const NO_REPLACE: usize = 30;
const SHELL: usize = 31;
/// The options before KEY are global: they may come before `run` too.
pub(super) const GLOBALS: usize = KEY;

/// The global options and `run`'s, in the order of the indexes above.
pub(super) const OPTS: [Opt; 32] = [
    Opt {
        repeats: true,
        ..opt("url", true)
    },
    opt("password-file", true),
    opt("sentinel-password-file", true),
    opt("sentinel-user", true),
    opt("prefix", true),
    opt("timeout", true),
    opt("tls-ca-file", true),
    opt("tls-cert-file", true),
    opt("tls-key-file", true),
    opt("tls-insecure", false),
    Opt {
        short: Some('v'),
        ..opt("verbose", false)
    },
    Opt {
        short: Some('q'),
        ..opt("quiet", false)
    },
    opt("log-format", true),
    Opt {
        repeats: true,
        ..opt("key", true)
    },
    opt("ttl", true),
    opt("wait", true),
    opt("conflict-exit-code", true),
    opt("kill-after", true),
    opt("hold-at-least", true),
    opt("shared", false),
    opt("slots", true),
    opt("max-runtime", true),
    opt("once-per", true),
    opt("retry-failed", false),
    opt("contain", true),
    opt("label", true),
    opt("metrics-file", true),
    opt("replicas", true),
    opt("max-waiters", true),
    opt("replace", false),
    opt("no-replace", false),
    // `-c` has no long name.
    Opt {
        short: Some('c'),
        ..opt("", true)
    },
];

/// The environment variables clap reads for these options; each is read here too.
pub(super) const ENV: [(usize, &str); 19] = [
    (URL, "REDLOCK_URL"),
    (PASSWORD_FILE, "REDLOCK_PASSWORD_FILE"),
    (SENTINEL_PASSWORD_FILE, "REDLOCK_SENTINEL_PASSWORD_FILE"),
    (SENTINEL_USER, "REDLOCK_SENTINEL_USER"),
    (PREFIX, "REDLOCK_PREFIX"),
    (TIMEOUT, "REDLOCK_TIMEOUT"),
    (TLS_CA_FILE, "REDLOCK_TLS_CA_FILE"),
    (TLS_CERT_FILE, "REDLOCK_TLS_CERT_FILE"),
    (TLS_KEY_FILE, "REDLOCK_TLS_KEY_FILE"),
    (TLS_INSECURE, "REDLOCK_TLS_INSECURE"),
    (LOG_FORMAT, "REDLOCK_LOG_FORMAT"),
    (MAX_RUNTIME, "REDLOCK_MAX_RUNTIME"),
    (ONCE_PER, "REDLOCK_ONCE_PER"),
    (RETRY_FAILED, "REDLOCK_RETRY_FAILED"),
    (CONTAIN, "REDLOCK_CONTAIN"),
    (LABEL, "REDLOCK_LABEL"),
    (METRICS_FILE, "REDLOCK_METRICS_FILE"),
    (REPLICAS, "REDLOCK_REPLICAS"),
    (MAX_WAITERS, "REDLOCK_MAX_WAITERS"),
];

/// The option `word` names (an index into [`OPTS`]), with its value when given after `=`.
fn option(word: &str) -> Option<(usize, Option<&str>)> {
    if let Some(long) = word.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let index = OPTS
            .iter()
            .position(|o| !o.long.is_empty() && o.long == name)?;
        return Some((index, inline));
    }
    let mut chars = word.chars();
    let (Some('-'), Some(c), None) = (chars.next(), chars.next(), chars.next()) else {
        return None;
    };
    Some((OPTS.iter().position(|o| o.short == Some(c))?, None))
}

/// A global option given both before and after `run` (at `at`), by its long name: clap's full
/// tree would keep one side's value and drop the other's without a word.
pub(super) fn on_both_sides(args: &[OsString], at: usize) -> Option<&'static str> {
    let mut before = [false; GLOBALS];
    let mut words = args.iter().enumerate().skip(1);
    while let Some((position, word)) = words.next() {
        let word = word.to_str()?;
        if word == "--" {
            return None;
        }
        let Some((index, inline)) = option(word) else {
            continue;
        };
        if OPTS[index].value && inline.is_none() {
            words.next();
        }
        if index >= GLOBALS {
            continue;
        }
        if position < at {
            before[index] = true;
        } else if before[index] {
            return Some(OPTS[index].long);
        }
    }
    None
}

/// `args` (the whole command line, `run` at `at`) as clap would read it, or `None` where this
/// reader leaves the line to clap. `env` looks up an environment variable.
pub(super) fn parse(
    args: &[OsString],
    at: usize,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Option<Cli> {
    let mut given: [Vec<&str>; OPTS.len()] = Default::default();
    // Which options were given after `run` (the others came before it).
    let mut after_run = [false; OPTS.len()];
    let mut command: Option<Vec<OsString>> = None;
    // The words but the program's name and `run`, as the run-only tree reads them; before
    // `run` only global options are allowed (clap's full tree refuses `run`'s own there).
    let mut words = args.iter().enumerate().skip(1).filter(|&(i, _)| i != at);
    while let Some((position, word)) = words.next() {
        let word = word.to_str()?;
        if word == "--" {
            // The command's words are passed on as they are, whatever their bytes.
            command = Some(words.by_ref().map(|(_, w)| w.clone()).collect());
            break;
        }
        let (index, inline) = option(word)?;
        if position < at && index >= GLOBALS {
            return None;
        }
        let opt = &OPTS[index];
        if !given[index].is_empty() && !opt.repeats {
            return None;
        }
        // clap keeps one side's values of a global option given on both sides of `run`.
        if !given[index].is_empty() && after_run[index] != (position > at) {
            return None;
        }
        after_run[index] = position > at;
        if opt.value {
            let value = match inline {
                Some(value) => value,
                None => words.next()?.1.to_str()?,
            };
            if value.is_empty() || value.starts_with('-') {
                return None;
            }
            given[index].push(value);
        } else {
            if inline.is_some() {
                return None;
            }
            given[index].push("");
        }
    }

    // Each option's value: from the line, else from its environment variable, which must then
    // be good (a boolean one is `true` or `false`, as clap's parser for flags reads it); one
    // that is empty or not UTF-8 is left to clap.
    let mut from_env: [Option<String>; OPTS.len()] = Default::default();
    for (index, name) in ENV {
        let Some(value) = env(name) else {
            continue;
        };
        let value = value.into_string().ok()?;
        // A global option given after `run` still has its variable read (and judged) by clap
        // for the options before `run`; one given before `run` (or one of `run`'s own) wins
        // over its variable.
        let judged = given[index].is_empty() || after_run[index] && index < GLOBALS;
        if !judged {
            continue;
        }
        let good = !value.is_empty()
            && match index {
                TLS_INSECURE | RETRY_FAILED => matches!(value.as_str(), "true" | "false"),
                TIMEOUT | MAX_RUNTIME | ONCE_PER => parse_duration(&value).is_ok(),
                LOG_FORMAT => matches!(value.as_str(), "text" | "json"),
                CONTAIN => matches!(value.as_str(), "auto" | "descendants"),
                _ => true,
            };
        if !good {
            return None;
        }
        if given[index].is_empty() {
            from_env[index] = Some(value);
        }
    }
    let text = |index: usize| -> Option<&str> {
        given[index].first().copied().or(from_env[index].as_deref())
    };
    // A flag on the line is set; from its variable, as that says.
    let flag =
        |index: usize| !given[index].is_empty() || from_env[index].as_deref() == Some("true");
    let duration = |index: usize| -> Option<Option<std::time::Duration>> {
        match text(index) {
            None => Some(None),
            Some(t) => parse_duration(t).ok().map(Some),
        }
    };
    let path = |index: usize| text(index).map(PathBuf::from);
    let string = |index: usize| text(index).map(str::to_owned);
    let number = |index: usize| -> Option<Option<u32>> {
        match text(index) {
            None => Some(None),
            Some(t) if !t.is_empty() && t.len() <= 10 && t.bytes().all(|b| b.is_ascii_digit()) => {
                t.parse().ok().map(Some)
            }
            Some(_) => None,
        }
    };

    // Conflicts and unmet requirements are clap's to report. A requirement is met by the
    // other option from the line or from its variable.
    if !given[VERBOSE].is_empty() && !given[QUIET].is_empty()
        || !given[SHARED].is_empty() && !given[SLOTS].is_empty()
        || !given[SHELL].is_empty() && command.is_some()
        || flag(REPLACE) && (flag(SHARED) || !given[SLOTS].is_empty() || text(ONCE_PER).is_some())
    {
        return None;
    }

    // Each value (the line's, or the variable's) is a comma-separated list; an empty entry is
    // clap's to judge.
    let mut urls = Vec::new();
    let values = given[URL].iter().copied().chain(from_env[URL].as_deref());
    for value in values {
        for url in value.split(',') {
            if url.is_empty() {
                return None;
            }
            urls.push(url.to_owned());
        }
    }
    let log_format = match text(LOG_FORMAT) {
        None | Some("text") => LogFormat::Text,
        Some("json") => LogFormat::Json,
        Some(_) => return None,
    };
    let contain = match text(CONTAIN) {
        None | Some("auto") => Contain::Auto,
        Some("descendants") => Contain::Descendants,
        Some(_) => return None,
    };
    let conflict_exit_code = match number(CONFLICT_EXIT_CODE)? {
        None => None,
        Some(n) => Some(u8::try_from(n).ok()?),
    };
    let global = Global {
        urls,
        password_file: path(PASSWORD_FILE),
        sentinel_password_file: path(SENTINEL_PASSWORD_FILE),
        sentinel_user: string(SENTINEL_USER),
        prefix: string(PREFIX).unwrap_or_default(),
        timeout: parse_duration(text(TIMEOUT).unwrap_or("3s")).ok()?,
        tls_ca_file: path(TLS_CA_FILE),
        tls_cert_file: path(TLS_CERT_FILE),
        tls_key_file: path(TLS_KEY_FILE),
        tls_insecure: flag(TLS_INSECURE),
        verbose: flag(VERBOSE),
        quiet: flag(QUIET),
        log_format,
    };
    let run = RunArgs {
        key: match given[KEY].as_slice() {
            [] => return None,
            keys => keys.iter().map(|k| (*k).to_owned()).collect(),
        },
        ttl: duration(TTL)??,
        wait: duration(WAIT)?,
        conflict_exit_code,
        kill_after: duration(KILL_AFTER)?,
        hold_at_least: duration(HOLD_AT_LEAST)?,
        shared: flag(SHARED),
        slots: number(SLOTS)?,
        max_runtime: duration(MAX_RUNTIME)?,
        once_per: duration(ONCE_PER)?,
        retry_failed: flag(RETRY_FAILED),
        contain,
        label: string(LABEL),
        metrics_file: path(METRICS_FILE),
        replicas: number(REPLICAS)?.unwrap_or(0),
        max_waiters: number(MAX_WAITERS)?,
        replace: flag(REPLACE),
        no_replace: flag(NO_REPLACE),
        shell: string(SHELL).map(OsString::from),
        command: command.unwrap_or_default(),
    };
    Some(Cli {
        global,
        command: Command::Run(run),
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use clap::{Args, Parser};

    use super::*;
    use crate::cli::names_run;

    fn words(line: &[&str]) -> Vec<OsString> {
        std::iter::once("redlock")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect()
    }

    /// Reads `args` by hand and as clap does, in this process's environment: where the reader
    /// accepts the line, clap must accept it and give the same. Whether it accepted.
    fn agrees(args: &[OsString]) -> bool {
        let Some(at) = names_run(args) else {
            return false;
        };
        let Some(by_hand) = parse(args, at, &|name| std::env::var_os(name)) else {
            return false;
        };
        match Cli::try_parse_from(args) {
            Ok(clap) => assert_eq!(
                format!("{by_hand:?}"),
                format!("{clap:?}"),
                "read differently by hand and by clap: {args:?}"
            ),
            Err(e) => panic!("accepted by hand, refused by clap: {args:?}: {e}"),
        }
        true
    }

    #[test]
    fn agrees_with_clap_on_every_option_in_every_form() {
        let durations = [
            "5s", "1h 30m", "500ms", " 2s ", "0s", "5", "-5s", "soon", "",
        ];
        let strings = ["x", "a b", "a=b", "run", "", "-x", "--", "é"];
        let numbers = [
            "0",
            "7",
            "255",
            "256",
            "007",
            "+5",
            "-1",
            "4294967295",
            "4294967296",
        ];
        let urls = [
            "redis://a:1",
            "redis://a:1,redis://b:2",
            "a,,b",
            ",",
            "redis://a:1,",
        ];
        let enums = ["text", "json", "JSON", "auto", "descendants", "bogus"];
        let mut accepted = [false; OPTS.len()];
        for (index, opt) in OPTS.iter().enumerate() {
            // An option that requires another comes with it.
            let partner: &[&str] = match index {
                SENTINEL_USER => &["--sentinel-password-file", "p"],
                TLS_CERT_FILE => &["--tls-key-file", "k"],
                TLS_KEY_FILE => &["--tls-cert-file", "c"],
                _ => &[],
            };
            let required: &[&str] = match index {
                KEY => &["--ttl", "5s"],
                TTL => &["--key", "k"],
                _ => &["--key", "k", "--ttl", "5s"],
            };
            let base = [required, partner].concat();
            let samples: &[&str] = match index {
                URL => &urls,
                TIMEOUT | TTL | WAIT | KILL_AFTER | HOLD_AT_LEAST | MAX_RUNTIME | ONCE_PER => {
                    &durations
                }
                CONFLICT_EXIT_CODE | SLOTS | REPLICAS | MAX_WAITERS => &numbers,
                LOG_FORMAT | CONTAIN => &enums,
                _ if opt.value => &strings,
                _ => &[""],
            };
            let names: Vec<String> = [
                (!opt.long.is_empty()).then(|| format!("--{}", opt.long)),
                opt.short.map(|c| format!("-{c}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            for name in &names {
                for value in samples {
                    let forms: Vec<Vec<String>> = if opt.value {
                        vec![
                            vec![name.clone(), value.to_string()],
                            vec![format!("{name}={value}")],
                            vec![format!("{name}{value}")],
                            vec![
                                name.clone(),
                                value.to_string(),
                                name.clone(),
                                value.to_string(),
                            ],
                        ]
                    } else {
                        vec![
                            vec![name.clone()],
                            vec![format!("{name}=true")],
                            vec![name.clone(), name.clone()],
                        ]
                    };
                    for form in forms {
                        let form: Vec<&str> = form.iter().map(String::as_str).collect();
                        for line in [
                            [&form[..], &["run"], &base, &["--", "true"]].concat(),
                            [&["run"], &form[..], &base, &["--", "true"]].concat(),
                            [&["run"][..], &base, &form, &["-c", "true"]].concat(),
                            [&["run"][..], &form].concat(),
                            [&["run"][..], &base, &form].concat(),
                        ] {
                            accepted[index] |= agrees(&words(&line));
                        }
                    }
                }
            }
        }
        // The reader is used: it accepts every option in some form.
        for (index, opt) in OPTS.iter().enumerate() {
            assert!(
                accepted[index],
                "never accepted: --{} -{:?}",
                opt.long, opt.short
            );
        }
    }

    #[test]
    fn agrees_with_clap_on_conflicts_requirements_and_odd_words() {
        // Words separated by single spaces.
        let accept = [
            "run --key k --ttl 5s -- true",
            "run --key k --ttl 5s --",
            "run --key k --ttl 5s -- a --help -V -- -c",
            "run --key k --ttl 5s -c true",
            "run --key k --ttl 5s",
            "--url redis://a:1 -v run --key=k --ttl=5s -c x",
            "--prefix run run --key run --ttl 1s -- run",
            "run --url redis://a:1 --url redis://b:2,redis://c:3 --key k --ttl 5s",
            "run --tls-cert-file c --tls-key-file k --key k --ttl 5s",
            "run --sentinel-user u --sentinel-password-file p --key k --ttl 5s",
            "run --sentinel-password-file p --key k --ttl 5s",
            // A requirement between two global options is the context's to check (64), on
            // whichever side of `run` each is given.
            "run --tls-cert-file c --key k --ttl 5s",
            "run --tls-key-file k --key k --ttl 5s",
            "run --sentinel-user u --key k --ttl 5s",
            "--sentinel-user u run --sentinel-password-file p --key k --ttl 5s",
            "--tls-cert-file c run --tls-key-file k --key k --ttl 5s",
            "run --shared --key k --ttl 5s -- x",
            "run --slots 3 --key k --ttl 5s -- x",
            "-q --log-format json run --key k --ttl 5s -- x",
            "run --key k --ttl 5s --max-runtime 1m --kill-after 1s -- x",
            "run --key k --ttl 5s --once-per 1h --retry-failed -- x",
            "run --key k --ttl 5s --replicas 1 -- x",
            "run --key k --ttl 5s --wait 1m --max-waiters 1 -- x",
            "run --key k --ttl 5s --replace -- x",
            "run --key k --ttl 5s --no-replace -- x",
            // Read alike, and refused alike after reading (`commands/run`, 64).
            "run --key k --ttl 5s --replace --no-replace -- x",
            "run --key k --ttl 5s --wait 0s --max-waiters 1 -- x",
        ];
        for line in accept {
            assert!(
                agrees(&words(&line.split(' ').collect::<Vec<_>>())),
                "declined: {line}"
            );
        }
        let decline = [
            "run --ttl 5s -- x",
            "run --key k -- x",
            "run --key k --ttl 5s -c x -- y",
            "run --key k --ttl 5s -c x --",
            "-v -q run --key k --ttl 5s",
            "-vq run --key k --ttl 5s",
            "run --shared --slots 2 --key k --ttl 5s",
            // The same global option on both sides of `run` (see `Cli::parse_args`).
            "--url redis://a:1 run --url redis://b:2 --key k --ttl 5s",
            "--prefix a: run --prefix b: --key k --ttl 5s",
            "-v run -v --key k --ttl 5s",
            "run --key k --ttl 5s x",
            "run --key k --ttl 5s --help",
            "run --key k --ttl 5s --kee x",
            "run --key k --ttl 5s -",
            "run --key k --ttl 5s --timeout",
            "run --key k --ttl 5s -c",
            // An empty value is clap's to read (and the run's to refuse, 64).
            "run --key k --ttl 5s --label= -- x",
        ];
        for line in decline {
            assert!(
                !agrees(&words(&line.split(' ').collect::<Vec<_>>())),
                "accepted: {line}"
            );
        }
        // An option's word that is not UTF-8 is clap's to refuse; the command's words are
        // read as they are, by both.
        let mut odd = words(&["run", "--key", "k", "--ttl", "5s", "--", "x"]);
        odd[2] = OsString::from_vec(b"k\xff".to_vec());
        assert!(!agrees(&odd));
        let mut odd = words(&["run", "--key", "k", "--ttl", "5s", "--", "x", "y"]);
        odd[7] = OsString::from_vec(b"x\xff".to_vec());
        odd[8] = OsString::from_vec(b"\xfe\xff".to_vec());
        assert!(agrees(&odd));
        let mut odd = words(&["run", "--key", "k", "--ttl", "5s", "-c", "x"]);
        odd[7] = OsString::from_vec(b"printf x\xff".to_vec());
        assert!(!agrees(&odd), "a -c that is not UTF-8 is left to clap");
    }

    /// Every option and environment variable in clap's definition of `run` and the global
    /// options is known here, with the same shape: a new option would be declined (clap reads
    /// the line), but a new variable would be ignored, so the definitions must not drift.
    #[test]
    fn knows_every_option_and_variable_clap_defines() {
        let cmd = RunArgs::augment_args(Global::augment_args(clap::Command::new("redlock")));
        let mut options = 0;
        let mut variables = 0;
        for arg in cmd.get_arguments() {
            if arg.is_positional() {
                assert_eq!(arg.get_id(), "command", "a positional argument besides CMD");
                continue;
            }
            options += 1;
            let Some(index) = OPTS.iter().position(|o| {
                arg.get_long().is_some_and(|l| l == o.long)
                    || o.long.is_empty() && arg.get_short() == o.short
            }) else {
                panic!("--{:?} is not known to the hand reader", arg.get_long());
            };
            let opt = &OPTS[index];
            assert_eq!(arg.get_short(), opt.short, "{}", opt.long);
            assert_eq!(arg.get_action().takes_values(), opt.value, "{}", opt.long);
            assert_eq!(
                matches!(arg.get_action(), clap::ArgAction::Append),
                opt.repeats,
                "{}",
                opt.long
            );
            if let Some(name) = arg.get_env() {
                variables += 1;
                assert!(
                    ENV.iter().any(|&(i, n)| i == index && name == n),
                    "{name:?} is not read by the hand reader"
                );
            } else {
                assert!(!ENV.iter().any(|&(i, _)| i == index), "{}", opt.long);
            }
        }
        assert_eq!(options, OPTS.len());
        assert_eq!(variables, ENV.len());
    }

    const CASE: &str = "REDLOCK_TEST_BY_HAND_LINE";

    /// Environment variables, a command line (words separated by single spaces), and whether
    /// the hand reader should accept it.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, bool);
    type Vars = Vec<(&'static str, OsString)>;

    /// The environment as clap reads it (once, when it builds its definition) cannot be changed
    /// inside a test process, so each case runs in a copy of this test binary started with that
    /// environment; the copy compares the two readers and says whether the hand reader accepted.
    #[test]
    fn agrees_with_clap_on_the_environment() {
        if let Some(line) = std::env::var_os(CASE) {
            let line = line.into_string().unwrap();
            let args = words(&line.split(' ').collect::<Vec<_>>());
            println!(
                "by hand: {}",
                if agrees(&args) {
                    "accepted"
                } else {
                    "declined"
                }
            );
            return;
        }
        let run = "run --key k --ttl 5s -- x";
        let tls = "run --tls-cert-file c --key k --ttl 5s";
        let user = "run --sentinel-user u --key k --ttl 5s";
        let timeout = "run --timeout 2s --key k --ttl 5s";
        let url = "--url redis://c:3 run --key k --ttl 5s";
        let shared = "run --shared --key k --ttl 5s";
        let sentinel = "--sentinel-password-file p run --key k --ttl 5s";
        let cases: &[Case] = &[
            (&[], run, true),
            (&[("REDLOCK_URL", "redis://a:1")], run, true),
            (&[("REDLOCK_URL", "redis://a:1,redis://b:2")], run, true),
            (&[("REDLOCK_URL", "redis://a:1,redis://b:2")], url, true),
            (&[("REDLOCK_URL", "a,,b")], run, false),
            (&[("REDLOCK_URL", "")], run, false),
            (
                &[("REDLOCK_PASSWORD_FILE", "/run/secrets/redis")],
                run,
                true,
            ),
            (&[("REDLOCK_PREFIX", "app:")], run, true),
            (&[("REDLOCK_TIMEOUT", "2s")], run, true),
            (&[("REDLOCK_TIMEOUT", " 2s ")], run, true),
            (&[("REDLOCK_TIMEOUT", "5")], run, false),
            // clap still reads (and refuses) the variable of a global option given after
            // `run`: the line is left to it.
            (&[("REDLOCK_TIMEOUT", "soon")], timeout, false),
            (&[("REDLOCK_TIMEOUT", "1s")], timeout, true),
            (&[("REDLOCK_TLS_CA_FILE", "/ca.pem")], run, true),
            (
                &[
                    ("REDLOCK_TLS_CERT_FILE", "c"),
                    ("REDLOCK_TLS_KEY_FILE", "k"),
                ],
                run,
                true,
            ),
            (&[("REDLOCK_TLS_KEY_FILE", "k")], tls, true),
            (&[("REDLOCK_TLS_KEY_FILE", "k")], run, true),
            (&[("REDLOCK_TLS_INSECURE", "true")], run, true),
            (&[("REDLOCK_TLS_INSECURE", "false")], run, true),
            (&[("REDLOCK_TLS_INSECURE", "0")], run, false),
            (&[("REDLOCK_TLS_INSECURE", "yes")], run, false),
            (
                &[
                    ("REDLOCK_SENTINEL_PASSWORD_FILE", "p"),
                    ("REDLOCK_SENTINEL_USER", "u"),
                ],
                run,
                true,
            ),
            (&[("REDLOCK_SENTINEL_PASSWORD_FILE", "p")], user, true),
            (&[("REDLOCK_SENTINEL_USER", "u")], run, true),
            (&[("REDLOCK_SENTINEL_USER", "u")], sentinel, true),
            (&[("REDLOCK_LOG_FORMAT", "json")], run, true),
            (&[("REDLOCK_LOG_FORMAT", "JSON")], run, false),
            (&[("REDLOCK_MAX_RUNTIME", "1m")], run, true),
            (&[("REDLOCK_ONCE_PER", "1h")], run, true),
            (&[("REDLOCK_RETRY_FAILED", "1")], run, false),
            (
                &[("REDLOCK_RETRY_FAILED", "true"), ("REDLOCK_ONCE_PER", "1h")],
                run,
                true,
            ),
            (&[("REDLOCK_CONTAIN", "descendants")], run, true),
            (&[("REDLOCK_CONTAIN", "bogus")], run, false),
            (&[("REDLOCK_LABEL", "nightly report")], run, true),
            (&[("REDLOCK_METRICS_FILE", "/var/lib/m.prom")], run, true),
            (&[("REDLOCK_REPLICAS", "1")], run, true),
            (&[("REDLOCK_REPLICAS", "one")], run, false),
            (&[("REDLOCK_MAX_WAITERS", "1")], run, true),
            (&[("REDLOCK_MAX_WAITERS", "one")], run, false),
            (
                &[("REDLOCK_SLOTS", "2"), ("REDLOCK_SHARED", "1")],
                shared,
                true,
            ),
        ];
        let exe = std::env::current_exe().unwrap();
        let test = "cli::by_hand::tests::agrees_with_clap_on_the_environment";
        let mut all: Vec<(Vars, &str, bool)> = cases
            .iter()
            .map(|(vars, line, accept)| {
                let vars = vars.iter().map(|&(k, v)| (k, OsString::from(v))).collect();
                (vars, *line, *accept)
            })
            .collect();
        all.push((
            vec![("REDLOCK_LABEL", OsString::from_vec(b"x\xff".to_vec()))],
            run,
            false,
        ));
        for (vars, line, accept) in all {
            let out = std::process::Command::new(&exe)
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env_clear()
                .envs(vars.iter().map(|(k, v)| (k, v)))
                .env(CASE, line)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{vars:?} {line:?}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let said = if accept {
                "by hand: accepted"
            } else {
                "by hand: declined"
            };
            assert!(stdout.contains(said), "{vars:?} {line:?}: {stdout}");
        }
    }
}
