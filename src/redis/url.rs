//! Reading `--url`: the schemes, the nodes a Cluster or Sentinel URL lists, passwords (the
//! URL's, `--password-file`'s, the sentinels' own), and the URL as it may be shown (redacted).
//! Everything here happens before anything is contacted: a bad URL is a usage error (64), and
//! no message carries a password.

use std::path::Path;

use anyhow::Result;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use super::sentinel::SentinelAuth;
use super::server::address_of;
use super::server::{Server, Target};
use super::tls::{Tls, TlsTarget};
use crate::report::error::usage;

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

impl Server {
    /// Parses one URL; `password` (from `--password-file`) wins over one in the URL.
    /// `sentinel` is for the sentinels of a `redis+sentinel://` URL, and refused with any other.
    pub fn parse(
        url: &str,
        password: Option<&str>,
        tls: &Tls,
        sentinel: &SentinelAuth,
    ) -> Result<Server> {
        let name = redact(url);
        let url = url.trim();
        if url.is_empty() {
            return Err(usage("--url is empty"));
        }
        for (scheme, tls) in [
            ("redis+sentinel://", None),
            ("rediss+sentinel://", Some(tls)),
        ] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return Server::parse_sentinel(rest, password, tls, sentinel, name);
            }
        }
        if sentinel.password.is_some() {
            return Err(usage(format!(
                "--sentinel-password-file is for redis+sentinel:// and rediss+sentinel:// URLs, \
                 not --url {name}"
            )));
        }
        for (scheme, tls) in [("redis+cluster://", None), ("rediss+cluster://", Some(tls))] {
            if let Some(rest) = url.strip_prefix(scheme) {
                return Server::parse_cluster(rest, password, tls, name);
            }
        }
        let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(usage(format!(
                "--url {name}: unsupported scheme; use redis://HOST:PORT, rediss://HOST:PORT or \
                 redis+unix:///PATH, redis[s]+cluster://HOST:PORT or \
                 redis[s]+sentinel://HOST:PORT/SERVICE"
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
        let tls_target = match info.addr() {
            ConnectionAddr::TcpTls { host, port, .. } => Some(TlsTarget {
                address: format!("{host}:{port}"),
                ca_file: tls.ca_file.clone(),
            }),
            _ => None,
        };
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
        let tls = if is_tls {
            Some(
                tls.config(true)
                    .map_err(|e| usage(format!("--url {name}: {e}")))?,
            )
        } else {
            None
        };
        Ok(Server {
            target: Target::Direct { info, tls },
            name,
            tls: tls_target,
            password_file: None,
        })
    }

    /// `[user:pass@]host:port[,host:port...]` into one address per node (`rediss://` ones when
    /// `tls`), and the user and password of the URL.
    fn nodes_of(
        rest: &str,
        tls: bool,
        name: &str,
    ) -> Result<(Vec<ConnectionInfo>, Option<String>, Option<String>)> {
        let (userinfo, hosts) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (username, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
            Some((u, p)) => (
                (!u.is_empty()).then(|| percent_decode(u)),
                (!p.is_empty()).then(|| percent_decode(p)),
            ),
            None => (None, None),
        };
        let scheme = if tls { "rediss" } else { "redis" };
        let nodes = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                format!("{scheme}://{h}")
                    .as_str()
                    .into_connection_info()
                    .map_err(|e| usage(format!("--url {name}: {}", describe_url_error(&e))))
            })
            .collect::<Result<Vec<_>>>()?;
        if nodes.is_empty() {
            return Err(usage(format!("--url {name}: no host:port given")));
        }
        Ok((nodes, username, password))
    }

    fn parse_cluster(
        rest: &str,
        password: Option<&str>,
        tls: Option<&Tls>,
        name: String,
    ) -> Result<Server> {
        let (seeds, username, url_password) =
            Server::nodes_of(rest.trim_end_matches('/'), tls.is_some(), &name)?;
        let target = tls.map(|tls| tls.target(address_of(&seeds[0])));
        let config = tls
            .map(|tls| tls.config(true))
            .transpose()
            .map_err(|e| usage(format!("--url {name}: {e}")))?;
        Ok(Server {
            target: Target::Cluster {
                seeds,
                password: password.map(str::to_string).or(url_password),
                username,
                tls: config,
            },
            name,
            tls: target,
            password_file: None,
        })
    }

    fn parse_sentinel(
        rest: &str,
        password: Option<&str>,
        tls: Option<&Tls>,
        auth: &SentinelAuth,
        name: String,
    ) -> Result<Server> {
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut path = path.split('/').filter(|p| !p.is_empty());
        let service = path.next().ok_or_else(|| {
            usage(format!(
                "--url {name}: missing the service name, as in redis+sentinel://HOST:26379/mymaster"
            ))
        })?;
        let db: i64 = match path.next() {
            Some(db) => db
                .parse()
                .map_err(|_| usage(format!("--url {name}: database {db:?} is not a number")))?,
            None => 0,
        };
        let (nodes, username, url_password) = Server::nodes_of(hosts, tls.is_some(), &name)?;
        let mut master = redis::RedisConnectionInfo::default()
            .set_skip_set_lib_name()
            .set_db(db);
        if let Some(user) = username {
            master = master.set_username(user);
        }
        if let Some(pw) = password.map(str::to_string).or(url_password) {
            master = master.set_password(pw);
        }
        let mut own = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(user) = &auth.username {
            own = own.set_username(user);
        }
        if let Some(pw) = &auth.password {
            own = own.set_password(pw);
        }
        let sentinels = nodes
            .into_iter()
            .map(|node| node.set_redis_settings(own.clone()))
            .collect();
        let config = tls
            .map(|tls| tls.config(true))
            .transpose()
            .map_err(|e| usage(format!("--url {name}: {e}")))?;
        Ok(Server {
            target: Target::Sentinel {
                sentinels,
                service: service.to_string(),
                master,
                tls: config,
                ca_file: tls.map(|tls| tls.ca_file.clone()),
            },
            name,
            tls: None,
            password_file: None,
        })
    }
}

/// `%XX` escapes decoded (as the URL's user and password may carry them); an escape that is not
/// two hex digits stays as written, and bytes that are not UTF-8 read as U+FFFD.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Reads the first line of a password file. An unreadable or empty file is a usage error (64):
/// the operator named it, so guessing another way to authenticate would only hide the mistake.
/// `flag` is the option that named the file (`--password-file`), or the environment variable
/// (`REDLOCK_PASSWORD_FILE`), for the message.
pub fn read_password_file(flag: &str, path: &Path) -> Result<String> {
    let sep = if flag.starts_with('-') { ' ' } else { '=' };
    let named = format!("{flag}{sep}{}", path.display());
    let text =
        std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read {named}: {e}")))?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(usage(format!("{named} is empty")));
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

/// `redis://user:secret@host:6379/0` → `redis://user:***@host:6379/0`; also the `pass` and
/// `password` query parameters (`redis+unix:///s.sock?pass=secret`). People paste raw passwords
/// containing `/`, `?` or `@` into URLs, so the user part runs to the *last* `@`: redacting a
/// little too much is the safe mistake.
pub fn redact(url: &str) -> String {
    let scheme_end = url.find("://").filter(|&end| {
        url[..end]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    let Some(scheme_end) = scheme_end else {
        // No scheme (`user:secret@host`, `redis:/:secret@host`): whatever precedes an `@`
        // may be a password.
        return match url.rfind('@') {
            Some(at) => format!("***@{}", &url[at + 1..]),
            None => url.to_string(),
        };
    };
    let (head, rest) = url.split_at(scheme_end + 3);
    let rest = match rest.rfind('@') {
        Some(at) => {
            let user = match rest[..at].split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None if at == 0 => String::new(),
                // `redis://secret@host` is read as a username, but people write passwords there.
                None => "***".to_string(),
            };
            format!("{user}@{}", &rest[at + 1..])
        }
        None => rest.to_string(),
    };
    let Some((before, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if matches!(name, "pass" | "password") => format!("{name}=***"),
            _ => param.to_string(),
        })
        .collect();
    format!("{head}{before}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::error::classify;
    use crate::report::exit::Exit;

    /// A small deterministic generator (xorshift), so a failure names its input and repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }
    }

    #[test]
    fn any_url_is_read_or_refused_as_a_usage_error_and_never_panics() {
        const PIECES: &[&str] = &[
            "",
            ":",
            "@",
            "%",
            "%4",
            "%41",
            "%aé",
            "%zz",
            "é",
            "ü@",
            "\u{0}",
            "/",
            "//",
            "?",
            "&",
            "=",
            ",",
            "[",
            "]",
            "::1",
            "127.0.0.1",
            "localhost",
            "host",
            "-",
            " ",
            "\t",
            "6379",
            "0",
            "65535",
            "65536",
            "99999999999999999999",
            "pass=x",
            "db=3",
            "mymaster",
            "user",
            "*",
            "{",
            "}",
            "\u{1F512}",
            "%00",
            "%FF%FE",
        ];
        const SCHEMES: &[&str] = &[
            "redis://",
            "rediss://",
            "redis+unix://",
            "redis+cluster://",
            "rediss+cluster://",
            "redis+sentinel://",
            "rediss+sentinel://",
            "http://",
            "redis:/",
            "",
        ];
        let (tls, none) = (Tls::default(), SentinelAuth::default());
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3_000 {
            let mut url = rng.pick(SCHEMES).to_string();
            // Half of them carry a password, which no message may show.
            let secret = rng.next().is_multiple_of(2);
            if secret {
                url.push_str(rng.pick(&["user:hunter2@", ":hunter2@", "u:hunter2%40x@"]));
            }
            for _ in 0..rng.next() % 12 {
                url.push_str(rng.pick(PIECES));
            }
            let parsed = std::panic::catch_unwind(|| Server::parse(&url, None, &tls, &none));
            match parsed {
                Err(_) => panic!("parsing {url:?} panicked"),
                Ok(Ok(_)) => {}
                Ok(Err(err)) => {
                    assert_eq!(classify(&err), Exit::Usage, "{url:?}: {err:#}");
                    let shown = format!("{err:#}");
                    assert!(!(secret && shown.contains("hunter2")), "{url:?}: {shown}");
                }
            }
        }
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("redis://user:s3cr%40t@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact("redis://:pw@host"), "redis://:***@host");
        assert_eq!(redact("redis://pw@host/1"), "redis://***@host/1");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("user:s3cret@host:6379"), "***@host:6379");
        assert_eq!(redact("redis:/:s3cret@host"), "***@host");
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
            let err =
                Server::parse(url, None, &Tls::default(), &SentinelAuth::default()).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            assert!(!format!("{err:#}").contains("hunter2"), "{err:#}");
        }
        let (tls, none) = (Tls::default(), SentinelAuth::default());
        assert!(Server::parse("redis://127.0.0.1:6379", None, &tls, &none).is_ok());
        assert!(Server::parse("redis+unix:///tmp/x.sock", None, &tls, &none).is_ok());
        assert!(
            Server::parse("rediss://localhost:6380", None, &tls, &none)
                .unwrap()
                .is_tls()
        );
    }

    #[test]
    fn tls_cluster_and_sentinel_urls_are_tls_and_plain_ones_are_not() {
        let (tls, none) = (Tls::default(), SentinelAuth::default());
        let parse = |url| Server::parse(url, None, &tls, &none).unwrap();
        assert!(parse("rediss+cluster://127.0.0.1:7000,127.0.0.1:7001").is_tls());
        assert!(parse("rediss+sentinel://127.0.0.1:26380/mymaster/2").is_tls());
        assert!(!parse("redis+cluster://127.0.0.1:7000").is_tls());
        assert!(!parse("redis+sentinel://127.0.0.1:26379/mymaster").is_tls());
        let cluster = parse("rediss+cluster://127.0.0.1:7000,127.0.0.1:7001");
        assert_eq!(
            cluster.tls_target().map(|t| t.address.as_str()),
            Some("127.0.0.1:7000")
        );
        assert!(!cluster.is_direct());
    }

    #[test]
    fn a_sentinel_password_is_refused_with_urls_that_are_not_sentinel_ones() {
        let tls = Tls::default();
        let auth = SentinelAuth {
            username: None,
            password: Some("hunter2".into()),
        };
        for url in [
            "redis://127.0.0.1:6379",
            "rediss://127.0.0.1:6380",
            "redis+cluster://127.0.0.1:7000",
        ] {
            let err = Server::parse(url, None, &tls, &auth).unwrap_err();
            assert_eq!(classify(&err), Exit::Usage, "{url}: {err:#}");
            let text = format!("{err:#}");
            assert!(text.contains("--sentinel-password-file"), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
        assert!(Server::parse("redis+sentinel://127.0.0.1:26379/m", None, &tls, &auth).is_ok());
    }
}
