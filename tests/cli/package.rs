//! The Debian package (`scripts/build-deb`): built from the binary under test, installed with
//! `dpkg -i` into a scratch root, and checked as an operator would: `redlock --version`,
//! `man -w`, the completions where the shells look for packaged ones, the docs.

use std::path::Path;
use std::process::Command;

use crate::support::temp::TempDir;

/// Runs `cmd` and returns its stdout; fails the test with its stderr when it fails.
fn output(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{shown} did not start: {e} (Debian: apt-get install dpkg man-db)")
    });
    assert!(
        out.status.success(),
        "{shown} failed with {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_debian_package_installs_the_binary_man_pages_completions_and_docs() {
    let dir = TempDir::new("deb");
    let out = dir.path().join("out");
    let root = dir.path().join("root");
    let built = output(
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-deb"))
            .arg("--binary")
            .arg(env!("CARGO_BIN_EXE_redlock"))
            .arg("--out")
            .arg(&out),
    );
    let deb = built.trim();
    let version = env!("CARGO_PKG_VERSION");
    let arch = output(Command::new("dpkg").arg("--print-architecture"));
    let expected = out.join(format!("redlock_{version}_{}.deb", arch.trim()));
    assert!(
        Path::new(deb) == expected && expected.is_file(),
        "build-deb printed {deb}, expected the package at {}",
        expected.display()
    );
    let fields = output(Command::new("dpkg-deb").args(["--field", deb]));
    for expected in ["Package: redlock", &format!("Version: {version}")] {
        assert!(
            fields.contains(expected),
            "control lacks {expected}:\n{fields}"
        );
    }
    assert!(
        !fields.contains("Depends:"),
        "a static binary depends on nothing:\n{fields}"
    );

    let admin = root.join("var/lib/dpkg");
    std::fs::create_dir_all(admin.join("info")).expect("admin dir");
    std::fs::create_dir_all(admin.join("updates")).expect("admin dir");
    std::fs::write(admin.join("status"), "").expect("status file");
    output(
        Command::new("dpkg")
            .arg(format!("--instdir={}", root.display()))
            .arg(format!("--admindir={}", admin.display()))
            .args(["--force-script-chrootless", "--force-not-root", "-i", deb]),
    );

    let version_line = output(Command::new(root.join("usr/bin/redlock")).arg("--version"));
    assert_eq!(version_line.trim(), format!("redlock {version}"));

    let manpath = root.join("usr/share/man");
    for page in [
        "redlock",
        "redlock-run",
        "redlock-status",
        "redlock-release",
    ] {
        let found = output(
            Command::new("man")
                .arg("-M")
                .arg(&manpath)
                .args(["-w", page]),
        );
        assert!(
            found.trim().ends_with(&format!("man1/{page}.1.gz")),
            "man -w {page} found {found:?}"
        );
    }

    let bash = root.join("usr/share/bash-completion/completions/redlock");
    let complete = output(Command::new("bash").arg("-c").arg(format!(
        "source '{}' && complete -p redlock",
        bash.display()
    )));
    assert!(complete.contains("redlock"), "bash completion: {complete}");
    for (file, mark) in [
        (
            "usr/share/zsh/vendor-completions/_redlock",
            "#compdef redlock",
        ),
        (
            "usr/share/fish/vendor_completions.d/redlock.fish",
            "complete -c redlock",
        ),
    ] {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file} is not installed: {e}"));
        assert!(text.contains(mark), "{file} does not start with {mark:?}");
    }
    for doc in ["README.md.gz", "copyright"] {
        let path = root.join("usr/share/doc/redlock").join(doc);
        assert!(path.is_file(), "{} is not installed", path.display());
    }
}
