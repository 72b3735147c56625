//! Two things the compiler cannot know by itself: the commit `redlock --version` names, and the
//! order in which the linker lays out the functions a short `redlock run` executes.
//!
//! **The commit.** `--version` says `redlock 1.0.0 (abc1234 2026-11-29)`: the commit's short
//! hash and its committer date, read from git when the build runs in a checkout. A build from a
//! source tarball has no repository: `REDLOCK_COMMIT=HASH` (and `REDLOCK_COMMIT_DATE=YYYY-MM-DD`,
//! optional) name the commit instead, and win over git. With neither, it says the version alone.
//! The text is a constant of the binary (`REDLOCK_VERSION`, read by `env!`): nothing is looked
//! up when redlock starts. The date is the commit's, not the build's, so two builds of one commit
//! are the same bytes.
//!
//! **The order.**
//! A start costs a page fault per 64 KiB of executable that the run touches; with the hot code
//! scattered among TLS, Cluster and documentation code that a plain run never calls, every page
//! of the binary ended up resident and the peak RSS above its target (docs/performance.md).
//! `link/startup-symbols.txt` lists the symbols a run executes (recorded with
//! `scripts/startup-symbols.sh`); lld lays them out first, together. Unknown names are ignored,
//! and a test fails when too many of them are, or when a function of redlock's own that a run
//! executes is not listed (tests/cli/startup_symbols.rs).
//!
//! The flag is lld's: it is passed where rustc links with lld by default, x86-64 Linux (GNU)
//! from Rust 1.90 on, unless RUSTFLAGS choose a linker. Elsewhere (an older toolchain, another
//! target, another linker) the binary is linked as rustc would, without the order.

use std::process::Command;

fn main() {
    version();
    link_order();
}

/// Sets `REDLOCK_VERSION`: `1.0.0 (HASH DATE)`, or `1.0.0` when the commit is unknown.
fn version() {
    println!("cargo:rerun-if-env-changed=REDLOCK_COMMIT");
    println!("cargo:rerun-if-env-changed=REDLOCK_COMMIT_DATE");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let given = std::env::var("REDLOCK_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = match given {
        Some(hash) => {
            let date = std::env::var("REDLOCK_COMMIT_DATE").unwrap_or_default();
            Some(
                format!("{} {}", hash.trim(), date.trim())
                    .trim_end()
                    .to_owned(),
            )
        }
        None => commit_from_git(),
    };
    let text = match commit {
        Some(commit) => format!("{version} ({commit})"),
        None => version,
    };
    println!("cargo:rustc-env=REDLOCK_VERSION={text}");
}

/// The checkout's commit as `HASH DATE`, when the crate is built inside one and git is there.
/// Asks cargo to run this again when HEAD moves (a commit, a checkout).
fn commit_from_git() -> Option<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .args(["-C", dir])
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    // Only the manifest's own repository: a crate unpacked inside someone else's checkout
    // (a vendor directory) must not name that checkout's commit.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    // HEAD, and the branch it names (loose or packed): a worktree has its own HEAD and shares
    // the branches. Only files that exist: cargo reruns on every build for a missing one.
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let mut watched = vec![format!("{git_dir}/HEAD"), format!("{common}/packed-refs")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(format!("{common}/{branch}"));
    }
    for path in watched.iter().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    git(&[
        "log",
        "-1",
        "--no-show-signature",
        "--format=%h %cs",
        "--abbrev=7",
    ])
}

/// Passes lld the start-up symbol order, where rustc links with lld.
fn link_order() {
    let order = concat!(env!("CARGO_MANIFEST_DIR"), "/link/startup-symbols.txt");
    println!("cargo:rerun-if-changed={order}");
    let target = std::env::var("TARGET").unwrap_or_default();
    // A linker chosen in RUSTFLAGS may not be lld.
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let own_linker = flags.contains("linker") || flags.contains("fuse-ld");
    if target == "x86_64-unknown-linux-gnu" && !own_linker && rustc_links_with_lld() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the rustc building this crate is 1.90 or later, where x86-64 Linux links with the
/// bundled lld by default.
fn rustc_links_with_lld() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("-vV").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.lines().find_map(|l| l.strip_prefix("release: ")) else {
        return false;
    };
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
