//! `redlock generate-docs DIR` (hidden): the man pages and shell completions, rendered from the
//! clap definition in `cli.rs`, so they cannot drift from the flags the binary accepts.
//!
//! Writes `DIR/man/redlock.1`, one `DIR/man/redlock-SUBCOMMAND.1` per visible subcommand, and
//! `DIR/completions/` for bash, zsh, fish, elvish and PowerShell. The pages get the sections
//! clap cannot know about: EXIT STATUS from the exit-status table in `exit.rs` (each page the
//! statuses its subcommand can end with), ENVIRONMENT, EXAMPLES and SEE ALSO from `pages.rs`.
//! This module is the writer: files, the roff of those sections, completions.
//!
//! Invariant: the output depends on nothing but the binary: no date, no environment (clap_mangen
//! names each option's environment variable, never its current value), no terminal width. The
//! copies checked in at the repository root are compared byte for byte by `tests/cli/docs.rs`;
//! `cargo run -- generate-docs .` refreshes them.

use std::fs;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use crate::cli::{Cli, GenerateDocsArgs};
use crate::report::exit::{self, Exit, Status, plain};
use crate::report::log;

mod pages;

use pages::Prose;

const SHELLS: [Shell; 5] = [
    Shell::Bash,
    Shell::Zsh,
    Shell::Fish,
    Shell::Elvish,
    Shell::PowerShell,
];

pub fn generate_docs(args: &GenerateDocsArgs) -> Result<Exit> {
    // The pages name the version alone: the commit `--version` adds would change them with
    // every commit, and they are checked in.
    let mut cmd = Cli::command().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for dir in [&man, &completions] {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }

    write(&man.join("redlock.1"), &page(&cmd, None)?)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("redlock-{}.1", sub.get_name());
        write(&man.join(name), &page(sub, Some(sub.get_name()))?)?;
    }

    let mut visible = without_hidden_subcommands(&Cli::command());
    for shell in SHELLS {
        let path = clap_complete::generate_to(shell, &mut visible, "redlock", &completions)
            .with_context(|| format!("cannot write the {shell} completions"))?;
        log::info("generated", &format!("wrote {}", path.display()), &[]);
    }
    Ok(Exit::Success)
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file =
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .with_context(|| format!("cannot write {}", path.display()))?;
    log::info("generated", &format!("wrote {}", path.display()), &[]);
    Ok(())
}

/// The completion scripts offer what `--help` shows: clap_complete would also offer hidden
/// subcommands, and there is no way to remove one from a `Command`, so this is a copy without.
/// `cmd` must not be built yet: building adds `--help` and `--version`, which the copy would
/// then get twice.
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    let bare = match cmd.get_about() {
        Some(about) => clap::Command::new("redlock").about(about.clone()),
        None => clap::Command::new("redlock"),
    };
    bare.version(env!("CARGO_PKG_VERSION"))
        .disable_help_subcommand(true)
        .subcommand_required(cmd.is_subcommand_required_set())
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// One man page: clap_mangen's sections, then ours, in the order man-pages(7) suggests.
/// `sub` is the subcommand's name, `None` for the main page.
fn page(cmd: &clap::Command, sub: Option<&str>) -> Result<Vec<u8>> {
    let version = env!("CARGO_PKG_VERSION");
    let man = Man::new(cmd.clone()).source(format!("redlock {version}"));
    let text = pages::prose(sub);
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    // Each render_* call starts with roff's apostrophe preamble; the title already wrote it.
    let preamble = Roff::new().render();
    let mut section = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> Result<()> {
        let mut buf = Vec::new();
        render(&mut buf)?;
        out.extend_from_slice(buf.strip_prefix(preamble.as_bytes()).unwrap_or(&buf));
        Ok(())
    };
    section(&|w| man.render_name_section(w))?;
    section(&|w| man.render_synopsis_section(w))?;
    section(&|w| man.render_description_section(w))?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        section(&|w| man.render_options_section(w))?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        section(&|w| man.render_subcommands_section(w))?;
    }
    section(&|w| render_extra(sub, &text, w))?;
    if cmd.get_version().is_some() {
        section(&|w| man.render_version_section(w))?;
    }
    Ok(out)
}

/// The sections after OPTIONS: EXIT STATUS (the statuses `sub` can end with), ENVIRONMENT,
/// EXAMPLES and SEE ALSO.
fn render_extra(sub: Option<&str>, text: &Prose, w: &mut Vec<u8>) -> std::io::Result<()> {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for status in Status::of(sub) {
        roff.control("TP", []);
        roff.text([bold(status.exit.label())]);
        roff.text([roman(plain(&status.text(sub)))]);
    }
    for note in exit::notes(sub) {
        roff.control("PP", []);
        roff.text([roman(plain(note))]);
    }
    if !text.env.is_empty() {
        roff.control("SH", ["ENVIRONMENT"]);
        if !text.env_intro.is_empty() {
            roff.text([roman(text.env_intro)]);
        }
        for (name, meaning) in text.env {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*meaning)]);
        }
    }
    roff.control("SH", ["EXAMPLES"]);
    for (i, (what, lines)) in text.examples.iter().enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(*what)]);
        roff.control("PP", []);
        roff.control("RS", ["4"]);
        roff.control("nf", []);
        for line in lines.lines() {
            roff.text([roman(line)]);
        }
        roff.control("fi", []);
        roff.control("RE", []);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(text.see_also.join(", "))]);
    roff.to_writer(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_carry_the_preamble_once_and_no_date() {
        let mut cmd = Cli::command();
        cmd.build();
        let page = String::from_utf8(page(&cmd, None).unwrap()).unwrap();
        let preamble = Roff::new().render();
        assert_eq!(page.matches(preamble.trim()).count(), 1, "{page}");
        assert!(page.starts_with(&preamble));
        let sections: Vec<&str> = page
            .lines()
            .filter_map(|l| l.strip_prefix(".SH "))
            .map(|s| s.trim_matches('"'))
            .collect();
        for section in ["EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "SEE ALSO"] {
            assert!(
                sections.contains(&section),
                "{section} missing from {sections:?}"
            );
        }
        assert!(page.contains("REDLOCK_FENCE") && page.contains("\\fB75\\fR"));
    }

    #[test]
    fn completions_leave_out_hidden_subcommands() {
        let mut visible = without_hidden_subcommands(&Cli::command());
        let mut out = Vec::new();
        clap_complete::generate(Shell::Bash, &mut visible, "redlock", &mut out);
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("doctor") && !script.contains("generate-docs"));
    }
}
