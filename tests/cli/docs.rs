//! The man pages and shell completions checked in under `man/` and `completions/` are exactly
//! what the binary generates from its own command line, and carry the sections a man page reader
//! looks for (exit statuses, environment, examples). CI runs the README's test command.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::support::{Redlock, TempDir};

const REGENERATE: &str = "cargo run -- generate-docs .";

const SUBCOMMANDS: [&str; 11] = [
    "run", "status", "release", "acquire", "extend", "doctor", "pause", "resume", "metrics",
    "check", "log",
];

/// Runs `redlock generate-docs` into a fresh directory.
fn generate(redlock: Redlock) -> TempDir {
    let out = TempDir::new("docs");
    redlock.arg("generate-docs").arg(out.path()).exits_with(0);
    out
}

/// Every file under `dir`, by name, with its contents.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|entry| entry.expect("read a directory entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (name, bytes)
        })
        .collect()
}

/// What differs between two trees of generated files, one line per file.
fn differences(generated: &Path, checked_in: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for dir in ["man", "completions"] {
        let new = files(&generated.join(dir));
        let old = files(&checked_in.join(dir));
        assert!(!new.is_empty(), "generate-docs wrote nothing under {dir}/");
        for (name, bytes) in &new {
            match old.get(name) {
                None => problems.push(format!("{dir}/{name} is missing")),
                Some(old) if old != bytes => problems.push(format!("{dir}/{name} is out of date")),
                Some(_) => {}
            }
        }
        for name in old.keys().filter(|name| !new.contains_key(*name)) {
            problems.push(format!("{dir}/{name} is no longer generated; delete it"));
        }
    }
    problems
}

fn man_page(dir: &TempDir, name: &str) -> String {
    let path = dir.path().join("man").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The section names of a man page, in order.
fn sections(page: &str) -> Vec<&str> {
    page.lines()
        .filter_map(|line| line.strip_prefix(".SH "))
        .map(|name| name.trim_matches('"'))
        .collect()
}

/// The text of one section, up to the next.
fn section<'a>(page: &'a str, name: &str) -> &'a str {
    let start = page
        .lines()
        .position(|line| line.strip_prefix(".SH ").map(|n| n.trim_matches('"')) == Some(name))
        .unwrap_or_else(|| panic!("no {name} section in\n{page}"));
    let offset: usize = page.lines().take(start + 1).map(|l| l.len() + 1).sum();
    let rest = &page[offset..];
    let end = rest.find("\n.SH ").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// Roff text with its escapes for `-` and `'` undone.
fn plain(roff: &str) -> String {
    roff.replace("\\-", "-").replace("\\*(Aq", "'")
}

#[test]
fn checked_in_man_pages_and_completions_are_up_to_date() {
    let generated = generate(Redlock::without_url());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let problems = differences(generated.path(), root);
    assert!(
        problems.is_empty(),
        "the checked-in man pages and completions differ from what the binary generates:\n  \
         {}\nregenerate them from the repository root with `{REGENERATE}` and commit the result",
        problems.join("\n  ")
    );
}

#[test]
fn generated_docs_do_not_depend_on_the_environment() {
    let plain = generate(Redlock::without_url());
    let configured = generate(
        Redlock::without_url()
            .env("REDLOCK_PREFIX", "staging:")
            .env("REDLOCK_URL", "redis://elsewhere:6379")
            .env("COLUMNS", "40")
            .env("SOURCE_DATE_EPOCH", "0"),
    );
    let problems = differences(configured.path(), plain.path());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn there_is_a_page_per_subcommand_and_none_for_hidden_ones() {
    let docs = generate(Redlock::without_url());
    let mut expected: Vec<String> = SUBCOMMANDS
        .iter()
        .map(|sub| format!("redlock-{sub}.1"))
        .collect();
    expected.push("redlock.1".to_owned());
    expected.sort();
    let pages: Vec<String> = files(&docs.path().join("man")).into_keys().collect();
    assert_eq!(pages, expected);
    let completions: Vec<String> = files(&docs.path().join("completions"))
        .into_keys()
        .collect();
    assert_eq!(
        completions,
        [
            "_redlock",
            "_redlock.ps1",
            "redlock.bash",
            "redlock.elv",
            "redlock.fish"
        ]
    );
    for (name, script) in files(&docs.path().join("completions")) {
        let script = String::from_utf8(script).expect("completions are text");
        assert!(script.contains("doctor"), "{name} does not complete doctor");
        assert!(
            !script.contains("generate-docs"),
            "{name} offers the hidden generate-docs"
        );
    }
}

#[test]
fn the_main_page_has_the_exit_status_table_environment_and_examples() {
    let docs = generate(Redlock::without_url());
    let page = man_page(&docs, "redlock.1");
    let names = sections(&page);
    for name in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let exit = section(&page, "EXIT STATUS");
    for status in ["128+N", "64", "69", "75", "76", "77", "78", "126", "127"] {
        assert!(
            exit.contains(&format!("\\fB{status}\\fR")),
            "EXIT STATUS lacks {status}:\n{exit}"
        );
    }
    let env = section(&page, "ENVIRONMENT");
    for var in [
        "REDLOCK_URL",
        "REDLOCK_PASSWORD_FILE",
        "REDLOCK_PREFIX",
        "REDLOCK_TIMEOUT",
        "REDLOCK_LOG_FORMAT",
        "REDLOCK_KEY",
        "REDLOCK_TOKEN",
        "REDLOCK_FENCE",
    ] {
        assert!(env.contains(var), "ENVIRONMENT lacks {var}:\n{env}");
    }
    let examples = plain(section(&page, "EXAMPLES"));
    for example in [
        "* * * * /usr/local/bin/redlock -q run",
        "--conflict-exit-code 0",
        " -c '",
        "redlock acquire",
        "redlock extend",
        "redlock release",
        "status --all --json",
    ] {
        assert!(
            examples.contains(example),
            "EXAMPLES lacks {example:?}:\n{examples}"
        );
    }
}

#[test]
fn every_subcommand_page_has_its_exit_status_and_examples() {
    let docs = generate(Redlock::without_url());
    for sub in SUBCOMMANDS {
        let page = man_page(&docs, &format!("redlock-{sub}.1"));
        let names = sections(&page);
        for name in ["SYNOPSIS", "OPTIONS", "EXIT STATUS", "EXAMPLES"] {
            assert!(
                names.contains(&name),
                "redlock-{sub}.1: {name} missing from {names:?}"
            );
        }
        let examples = plain(section(&page, "EXAMPLES"));
        assert!(
            examples.contains(&format!("redlock {sub}")),
            "redlock-{sub}.1 has no example of redlock {sub}:\n{examples}"
        );
    }
    let doctor = man_page(&docs, "redlock-doctor.1");
    let description = section(&doctor, "DESCRIPTION");
    for check in ["maxmemory", "persistence", "replica", "clock", "ACL"] {
        assert!(
            description.contains(check),
            "doctor's page does not describe {check}"
        );
    }
}

/// The one command the README gives for the tests: the first `sh` block of its "Tests" section,
/// which the README's opening shows too, as the second of its two commands.
fn readme_test_command(root: &Path) -> String {
    let readme = fs::read_to_string(root.join("README.md")).expect("read README.md");
    let first_sh_block = |text: &str| {
        text.split("```sh\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .map(|block| block.trim().to_owned())
    };
    let section = readme
        .split("\n## Tests\n")
        .nth(1)
        .expect("README.md has a \"## Tests\" section");
    let command =
        first_sh_block(section).expect("README.md's \"Tests\" section starts with a ```sh block");
    assert!(
        !command.is_empty() && !command.contains('\n'),
        "README.md's \"Tests\" block should hold one command: {command:?}"
    );
    let opening = readme.split("\n## ").next().unwrap_or_default();
    let commands: Vec<String> = opening
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .map(|block| block.trim().to_owned())
        .collect();
    assert_eq!(
        commands.get(1),
        Some(&command),
        "the README opens with two commands, the first run's and the tests' ({command:?})"
    );
    command
}

#[test]
fn ci_runs_the_readme_test_command_after_the_format_and_lint_checks_then_the_release_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let command = readme_test_command(root);
    let ci = fs::read_to_string(root.join(".ci/run")).expect("read .ci/run");
    let lines: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let at = |wanted: &str| lines.iter().position(|line| *line == wanted);
    let tests = at(&command)
        .unwrap_or_else(|| panic!(".ci/run does not run the README's test command {command:?}"));
    // Then only the reproducibility check of the release artifacts (docs/deploy.md), which
    // takes two release builds.
    assert_eq!(
        &lines[tests + 1..],
        ["scripts/release --check"],
        "after the README's test command, .ci/run should check the release and stop"
    );
    for check in [
        "cargo fmt --check",
        "cargo clippy --all-targets -- -D warnings",
    ] {
        let checked = at(check).unwrap_or_else(|| panic!(".ci/run does not run `{check}`"));
        assert!(checked < tests, ".ci/run runs `{check}` after the tests");
    }
}
