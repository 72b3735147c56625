//! redlock's own messages, on stderr; stdout belongs to the child (and to `status`/`acquire`).
//!
//! Three levels: the timeline (`-v` only), warnings (silenced by `-q`), and the final error line
//! (always printed). Text lines start with `redlock:`; with `--log-format json` every message is
//! one JSON object per line with the stable fields `ts` (RFC 3339, UTC), `level`
//! (`info`/`warn`/`error`), `event` (a short fixed name such as `acquired`), `msg`, and the
//! event's own fields. Each line is written with a single `write` so that lines from the
//! heartbeat thread never interleave with the main thread's.
//!
//! **Logging never blocks supervision.** A stderr nobody reads (a stuck log shipper, a full
//! pipe to a mailer, a terminal stopped with Ctrl-S) must not hold up a renewal, a kill or a
//! reap, so no write to stderr ever waits: a pipe or terminal is reopened through
//! `/proc/self/fd/2` as a description of redlock's own, non-blocking (the command's stderr,
//! the same pipe, stays as it was); a socket (journald) is written with `MSG_DONTWAIT`; a
//! regular file is written as it is (it never waits for a reader). A line that does not fit
//! is dropped and counted, and the count is said in the final line (or, after a success, in
//! a last warning). Only that last line, written after the release when nothing is left to
//! supervise, waits for room — at most [`LAST_LINE_WAIT`].

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
    /// Shown on a terminal (unless `-q`) or with `-v`, yet not a warning (JSON level `info`):
    /// what an operator waiting at a terminal wants to see once, such as a run's place in a
    /// queue, and what cron's mail should not carry.
    Note,
    Warn,
    Error,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    verbose: bool,
    quiet: bool,
    format: LogFormat,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn init(verbose: bool, quiet: bool, format: LogFormat) {
    let _ = CONFIG.set(Config {
        verbose,
        quiet,
        format,
    });
}

fn config() -> Config {
    CONFIG.get().copied().unwrap_or(Config {
        verbose: false,
        quiet: false,
        format: LogFormat::Text,
    })
}

/// How redlock's own lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `redlock: message` lines
    Text,
    /// One JSON object per line
    Json,
}

/// Writes `text` to stdout. A reader that went away (`status | head -1`) is not redlock's
/// failure: the error is returned for callers that must know (acquire's token), never a panic.
pub fn stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A value attached to a message; numbers stay numbers in JSON.
#[derive(Clone, Copy)]
pub enum Field<'a> {
    Str(&'a str),
    Num(i128),
}

impl<'a> From<&'a str> for Field<'a> {
    fn from(s: &'a str) -> Field<'a> {
        Field::Str(s)
    }
}

impl<'a> From<&'a String> for Field<'a> {
    fn from(s: &'a String) -> Field<'a> {
        Field::Str(s)
    }
}

macro_rules! num_field {
    ($($t:ty),*) => {$(
        impl From<$t> for Field<'_> {
            fn from(n: $t) -> Self {
                Field::Num(n as i128)
            }
        }
    )*};
}
num_field!(u8, u32, i32, u64, i64, usize, u128);

/// Whether messages of `level` are printed (to skip building ones that would not be).
pub fn enabled(level: Level) -> bool {
    let config = config();
    match level {
        Level::Info => config.verbose,
        // Asked only when a note is about to be written: no start-up cost for every run.
        // SAFETY: isatty only inspects the descriptor.
        Level::Note => !config.quiet && (config.verbose || unsafe { libc::isatty(2) } == 1),
        Level::Warn => !config.quiet,
        Level::Error => true,
    }
}

pub fn info(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Info, event, msg, fields);
}

pub fn note(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Note, event, msg, fields);
}

pub fn warn(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Warn, event, msg, fields);
}

pub fn error(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Error, event, msg, fields);
}

/// A final error line that ends redlock with `exit` (busy, skipped, a signal while waiting, an
/// unreadable lock): like every final error line, it carries the status as `exit`. Returns
/// `exit`.
pub fn ending(
    event: &str,
    msg: &str,
    fields: &[(&str, Field)],
    exit: crate::report::exit::Exit,
) -> crate::report::exit::Exit {
    let mut all: Vec<(&str, Field)> = fields.to_vec();
    all.push(("exit", exit.code().into()));
    emit(Level::Error, event, msg, &all);
    exit
}

pub fn emit(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) {
    if !enabled(level) {
        return;
    }
    let line = format_line(level, event, msg, fields);
    if !stderr().try_write(line.as_bytes()) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The last line redlock prints, after everything else is done: it says how many earlier
/// lines a full stderr cost, and it may wait (a bounded time) for room.
pub fn last(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) {
    if !enabled(level) {
        return;
    }
    let line = match DROPPED.load(Ordering::Relaxed) {
        0 => format_line(level, event, msg, fields),
        n => {
            let mut all: Vec<(&str, Field)> = fields.to_vec();
            all.push(("dropped", n.into()));
            let msg = format!("{msg} ({n} earlier messages were dropped: stderr was full)");
            format_line(level, event, &msg, &all)
        }
    };
    stderr().write_waiting(line.as_bytes(), LAST_LINE_WAIT);
}

/// After a run that needed no final line: says what a full stderr cost, if anything.
pub fn dropped_summary() {
    let n = DROPPED.load(Ordering::Relaxed);
    if n > 0 && enabled(Level::Warn) {
        let line = format_line(
            Level::Warn,
            "dropped",
            &format!("{n} messages were dropped: stderr was full"),
            &[("dropped", n.into())],
        );
        stderr().write_waiting(line.as_bytes(), LAST_LINE_WAIT);
    }
}

/// How long the last line may wait for a full stderr to drain.
const LAST_LINE_WAIT: Duration = Duration::from_secs(2);
/// A line longer than this is cut: a pipe takes up to this much in one piece, or nothing.
const MAX_LINE: usize = 4096;

static DROPPED: AtomicU64 = AtomicU64::new(0);

fn format_line(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) -> String {
    let mut line = match config().format {
        LogFormat::Text => format!("redlock: {msg}\n"),
        LogFormat::Json => json_line(level, event, msg, fields),
    };
    if line.len() > MAX_LINE {
        let mut cut = MAX_LINE - 1;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('\n');
    }
    line
}

/// stderr as redlock writes it: never waiting, see the module doc.
struct Stderr {
    fd: libc::c_int,
    how: How,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// A description of our own with O_NONBLOCK (a pipe, a FIFO, a terminal).
    Own,
    /// `send` with MSG_DONTWAIT (a socket).
    Socket,
    /// A plain write (a regular file, which never waits for a reader).
    Plain,
    /// Could not get a description of our own: write only when poll says there is room.
    Polled,
}

fn stderr() -> &'static Stderr {
    static STDERR: OnceLock<Stderr> = OnceLock::new();
    STDERR.get_or_init(|| {
        // SAFETY: `stat` is plain data, for which all-zero bytes are a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is valid for writes; fstat on fd 2 has no other effects.
        if unsafe { libc::fstat(2, &mut st) } != 0 {
            return Stderr {
                fd: 2,
                how: How::Plain,
            };
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFSOCK => Stderr {
                fd: 2,
                how: How::Socket,
            },
            libc::S_IFIFO | libc::S_IFCHR => {
                // SAFETY: a valid NUL-terminated path. On Linux, opening a pipe (or a
                // terminal) through /proc gives a new description of the same file.
                let fd = unsafe {
                    libc::open(
                        c"/proc/self/fd/2".as_ptr(),
                        libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
                    )
                };
                if fd >= 0 {
                    Stderr { fd, how: How::Own }
                } else {
                    Stderr {
                        fd: 2,
                        how: How::Polled,
                    }
                }
            }
            _ => Stderr {
                fd: 2,
                how: How::Plain,
            },
        }
    })
}

impl Stderr {
    /// Writes `line` if there is room now; false when it had to be dropped.
    fn try_write(&self, line: &[u8]) -> bool {
        if self.how == How::Polled && !self.writable(Duration::ZERO) {
            return false;
        }
        // SAFETY: `line` is valid for reads of its length.
        let n = unsafe {
            match self.how {
                How::Socket => libc::send(
                    self.fd,
                    line.as_ptr().cast(),
                    line.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                ),
                _ => libc::write(self.fd, line.as_ptr().cast(), line.len()),
            }
        };
        // A closed stderr is not a full one: nothing to count, nothing to retry.
        n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
    }

    /// Writes `line`, waiting up to `limit` for room.
    fn write_waiting(&self, line: &[u8], limit: Duration) {
        let until = Instant::now() + limit;
        while !self.try_write(line) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.writable(left) {
                return;
            }
        }
    }

    fn writable(&self, within: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: `pfd` is valid for one entry.
        unsafe { libc::poll(&mut pfd, 1, within.as_millis().min(60_000) as libc::c_int) > 0 }
    }
}

fn json_line(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) -> String {
    let level = match level {
        Level::Info | Level::Note => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    let mut out = String::with_capacity(128);
    out.push_str("{\"ts\":");
    json_str(
        &mut out,
        &humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
    );
    out.push_str(",\"level\":");
    json_str(&mut out, level);
    out.push_str(",\"event\":");
    json_str(&mut out, event);
    out.push_str(",\"msg\":");
    json_str(&mut out, msg);
    for (name, value) in fields {
        out.push(',');
        json_str(&mut out, name);
        out.push(':');
        match value {
            Field::Str(s) => json_str(&mut out, s),
            Field::Num(n) => {
                let _ = write!(out, "{n}");
            }
        }
    }
    out.push_str("}\n");
    out
}

/// Appends `s` as a JSON string literal.
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_are_one_object_with_stable_fields() {
        let line = json_line(
            Level::Info,
            "acquired",
            "took \"k\"\n",
            &[("fence", 7u64.into()), ("key", "k".into())],
        );
        assert!(line.ends_with("}\n"));
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.contains(r#""level":"info","event":"acquired","msg":"took \"k\"\n""#));
        assert!(line.contains(r#""fence":7,"key":"k"}"#));
    }

    #[test]
    fn control_characters_are_escaped() {
        let mut out = String::new();
        json_str(&mut out, "a\u{1}b");
        assert_eq!(out, "\"a\\u0001b\"");
    }
}
