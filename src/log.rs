//! redlock's own messages, on stderr; stdout belongs to the child (and to `status`/`acquire`).
//!
//! Three levels: the timeline (`-v` only), warnings (silenced by `-q`), and the final error line
//! (always printed). Text lines start with `redlock:`; with `--log-format json` every message is
//! one JSON object per line with the stable fields `ts` (RFC 3339, UTC), `level`
//! (`info`/`warn`/`error`), `event` (a short fixed name such as `acquired`), `msg`, and the
//! event's own fields. Each line is written with a single `write` so that lines from the
//! heartbeat thread never interleave with the main thread's.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::cli::LogFormat;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
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

/// Writes `text` to stdout. A reader that went away (`status | head -1`) is not redlock's
/// failure: the error is returned for callers that must know (acquire's token), never a panic.
pub fn stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A value attached to a message; numbers stay numbers in JSON.
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
        Level::Warn => !config.quiet,
        Level::Error => true,
    }
}

pub fn info(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Info, event, msg, fields);
}

pub fn warn(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Warn, event, msg, fields);
}

pub fn error(event: &str, msg: &str, fields: &[(&str, Field)]) {
    emit(Level::Error, event, msg, fields);
}

pub fn emit(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) {
    if !enabled(level) {
        return;
    }
    let config = config();
    let line = match config.format {
        LogFormat::Text => format!("redlock: {msg}\n"),
        LogFormat::Json => json_line(level, event, msg, fields),
    };
    // One write per line; a closed stderr must not take redlock down with it.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn json_line(level: Level, event: &str, msg: &str, fields: &[(&str, Field)]) -> String {
    let level = match level {
        Level::Info => "info",
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
