//! `rediss+cluster://` and `rediss+sentinel://`: Redis Cluster and Sentinel over TLS, with the
//! TLS flags of `rediss://` (docs/guide.md, "Beyond one Redis" and "TLS: what is accepted, and
//! what the messages mean"). The cluster's nodes and the Sentinel setup's
//! servers listen with TLS only (`--port 0`), so nothing can reach them in plain text; the
//! certificates are made by `openssl` for each test.

use std::time::{Duration, Instant};

use crate::support::redlock::Running;
use crate::support::{Certs, RedisCluster, RedisSentinel, Redlock, child, says};

/// `redlock --url URL --tls-ca-file CA`.
fn redlock(url: &str, certs: &Certs) -> Redlock {
    Redlock::without_url().args(["--url", url, "--tls-ca-file", &certs.path("ca.crt")])
}

/// `rediss+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`.
fn cluster_url(cluster: &RedisCluster) -> String {
    cluster
        .url()
        .replacen("redis+cluster://", "rediss+cluster://", 1)
}

/// Starts a run on `key`, its command printing its token and `ready`, then holding until the
/// test closes stdin. Returns the run and the token.
fn hold(redlock: Redlock, key: &str) -> (Running, String) {
    let mut holder = redlock
        .args(["run", "--key", key, "--ttl", "3s"])
        .args(["-c", child::HOLD_AND_PRINT_TOKEN])
        .spawn();
    let token = holder.expect_line_starting("token=");
    holder.expect_line("ready");
    (holder, token)
}

/// A run holds `job` on the node that owns it, `status` reads it (and `status --all` finds it
/// among every master's keys), a second run is refused, and the release leaves the key gone.
fn a_run_holds_and_releases_on(cluster: &RedisCluster, certs: &Certs) {
    let url = cluster_url(cluster);
    let (mut holder, token) = hold(redlock(&url, certs), "job");
    assert_eq!(
        cluster.owner_node("job").get("job").as_deref(),
        Some(token.as_str())
    );
    redlock(&url, certs).args(["status", "job"]).exits_with(0);
    // Every master is asked (SCAN through the router, to each node over TLS).
    let all = redlock(&url, certs).args(["status", "--all"]).exits_with(0);
    assert!(all.stdout.contains("job"), "{all}");
    redlock(&url, certs)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(75);
    holder.close_stdin();
    holder.exits_with(0);
    assert!(!cluster.owner_node("job").exists("job"));
}

#[test]
fn run_status_and_release_work_on_a_tls_only_cluster() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    a_run_holds_and_releases_on(&cluster, &certs);
    let url = cluster_url(&cluster);

    let token = redlock(&url, &certs)
        .args(["acquire", "--key", "script", "--ttl", "30s"])
        .exits_with(0)
        .stdout
        .lines()
        .next()
        .expect("a token")
        .to_owned();
    redlock(&url, &certs)
        .args(["release", "script", "--token", &token])
        .exits_with(0);
    assert!(!cluster.owner_node("script").exists("script"));
}

#[test]
fn a_tls_cluster_with_another_ca_is_refused_in_plain_words_with_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    let other = certs.path("other.crt");
    let started = Instant::now();
    Redlock::without_url()
        .args(["--url", &cluster_url(&cluster), "--tls-ca-file", &other])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(69)
        .error_mentions(&["not signed by any CA in --tls-ca-file"])
        .error_mentions(&[&other]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!cluster.owner_node("job").exists("job"));
}

#[test]
fn a_tls_cluster_is_reached_without_verification_under_tls_insecure() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    let outcome = Redlock::without_url()
        .args(["--url", &cluster_url(&cluster), "--tls-insecure"])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    assert!(
        outcome.stderr.contains("not verified"),
        "no warning about --tls-insecure:\n{outcome}"
    );
}

#[test]
fn a_plain_cluster_url_to_a_tls_cluster_exits_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    Redlock::without_url()
        .args(["--timeout", "1s", "--url", &cluster.url()])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(69)
        .error_mentions(says::UNAVAILABLE);
}

#[test]
fn run_status_and_release_work_through_tls_sentinels_to_a_tls_master() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, None);
    let url = sentinel.url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let (mut holder, token) = hold(redlock(&url, &certs), "job");
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token.as_str())
    );
    redlock(&url, &certs).args(["status", "job"]).exits_with(0);
    redlock(&url, &certs)
        .args(["release", "job", "--force"])
        .exits_with(0);
    assert!(!sentinel.master().exists("job"));
    holder.close_stdin();
    // The lock was taken from under the run: its release finds it gone.
    holder.exits_with(76);
}

#[test]
fn tls_sentinels_with_another_ca_are_refused_in_plain_words_with_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, None);
    let other = certs.path("other.crt");
    let outcome = Redlock::without_url()
        .args(["--url", &sentinel.url(), "--tls-ca-file", &other])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(69);
    outcome
        .error_mentions(&["not signed by any CA in --tls-ca-file"])
        .error_mentions(&[&other])
        .error_mentions(&[&format!("127.0.0.1:{}", sentinel.port())]);
    assert!(!sentinel.master().exists("job"));
}

#[test]
fn tls_sentinels_are_reached_without_verification_under_tls_insecure() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, None);
    let outcome = Redlock::without_url()
        .args(["--url", &sentinel.url(), "--tls-insecure"])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0);
    assert!(
        outcome.stderr.contains("not verified"),
        "no warning about --tls-insecure:\n{outcome}"
    );
}

#[test]
fn tls_sentinels_with_their_own_password_take_it_from_the_file() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, Some("sentinel-secret"));
    let file = certs.join("sentinel.pw");
    std::fs::write(&file, "sentinel-secret\n").expect("write the password file");
    redlock(&sentinel.url(), &certs)
        .arg("--sentinel-password-file")
        .arg(&file)
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(0)
        .never_shows("sentinel-secret");
}

#[test]
fn doctor_checks_the_master_through_tls_sentinels() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, None);
    // No persistence in the harness: warnings only, 1.
    let outcome = redlock(&sentinel.url(), &certs).arg("doctor").exits_with(1);
    assert!(
        outcome
            .stdout
            .lines()
            .any(|line| line.starts_with("ok") && line.contains("permissions")),
        "the probe lock did not pass:\n{outcome}"
    );
}

#[test]
fn doctor_on_a_tls_cluster_with_another_ca_says_so_with_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    Redlock::without_url()
        .args(["--url", &cluster_url(&cluster)])
        .args(["--tls-ca-file", &certs.path("other.crt"), "doctor"])
        .exits_with(69)
        .error_mentions(&["not signed by any CA in --tls-ca-file"]);
}

#[test]
fn a_tls_sentinel_url_to_plain_sentinels_exits_69_asking_about_the_port() {
    let sentinel = RedisSentinel::start();
    let url = sentinel.url().replacen("redis+", "rediss+", 1);
    let outcome = Redlock::without_url()
        .args(["--timeout", "1s", "--url", &url])
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(69);
    outcome
        .error_mentions(&["plain port"])
        .never_shows("started");
    assert!(!sentinel.master().exists("job"));
}

#[test]
fn tls_insecure_with_a_client_certificate_reaches_sentinels_and_master() {
    crate::needs_tls!();
    let certs = Certs::new();
    let sentinel = RedisSentinel::start_tls(&certs, None);
    let outcome = Redlock::without_url()
        .args(["--url", &sentinel.url(), "--tls-insecure"])
        .args(["--tls-cert-file", &certs.path("client.crt")])
        .args(["--tls-key-file", &certs.path("client.key")])
        .args(["run", "--key", "job", "--ttl", "2s", "-c", "echo started"])
        .exits_with(0);
    assert!(outcome.stdout.contains("started"), "{outcome}");
}

/// Makes every server of `certs` present one self-signed certificate made the guides' way
/// (`openssl req -x509 … -addext subjectAltName=IP:127.0.0.1`, so CA:TRUE), which is also
/// their CA file and the cluster bus's client certificate: OpenSSL-based clients, and the
/// servers between themselves, accept it.
fn present_the_guides_certificate(certs: &Certs) {
    let stem = certs.self_signed("guide", "IP:127.0.0.1", &[]);
    for to in ["server", "ca", "client"] {
        for ext in ["crt", "key"] {
            std::fs::copy(
                certs.join(&format!("{stem}.{ext}")),
                certs.join(&format!("{to}.{ext}")),
            )
            .expect("copy the guides' certificate");
        }
    }
}

#[test]
fn a_cluster_presenting_the_listed_ca_certificate_as_its_own_is_trusted() {
    crate::needs_tls!();
    let certs = Certs::new();
    present_the_guides_certificate(&certs);
    let cluster = RedisCluster::start_tls(&certs);
    a_run_holds_and_releases_on(&cluster, &certs);
}

#[test]
fn a_cluster_presenting_a_ca_certificate_not_listed_is_explained_with_69() {
    crate::needs_tls!();
    let certs = Certs::new();
    present_the_guides_certificate(&certs);
    let cluster = RedisCluster::start_tls(&certs);
    // The file lists another certificate: the nodes' is neither listed nor signed by a listed
    // CA, and the message says how to make either true.
    Redlock::without_url()
        .args(["--url", &cluster_url(&cluster)])
        .args(["--tls-ca-file", &certs.path("other.crt")])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(69)
        .error_mentions(&["as its own", "list that very certificate", "CA:FALSE"]);
    assert!(!cluster.owner_node("job").exists("job"));
}

#[test]
fn a_plain_cluster_url_at_tls_ports_asks_whether_they_are() {
    crate::needs_tls!();
    let certs = Certs::new();
    let cluster = RedisCluster::start_tls(&certs);
    Redlock::without_url()
        .args(["--url", &cluster.url()])
        .args(["run", "--key", "job", "--ttl", "2s", "--", "true"])
        .exits_with(69)
        .error_mentions(&["is it a TLS port", "rediss+cluster://"]);
}

#[test]
fn a_master_presenting_the_listed_ca_certificate_as_its_own_is_trusted_through_sentinels() {
    crate::needs_tls!();
    // The master and replica present the guides' self-signed certificate; the sentinel keeps
    // one signed by the test CA (the harness watches it with a client that, unlike redlock,
    // refuses a CA certificate served as a server's own). One CA file lists both, for the
    // servers (the sentinel and the replica verify the master with it) and for redlock.
    let certs = Certs::new();
    let servers = Certs::new();
    let stem = servers.self_signed("guide", "IP:127.0.0.1", &[]);
    for ext in ["crt", "key"] {
        std::fs::copy(
            servers.join(&format!("{stem}.{ext}")),
            servers.join(&format!("server.{ext}")),
        )
        .expect("copy the guides' certificate");
    }
    let both = [
        std::fs::read(certs.join("ca.crt")).expect("the CA"),
        std::fs::read(servers.join(&format!("{stem}.crt"))).expect("the guides' certificate"),
    ]
    .concat();
    for dir in [&certs, &servers] {
        std::fs::write(dir.join("ca.crt"), &both).expect("write the CA file");
    }
    let sentinel = RedisSentinel::start_tls_with(&servers, &certs, None);
    let url = sentinel.url();
    let (mut holder, token) = hold(redlock(&url, &certs), "job");
    assert_eq!(
        sentinel.master().get("job").as_deref(),
        Some(token.as_str())
    );
    redlock(&url, &certs).args(["status", "job"]).exits_with(0);
    holder.close_stdin();
    holder.exits_with(0);
    assert!(!sentinel.master().exists("job"));
}
