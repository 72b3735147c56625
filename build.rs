//! Links the functions a short `redlock run` executes next to each other.
//!
//! A start costs a page fault per 64 KiB of executable that the run touches; with the hot code
//! scattered among TLS, Cluster and documentation code that a plain run never calls, every page
//! of the binary ended up resident. `link/startup-symbols.txt` lists the symbols a run executes
//! (recorded with `scripts/startup-symbols.sh`); lld lays them out first, together. A stale
//! list only makes the layout less tight: unknown names are ignored.

fn main() {
    let order = concat!(env!("CARGO_MANIFEST_DIR"), "/link/startup-symbols.txt");
    println!("cargo:rerun-if-changed={order}");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let lld = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");
    if linux && lld {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
