//! Why a server could not be used, in plain words: nothing listens there, no such host, no
//! answer in time, the wrong side of TLS, a password the server does not take.
//!
//! The transport names only the symptom, and sometimes a misleading one: the redis crate counts
//! a refused connection as a dropped one, and a dropped connection at the first request is what
//! a TLS port does to plain text; a refused password is `AuthenticationFailed` whether the
//! password is wrong or the server has none. [`explain`] tells these apart, in that order, and
//! says what to do. A TLS handshake the server refused is `tls.rs`'s to word.

use crate::report::error::GIVE_PASSWORD;
use std::io;
use std::time::Duration;

use redis::ErrorKind;

use super::dial::Unconnected;
use super::tls::maybe_tls;
use crate::report::error::{is_server_reply, is_timeout, redis_errors};

/// What a message names: the server as dialled, and what is known of the connection.
pub struct Dialled<'a> {
    /// The URL as it may be shown (no password).
    pub name: &'a str,
    /// `HOST:PORT`, or a socket's path.
    pub address: &'a str,
    /// Whether the URL asks for TLS.
    pub tls: bool,
    /// The wait for each connect and request (`--timeout`), when known.
    pub timeout: Option<Duration>,
    /// Whether this connection has answered a request (it speaks RESP; TLS, if any, is done).
    pub answered: bool,
    /// Where a password given came from, as the operator gave it: `--password-file`,
    /// `REDLOCK_PASSWORD_FILE`, or `the URL`; `None` when none was (a URL naming a user alone).
    pub password: Option<&'a str>,
}

/// `err` in plain words when it is one of the failures above; `None` otherwise (the caller
/// keeps it as it is).
pub fn explain(err: &anyhow::Error, to: &Dialled) -> Option<String> {
    let (name, address) = (to.name, to.address);
    let within = to
        .timeout
        .map(|t| format!(" within {}", humantime::format_duration(t)))
        .unwrap_or_default();
    match unconnected(err) {
        Some(Unconnected::UnknownHost(host, why)) => {
            return Some(format!(
                "cannot resolve the host {host} ({why}: unknown host): check the host name in \
                 {name}, or this machine's DNS"
            ));
        }
        Some(Unconnected::NoHandshake) => {
            return Some(format!(
                "{address} did not take the connection{within} (timed out): is the host up, \
                 and the port open to this machine? (--timeout sets the wait)"
            ));
        }
        None => {}
    }
    if redis_errors(err).any(redis::RedisError::is_connection_refusal) {
        return Some(match io_error(err).map(io::Error::kind) {
            Some(io::ErrorKind::NotFound) => format!(
                "nothing listens on {address} (no such socket): is Redis running, with \
                 `unixsocket {address}`? Start it or correct the URL; `redlock doctor` checks \
                 the server"
            ),
            _ => format!(
                "nothing listens on {address} (connection refused): is Redis running there, on \
                 that port? Start it or correct the URL; `redlock doctor` checks the server"
            ),
        });
    }
    if let Some(auth) = redis_errors(err).find(|e| e.kind() == ErrorKind::AuthenticationFailed) {
        let why = auth.detail().unwrap_or_default();
        let Some(given) = to.password else {
            return Some(format!(
                "{name} did not let in the URL's user without a password (WRONGPASS): the user \
                 is unknown or disabled, or has a password: {GIVE_PASSWORD} (USER:PASSWORD@)"
            ));
        };
        return Some(if why.contains("without any password configured") {
            format!(
                "{name} has no password set (for this user), yet one was given ({given}): drop \
                 the password, or set one on the server (requirepass, or the ACL user's)"
            )
        } else {
            format!(
                "{name} refused the password (WRONGPASS): it is wrong, or the user is unknown \
                 or disabled; check the password (given in {given}) and the URL's user"
            )
        });
    }
    if to.answered || is_server_reply(err) {
        return None;
    }
    // A plain TCP URL only: a unix socket has no TLS port, and a cluster's seeds are asked
    // again by `Server::why_not`.
    if to.name.starts_with("redis://")
        && redis_errors(err).any(redis::RedisError::is_connection_dropped)
    {
        return Some(maybe_tls(name, "rediss://"));
    }
    if is_timeout(err) {
        return Some(if to.tls {
            format!(
                "{address} gave no TLS answer{within} (timed out): is it the plain port? use \
                 redis:// or the tls-port"
            )
        } else {
            format!(
                "{address} took the connection but did not answer{within} (timed out): is it \
                 a Redis server, and not paused or overloaded? (--timeout sets the wait)"
            )
        });
    }
    None
}

/// The I/O error in an error's chain of causes, if any. The redis crate keeps it behind an
/// `Arc` (which is what its `source` is).
fn io_error(err: &anyhow::Error) -> Option<&io::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    err.chain()
        .find_map(|cause| match cause.downcast_ref::<Shared>() {
            Some(shared) => shared.downcast_ref::<io::Error>(),
            None => cause.downcast_ref::<io::Error>(),
        })
}

/// Why no TCP connection was made, when `wire.rs` knows.
fn unconnected(err: &anyhow::Error) -> Option<&Unconnected> {
    io_error(err)?.get_ref()?.downcast_ref::<Unconnected>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::RedisError;

    fn dialled(tls: bool, answered: bool) -> Dialled<'static> {
        Dialled {
            name: "redis://127.0.0.1:6379",
            address: "127.0.0.1:6379",
            tls,
            timeout: Some(Duration::from_secs(3)),
            answered,
            password: Some("REDLOCK_PASSWORD_FILE"),
        }
    }

    fn io(kind: io::ErrorKind) -> anyhow::Error {
        anyhow::Error::new(RedisError::from(io::Error::from(kind))).context("cannot connect")
    }

    #[test]
    fn a_refused_connection_is_not_a_tls_problem() {
        let text = explain(
            &io(io::ErrorKind::ConnectionRefused),
            &dialled(false, false),
        )
        .unwrap();
        assert!(
            text.starts_with("nothing listens on 127.0.0.1:6379"),
            "{text}"
        );
        assert!(!text.contains("TLS"), "{text}");
    }

    #[test]
    fn a_connection_closed_before_any_answer_may_be_a_tls_port() {
        let text = explain(&io(io::ErrorKind::UnexpectedEof), &dialled(false, false)).unwrap();
        assert!(text.contains("rediss://"), "{text}");
        assert_eq!(
            explain(&io(io::ErrorKind::UnexpectedEof), &dialled(false, true)),
            None
        );
    }

    #[test]
    fn timeouts_say_where_they_happened() {
        let silent = explain(&io(io::ErrorKind::WouldBlock), &dialled(false, false)).unwrap();
        assert!(silent.contains("did not answer within 3s"), "{silent}");
        let tls = explain(&io(io::ErrorKind::WouldBlock), &dialled(true, false)).unwrap();
        assert!(tls.contains("no TLS answer"), "{tls}");
        let handshake = anyhow::Error::new(RedisError::from(io::Error::new(
            io::ErrorKind::TimedOut,
            Unconnected::NoHandshake,
        )));
        let text = explain(&handshake, &dialled(false, false)).unwrap();
        assert!(text.contains("did not take the connection"), "{text}");
        // Still a timeout for the code that undoes a timed-out request.
        assert!(is_timeout(&handshake));
    }

    #[test]
    fn refused_passwords_are_told_apart() {
        let auth = |why: &str| {
            anyhow::Error::new(RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
                why.to_string(),
            )))
        };
        let none = explain(
            &auth(
                "ERR AUTH <password> called without any password configured for the default user.",
            ),
            &dialled(false, false),
        )
        .unwrap();
        assert!(none.contains("has no password set"), "{none}");
        // The password is named as it was given.
        assert!(none.contains("(REDLOCK_PASSWORD_FILE)"), "{none}");
        assert!(!none.contains("--password-file"), "{none}");
        let wrong = explain(
            &auth("WRONGPASS invalid username-password pair or user is disabled."),
            &dialled(false, false),
        )
        .unwrap();
        assert!(wrong.contains("refused the password"), "{wrong}");
        assert!(wrong.contains("given in REDLOCK_PASSWORD_FILE"), "{wrong}");
    }
}
