//! `rediss://`: certificates are verified by default, against `--tls-ca-file` or the system's
//! trust store; client certificates work; `--tls-insecure` connects without verification and
//! says so; a wrong certificate fails fast with 69. The certificates are made by `openssl` for
//! each test, and the server is a real `redis-server --tls-port`.

use std::time::{Duration, Instant};

use crate::support::{Certs, RedisServer, Redlock, free_port, wait_until};

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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
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
    crate::needs_tls!();
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "yes");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("ca.crt")])
        .args(run_true())
        .exits_with(69);
}

#[test]
fn an_unreadable_ca_file_is_a_usage_error() {
    crate::needs_tls!();
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

/// A redis-server whose TLS port presents `stem.crt`; its plain port stays open too.
fn tls_server_with(certs: &Certs, stem: &str) -> (RedisServer, String) {
    let port = free_port().to_string();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &certs.path(&format!("{stem}.crt")),
        "--tls-key-file",
        &certs.path(&format!("{stem}.key")),
        "--tls-auth-clients",
        "no",
    ]);
    (server, format!("rediss://127.0.0.1:{port}"))
}

#[test]
fn the_guides_self_signed_certificate_listed_in_the_ca_file_takes_the_lock() {
    crate::needs_tls!();
    let certs = Certs::new();
    // Exactly the guides' command: OpenSSL marks it CA:TRUE. Listed as the CA file, it is
    // trusted as the server's own certificate, as OpenSSL-based clients do.
    let stem = certs.self_signed("guide", "IP:127.0.0.1", &[]);
    let (server, url) = tls_server_with(&certs, &stem);
    let ca = [
        "--url",
        url.as_str(),
        "--tls-ca-file",
        &certs.path("guide.crt"),
    ];
    Redlock::without_url()
        .args(ca)
        .args(run_true())
        .exits_with(0);
    assert!(server.exists("{job}:redlock:fence"));
    Redlock::without_url()
        .args(ca)
        .args(["status", "job"])
        .exits_with(1);
}

#[test]
fn the_guides_certificate_is_still_checked_for_the_servers_name() {
    crate::needs_tls!();
    let certs = Certs::new();
    let stem = certs.self_signed("guide", "IP:127.0.0.2", &[]);
    let (server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("guide.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["is for 127.0.0.2, not 127.0.0.1"]);
    assert!(!server.exists("job"));
}

#[test]
fn a_ca_certificate_presented_but_not_listed_is_explained_with_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    // The server presents one self-signed CA:TRUE certificate, the file lists another.
    certs.self_signed("other", "IP:127.0.0.1", &[]);
    let stem = certs.self_signed("guide", "IP:127.0.0.1", &[]);
    let (server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("other.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&[
            "CA certificate",
            "as its own",
            "list that very certificate",
            "CA:FALSE",
        ]);
    assert!(!server.exists("job"));
}

#[test]
fn an_expired_self_signed_certificate_in_the_ca_file_says_when_it_expired() {
    crate::needs_tls!();
    let certs = Certs::new();
    // The guides' kind of certificate (self-signed, CA:TRUE), with dates in the past.
    let stem = expired(&certs, "old", "basicConstraints = critical,CA:TRUE", true);
    let (_server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("old.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["expired on 2020-01-02T00:00:00Z", "renew"]);
}

/// A certificate `stem.crt` for 127.0.0.1 with the extensions `ext`, valid only on 2020-01-01:
/// signed by the test CA, or by its own key when `self_signed`. `openssl x509 -days` cannot go
/// back in time; `openssl ca` takes explicit dates.
fn expired(certs: &Certs, stem: &str, ext: &str, self_signed: bool) -> String {
    std::fs::create_dir_all(certs.join("db/new")).expect("mkdir");
    std::fs::write(certs.join("db/index.txt"), "").expect("index");
    std::fs::write(certs.join("db/serial"), "01\n").expect("serial");
    std::fs::write(
        certs.join("dated.cnf"),
        format!(
            "[ca]\ndefault_ca = test\n[test]\ndir = db\ndatabase = db/index.txt\n\
             new_certs_dir = db/new\nserial = db/serial\ncertificate = ca.crt\n\
             private_key = ca.key\ndefault_md = sha256\npolicy = any\ncopy_extensions = copy\n\
             unique_subject = no\n[any]\ncommonName = supplied\n[ext]\n\
             subjectAltName = IP:127.0.0.1\n{ext}\n"
        ),
    )
    .expect("write the config");
    let (key, csr, crt) = (
        format!("{stem}.key"),
        format!("{stem}.csr"),
        format!("{stem}.crt"),
    );
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
        "/CN=localhost",
    ]);
    let mut args = vec!["ca", "-batch", "-config", "dated.cnf", "-extensions", "ext"];
    if self_signed {
        args.extend(["-selfsign", "-keyfile", &key]);
    }
    args.extend([
        "-startdate",
        "20200101000000Z",
        "-enddate",
        "20200102000000Z",
        "-in",
        &csr,
        "-out",
        &crt,
    ]);
    certs.openssl(&args);
    stem.to_string()
}

#[test]
fn a_self_signed_server_certificate_in_the_ca_file_takes_the_lock() {
    crate::needs_tls!();
    let certs = Certs::new();
    let stem = certs.self_signed(
        "leaf",
        "IP:127.0.0.1",
        &["-addext", "basicConstraints=critical,CA:FALSE"],
    );
    let (server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("leaf.crt")])
        .args(run_true())
        .exits_with(0);
    assert!(server.exists("{job}:redlock:fence"));
}

#[test]
fn a_certificate_for_another_name_says_which_names_it_has() {
    crate::needs_tls!();
    let certs = Certs::new();
    let stem = certs.self_signed(
        "elsewhere",
        "IP:127.0.0.2",
        &["-addext", "basicConstraints=critical,CA:FALSE"],
    );
    let (_server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("elsewhere.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["is for 127.0.0.2, not 127.0.0.1", "reissue"]);
}

#[test]
fn a_certificate_from_another_ca_names_the_ca_file() {
    crate::needs_tls!();
    let certs = Certs::new();
    let (_server, url) = tls_server(&certs, "no");
    let ca_file = certs.path("other.crt");
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &ca_file])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["not signed by any CA in --tls-ca-file", &ca_file]);
}

#[test]
fn an_expired_certificate_says_when_it_expired() {
    crate::needs_tls!();
    let certs = Certs::new();
    let stem = expired(&certs, "expired", "extendedKeyUsage = serverAuth", false);
    let (_server, url) = tls_server_with(&certs, &stem);
    Redlock::without_url()
        .args(["--url", &url, "--tls-ca-file", &certs.path("ca.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["expired on 2020-01-02T00:00:00Z", "renew"]);
}

#[test]
fn rediss_to_a_plain_port_says_it_may_be_the_plain_port() {
    crate::needs_tls!();
    let certs = Certs::new();
    let (server, _url) = tls_server(&certs, "no");
    let started = Instant::now();
    Redlock::without_url()
        .args(["--timeout", "1s"])
        .args(["--url", &format!("rediss://localhost:{}", server.port())])
        .args(["--tls-ca-file", &certs.path("ca.crt")])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["no TLS answer", "plain port", "redis://"]);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_plain_url_at_a_tls_port_asks_whether_it_is_one() {
    crate::needs_tls!();
    let certs = Certs::new();
    let (server, url) = tls_server(&certs, "no");
    let plain = url.replacen("rediss://", "redis://", 1);
    Redlock::without_url()
        .args(["--url", &plain])
        .args(run_true())
        .exits_with(69)
        .error_mentions(&["closed the connection", "is it a TLS port", "rediss://"]);
    assert!(!server.exists("job"));
}

#[test]
fn a_waiter_over_tls_gets_the_lock_at_the_release_and_a_signal_ends_another() {
    crate::needs_tls!();
    let certs = Certs::new();
    let (server, url) = tls_server(&certs, "no");
    let queued = || server.query::<usize>(&["ZCARD", "{job}:redlock:queue"]);
    let tls = [
        "--url",
        url.as_str(),
        "--tls-ca-file",
        &certs.path("ca.crt"),
    ];
    let mut holder = Redlock::without_url()
        .args(tls)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "-c",
            crate::support::child::HOLD,
        ])
        .spawn();
    holder.expect_line("ready");
    // The waiters' answers come over TLS: a session ticket on a connection is no answer.
    let waiter = Redlock::without_url()
        .args(tls)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--wait",
            "30s",
            "-c",
            "echo took",
        ])
        .spawn();
    wait_until("the waiter to queue", Duration::from_secs(10), || {
        (queued() == 1).then_some(())
    });
    let quitter = Redlock::without_url()
        .args(tls)
        .args([
            "run", "--key", "job", "--ttl", "5s", "--wait", "30s", "--", "true",
        ])
        .spawn();
    wait_until(
        "the second waiter to queue",
        Duration::from_secs(10),
        || (queued() == 2).then_some(()),
    );
    let interrupted = Instant::now();
    quitter.signal(libc::SIGINT);
    quitter.exits_with(130);
    assert!(
        interrupted.elapsed() < Duration::from_secs(3),
        "SIGINT took {:?}",
        interrupted.elapsed()
    );
    holder.close_stdin();
    holder.exits_with(0);
    let took = waiter.exits_with(0);
    assert_eq!(took.stdout.trim(), "took", "{took}");
}
