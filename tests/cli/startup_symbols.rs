//! The start-up symbol list (`link/startup-symbols.txt`, see `build.rs`) still names the
//! functions of the release binary it lays out. Symbol names carry hashes that change with the
//! code's paths, the dependencies and the toolchain: a list whose names are gone does nothing,
//! and the peak RSS of every run grows by a mebibyte. Regenerate it with
//! `scripts/startup-symbols.sh`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

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
