//! Links the functions a short `redlock run` executes next to each other.
//!
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
