//! The command line, as clap sees it.
//!
//! This module is shared by the binary and by the man-page/completion generator, so every
//! user-visible word about flags lives here and nowhere else. Parsing only checks shapes
//! (a duration is a duration); the rules that relate values to each other (a TTL long enough
//! to renew, a `--kill-after` that leaves time to renew) live in `lease.rs` and run before
//! anything is contacted.

use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::report::exit::{self, BUSY, Exit};
use crate::report::log::LogFormat;

mod args;
mod by_hand;
mod run;
pub mod usage;

pub use self::args::{
    AcquireArgs, CheckArgs, DoctorArgs, ExtendArgs, GenerateDocsArgs, LogArgs, MetricsArgs,
    PauseArgs, ReleaseArgs, ResumeArgs, StatusArgs,
};
use self::args::{
    CHECK_LONG_ABOUT, DOCTOR_LONG_ABOUT, LOG_LONG_ABOUT, METRICS_LONG_ABOUT, PAUSE_LONG_ABOUT,
};
use self::run::RUN_LONG_ABOUT;
pub use self::run::RunArgs;

// The groups of options in `--help`, the usual ones first. Options without a heading (the
// key, the TTL, the command) come before all of them.
const LOCK: &str = "Lock";
const BUSY_HEADING: &str = "When the lock is busy";
const SUPERVISION: &str = "Supervision";
const RECORDS: &str = "Records";
const CONNECTION: &str = "Connection and TLS";
const OUTPUT: &str = "Output";

#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version = env!("REDLOCK_VERSION"),
    about = "Guard shell commands and cron jobs with a Redis lock",
    long_about = format!("Guard shell commands and cron jobs with a Redis lock.\n\n\
        `redlock run` takes a lease on a Redis key, runs the command while renewing it, forwards \
        signals, and releases the lock on every exit path. Exactly one holder runs at a time; \
        everyone else gets a distinct exit status ({BUSY}) or waits."),
    after_help = exit::help(None),
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand understands. Each has an environment fallback; the flag wins.
#[derive(Debug, Args)]
pub struct Global {
    /// Redis server URL [default: redis://127.0.0.1:6379]
    ///
    /// redis://, rediss:// or redis+unix://; repeat it (or separate URLs with commas) for a
    /// quorum of independent masters (distinct servers: two URLs that reach one server are
    /// refused); or one redis+cluster://HOST:PORT[,HOST:PORT...] or
    /// redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB] (rediss+cluster:// and
    /// rediss+sentinel:// for TLS)
    #[arg(
        long = "url",
        global = true,
        env = "REDLOCK_URL",
        value_delimiter = ',',
        value_name = "URL",
        hide_env_values = true,
        help_heading = CONNECTION
    )]
    pub urls: Vec<String>,

    /// File holding the Redis password (first line)
    ///
    /// It wins over a password in the URL, and keeps the password out of argv, crontabs and ps.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_PASSWORD_FILE",
        value_name = "PATH",
        help_heading = CONNECTION
    )]
    pub password_file: Option<PathBuf>,

    /// Namespace prepended to every key, so staging never blocks production
    #[arg(
        long,
        global = true,
        env = "REDLOCK_PREFIX",
        default_value = "",
        hide_default_value = true,
        value_name = "STR",
        help_heading = CONNECTION
    )]
    pub prefix: String,

    /// Connect and command timeout for talking to Redis outside the heartbeat
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TIMEOUT",
        default_value = "3s",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        value_name = "DURATION",
        help_heading = CONNECTION
    )]
    pub timeout: Duration,

    /// File holding the sentinels' own password (first line)
    ///
    /// For redis+sentinel:// and rediss+sentinel://; the master's password is
    /// --password-file's.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_SENTINEL_PASSWORD_FILE",
        value_name = "PATH",
        help_heading = CONNECTION,
        hide_short_help = true
    )]
    pub sentinel_password_file: Option<PathBuf>,

    /// ACL user the sentinels know redlock as (with --sentinel-password-file)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_SENTINEL_USER",
        value_name = "NAME",
        help_heading = CONNECTION,
        hide_short_help = true
    )]
    pub sentinel_user: Option<String>,

    /// CA certificate(s) (PEM) to verify TLS servers with, instead of the system's
    ///
    /// For rediss://, rediss+cluster:// and rediss+sentinel://. A server (a rediss:// one, a
    /// cluster node, a sentinel or the master it names) that presents exactly a certificate
    /// listed here is trusted with it, even a self-signed one marked CA:TRUE, as redis-cli
    /// does; its dates and name are still checked.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_CA_FILE",
        value_name = "PATH",
        help_heading = CONNECTION
    )]
    pub tls_ca_file: Option<PathBuf>,

    /// Client certificate (PEM) for servers that require one (with --tls-key-file)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_CERT_FILE",
        value_name = "PATH",
        help_heading = CONNECTION,
        hide_short_help = true
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key (PEM) of the client certificate
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_KEY_FILE",
        value_name = "PATH",
        help_heading = CONNECTION,
        hide_short_help = true
    )]
    pub tls_key_file: Option<PathBuf>,

    /// Do not verify the server's certificate (TLS URLs only; prints a warning)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TLS_INSECURE",
        help_heading = CONNECTION,
        hide_short_help = true
    )]
    pub tls_insecure: bool,

    /// Print a timeline of what redlock does on stderr
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "quiet",
        help_heading = OUTPUT
    )]
    pub verbose: bool,

    /// Print only the final error line
    #[arg(short, long, global = true, help_heading = OUTPUT)]
    pub quiet: bool,

    /// Format of redlock's own messages on stderr
    #[arg(
        long,
        global = true,
        env = "REDLOCK_LOG_FORMAT",
        value_enum,
        default_value = "text",
        value_name = "FORMAT",
        help_heading = OUTPUT,
        hide_short_help = true
    )]
    pub log_format: LogFormat,
}

/// Where the command's processes are kept track of (see `tree.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Contain {
    /// A cgroup of its own where redlock may create one, otherwise redlock's descendants
    Auto,
    /// redlock's descendants, found by walking /proc (no cgroup is created)
    Descendants,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock
    #[command(long_about = RUN_LONG_ABOUT)]
    Run(RunArgs),
    // The exit statuses in the one-line abouts and after the help come from the table in
    // `exit.rs`, in each subcommand's own words.
    #[command(about = format!(
        "Show who holds a lock, since when, and how its last run ended ({})",
        exit::briefly("status", &[Exit::Success, Exit::No])
    ))]
    Status(StatusArgs),
    #[command(about = format!(
        "Release a lock by its token, or force it ({})",
        exit::briefly("release", &[Exit::Success, Exit::No])
    ))]
    Release(ReleaseArgs),
    /// Take the lock and print its token, for shell scripts
    Acquire(AcquireArgs),
    #[command(about = format!(
        "Renew a lock held by TOKEN ({})",
        exit::briefly("extend", &[Exit::Success, Exit::No])
    ))]
    Extend(ExtendArgs),
    /// Check the server for lock hazards and print each finding with its fix
    #[command(long_about = DOCTOR_LONG_ABOUT, after_help = exit::help(Some("doctor")))]
    Doctor(DoctorArgs),
    /// Refuse new runs of locks (for maintenance); with --drain, wait for the running ones
    #[command(long_about = PAUSE_LONG_ABOUT, after_help = exit::help(Some("pause")))]
    Pause(PauseArgs),
    /// Lift a pause: new runs of the locks go ahead again
    #[command(after_help = exit::help(Some("resume")))]
    Resume(ResumeArgs),
    /// Print locks' state and counters as Prometheus metrics
    #[command(long_about = METRICS_LONG_ABOUT, after_help = exit::help(Some("metrics")))]
    Metrics(MetricsArgs),
    /// Health check for Nagios/Icinga: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN
    #[command(long_about = CHECK_LONG_ABOUT, after_help = exit::help(Some("check")))]
    Check(CheckArgs),
    /// Print locks' audit log: acquires, refusals, releases, lost leases, forced releases,
    /// pauses and resumes, oldest first
    #[command(long_about = LOG_LONG_ABOUT, after_help = exit::help(Some("log")))]
    Log(LogArgs),
    /// Write the man pages and shell completions under DIR (for packagers)
    #[command(name = "generate-docs", hide = true)]
    GenerateDocs(GenerateDocsArgs),
}

/// humantime durations (`500ms`, `30s`, `1h 30m`), plus a clear word for the mistakes people
/// actually make: a bare number or a negative value.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        // No zero is suggested: most durations refuse it.
        return Err(if t.chars().all(|c| c == '0') {
            "missing unit; write a duration such as '30s', '500ms' or '5m'".into()
        } else {
            format!("missing unit; write e.g. '{t}s' for seconds (or ms, m, h)")
        });
    }
    humantime::parse_duration(t).map_err(|e| match e {
        // humantime's own words ("expected number at 0") say where its reading stopped, not
        // that the value is no duration at all (`fast`, `yesterday`).
        humantime::DurationError::NumberExpected(_)
        | humantime::DurationError::InvalidCharacter(_)
        | humantime::DurationError::Empty => {
            "not a duration; write a number and a unit, such as '3s', '500ms' or '6h'".into()
        }
        e => e.to_string(),
    })
}

impl Cli {
    /// Parses the command line. clap builds every subcommand, and copies each global option
    /// into each of them, before it parses anything: for `redlock run`, which cron starts
    /// thousands of times a day, that is most of redlock's own start-up work. So a command line
    /// that plainly names `run` (and asks for no help or version) is first read by hand
    /// (`by_hand.rs`: the usual forms, exactly as clap reads them); anything else, and anything
    /// the hand reader declines, goes through clap, so help and error messages are clap's.
    ///
    /// One line clap would read wrongly is refused first: a global option given both before
    /// and after `run` (clap keeps one side's values; `--url a run --url b` would be a one-node
    /// "quorum").
    pub fn parse_args(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
        if let Some(at) = names_run(args) {
            if let Some(cli) = by_hand::parse(args, at, &|name| std::env::var_os(name)) {
                return Ok(cli);
            }
            if let Some(name) = by_hand::on_both_sides(args, at) {
                return Err(clap::Error::raw(
                    ErrorKind::ArgumentConflict,
                    format!(
                        "--{name} is given both before and after 'run'; give it on one side \
                         (as often as needed)\n"
                    ),
                ));
            }
        }
        Cli::try_parse_from(args)
    }
}

/// `--label TEXT` (`run`, `acquire`), checked: recorded instead of the command, so it says
/// something, as `-c` must (64 for an empty or blank one, named as given).
pub fn check_label(label: Option<&str>) -> anyhow::Result<()> {
    let Some(text) = label.filter(|t| t.trim().is_empty()) else {
        return Ok(());
    };
    // clap reads the variable even when it is set to nothing, which `named` takes as unset.
    let from_env = std::env::var_os("REDLOCK_LABEL").is_some_and(|v| v == text)
        && !std::env::args_os()
            .take_while(|w| w != "--")
            .any(|w| w == "--label" || w.to_string_lossy().starts_with("--label="));
    let name = if from_env { "REDLOCK_LABEL" } else { "--label" };
    Err(crate::report::error::usage(format!(
        "{name} is empty: give the text to record instead of the command"
    )))
}

/// How a message names option `--LONG`: by the environment variable its value came from when
/// the option is not on the command line and its variable is set (clap then read the
/// variable), otherwise as the flag. For messages about a value, on error paths only: it
/// builds clap's definition.
pub fn named(long: &str) -> String {
    let words: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    named_among(long, &words)
}

/// [`named`] for the command line `words` (without the program's name).
pub(crate) fn named_among(long: &str, words: &[String]) -> String {
    let flag = format!("--{long}");
    let given = words
        .iter()
        .take_while(|w| *w != "--")
        .any(|w| *w == flag || w.strip_prefix(&flag).is_some_and(|v| v.starts_with('=')));
    if given {
        return flag;
    }
    // The hand reader's table has every variable clap reads (a test holds it to that).
    let var = by_hand::ENV
        .iter()
        .find(|(index, _)| by_hand::OPTS[*index].long == long)
        .map(|(_, var)| *var);
    match var {
        Some(var) if std::env::var_os(var).is_some_and(|v| !v.is_empty()) => var.to_string(),
        _ => flag,
    }
}

/// The format of redlock's own lines, read before the command line is parsed (an error in it
/// is said in that format): `--log-format` before `--`, else (or when that is no format)
/// `REDLOCK_LOG_FORMAT`. Anything but `json` is text.
pub fn log_format_of(args: &[std::ffi::OsString]) -> LogFormat {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    let mut flag = None;
    while let Some(word) = words.next() {
        match word {
            Some("--") => break,
            Some("--log-format") => flag = words.next().flatten(),
            Some(w) if w.starts_with("--log-format=") => flag = w.get(13..),
            _ => {}
        }
        if flag.is_some() {
            break;
        }
    }
    let env = std::env::var("REDLOCK_LOG_FORMAT").ok();
    match flag
        .filter(|f| ["text", "json"].contains(f))
        .or(env.as_deref())
    {
        Some("json") => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

/// Where the word `run` is, when it is the first word that is not an option (or an option's
/// value), every option before it is a global one, and no help or version flag comes before
/// the command's own words.
fn names_run(args: &[std::ffi::OsString]) -> Option<usize> {
    let mut words = args.iter().map(|a| a.to_str()).enumerate().skip(1);
    let mut at = None;
    while let Some((i, word)) = words.next() {
        let word = word?;
        if word == "run" {
            at = Some(i);
            break;
        }
        // A global option, which alone may come before `run` (clap refuses `run`'s own there).
        let global = by_hand::OPTS[..by_hand::GLOBALS].iter().find(|o| {
            word.strip_prefix("--")
                .is_some_and(|w| !o.long.is_empty() && w.split('=').next() == Some(o.long))
                || o.short.is_some()
                    && word.strip_prefix('-').and_then(|w| w.parse::<char>().ok()) == o.short
        })?;
        if global.value && !word.contains('=') {
            words.next();
        }
    }
    for (_, word) in words {
        match word {
            Some("--") => return at,
            Some("-h" | "--help" | "-V" | "--version") | None => return None,
            _ => {}
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn words(line: &str) -> Vec<std::ffi::OsString> {
        line.split(' ').map(Into::into).collect()
    }

    #[test]
    fn help_version_and_other_subcommands_take_the_full_tree() {
        for line in [
            "redlock run --help",
            "redlock run -h --key k",
            "redlock -V run",
            "redlock status run",
            "redlock --url run status",
            "redlock --wait=5s run --key k --ttl 5s -- x",
            "redlock --key k run --ttl 5s -- x",
        ] {
            assert!(names_run(&words(line)).is_none(), "{line}");
        }
        // An error on the short path is reported by the full tree.
        assert!(Cli::parse_args(&words("redlock run --key k --ttl 5 -- x")).is_err());
    }

    #[test]
    fn a_global_option_on_both_sides_of_run_is_refused_rather_than_half_read() {
        for line in [
            "redlock --url redis://a:1 run --url redis://b:2 --key k --ttl 5s -- x",
            "redlock --prefix a: run --prefix=b: --key k --ttl 5s -- x",
            "redlock -v run --key k --ttl 5s -v -- x",
        ] {
            let err = Cli::parse_args(&words(line)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{line}");
        }
        // After `--`, words are the command's.
        assert!(
            Cli::parse_args(&words("redlock -v run --key k --ttl 5s -- x -v")).is_ok(),
            "the command's own -v"
        );
    }

    #[test]
    fn the_busy_status_the_help_names_is_the_contracts() {
        let cmd = Cli::command();
        let run = cmd.find_subcommand("run").unwrap();
        let conflict = run
            .get_arguments()
            .find(|a| a.get_id() == "conflict_exit_code")
            .and_then(|a| a.get_help())
            .unwrap()
            .to_string();
        assert!(
            conflict.contains(&format!("(instead of {BUSY})")),
            "{conflict}"
        );
    }

    #[test]
    fn words_that_are_no_duration_are_said_to_be_none() {
        for word in ["fast", "yesterday", "a while", ""] {
            let err = parse_duration(word).unwrap_err();
            assert!(err.starts_with("not a duration"), "{word}: {err}");
            assert!(err.contains("'3s'") && err.contains("'6h'"), "{err}");
        }
        assert!(
            parse_duration("5x")
                .unwrap_err()
                .contains("unknown time unit")
        );
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_accept_humantime_and_reject_bare_numbers() {
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5").unwrap_err().contains("5s"));
        // Zero is refused by most durations: it is never suggested.
        assert!(!parse_duration("0").unwrap_err().contains("'0"));
        assert!(parse_duration("-5s").unwrap_err().contains("negative"));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("99999999999999999999999h").is_err());
    }
}
