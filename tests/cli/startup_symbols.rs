//! The start-up symbol list (`link/startup-symbols.txt`, see `build.rs`) still names the
//! functions of the release binary it lays out. Symbol names carry hashes that change with the
//! code's paths, the dependencies and the toolchain: a list whose names are gone does nothing,
//! and the peak RSS of every run grows by a mebibyte. Regenerate it with
//! `scripts/startup-symbols.sh`.
//!
//! Most of the list surviving is not enough: a change to a few of redlock's functions on the
//! run path renames just those, and each one left out of the list costs a run the pages
//! faulted in around it (a quarter of a mebibyte for four of them, once). So every function of
//! redlock's own that a run executes, as far as valgrind can follow it (a run up to its keeper,
//! `acquire` and `release`), must be listed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{RedisServer, TempDir};

/// The share of listed names the release binary must still have.
const FRESH: f64 = 0.9;

/// The release binary, built (or found up to date) by cargo: the one the list is for.
fn release_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.current_dir(root).args([
        "build",
        "--release",
        "--bin",
        "redlock",
        "--message-format=json",
    ]);
    // What `cargo test` sets for its tests (this crate's OUT_DIR, the debug build's library
    // path, the package's variables) would make this build differ from a plain one, and
    // rebuild the release binary that .ci/run built before the suite.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if (name.starts_with("CARGO_") && name != "CARGO_HOME")
            || ["OUT_DIR", "LD_LIBRARY_PATH", "RUST_RECURSION_COUNT"].contains(&name.as_ref())
        {
            build.env_remove(name.as_ref());
        }
    }
    let out = build.output().expect("run cargo build --release");
    assert!(
        out.status.success(),
        "cargo build --release failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "redlock")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo built no redlock executable")
}

#[test]
fn the_startup_symbol_list_names_the_release_binarys_functions() {
    let list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("link/startup-symbols.txt"),
    )
    .expect("read link/startup-symbols.txt");
    let listed: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    assert!(!listed.is_empty(), "link/startup-symbols.txt is empty");
    let binary = release_binary();
    let nm = Command::new("nm")
        .arg("--defined-only")
        .arg(&binary)
        .output()
        .expect("run nm (Debian: binutils)");
    assert!(nm.status.success(), "nm {} failed", binary.display());
    let text = String::from_utf8_lossy(&nm.stdout);
    let defined: HashSet<&str> = text.lines().filter_map(|l| l.split(' ').nth(2)).collect();
    let found = listed
        .iter()
        .filter(|name| defined.contains(**name))
        .count();
    let share = found as f64 / listed.len() as f64;
    assert!(
        share >= FRESH,
        "only {found} of the {} names in link/startup-symbols.txt are in {}: the list is stale; \
         run scripts/startup-symbols.sh and commit the list",
        listed.len(),
        binary.display()
    );
}

/// The names `valgrind --tool=callgrind` saw executed by `args` (with `extra` options), as the
/// linker knows them; what the run itself did does not matter.
fn traced(binary: &Path, dir: &TempDir, name: &str, extra: &[&str], args: &[&str]) -> String {
    let out = dir.join(name);
    let run = Command::new("valgrind")
        .args(["--tool=callgrind", "--demangle=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args(extra)
        .arg(binary)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run valgrind ({e}); on Debian: sudo apt-get install valgrind")
        });
    let mut names = String::new();
    // A dump before the keeper's clone, then the rest (which valgrind cannot follow).
    for entry in std::fs::read_dir(dir.path()).expect("read the scratch directory") {
        let path = entry.expect("a directory entry").path();
        if path
            .file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with(name))
        {
            names.push_str(&std::fs::read_to_string(&path).expect("read callgrind's output"));
        }
    }
    assert!(
        names.contains("fn="),
        "callgrind recorded nothing for {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    names
}

#[test]
fn every_function_of_redlocks_own_that_a_run_executes_is_listed() {
    let list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("link/startup-symbols.txt"),
    )
    .expect("read link/startup-symbols.txt");
    let listed: HashSet<&str> = list.lines().collect();
    let binary = release_binary();
    let server = RedisServer::start();
    let url = server.url();
    let dir = TempDir::new("startup-symbols");
    let mut trace = traced(
        &binary,
        &dir,
        "cg.run",
        &["--dump-before=clone"],
        &[
            "--url", &url, "run", "--key", "t", "--ttl", "1s", "--", "true",
        ],
    );
    let acquired = Command::new(&binary)
        .args(["--url", &url, "acquire", "--key", "a", "--ttl", "10s"])
        .output()
        .expect("run redlock acquire");
    let token = String::from_utf8_lossy(&acquired.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(!token.is_empty(), "redlock acquire printed no token");
    trace.push_str(&traced(
        &binary,
        &dir,
        "cg.release",
        &[],
        &["--url", &url, "release", "a", "--token", &token],
    ));
    trace.push_str(&traced(
        &binary,
        &dir,
        "cg.acquire",
        &[],
        &["--url", &url, "acquire", "--key", "b", "--ttl", "10s"],
    ));
    // `fn=(12) name` on a function's first mention, `fn=(12)` after it; `name'2` is a
    // recursive call's.
    let mut missing: Vec<&str> = trace
        .lines()
        .filter_map(|l| l.strip_prefix("fn=").or_else(|| l.strip_prefix("cfn=")))
        .filter_map(|l| l.split_once(") ").map(|(_, name)| name))
        .map(|name| name.split_once('\'').map_or(name, |(name, _)| name))
        .filter(|name| name.starts_with("_ZN7redlock") && !listed.contains(name))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "{} of redlock's functions that a run executes are not in link/startup-symbols.txt \
         (each costs a run the pages faulted in around it): run scripts/startup-symbols.sh and \
         commit the list:\n{}",
        missing.len(),
        missing.join("\n")
    );
}
