//! Where the lock lives: parsing `--url`, applying `--password-file`, connecting with timeouts.
//!
//! Invariants: a password never leaves this module except inside the redis crate's
//! `ConnectionInfo` (every message names the server by [`Server::name`], which is redacted);
//! every connection has connect, read and write timeouts, because a sync connection without them
//! blocks forever on a hung server; and connecting costs one TCP handshake and nothing else —
//! no `CLIENT SETINFO`, no `HELLO` (AUTH only when a password is set).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use redis::{Client, Connection, ConnectionAddr, IntoConnectionInfo, TlsCertificates};

use crate::exit::usage;

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Clone)]
pub struct Server {
    client: Client,
    name: String,
}

/// How to talk TLS to `rediss://` servers. Verification is on unless `insecure`; without a CA
/// file the system's trust store is used.
#[derive(Clone, Default)]
pub struct Tls {
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub insecure: bool,
}

impl Tls {
    /// Reads the certificate files now, so a wrong path is a usage error (64) before anything
    /// is contacted.
    pub fn load(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
        insecure: bool,
    ) -> Result<Tls> {
        let read = |flag: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|e| usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        let ca = ca.map(|p| read("--tls-ca-file", p)).transpose()?;
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((read("--tls-cert-file", c)?, read("--tls-key-file", k)?)),
            _ => None,
        };
        Ok(Tls {
            ca,
            identity,
            insecure,
        })
    }

    fn configured(&self) -> bool {
        self.ca.is_some() || self.identity.is_some()
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Server {
    /// Parses one URL; `password` (from `--password-file`) wins over one in the URL.
    pub fn parse(url: &str, password: Option<&str>, tls: &Tls) -> Result<Server> {
        let name = redact(url);
        let url = url.trim();
        if url.is_empty() {
            return Err(usage("--url is empty"));
        }
        let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(usage(format!(
                "--url {name}: unsupported scheme; use redis://HOST:PORT, rediss://HOST:PORT or \
                 redis+unix:///PATH"
            )));
        }
        let info = url
            .into_connection_info()
            .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))?;
        if let redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } = info.addr()
            && (host.is_empty() || *port == 0)
        {
            return Err(usage(format!("--url {name}: missing host or port")));
        }
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(password) = password {
            settings = settings.set_password(password);
        }
        let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let mut info = info.set_redis_settings(settings).set_tcp_settings(tcp);
        let is_tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        if let ConnectionAddr::TcpTls { host, port, .. } = info.addr().clone()
            && tls.insecure
        {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: true,
                tls_params: None,
            });
        }
        let client = if is_tls && tls.configured() {
            let certs = TlsCertificates {
                client_tls: tls
                    .identity
                    .clone()
                    .map(|(cert, key)| redis::ClientTlsConfig {
                        client_cert: cert,
                        client_key: key,
                    }),
                root_cert: tls.ca.clone(),
            };
            Client::build_with_tls(info, certs).map_err(|e| {
                usage(format!(
                    "--url {name}: cannot use the TLS certificate files: {}",
                    describe_url_error(&e)
                ))
            })?
        } else {
            Client::open(info)
                .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))?
        };
        Ok(Server { client, name })
    }

    pub fn is_tls(&self) -> bool {
        matches!(
            self.client.get_connection_info().addr(),
            ConnectionAddr::TcpTls { .. }
        )
    }

    /// The URL as it may be shown to people: without its password.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection whose connect, read and write operations each give up after `timeout`.
    pub fn connect(&self, timeout: Duration) -> Result<Connection> {
        let timeout = timeout.max(Duration::from_millis(1));
        let con = self
            .client
            .get_connection_with_timeout(timeout)
            .with_context(|| format!("cannot connect to {}", self.name))?;
        set_timeouts(&con, timeout)?;
        Ok(con)
    }
}

pub fn set_timeouts(con: &Connection, timeout: Duration) -> Result<()> {
    let timeout = Some(timeout.max(Duration::from_millis(1)));
    con.set_read_timeout(timeout)?;
    con.set_write_timeout(timeout)?;
    Ok(())
}

/// Reads the first line of a password file. An unreadable or empty file is a usage error (64):
/// the operator named it, so guessing another way to authenticate would only hide the mistake.
pub fn read_password_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!(
            "cannot read --password-file {}: {e}",
            path.display()
        ))
    })?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(usage(format!(
            "--password-file {} is empty",
            path.display()
        )));
    }
    Ok(password.to_string())
}

fn describe_url_error(err: &redis::RedisError) -> String {
    // The redis crate's messages may quote the URL; ours never carries the password.
    match err.detail() {
        Some(detail) if !detail.contains('@') => format!("{} ({detail})", err.category()),
        _ => "malformed URL".to_string(),
    }
}

/// `redis://user:secret@host:6379/0` → `redis://user:***@host:6379/0`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let user = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None if userinfo.is_empty() => String::new(),
        // `redis://secret@host` is read as a username, but people write passwords there.
        None => "***".to_string(),
    };
    format!(
        "{}://{}@{}",
        &url[..scheme_end],
        user,
        &rest[at..].trim_start_matches('@')
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{Exit, classify};

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("redis://user:s3cr%40t@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact("redis://:pw@host"), "redis://:***@host");
        assert_eq!(redact("redis://pw@host/1"), "redis://***@host/1");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock"),
            "redis+unix:///tmp/r.sock"
        );
    }

    #[test]
    fn malformed_urls_are_usage_errors_without_the_password() {
        for url in [
            "http://x",
            "redis://:99999",
            "redis://:hunter2@host:99999",
            "",
            "localhost:6379",
        ] {
            let err = Server::parse(url, None, &Tls::default()).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            assert!(!format!("{err:#}").contains("hunter2"), "{err:#}");
        }
        let tls = Tls::default();
        assert!(Server::parse("redis://127.0.0.1:6379", None, &tls).is_ok());
        assert!(Server::parse("redis+unix:///tmp/x.sock", None, &tls).is_ok());
        assert!(
            Server::parse("rediss://localhost:6380", None, &tls)
                .unwrap()
                .is_tls()
        );
    }
}
