//! clap's errors as the one line redlock prints, rewritten where clap names the symptom
//! rather than the mistake.
//!
//! clap reports what its parser met: `unexpected argument 'true'` for `--wait -- true` (a flag
//! whose value is missing), for `run --key k --ttl 5s echo hi` (a forgotten `--`) and, as
//! `'30m'`, for `--ttl 1h 30m` (a duration with a space, unquoted); a value from an environment
//! variable is named by its flag. This module reads the error's context and the command line
//! again and says what to do instead; typos of options and subcommands get the nearest known
//! name. Only the error path comes here: the hand reader (`by_hand.rs`) declines every line
//! clap would refuse, so clap, and then this module, reports them all.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Command, CommandFactory, Parser};

use super::Cli;

/// The one line (without `redlock: `) for clap's error `err` about `args`.
pub fn explain(err: &clap::Error, args: &[OsString]) -> String {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cli = Cli::command();
    let text = match err.kind() {
        ErrorKind::UnknownArgument => unknown_argument(err, &words, &cli),
        ErrorKind::InvalidSubcommand => context_str(err, ContextKind::InvalidSubcommand)
            .map(|word| unknown_subcommand(&word, &cli)),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => invalid_value(err, &words),
        ErrorKind::MissingRequiredArgument => missing_token(err, &words, &cli),
        ErrorKind::InvalidUtf8 => invalid_utf8(args),
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Some(format!(
                "name a subcommand: {}",
                subcommands(&cli).collect::<Vec<_>>().join(", ")
            ))
        }
        _ => None,
    };
    text.unwrap_or_else(|| first_line(err))
}

/// Which word (or environment variable) is not UTF-8, and what it is the value of: only the
/// command's words (after `--`, or `-c`'s) may be any bytes.
fn invalid_utf8(args: &[OsString]) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let shown = |word: &std::ffi::OsStr| word.as_bytes().escape_ascii().to_string();
    let rule = "only the command after -- (or -c's) may be any bytes; keys, options and \
                their values must be UTF-8 text";
    if let Some(at) = args.iter().skip(1).position(|a| a.to_str().is_none()) {
        let word = &args[at + 1];
        let flag = match word.as_bytes().split(|&b| b == b'=').next() {
            Some(name) if name.starts_with(b"--") && word.as_bytes().contains(&b'=') => {
                Some(String::from_utf8_lossy(name).into_owned())
            }
            _ => args[at]
                .to_str()
                .filter(|w| at > 0 && w.starts_with('-') && *w != "--")
                .map(str::to_owned),
        };
        let of = flag.map_or_else(String::new, |f| format!(", the value of {f},"));
        return Some(format!(
            "argument {} ({}){of} is not UTF-8: {rule}",
            at + 1,
            shown(word)
        ));
    }
    let (name, value) = std::env::vars_os()
        .find(|(k, v)| k.as_bytes().starts_with(b"REDLOCK_") && v.to_str().is_none())?;
    Some(format!(
        "{} ({}) is not UTF-8: {rule}",
        name.to_string_lossy(),
        shown(&value)
    ))
}

/// clap's own first line, with the lines it lists below it (the missing options).
fn first_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // "the following required arguments were not provided:" lists them on the lines below, one
    // per indented line: they go on the one line, which must name what is wrong.
    let listed: Vec<&str> = if first.ends_with(':') {
        lines
            .take_while(|l| l.starts_with(' '))
            .map(str::trim)
            .collect()
    } else {
        Vec::new()
    };
    if listed.is_empty() {
        first.to_string()
    } else {
        format!("{first} {}", listed.join(", "))
    }
}

fn context_str(err: &clap::Error, kind: ContextKind) -> Option<String> {
    match err.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => v.first().cloned(),
        _ => None,
    }
}

/// The subcommand a line names (the first word that is one), if any.
fn subcommand<'a>(words: &[String], cli: &'a Command) -> Option<(usize, &'a Command)> {
    words
        .iter()
        .take_while(|w| *w != "--")
        .enumerate()
        .find_map(|(i, w)| cli.find_subcommand(w).map(|sub| (i, sub)))
}

fn subcommands(cli: &Command) -> impl Iterator<Item = &str> {
    cli.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(Command::get_name)
}

/// A word clap did not expect: an unknown option (a typo, or an option of the subcommand
/// given before it), a value left without its flag, or the command without `--` before it.
fn unknown_argument(err: &clap::Error, words: &[String], cli: &Command) -> Option<String> {
    let word = context_str(err, ContextKind::InvalidArg)?;
    let sub = subcommand(words, cli);
    let here = sub.map_or(cli, |(_, s)| s);
    let at = words.iter().position(|w| {
        *w == word
            || w.strip_prefix(word.as_str())
                .is_some_and(|v| v.starts_with('='))
    });
    // `--conflict-exit-code -1`: a negative number after a flag that takes a value reads as an
    // option of its own; say what the flag makes of it.
    if let Some(at) = at
        && at >= 1
        && word.len() > 1
        && word[1..].starts_with(|c: char| c.is_ascii_digit())
        && takes_value(here, cli, &words[at - 1])
    {
        let flag = &words[at - 1];
        // The line read again with the value joined to its flag (`--flag=-1`, which clap takes
        // as a value): the flag's own verdict on it.
        let mut joined: Vec<OsString> = vec!["redlock".into()];
        for (i, w) in words.iter().enumerate() {
            match i {
                i if i == at - 1 => joined.push(format!("{flag}={word}").into()),
                i if i == at => {}
                _ => joined.push(w.into()),
            }
        }
        if let Err(e) = Cli::try_parse_from(&joined)
            && matches!(
                e.kind(),
                ErrorKind::InvalidValue | ErrorKind::ValueValidation
            )
        {
            return Some(explain(&e, &joined));
        }
        return Some(format!(
            "{flag} {word}: a value that starts with '-' must be joined to its flag: {flag}={word}"
        ));
    }
    if word.starts_with('-') && word.len() > 1 {
        let name = word.split('=').next().unwrap_or(&word);
        // `release --key K`: the key of `release` (and of `status`, `extend`'s is --key) is an
        // argument, not an option.
        if let Some((_, s)) = sub
            && let Some(long) = name.strip_prefix("--")
            && s.get_positionals().any(|p| {
                p.get_value_names()
                    .is_some_and(|n| n.iter().any(|n| n.eq_ignore_ascii_case(long)))
            })
        {
            let sub = s.get_name();
            let upper = long.to_ascii_uppercase();
            let example = if sub == "release" {
                format!("redlock release {upper} --token TOKEN (or --force)")
            } else {
                format!("redlock {sub} {upper}")
            };
            return Some(format!(
                "'redlock {sub}' takes the {long} as an argument, not as {name}: {example}"
            ));
        }
        if let (Some((i, s)), Some(at)) = (sub, at)
            && at < i
            && long_of(s, name).is_some()
        {
            return Some(format!(
                "{name} is an option of '{}': give it after '{}'",
                s.get_name(),
                s.get_name()
            ));
        }
        let longs = here
            .get_arguments()
            .chain(cli.get_arguments())
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")));
        let scope = sub.map_or_else(
            || "redlock".to_string(),
            |(_, s)| format!("redlock {}", s.get_name()),
        );
        return Some(match nearest(name, longs) {
            Some(near) => format!("unknown option '{name}': did you mean '{near}'?"),
            None => format!("unknown option '{name}' (see '{scope} --help')"),
        });
    }
    // A flag that takes a value, given none before `--`: clap took `--` as the end of options
    // and the command's first word as a stray one.
    if let Some(flag) = words
        .windows(2)
        .take_while(|pair| pair[0] != "--")
        .find(|pair| pair[1] == "--" && takes_value(here, cli, &pair[0]))
        .map(|pair| pair[0].clone())
    {
        let example = example_value(here, cli, &flag);
        return Some(format!(
            "{flag} needs a value before '--' (as in {flag} {example})"
        ));
    }
    let at = at?;
    // `--ttl 1h 30m`, `--ttl 5 mins`: the second part of a duration, its flag two words back.
    if at >= 2 && is_duration(here, cli, &words[at - 2]) {
        let flag = &words[at - 2];
        let value = format!("{} {word}", words[at - 1]);
        if let Ok(d) = super::parse_duration(&value) {
            // Without its spaces, in redlock's own units (`5m`, not `5mins`).
            let compact = humantime::format_duration(d).to_string().replace(' ', "");
            return Some(format!(
                "a duration with a space must be quoted: {flag} '{value}' (or write it without \
                 one, in units such as s, m, h: {compact})"
            ));
        }
    }
    if let Some((_, s)) = sub
        && s.get_name() == "run"
        && !words.iter().any(|w| w == "--")
    {
        return Some(format!(
            "'{word}' is not an option of 'redlock run': put the command after '--', as in \
             `redlock run --key KEY --ttl 5m -- {word} ...`"
        ));
    }
    None
}

/// `release` without `--token`: clap lists the missing option, but `--force` (what an operator
/// who does not hold the lock uses) is the other way to release.
fn missing_token(err: &clap::Error, words: &[String], cli: &Command) -> Option<String> {
    let (_, sub) = subcommand(words, cli)?;
    let missing = match err.get(ContextKind::InvalidArg)? {
        ContextValue::Strings(v) => v.clone(),
        ContextValue::String(s) => vec![s.clone()],
        _ => return None,
    };
    if sub.get_name() != "release" || missing.len() != 1 || !missing[0].starts_with("--token") {
        return None;
    }
    Some(
        "'redlock release' needs --token TOKEN (the token 'redlock acquire' printed) to end \
         that hold, or --force to remove the lock whoever holds it"
            .to_string(),
    )
}

/// `--NAME` among `cmd`'s options.
fn long_of<'a>(cmd: &'a Command, flag: &str) -> Option<&'a clap::Arg> {
    let long = flag.strip_prefix("--")?;
    cmd.get_arguments().find(|a| a.get_long() == Some(long))
}

fn option<'a>(here: &'a Command, cli: &'a Command, flag: &str) -> Option<&'a clap::Arg> {
    long_of(here, flag).or_else(|| long_of(cli, flag))
}

fn takes_value(here: &Command, cli: &Command, flag: &str) -> bool {
    option(here, cli, flag).is_some_and(|a| a.get_action().takes_values())
}

fn is_duration(here: &Command, cli: &Command, flag: &str) -> bool {
    option(here, cli, flag).is_some_and(|a| {
        a.get_value_names()
            .is_some_and(|names| names.iter().any(|n| n.as_str() == "DURATION"))
    })
}

fn example_value(here: &Command, cli: &Command, flag: &str) -> String {
    let names = option(here, cli, flag).and_then(|a| a.get_value_names());
    match names
        .and_then(|n| n.first())
        .map(clap::builder::Str::as_str)
    {
        Some("DURATION") => "30s".into(),
        Some(other) => other.to_string(),
        None => "VALUE".into(),
    }
}

fn unknown_subcommand(word: &str, cli: &Command) -> String {
    match nearest(word, subcommands(cli).map(str::to_string)) {
        Some(near) => format!("unknown subcommand '{word}': did you mean '{near}'?"),
        None => format!(
            "unknown subcommand '{word}'; the subcommands are {}",
            subcommands(cli).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A value clap refused, named as the user gave it: `--flag`, or the environment variable
/// it came from, with the possible values when there is a list.
fn invalid_value(err: &clap::Error, words: &[String]) -> Option<String> {
    let arg = context_str(err, ContextKind::InvalidArg)?;
    let flag = arg.split([' ', '=']).next().unwrap_or(&arg).to_string();
    let long = flag.strip_prefix("--")?;
    let given = super::named_among(long, words);
    let first = first_line(err).replace(&format!("'{arg}'"), &given);
    let valid: Vec<String> = match err.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    };
    Some(if valid.is_empty() {
        first
    } else {
        format!("{first}; possible values: {}", valid.join(", "))
    })
}

/// The candidate nearest to `word`, when it is near enough to be a typo of it.
fn nearest(word: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    let limit = (word.trim_start_matches('-').chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (distance(word, &c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance, a swap of two neighbours counting as one edit (`--tll` for `--ttl`).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> String {
        let args: Vec<OsString> = std::iter::once("redlock")
            .chain(text.split(' '))
            .map(Into::into)
            .collect();
        let err = Cli::try_parse_from(args.clone()).expect_err(text);
        explain(&err, &args)
    }

    #[test]
    fn clap_symptoms_become_the_mistakes_behind_them() {
        let l = line("run --key k --ttl 5s --wait -- true");
        assert!(l.starts_with("--wait needs a value"), "{l}");
        let l = line("run --key k --ttl 5s echo hi");
        assert!(l.contains("put the command after '--'"), "{l}");
        let l = line("run --key k --ttl 1h 30m -- true");
        assert!(l.contains("--ttl '1h 30m'") && l.contains("1h30m"), "{l}");
        let l = line("run --key k --tll 5s -- true");
        assert!(l.contains("did you mean '--ttl'"), "{l}");
        let l = line("rnu --key k");
        assert!(l.contains("did you mean 'run'"), "{l}");
        let l = line("--wait=5s run --key k --ttl 5s -- true");
        assert!(l.contains("give it after 'run'"), "{l}");
        let l = line("release k");
        assert!(l.contains("--token TOKEN") && l.contains("--force"), "{l}");
        let l = line("release --key k --token t");
        assert!(
            l.contains("redlock release KEY --token TOKEN (or --force)"),
            "{l}"
        );
        let l = line("run --key k --ttl 5s --conflict-exit-code -1 -- true");
        assert!(
            l.contains("--conflict-exit-code: -1 is not in 0..=255"),
            "{l}"
        );
    }

    #[test]
    fn typos_are_near_and_strangers_are_not() {
        assert_eq!(distance("--tll", "--ttl"), 1);
        assert_eq!(
            nearest(
                "--frobnicate",
                ["--ttl", "--key"].map(String::from).into_iter()
            ),
            None
        );
    }
}
