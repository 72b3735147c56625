//! `redlock --version` names the version and the commit the binary was built from, as a
//! constant of the binary: `redlock 1.0.0 (abc1234 2026-11-29)`. build.rs reads the commit from
//! git in a checkout; `REDLOCK_COMMIT` (and `REDLOCK_COMMIT_DATE`) name it for a build from a
//! source tarball (`scripts/release` builds that way, and its check reads the result).

use std::path::Path;
use std::process::Command;

use crate::support::Redlock;

/// What the build names: `REDLOCK_COMMIT` when this test's build was given one, else the
/// checkout's HEAD as git reads it (hash and committer date); `None` outside a checkout.
fn expected_commit() -> Option<String> {
    if let Some(hash) = option_env!("REDLOCK_COMMIT").filter(|h| !h.trim().is_empty()) {
        let date = option_env!("REDLOCK_COMMIT_DATE").unwrap_or("");
        return Some(
            format!("{} {}", hash.trim(), date.trim())
                .trim_end()
                .to_owned(),
        );
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(["log", "-1", "--format=%h %cs", "--abbrev=7"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[test]
fn version_names_the_version_and_the_commit() {
    let version = env!("CARGO_PKG_VERSION");
    let expected = match expected_commit() {
        Some(commit) => format!("redlock {version} ({commit})"),
        None => format!("redlock {version}"),
    };
    for flag in ["--version", "-V"] {
        let outcome = Redlock::without_url().arg(flag).exits_with(0);
        assert_eq!(outcome.stdout.trim_end(), expected, "{flag}\n{outcome}");
        assert!(outcome.stderr.is_empty(), "{flag}\n{outcome}");
    }
}

#[test]
fn the_version_text_is_a_constant_of_the_binary() {
    // Nothing is asked at start-up (no git, no file): the whole line is in the executable.
    let outcome = Redlock::without_url().arg("--version").exits_with(0);
    let line = outcome.stdout.trim_end();
    let text = line.strip_prefix("redlock ").expect("starts with the name");
    let binary = std::fs::read(Path::new(env!("CARGO_BIN_EXE_redlock"))).expect("the binary");
    assert!(
        binary.windows(text.len()).any(|w| w == text.as_bytes()),
        "`{text}` is not a constant of the binary"
    );
}

#[test]
fn the_man_pages_name_the_version_alone() {
    // The checked-in pages must not change with every commit.
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/redlock.1");
    let text = std::fs::read_to_string(page).expect("man/redlock.1");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!("\"redlock {version}\"")),
        "the title names the version"
    );
    assert!(
        !text.contains(&format!("{version} (")),
        "a commit in the page"
    );
}
