//! The packages (`scripts/build-deb`, `scripts/build-rpm`): each built from the binary under
//! test for the host's target, installed into a scratch root by its family's own tool
//! (`dpkg --instdir`, `rpm --root`), and checked as an operator would: the installed binary
//! runs and is static, `man -w` finds the pages, the completions load where the shells look
//! for packaged ones, the licence and the README are there, and every link in an installed
//! page reaches an installed file. The architecture comes from the
//! target: a binary for another machine is labelled as that machine's, or refused when it does
//! not match the target asked for.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::temp::TempDir;

fn script(name: &str) -> Command {
    Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(name),
    )
}

/// Runs `cmd`; fails the test with its stderr when it fails.
fn run(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{shown} did not start: {e} (Debian: apt-get install dpkg rpm rpm2cpio cpio man-db)")
    });
    assert!(
        out.status.success(),
        "{shown} failed with {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn output(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd).stdout).into_owned()
}

/// The package names of the host's architecture: (Debian, RPM).
fn host_arch() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "x86_64" => ("amd64", "x86_64"),
        "aarch64" => ("arm64", "aarch64"),
        other => panic!("no package names known for {other}"),
    }
}

/// Builds a package with `name` (build-deb, build-rpm) from `binary`; returns its path.
fn build(name: &str, binary: &Path, out: &Path, target: Option<&str>) -> PathBuf {
    let mut cmd = script(name);
    cmd.arg("--binary").arg(binary).arg("--out").arg(out);
    if let Some(target) = target {
        cmd.args(["--target", target]);
    }
    PathBuf::from(output(&mut cmd).trim())
}

/// Every regular file under `root`, as absolute paths in the installed system.
fn files_under(root: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, into: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, into);
            } else {
                into.insert(format!("/{}", path.strip_prefix(root).unwrap().display()));
            }
        }
    }
    let mut files = BTreeSet::new();
    walk(&root.join("usr"), root, &mut files);
    files
}

/// What both packages hold, at the paths both families share.
fn common_files() -> BTreeSet<String> {
    let mut files: BTreeSet<String> = [
        "/usr/bin/redlock",
        "/usr/share/bash-completion/completions/redlock",
        "/usr/share/fish/vendor_completions.d/redlock.fish",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let man = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    for page in fs::read_dir(&man).expect("man/").flatten() {
        let name = page.file_name().to_string_lossy().into_owned();
        files.insert(format!("/usr/share/man/man1/{name}.gz"));
    }
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/systemd");
    for unit in fs::read_dir(&units).expect("deploy/systemd/").flatten() {
        let name = unit.file_name().to_string_lossy().into_owned();
        files.insert(format!("/usr/share/doc/redlock/examples/systemd/{name}"));
    }
    for watch in ["prometheus", "grafana"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy")
            .join(watch);
        for file in fs::read_dir(&dir).expect("deploy/").flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            files.insert(format!("/usr/share/doc/redlock/examples/{watch}/{name}"));
        }
    }
    for (dir, ending) in [("docs", ".md"), ("schemas", ".json")] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for doc in fs::read_dir(&path).expect(dir).flatten() {
            let name = doc.file_name().to_string_lossy().into_owned();
            if name.ends_with(ending) {
                files.insert(format!("/usr/share/doc/redlock/{dir}/{name}"));
            }
        }
    }
    for doc in [
        "README.md",
        "CHANGELOG.md",
        "ARCHITECTURE.md",
        "benches/HISTORY.md",
    ] {
        files.insert(format!("/usr/share/doc/redlock/{doc}"));
    }
    files
}

/// Every link in an installed Markdown page that names a file (`[text](path)`, not a URL nor
/// an anchor in the page itself) reaches a file or directory installed by the package: a page
/// read where it is installed links to nothing that was left behind in the repository.
fn links_resolve(root: &Path) {
    let docs = root.join("usr/share/doc/redlock");
    let pages: Vec<String> = files_under(root)
        .into_iter()
        .filter(|f| f.starts_with("/usr/share/doc/redlock/") && f.ends_with(".md"))
        .collect();
    assert!(pages.len() > 5, "too few pages installed: {pages:?}");
    let mut broken = Vec::new();
    for page in pages {
        let file = root.join(page.trim_start_matches('/'));
        let text = fs::read_to_string(&file).expect("an installed page");
        let dir = file.parent().expect("a directory");
        for (i, _) in text.match_indices("](") {
            let target: String = text[i + 2..].chars().take_while(|c| *c != ')').collect();
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let reached = dir.join(path);
            // Inside the package's documentation, and there.
            let inside = reached
                .canonicalize()
                .is_ok_and(|r| r.starts_with(docs.canonicalize().expect("the doc directory")));
            if !inside {
                broken.push(format!("{page}: ({target})"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links in installed pages that reach nothing installed:\n{}",
        broken.join("\n")
    );
}

/// Whether the ELF executable at `path` is static: no program interpreter, no dynamic section.
fn is_static(path: &Path) -> bool {
    let elf = fs::read(path).expect("the binary");
    assert_eq!(
        &elf[..4],
        b"\x7fELF",
        "{} is not an ELF file",
        path.display()
    );
    assert_eq!(elf[4], 2, "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| {
        let kind = u32::from_le_bytes(elf[phoff + i * phentsize..][..4].try_into().unwrap());
        kind != 2 && kind != 3 // PT_DYNAMIC, PT_INTERP
    })
}

/// What an operator checks after installing a package into `root`.
fn check_installed(root: &Path, zsh_dir: &str) {
    let version = env!("CARGO_PKG_VERSION");
    let binary = root.join("usr/bin/redlock");
    let version_line = output(Command::new(&binary).arg("--version"));
    // The version, then the commit the binary was built from (tests/cli/version.rs).
    assert!(
        version_line == format!("redlock {version}\n")
            || version_line.starts_with(&format!("redlock {version} (")),
        "{version_line}"
    );
    assert!(
        is_static(&binary),
        "{} needs a dynamic loader",
        binary.display()
    );

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

    links_resolve(root);

    let bash = root.join("usr/share/bash-completion/completions/redlock");
    let complete = output(Command::new("bash").arg("-c").arg(format!(
        "source '{}' && complete -p redlock",
        bash.display()
    )));
    assert!(complete.contains("redlock"), "bash completion: {complete}");
    for (file, mark) in [
        (format!("{zsh_dir}/_redlock"), "#compdef redlock"),
        (
            "usr/share/fish/vendor_completions.d/redlock.fish".to_owned(),
            "complete -c redlock",
        ),
    ] {
        let text = fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("{file} is not installed: {e}"));
        assert!(text.contains(mark), "{file} does not hold {mark:?}");
    }
}

#[test]
fn the_debian_package_installs_the_binary_man_pages_completions_licence_and_docs() {
    let dir = TempDir::new("deb");
    let root = dir.join("root");
    let deb = build(
        "build-deb",
        Path::new(env!("CARGO_BIN_EXE_redlock")),
        &dir.join("out"),
        None,
    );
    let (arch, _) = host_arch();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        deb.ends_with(format!("redlock_{version}_{arch}.deb")),
        "unexpected package name {}",
        deb.display()
    );
    let fields = output(Command::new("dpkg-deb").arg("--field").arg(&deb));
    for expected in [
        "Package: redlock".to_owned(),
        format!("Version: {version}"),
        format!("Architecture: {arch}"),
    ] {
        assert!(
            fields.contains(&expected),
            "control lacks {expected}:\n{fields}"
        );
    }
    assert!(
        !fields.contains("Depends:"),
        "a static binary depends on nothing:\n{fields}"
    );

    let admin = root.join("var/lib/dpkg");
    fs::create_dir_all(admin.join("info")).expect("admin dir");
    fs::create_dir_all(admin.join("updates")).expect("admin dir");
    fs::write(admin.join("status"), "").expect("status file");
    run(Command::new("dpkg")
        .arg(format!("--instdir={}", root.display()))
        .arg(format!("--admindir={}", admin.display()))
        .args(["--force-script-chrootless", "--force-not-root", "-i"])
        .arg(&deb));
    // dpkg checks the md5sums the package carries against what it installed.
    run(Command::new("dpkg")
        .arg(format!("--admindir={}", admin.display()))
        .arg(format!("--root={}", root.display()))
        .args(["--verify", "redlock"]));

    check_installed(&root, "usr/share/zsh/vendor-completions");
    let mut expected = common_files();
    expected.extend(
        [
            "/usr/share/zsh/vendor-completions/_redlock",
            "/usr/share/doc/redlock/copyright",
        ]
        .map(str::to_owned),
    );
    assert_eq!(files_under(&root), expected, "the .deb's files");
    let copyright = fs::read_to_string(root.join("usr/share/doc/redlock/copyright")).unwrap();
    assert!(
        copyright.contains("License: MIT or Apache-2.0"),
        "{copyright}"
    );
}

#[test]
fn the_rpm_package_installs_the_same_files_at_the_rpm_familys_paths() {
    let dir = TempDir::new("rpm");
    let root = dir.join("root");
    let rpm = build(
        "build-rpm",
        Path::new(env!("CARGO_BIN_EXE_redlock")),
        &dir.join("out"),
        None,
    );
    let (_, arch) = host_arch();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        rpm.ends_with(format!("redlock-{version}-1.{arch}.rpm")),
        "unexpected package name {}",
        rpm.display()
    );
    let query = output(
        Command::new("rpm")
            .args(["-qp", "--qf", "%{NAME} %{VERSION} %{ARCH} %{LICENSE}\\n"])
            .arg(&rpm),
    );
    assert_eq!(
        query.trim(),
        format!("redlock {version} {arch} MIT OR Apache-2.0")
    );
    // Nothing required but rpm's own features: the binary needs no library.
    let requires = output(Command::new("rpm").arg("-qpR").arg(&rpm));
    assert!(
        requires.lines().all(|l| l.starts_with("rpmlib(")),
        "the package requires more than rpm itself:\n{requires}"
    );

    // Installed by rpm into a scratch root, with its own database there; and, as a second
    // opinion, unpacked with rpm2cpio and cpio, which must give the same files.
    run(Command::new("rpm").arg("--root").arg(&root).args([
        "--dbpath",
        "/var/lib/rpm",
        "--initdb",
    ]));
    run(Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args(["--dbpath", "/var/lib/rpm", "-i"])
        .arg(&rpm));
    run(Command::new("rpm").arg("--root").arg(&root).args([
        "--dbpath",
        "/var/lib/rpm",
        "-V",
        "redlock",
    ]));
    check_installed(&root, "usr/share/zsh/site-functions");
    let mut expected = common_files();
    expected.extend(
        [
            "/usr/share/zsh/site-functions/_redlock",
            "/usr/share/licenses/redlock/LICENSE-MIT",
            "/usr/share/licenses/redlock/LICENSE-APACHE",
        ]
        .map(str::to_owned),
    );
    assert_eq!(files_under(&root), expected, "the .rpm's files");

    let unpacked = dir.join("cpio");
    fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("sh")
        .current_dir(&unpacked)
        .arg("-c")
        .arg("rpm2cpio \"$1\" | cpio -idm --quiet")
        .arg("sh")
        .arg(&rpm));
    assert_eq!(files_under(&unpacked), expected, "rpm2cpio's files");
}

#[test]
fn the_packages_architecture_is_the_targets_and_a_binary_for_another_machine_is_refused() {
    let dir = TempDir::new("arch");
    let test_binary = Path::new(env!("CARGO_BIN_EXE_redlock"));
    for name in ["build-deb", "build-rpm"] {
        let refused = script(name)
            .arg("--binary")
            .arg(test_binary)
            .args(["--target", "riscv64gc-unknown-linux-gnu", "--out"])
            .arg(dir.join("refused"))
            .output()
            .expect("the script starts");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(65), "{name}: {stderr}");
        assert!(
            stderr.starts_with("redlock: ") && stderr.contains("riscv64gc-unknown-linux-gnu"),
            "{name}: {stderr}"
        );
        assert!(
            !dir.join("refused").exists(),
            "{name} wrote something for a refused binary"
        );
    }

    // A binary for riscv64: what the scripts read of one is its ELF header, so a header alone
    // stands in for it (no cross toolchain needed, and nothing to compress).
    let foreign = dir.join("redlock");
    let mut header = vec![0u8; 64];
    header[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    header[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    header[18..20].copy_from_slice(&243u16.to_le_bytes()); // EM_RISCV
    fs::write(&foreign, &header).unwrap();
    run(Command::new("chmod").arg("755").arg(&foreign));
    let target = Some("riscv64gc-unknown-linux-gnu");
    let deb = build("build-deb", &foreign, &dir.join("out"), target);
    let fields = output(Command::new("dpkg-deb").arg("--field").arg(&deb));
    assert!(fields.contains("Architecture: riscv64"), "{fields}");
    let rpm = build("build-rpm", &foreign, &dir.join("out"), target);
    let arch = output(
        Command::new("rpm")
            .args(["-qp", "--qf", "%{ARCH}"])
            .arg(&rpm),
    );
    assert_eq!(arch, "riscv64");
}
