//! What an error means, in one place: which exit status it stands for ([`classify`]), whether
//! the server answered or could not be reached (the predicates), and how it reads on the one
//! line redlock prints ([`render`]).
//!
//! Errors travel up as `anyhow::Error`. A [`Failure`] carries a status its raiser decided
//! (usage errors, a lost lease); otherwise the first Redis error in the chain decides, by its
//! class. Anything unrecognised is "unavailable" (69): when in doubt, redlock says it could not
//! do its job, never that the lock is busy or free.

use std::fmt;

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::exit::Exit;
use crate::server::TlsTarget;

/// An error whose exit status is already decided by the code that raised it.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

/// An error that ends redlock with `exit`.
pub fn fail(exit: Exit, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure {
        exit,
        message: message.into(),
    })
}

/// Bad input (64): said before anything is contacted.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    fail(Exit::Usage, message)
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The Redis errors in an error's chain of causes, outermost first.
pub fn redis_errors(err: &anyhow::Error) -> impl Iterator<Item = &RedisError> {
    err.chain().filter_map(|c| c.downcast_ref::<RedisError>())
}

/// The exit status an error stands for.
pub fn classify(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return failure.exit;
        }
        if let Some(redis) = cause.downcast_ref::<RedisError>() {
            return classify_redis(redis);
        }
    }
    Exit::Unavailable
}

/// Redis errors by class. Transient server states (LOADING, MASTERDOWN, BUSY, CLUSTERDOWN,
/// TRYAGAIN), READONLY and OOM mean "this server cannot take the lock right now": 69.
pub fn classify_redis(err: &RedisError) -> Exit {
    // Some clients (the cluster client) wrap an authentication failure in another kind.
    let text = err.to_string();
    if text.contains("WRONGPASS") || text.contains("invalid username-password") {
        return Exit::Permission;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => return Exit::Permission,
        ErrorKind::Server(ServerErrorKind::NoPerm) => return Exit::Permission,
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => return Exit::Unavailable,
        _ => {}
    }
    match err.code() {
        Some("WRONGPASS" | "NOAUTH" | "NOPERM") => Exit::Permission,
        Some("WRONGTYPE") => Exit::Config,
        Some(
            "OOM" | "BUSY" | "READONLY" | "LOADING" | "MASTERDOWN" | "CLUSTERDOWN" | "TRYAGAIN",
        ) => Exit::Unavailable,
        Some(_)
            if err
                .detail()
                .is_some_and(|d| d.contains("max number of clients")) =>
        {
            Exit::Unavailable
        }
        // An ACL denial inside a script is an ERR, not a NOPERM.
        Some(_)
            if err.detail().is_some_and(|d| {
                d.contains("executing the script can't") || d.contains("No permissions")
            }) =>
        {
            Exit::Permission
        }
        // A server with requirepass answers an unauthenticated client's large request this way.
        Some(_) if err.detail().is_some_and(|d| d.contains("unauthenticated")) => Exit::Permission,
        // Any other error reply (an unknown or renamed command, a script the server refuses)
        // means the server is not set up for redlock.
        Some(_) => Exit::Config,
        None => Exit::Unavailable,
    }
}

/// Whether a Redis error is an answer about the lock (the server spoke and refused) rather than
/// a failure to reach it. The heartbeat treats the former as lease loss at once and retries the
/// latter until the kill point.
pub fn is_definitive(err: &RedisError) -> bool {
    match classify_redis(err) {
        Exit::Permission | Exit::Config => true,
        Exit::Unavailable => matches!(err.code(), Some("READONLY" | "OOM")),
        _ => false,
    }
}

/// Whether an error is a reply from the server (it answered) rather than a transport failure.
pub fn is_server_reply(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| e.code().is_some())
}

pub fn is_readonly(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| e.code() == Some("READONLY"))
}

pub fn is_timeout(err: &anyhow::Error) -> bool {
    redis_errors(err).any(redis::RedisError::is_timeout)
}

pub fn is_definitive_error(err: &anyhow::Error) -> bool {
    redis_errors(err).any(is_definitive)
}

/// The TLS error in an error's chain of causes, if any. rustls's errors reach us inside an
/// `io::Error` that the `RedisError` keeps behind an `Arc` (which is what its `source` is).
fn tls_error(err: &anyhow::Error) -> Option<&rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    err.chain().find_map(|cause| {
        let cause = match cause.downcast_ref::<Shared>() {
            Some(shared) => &**shared as &(dyn std::error::Error + 'static),
            None => cause,
        };
        cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        })
    })
}

/// A failed TLS handshake with a TLS server (`rediss://`, a cluster node, a sentinel or its
/// master), in plain words: what is wrong and what to do. `None` when the error is not a TLS
/// failure (the caller keeps it as it is).
pub fn explain_tls(err: &anyhow::Error, target: &TlsTarget) -> Option<String> {
    use rustls::CertificateError as Cert;
    let address = &target.address;
    let host = address
        .rsplit_once(':')
        .map_or(address.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let trust = match &target.ca_file {
        Some(file) => format!("any CA in --tls-ca-file {file}: give the CA that signed it"),
        None => "a CA the system trusts: give the CA that signed it with --tls-ca-file".into(),
    };
    let text = match tls_error(err)? {
        rustls::Error::InvalidCertificate(cert) => match cert {
            Cert::UnknownIssuer | Cert::BadSignature => {
                format!("the server's certificate at {address} is not signed by {trust}")
            }
            Cert::Expired => format!("the server's certificate at {address} has expired: renew it"),
            Cert::ExpiredContext { not_after, .. } => format!(
                "the server's certificate at {address} expired on {}: renew it",
                date(*not_after)
            ),
            Cert::NotValidYet => format!(
                "the server's certificate at {address} is not valid yet: check this host's \
                 clock or the certificate's start date"
            ),
            Cert::NotValidYetContext { not_before, .. } => format!(
                "the server's certificate at {address} is not valid before {}: check this \
                 host's clock or the certificate's start date",
                date(*not_before)
            ),
            Cert::NotValidForName => format!(
                "the server's certificate at {address} is not for {host}: connect by a name it \
                 lists or reissue it"
            ),
            Cert::NotValidForNameContext { presented, .. } => format!(
                "the server's certificate is for {}, not {host}: connect by a name it lists \
                 or reissue it",
                if presented.is_empty() {
                    "no name".to_string()
                } else {
                    presented
                        .iter()
                        .map(|n| plain_name(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            Cert::InvalidPurpose | Cert::InvalidPurposeContext { .. } => format!(
                "the server's certificate at {address} is not for TLS servers (its extended \
                 key usage lacks serverAuth): reissue it"
            ),
            other if crate::wire::ca_used_as_own(other) => {
                let accept = match &target.ca_file {
                    Some(file) => {
                        format!("list that very certificate in --tls-ca-file {file}, or ")
                    }
                    None => "give that very certificate with --tls-ca-file, or ".into(),
                };
                format!(
                    "the server at {address} presents a CA certificate (basicConstraints \
                     CA:TRUE) as its own: {accept}reissue it with \
                     `-addext basicConstraints=critical,CA:FALSE`, or sign a server certificate \
                     with that CA"
                )
            }
            other => format!("the server's certificate at {address} is refused: {other:?}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            not_tls(address)
        }
        other => format!("the TLS handshake with {address} failed: {other}"),
    };
    Some(text)
}

/// Whether the server closed the connection (reset, end of file) somewhere in `err`.
pub fn is_dropped(err: &anyhow::Error) -> bool {
    redis_errors(err).any(RedisError::is_connection_dropped)
}

/// What a plain URL (`scheme` names its TLS form) gets when the server closed the connection
/// without a word: a Redis TLS port does that to a client that speaks plain text.
pub fn maybe_tls(name: &str, scheme: &str) -> String {
    format!(
        "{name} closed the connection without answering (is it a TLS port? use {scheme} or the \
         plain port)"
    )
}

/// What a `rediss://` URL that reached a plain Redis port gets.
pub fn not_tls(address: &str) -> String {
    format!("{address} does not speak TLS (is it the plain port? use redis:// or the tls-port)")
}

/// rustls words the names a certificate lists as `DnsName("x")` or `IpAddress(1.2.3.4)`.
fn plain_name(name: &str) -> &str {
    ["DnsName(", "IpAddress("]
        .iter()
        .find_map(|kind| name.strip_prefix(kind)?.strip_suffix(')'))
        .map_or(name, |inner| inner.trim_matches('"'))
}

fn date(time: rustls::pki_types::UnixTime) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(time.as_secs());
    humantime::format_rfc3339_seconds(at).to_string()
}

/// An error and its causes on one line, without repeating a cause its parent already quotes.
pub fn render(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        // A socket read timeout surfaces as EAGAIN; say what it means.
        let text = cause.to_string().replace(
            "Resource temporarily unavailable (os error 11)",
            "timed out",
        );
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // Unauthenticated, a server with requirepass says NOAUTH, or (to a large request such as
    // a script) "Protocol error: unauthenticated multibulk length": say what to do.
    if redis_errors(err).any(|e| {
        e.code() == Some("NOAUTH") || e.detail().is_some_and(|d| d.contains("unauthenticated"))
    }) {
        line.push_str(
            " (the server requires a password: give it with --password-file or in the URL)",
        );
    }
    // Inside a script, Redis words an ACL denial without saying "permission".
    if redis_errors(err).any(|e| {
        e.detail()
            .is_some_and(|d| d.contains("executing the script can't"))
    }) {
        line.push_str(
            " (permission denied: the user's ACL lacks a command the script calls; \
             `redlock doctor` names it)",
        );
    }
    line
}

/// A server's error reply (`CODE detail`), as tests need them.
#[cfg(test)]
pub fn server_error(line: &str) -> RedisError {
    let (code, detail) = line.split_once(' ').unwrap();
    redis::make_extension_error(code.to_string(), Some(detail.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_wanting_a_password_is_told_how_to_give_it() {
        for reply in [
            "NOAUTH Authentication required.",
            "ERR Protocol error: unauthenticated multibulk length",
        ] {
            let err = anyhow::Error::new(server_error(reply)).context("cannot acquire job");
            assert!(render(&err).ends_with("give it with --password-file or in the URL)"));
        }
        let err = anyhow::Error::new(server_error("WRONGPASS invalid")).context("x");
        assert!(!render(&err).contains("--password-file"));
    }

    #[test]
    fn redis_errors_are_classified_by_their_code() {
        assert_eq!(classify_redis(&server_error("WRONGTYPE x")), Exit::Config);
        assert_eq!(classify_redis(&server_error("OOM x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error("WRONGPASS x")),
            Exit::Permission
        );
        assert_eq!(classify_redis(&server_error("NOAUTH x")), Exit::Permission);
        assert_eq!(classify_redis(&server_error("BUSY x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error(
                "ERR Protocol error: unauthenticated multibulk length"
            )),
            Exit::Permission
        );
        assert_eq!(
            classify_redis(&server_error(
                "ERR The user executing the script can't run this command or subcommand"
            )),
            Exit::Permission
        );
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_redis(&io), Exit::Unavailable);
        assert!(!is_definitive(&io));
        assert!(is_definitive(&server_error("WRONGTYPE x")));
        assert!(is_definitive(&server_error("READONLY x")));
        assert!(!is_definitive(&server_error("LOADING x")));
    }

    /// A rustls error as the redis crate hands it over: in an `io::Error` in a `RedisError`.
    fn handshake_failure(err: rustls::Error) -> anyhow::Error {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, err);
        anyhow::Error::new(RedisError::from(io)).context("cannot acquire job")
    }

    #[test]
    fn tls_failures_are_worded_for_people() {
        use rustls::CertificateError as Cert;
        let target = TlsTarget {
            address: "127.0.0.1:6380".into(),
            ca_file: Some("/etc/redis/ca.crt".into()),
        };
        let explain = |e| explain_tls(&handshake_failure(e), &target).expect("a TLS failure");
        assert_eq!(
            explain(rustls::Error::InvalidCertificate(Cert::UnknownIssuer)),
            "the server's certificate at 127.0.0.1:6380 is not signed by any CA in \
             --tls-ca-file /etc/redis/ca.crt: give the CA that signed it"
        );
        let presented = vec![
            "DnsName(\"redis.internal\")".to_string(),
            "IpAddress(10.0.0.2)".to_string(),
        ];
        assert_eq!(
            explain(rustls::Error::InvalidCertificate(
                Cert::NotValidForNameContext {
                    expected: rustls::pki_types::ServerName::try_from("127.0.0.1")
                        .unwrap()
                        .to_owned(),
                    presented,
                }
            )),
            "the server's certificate is for redis.internal, 10.0.0.2, not 127.0.0.1: connect \
             by a name it lists or reissue it"
        );
        let not_after = rustls::pki_types::UnixTime::since_unix_epoch(
            std::time::Duration::from_secs(1_577_923_200),
        );
        assert!(
            explain(rustls::Error::InvalidCertificate(Cert::ExpiredContext {
                time: not_after,
                not_after,
            }))
            .contains("expired on 2020-01-02T00:00:00Z")
        );
        let plain = anyhow::Error::new(RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert_eq!(explain_tls(&plain, &target), None);
    }

    #[test]
    fn failures_win_over_everything_else() {
        let err = fail(Exit::LeaseLost, "lost").context("while running");
        assert_eq!(classify(&err), Exit::LeaseLost);
        assert_eq!(
            classify(&anyhow::anyhow!("something odd")),
            Exit::Unavailable
        );
    }
}
