//! The safety model (`model/redlock.pml`) is checked by SPIN: with every safety mechanism on,
//! no search finds an error; with any one of them off, a search finds a counterexample.
//! `model/check` runs the searches; this test runs it and holds it to its result.

use std::path::Path;
use std::process::Command;

#[test]
fn the_safety_model_holds_and_each_mechanism_it_relies_on_is_needed() {
    let have_spin = Command::new("spin")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have_spin,
        "spin is not installed: apt-get install spin (the model checker for model/redlock.pml)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/check");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "model/check failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Every configuration reported, each as expected.
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok ")).collect();
    assert_eq!(
        lines.len(),
        32,
        "model/check:
{stdout}
{stderr}"
    );
    assert!(!stdout.contains("FAIL"), "model/check:\n{stdout}");
}
