//! `rediss://`: certificates are verified by default, against `--tls-ca-file` or the system's
//! trust store; client certificates work; `--tls-insecure` connects without verification and
//! says so; a wrong certificate fails fast with 69. The certificates are made by `openssl` for
//! each test, and the server is a real `redis-server --tls-port`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{RedisServer, Redlock, TempDir, free_port};

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all signed by
/// that CA, plus an unrelated CA that signed nothing.
struct Certs {
    dir: TempDir,
}

impl Certs {
    fn new() -> Certs {
        let dir = TempDir::new("tls");
        let certs = Certs { dir };
        certs.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=redlock test CA",
        ]);
        certs.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "other.key",
            "-out",
            "other.crt",
            "-days",
            "2",
            "-subj",
            "/CN=another CA",
        ]);
        std::fs::write(
            certs.dir.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write extension file");
        // X.509 v3 (any extension makes it so): TLS libraries reject v1 certificates.
        std::fs::write(
            certs.dir.join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .expect("write extension file");
        for (name, ext) in [("server", "server.ext"), ("client", "client.ext")] {
            let key = format!("{name}.key");
            let csr = format!("{name}.csr");
            let crt = format!("{name}.crt");
            certs.openssl(&[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={name}"),
            ]);
            certs.openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                ext,
            ]);
        }
        certs
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl must be installed (apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, name: &str) -> String {
        let path: PathBuf = self.dir.join(name);
        path.to_str().expect("utf-8 path").to_owned()
    }
}

/// A redis-server that also listens with TLS; `clients` is `no`, `yes` or `optional`.
fn tls_server(certs: &Certs, clients: &str) -> (RedisServer, String) {
    let port = free_port().to_string();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &certs.path("server.crt"),
        "--tls-key-file",
        &certs.path("server.key"),
        "--tls-ca-cert-file",
        &certs.path("ca.crt"),
        "--tls-auth-clients",
        clients,
    ]);
    let url = format!("rediss://localhost:{port}");
    (server, url)
}

fn run_true() -> [&'static str; 7] {
    ["run", "--key", "job", "--ttl", "1s", "--", "true"]
}

#[test]
fn rediss_with_the_servers_ca_takes_the_lock() {
    let certs = Certs::new();
    let (server, url) = tls_server(&certs, "no");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("ca.crt")])
        .args(["run", "--key", "job", "--ttl", "1s", "--"])
        .args(["sh", "-c", "echo $REDLOCK_FENCE"])
        .exits_with(0);
    assert!(server.exists("{job}:redlock:fence"));
}

#[test]
fn the_ca_file_can_come_from_the_environment() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "no");
    Redlock::without_url()
        .env("REDLOCK_URL", &url)
        .env("REDLOCK_TLS_CA_FILE", certs.path("ca.crt"))
        .args(run_true())
        .exits_with(0);
}

#[test]
fn a_certificate_from_an_unknown_ca_fails_fast_with_69() {
    let certs = Certs::new();
    let (server, url) = tls_server(&certs, "no");
    let started = Instant::now();
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("other.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["certificate"]);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!server.exists("job"));
}

#[test]
fn the_system_trust_store_does_not_trust_a_private_ca() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "no");
    Redlock::without_url()
        .args(["--url", &url])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["certificate"]);
}

#[test]
fn insecure_connects_without_verification_and_warns() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "no");
    let outcome = Redlock::without_url()
        .args(["--url", &url, "--tls-insecure"])
        .args(run_true())
        .exits_with(0);
    assert!(
        outcome.stderr.contains("not verified"),
        "no warning about --tls-insecure:\n{outcome}"
    );
}

#[test]
fn quiet_silences_the_insecure_warning() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "no");
    let outcome = Redlock::without_url()
        .args(["-q", "--url", &url, "--tls-insecure"])
        .args(run_true())
        .exits_with(0);
    assert!(outcome.stderr.is_empty(), "{outcome}");
}

#[test]
fn a_server_that_requires_a_client_certificate_gets_one() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "yes");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("ca.crt")])
        .args(["--tls-cert-file", &certs.path("client.crt")])
        .args(["--tls-key-file", &certs.path("client.key")])
        .args(run_true())
        .exits_with(0);
}

#[test]
fn a_server_that_requires_a_client_certificate_refuses_none_with_69() {
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "yes");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("ca.crt")])
        .args(run_true())
        .exits_with(69);
}

#[test]
fn an_unreadable_ca_file_is_a_usage_error() {
    let certs = Certs::new();
    let (server, url) = tls_server(&certs, "no");
    let commands_before = server.info_number("stats", "total_commands_processed");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("missing.crt")])
        .args(run_true())
        .exits_with(64)
        .error_mentions(&["--tls-ca-file"]);
    // Only the harness's own INFO reached the server.
    assert_eq!(
        server.info_number("stats", "total_commands_processed"),
        commands_before + 1
    );
}

#[test]
fn a_client_certificate_without_its_key_is_a_usage_error() {
    let certs = Certs::new();
    Redlock::without_url()
        .args([
            "--url",
            "rediss://localhost:1",
            "--tls-cert-file",
            &certs.path("client.crt"),
        ])
        .args(run_true())
        .exits_with(64);
}
