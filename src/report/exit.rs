//! The exit-status contract (the README's "Exit status") as a type, and as the table of what
//! each status means.
//!
//! Exit statuses are a promise to crontabs, scripts and Kubernetes `podFailurePolicy` rules:
//! the numbers below never change. What an *error* means (which status it stands for, how it
//! reads) is decided in `error.rs`; `main` is the only place a status ends the process.
//!
//! [`STATUSES`] words what each status means, once: the man pages' EXIT STATUS sections and the
//! exit statuses `--help` lists are rendered from it, and a test holds the README's table to it.

/// What redlock tells its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done (`status`: held; `release`/`extend`: done).
    Success,
    /// 1: `status`: not held; `release`/`extend`: nothing done (not the holder).
    No,
    /// The child's own status, passed through.
    Child(u8),
    /// 128+N: the child (or redlock while waiting) ended by signal N.
    Signal(i32),
    /// 64: usage error or bad input; nothing was contacted (a quorum's nodes were at most
    /// asked which server each is).
    Usage,
    /// 69: Redis unreachable, timed out, read-only, out of memory, loading.
    Unavailable,
    /// 75 (or `--conflict-exit-code`): somebody else holds the lock.
    Busy(u8),
    /// 76: the lease was lost while the child ran; the child was stopped.
    LeaseLost,
    /// 77: authentication failed or an ACL denied a command.
    Permission,
    /// 79: another run replaced this one (`--replace`); the command's tree was stopped.
    Replaced,
    /// 78: the server is set up in a way redlock cannot work with (WRONGTYPE, unknown command).
    Config,
    /// 70: an internal error (a bug in redlock: a panic), reported on one line.
    Internal,
    /// 124: `--max-runtime` ran out; the command's tree was stopped (as timeout(1) exits).
    TimedOut,
    /// 126: the command exists but could not be executed.
    NotExecutable,
    /// 127: the command was not found.
    NotFound,
    /// 2: `check` only (monitoring-plugin convention): CRITICAL.
    Critical,
    /// 3: `check` only (monitoring-plugin convention): UNKNOWN, Redis could not be asked.
    Unknown,
}

pub const BUSY: u8 = 75;

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::No => 1,
            Exit::Child(code) => code,
            Exit::Signal(n) => (128 + n).clamp(0, 255) as u8,
            Exit::Usage => 64,
            Exit::Unavailable => 69,
            Exit::Busy(code) => code,
            Exit::LeaseLost => 76,
            Exit::Permission => 77,
            Exit::Replaced => 79,
            Exit::Config => 78,
            Exit::Internal => 70,
            Exit::TimedOut => 124,
            Exit::NotExecutable => 126,
            Exit::NotFound => 127,
            Exit::Critical => 2,
            Exit::Unknown => 3,
        }
    }

    /// How the tables write it: the number, or what stands for one.
    pub fn label(self) -> String {
        match self {
            Exit::Child(_) => "the command's status".into(),
            Exit::Signal(_) => "128+N".into(),
            other => other.code().to_string(),
        }
    }
}

/// One line of the exit-status table: the README's "Exit status", every man page's EXIT STATUS
/// and the exit statuses `--help` lists are rendered from [`STATUSES`], and worded nowhere else.
/// Text may quote flags and commands in backticks (Markdown, for the README); the man pages and
/// `--help` drop them ([`plain`]).
pub struct Status {
    /// The status; [`Exit::label`] writes it. `Child` and `Signal` stand for every status of
    /// the command and every signal.
    pub exit: Exit,
    /// A few words, for `--help`.
    pub short: &'static str,
    /// What it means, whichever subcommand ends with it: one or two sentences.
    pub meaning: &'static str,
    /// The subcommands that can end with it, in the order their pages list them.
    pub on: &'static [On],
}

/// A subcommand that can end with a status, and what it adds about it.
pub struct On {
    pub command: &'static str,
    /// This subcommand's few words for it, for its `--help` and the table's summary (`""`: the
    /// status's own).
    pub short: &'static str,
    /// A sentence its man page adds to the meaning (`""`: none).
    pub more: &'static str,
}

const fn on(command: &'static str, short: &'static str, more: &'static str) -> On {
    On {
        command,
        short,
        more,
    }
}

/// Every status redlock can end with, in the order the tables list them.
pub const STATUSES: &[Status] = &[
    Status {
        exit: Exit::Child(0),
        short: "",
        meaning: "The command ran while the lease was held the whole time (`redlock run`).",
        on: &[on("run", "", "")],
    },
    Status {
        exit: Exit::Signal(0),
        short: "ended by signal N",
        meaning: "Ended by signal N (shell convention): the command, or redlock itself while it \
            waited for the lock (nothing is held then).",
        on: &[on("run", "", ""), on("acquire", "", "")],
    },
    Status {
        exit: Exit::Success,
        short: "success",
        meaning: "Success.",
        on: &[
            on(
                "status",
                "held",
                "Every named key is held (with `--all`: the locks were listed).",
            ),
            on(
                "release",
                "released",
                "The lock is deleted (with `--token`: it was held with that token).",
            ),
            on(
                "acquire",
                "acquired",
                "The token is the first line of stdout, the fence the second (with `--json`, \
                 one object).",
            ),
            on("extend", "renewed", "The lock now expires TTL from now."),
            on("doctor", "every check ok", "Every check is ok."),
            on(
                "pause",
                "paused",
                "Every named key (with `--all`: the prefix) is paused; with `--drain`, no \
                 paused lock had a running holder left within the drain time.",
            ),
            on(
                "resume",
                "resumed",
                "A pause was lifted on every named key (with `--all`: whatever was paused).",
            ),
            on("metrics", "printed", "The metrics are on stdout."),
            on(
                "log",
                "printed",
                "The log is on stdout (with `--follow`: until SIGINT or SIGTERM).",
            ),
            on(
                "check",
                "OK",
                "OK (monitoring-plugin convention): nothing below applies to any key.",
            ),
        ],
    },
    Status {
        exit: Exit::No,
        short: "a negative answer",
        meaning: "A negative answer, not an error.",
        on: &[
            on("status", "free", "At least one named key is free."),
            on(
                "release",
                "nothing released",
                "Nothing released: the lock is free, or (with `--token`) held with another token.",
            ),
            on(
                "extend",
                "not the holder",
                "Not the holder: the lock expired, was released, or is held with another token. \
                 Stop the work it protects.",
            ),
            on(
                "doctor",
                "warnings only",
                "Some checks warned, none failed.",
            ),
            on(
                "resume",
                "nothing to resume",
                "A named key was not paused (the others were resumed).",
            ),
            on(
                "check",
                "WARNING",
                "WARNING: a key is paused without an end (`--for`), was never run, or its last \
                 run did not end ok.",
            ),
        ],
    },
    Status {
        exit: Exit::Critical,
        short: "CRITICAL",
        meaning: "CRITICAL (`check` only, monitoring-plugin convention): a holder older than \
            `--max-age`, no run ended ok within `--max-since-success`, a pause whose `--for` ran \
            out without a resume, or a key of another type.",
        on: &[on("check", "", "")],
    },
    Status {
        exit: Exit::Unknown,
        short: "UNKNOWN",
        meaning: "UNKNOWN (`check` only, monitoring-plugin convention): Redis could not be asked \
            (unreachable, timed out, authentication or ACL denied, a quorum that cannot tell); \
            `check` never exits 69 or 77.",
        on: &[on("check", "", "")],
    },
    Status {
        exit: Exit::Usage,
        short: "usage error",
        meaning: "Usage error or bad input (bad duration, empty key, missing command, malformed \
            URL, unreadable password file, a quorum that names one server twice); nothing was \
            contacted (a quorum's nodes were at most asked which server each is).",
        on: EVERY_COMMAND,
    },
    Status {
        exit: Exit::Unavailable,
        short: "Redis unavailable",
        meaning: "Redis (or the quorum) unreachable, timed out, a read-only replica, out of \
            memory, or in a transient state (LOADING, MASTERDOWN, BUSY, CLUSTERDOWN, TRYAGAIN); \
            or fewer replicas than `--replicas N` acknowledged the lock (it was given back).",
        on: &[
            on("run", "", "The command never started."),
            on(
                "status",
                "",
                "`status` never says free when it could not ask.",
            ),
            on("release", "", ""),
            on("acquire", "", ""),
            on("extend", "", ""),
            on(
                "doctor",
                "",
                "For `doctor`: the role check found a replica, the probe lock's writes were \
                 refused, or fewer replicas than `--replicas N` acknowledge.",
            ),
            on("pause", "", ""),
            on("resume", "", ""),
            on("metrics", "", ""),
            on("log", "", ""),
        ],
    },
    Status {
        exit: Exit::Busy(BUSY),
        short: "busy",
        meaning: "Lock busy: held by someone else and not acquired within `--wait` (`redlock run \
            --conflict-exit-code N` replaces it, 0 allowed).",
        on: &[
            on("run", "", "Also when the key is paused (`redlock pause`)."),
            on(
                "acquire",
                "",
                "Also when the key is paused (`redlock pause`).",
            ),
            on(
                "pause",
                "holders remain",
                "With `--drain`: a paused lock still had a running holder when the drain time \
                 ran out (the pause stays in force).",
            ),
        ],
    },
    Status {
        exit: Exit::LeaseLost,
        short: "lease lost",
        meaning: "Lease lost while the command ran: redlock stopped the command, or found at \
            the release that the lock was gone or someone else's.",
        on: &[on(
            "run",
            "",
            "The key expired or was taken, renewals kept failing, or redlock itself was stopped \
             past its kill point: every process of the command got SIGTERM, then SIGKILL \
             `--kill-after` later, before the lease ran out. Also when the release finds the key \
             deleted or taken over since the last renewal (the run is recorded as lease lost). \
             76 even when the command itself exited 0.",
        )],
    },
    Status {
        exit: Exit::Replaced,
        short: "replaced",
        meaning: "Replaced: another run asked this one to stop (`--replace`); redlock stopped \
            the command's tree as on a lost lease, recorded the run as replaced, and released \
            the lock.",
        on: &[on(
            "run",
            "",
            "Every process of the command got SIGTERM, then SIGKILL `--kill-after` later; the \
             lock was released once all of them were gone, and the run is recorded as replaced \
             (and by whom). A run with `--no-replace` is never asked. A lost lease (76) takes \
             precedence. Also a `--replace` run still waiting when a later `--replace` run \
             arrives: it started nothing (the last replacer to arrive is the one that runs).",
        )],
    },
    Status {
        exit: Exit::Permission,
        short: "permission denied",
        meaning: "Authentication failed or an ACL denied a command.",
        on: &[
            on("run", "", ""),
            on(
                "status",
                "",
                "`status` needs only read commands: a read-only ACL user can run it.",
            ),
            on("release", "", ""),
            on("acquire", "", ""),
            on("extend", "", ""),
            on(
                "doctor",
                "",
                "Also when the user lacks a permission `redlock run` or `status` needs (the fail \
                 line names it).",
            ),
            on("pause", "", ""),
            on("resume", "", ""),
            on(
                "metrics",
                "",
                "`metrics` needs only read commands, as `status` does.",
            ),
            on(
                "log",
                "",
                "`log` needs only `LRANGE` and `LINDEX` on the locks' keys, beside what `status` reads.",
            ),
        ],
    },
    Status {
        exit: Exit::Config,
        short: "server misconfiguration",
        meaning: "Server-side misconfiguration, e.g. the lock key holds another type of value \
            (WRONGTYPE), a command redlock needs is renamed or missing, a run asks for \
            `--slots N` (or `--shared`) on a key held with another slot count (or shape), or \
            the lock's records are of a data layout this redlock does not read.",
        on: &[
            on("run", "", ""),
            on(
                "status",
                "",
                "A key of another type is no lock, and nothing redlock does will change that.",
            ),
            on(
                "release",
                "",
                "With `--force`: a key of another type is left alone.",
            ),
            on("acquire", "", ""),
            on("extend", "", ""),
            on(
                "doctor",
                "",
                "Also when the server is too old for redlock's scripts (before 5.0).",
            ),
            on("pause", "", ""),
            on("resume", "", ""),
            on(
                "metrics",
                "",
                "A key of another type is no lock, or a lock's records are of another type or \
                 layout: nothing is printed.",
            ),
            on(
                "log",
                "",
                "A lock's log key or records hold another type of value, or a data layout this \
                 redlock does not read (with `--all`: every other log is printed, each such lock \
                 named on stderr).",
            ),
        ],
    },
    Status {
        exit: Exit::Internal,
        short: "internal error",
        meaning: "Internal error: a bug in redlock (the line says where; please report it). A \
            command that was running is killed by redlock's keeper, and the lock expires by \
            itself.",
        on: EVERY_COMMAND,
    },
    Status {
        exit: Exit::TimedOut,
        short: "timed out",
        meaning: "`--max-runtime` ran out: redlock stopped the command's tree (as timeout(1) \
            does).",
        on: &[on(
            "run",
            "",
            "Every process of the command got SIGTERM the maximum runtime after the lock was \
             taken, and SIGKILL `--kill-after` later; the lock was released once all of them \
             were gone, and the run is recorded as timed out. 124 whatever status the command \
             ended with; a lost lease (76) takes precedence.",
        )],
    },
    Status {
        exit: Exit::NotExecutable,
        short: "command not executable",
        meaning: "The command is not executable (nothing is left locked).",
        on: &[on("run", "", "")],
    },
    Status {
        exit: Exit::NotFound,
        short: "command not found",
        meaning: "The command was not found (nothing is left locked).",
        on: &[on("run", "", "")],
    },
];

/// Every subcommand, with nothing to add: for the statuses any of them can end with.
const EVERY_COMMAND: &[On] = &[
    on("run", "", ""),
    on("status", "", ""),
    on("release", "", ""),
    on("acquire", "", ""),
    on("extend", "", ""),
    on("doctor", "", ""),
    on("pause", "", ""),
    on("resume", "", ""),
    on("metrics", "", ""),
    on("check", "", ""),
    on("log", "", ""),
];

/// Said after the table, on every page.
pub const STDERR_NOTE: &str = "Every non-zero status from redlock itself comes with one line on \
    stderr, starting `redlock:`, that says what happened and what to do.";

/// What a subcommand's page says after its table, besides [`STDERR_NOTE`].
const NOTES: &[(&str, &str)] = &[
    (
        "release",
        "A `redlock run` whose lock was removed with `--force` notices at its next renewal, \
         stops its command and exits 76.",
    ),
    (
        "doctor",
        "When several checks fail, the first one printed decides the status.",
    ),
    (
        "check",
        "`check` is the exception: WARNING and CRITICAL are said in the plugin line on stdout \
         only, because monitoring systems may merge stderr into the plugin output; UNKNOWN gets \
         the `redlock:` line on stderr too.",
    ),
];

impl Status {
    /// The statuses `command` can end with (`None`: every one), in table order.
    pub fn of(command: Option<&str>) -> impl Iterator<Item = &'static Status> {
        STATUSES
            .iter()
            .filter(move |s| command.is_none_or(|c| s.on_command(c).is_some()))
    }

    fn on_command(&self, command: &str) -> Option<&'static On> {
        self.on.iter().find(|on| on.command == command)
    }

    /// What the status means: on `command`'s page, the meaning and what `command` adds; on
    /// the main page and in the README, the meaning and each subcommand's few words for it.
    pub fn text(&self, command: Option<&str>) -> String {
        match command {
            Some(command) => match self.on_command(command) {
                Some(on) if !on.more.is_empty() => format!("{} {}", self.meaning, on.more),
                _ => self.meaning.to_owned(),
            },
            None => {
                let shorts: Vec<String> = self
                    .on
                    .iter()
                    .filter(|on| !on.short.is_empty())
                    .map(|on| format!("`{}`: {}", on.command, on.short))
                    .collect();
                if shorts.is_empty() {
                    self.meaning.to_owned()
                } else {
                    format!("{} {}.", self.meaning, shorts.join("; "))
                }
            }
        }
    }

    /// `64 usage error`: for `--help`, with `command`'s own words where it has them.
    fn brief(&self, command: Option<&str>) -> String {
        let own = command
            .and_then(|c| self.on_command(c))
            .map_or("", |on| on.short);
        let short = if own.is_empty() { self.short } else { own };
        let label = self.exit.label();
        if short.is_empty() {
            label
        } else {
            format!("{label} {short}")
        }
    }
}

/// The notes after `command`'s table (`None`: the main page's).
pub fn notes(command: Option<&str>) -> impl Iterator<Item = &'static str> {
    let own = NOTES
        .iter()
        .filter(move |(c, _)| command == Some(*c))
        .map(|(_, note)| *note);
    std::iter::once(STDERR_NOTE).chain(own)
}

/// `Exit status: 0 held, 1 free, ...` for `--help` (`None`: every status), then the
/// subcommand's notes but the one about stderr.
pub fn help(command: Option<&str>) -> String {
    let briefs: Vec<String> = Status::of(command).map(|s| s.brief(command)).collect();
    let mut text = format!("Exit status: {}.", briefs.join(", "));
    for note in notes(command).skip(1) {
        text.push(' ');
        text.push_str(note);
    }
    plain(&text)
}

/// `0 held, 1 free`: a subcommand's own words for the given statuses, for its one-line about.
pub fn briefly(command: &str, exits: &[Exit]) -> String {
    let briefs: Vec<String> = Status::of(Some(command))
        .filter(|s| exits.contains(&s.exit))
        .map(|s| s.brief(Some(command)))
        .collect();
    briefs.join(", ")
}

/// Text for a man page or `--help`: the README's backticks dropped.
pub fn plain(text: &str) -> String {
    text.replace('`', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_contract() {
        assert_eq!(Exit::Success.code(), 0);
        assert_eq!(Exit::No.code(), 1);
        assert_eq!(Exit::Usage.code(), 64);
        assert_eq!(Exit::Unavailable.code(), 69);
        assert_eq!(Exit::Busy(BUSY).code(), 75);
        assert_eq!(Exit::Busy(0).code(), 0);
        assert_eq!(Exit::LeaseLost.code(), 76);
        assert_eq!(Exit::Permission.code(), 77);
        assert_eq!(Exit::Config.code(), 78);
        assert_eq!(Exit::NotExecutable.code(), 126);
        assert_eq!(Exit::NotFound.code(), 127);
        assert_eq!(Exit::Signal(libc::SIGTERM).code(), 143);
        assert_eq!(Exit::Signal(libc::SIGKILL).code(), 137);
        assert_eq!(Exit::Child(3).code(), 3);
        assert_eq!(Exit::Critical.code(), 2);
        assert_eq!(Exit::Unknown.code(), 3);
    }

    /// One of each kind; the match makes a new variant fail to compile here until the table
    /// has a line for it.
    fn every_kind() -> [Exit; 17] {
        let kinds = [
            Exit::Success,
            Exit::No,
            Exit::Child(0),
            Exit::Signal(0),
            Exit::Usage,
            Exit::Unavailable,
            Exit::Busy(BUSY),
            Exit::LeaseLost,
            Exit::Replaced,
            Exit::Permission,
            Exit::Config,
            Exit::Internal,
            Exit::TimedOut,
            Exit::NotExecutable,
            Exit::NotFound,
            Exit::Critical,
            Exit::Unknown,
        ];
        for kind in kinds {
            match kind {
                Exit::Success
                | Exit::No
                | Exit::Child(_)
                | Exit::Signal(_)
                | Exit::Usage
                | Exit::Unavailable
                | Exit::Busy(_)
                | Exit::LeaseLost
                | Exit::Replaced
                | Exit::Permission
                | Exit::Config
                | Exit::Internal
                | Exit::TimedOut
                | Exit::NotExecutable
                | Exit::NotFound
                | Exit::Critical
                | Exit::Unknown => {}
            }
        }
        kinds
    }

    #[test]
    fn the_table_has_one_line_per_status() {
        let labels: Vec<String> = STATUSES.iter().map(|s| s.exit.label()).collect();
        for kind in every_kind() {
            let n = labels.iter().filter(|l| **l == kind.label()).count();
            assert_eq!(n, 1, "{} has {n} lines in STATUSES", kind.label());
        }
        assert_eq!(STATUSES.len(), every_kind().len());
    }

    #[test]
    fn every_subcommand_in_the_table_exists_and_every_one_has_statuses() {
        use clap::CommandFactory;
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let visible: Vec<&str> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(clap::Command::get_name)
            .collect();
        for status in STATUSES {
            for on in status.on {
                assert!(
                    visible.contains(&on.command),
                    "no subcommand {}",
                    on.command
                );
            }
        }
        for name in visible {
            let labels: Vec<String> = Status::of(Some(name)).map(|s| s.exit.label()).collect();
            // `check` follows the monitoring-plugin convention: a denied permission is UNKNOWN.
            let denied = if name == "check" { "3" } else { "77" };
            assert!(
                labels.contains(&"64".to_owned()) && labels.contains(&denied.to_owned()),
                "{name}: {labels:?}"
            );
        }
    }

    #[test]
    fn help_lists_a_subcommands_statuses_in_its_own_words() {
        assert_eq!(
            briefly("status", &[Exit::Success, Exit::No]),
            "0 held, 1 free"
        );
        let doctor = help(Some("doctor"));
        assert!(doctor.starts_with("Exit status: 0 every check ok, 1 warnings only, 64 "));
        assert!(doctor.ends_with("the first one printed decides the status."));
        assert!(help(None).contains("75 busy, 76 lease lost"));
        assert!(!help(None).contains('`'));
    }

    /// The README's table, as this table renders it.
    fn readme_table() -> String {
        let mut table = String::from("| status | meaning |\n|---|---|\n");
        for status in STATUSES {
            table.push_str(&format!(
                "| {} | {} |\n",
                status.exit.label(),
                status.text(None)
            ));
        }
        table
    }

    #[test]
    fn the_readme_exit_status_table_is_this_table() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("read README.md");
        let section = readme
            .split("\n## Exit status\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("README.md has an \"## Exit status\" section");
        let mut paragraphs = section.trim().split("\n\n");
        let table = format!("{}\n", paragraphs.next().unwrap_or(""));
        let expected = readme_table();
        assert!(
            table == expected,
            "README.md's exit-status table differs from exit.rs's STATUSES; replace it with:\n\n\
             {expected}"
        );
        let note = paragraphs.next().unwrap_or("").replace('\n', " ");
        assert!(
            note.starts_with(STDERR_NOTE),
            "the paragraph after README.md's table should start with {STDERR_NOTE:?}: {note:?}"
        );
        for status in STATUSES {
            assert!(!status.text(None).contains('|'), "{}", status.exit.label());
        }
    }
}
