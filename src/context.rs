//! What every subcommand needs from the global options (`--url`, the password files, TLS,
//! `--prefix`, `--timeout`), checked before anything is contacted: a bad value is a usage error
//! (64) and no server has been reached.

use std::time::Duration;

use anyhow::Result;

use crate::cli::Global;
use crate::cli::named;
use crate::lock::nodes;
use crate::redis::server::Server;
use crate::report::error::{Failure, usage};
use crate::report::log;

/// What every subcommand needs from the global options, checked before anything is contacted.
pub struct Context {
    pub servers: Vec<Server>,
    pub prefix: String,
    pub timeout: Duration,
}

impl Context {
    pub fn new(global: &Global) -> Result<Context> {
        // Checked here rather than by clap, which checks a global option's requirement on each
        // side of the word `run` alone (and would refuse, say, REDLOCK_SENTINEL_USER with
        // --sentinel-password-file given before `run`).
        if global.tls_cert_file.is_some() != global.tls_key_file.is_some() {
            return Err(usage(
                "--tls-cert-file and --tls-key-file go together: give the client certificate \
                 and its key",
            ));
        }
        if global.sentinel_user.is_some() && global.sentinel_password_file.is_none() {
            return Err(usage(
                "--sentinel-user needs --sentinel-password-file (the sentinels' password for \
                 that user)",
            ));
        }
        // The flag, or the variable it was read from: what messages about the password name.
        let password_file = global
            .password_file
            .as_ref()
            .map(|_| named("password-file"));
        let password = match (&global.password_file, &password_file) {
            (Some(path), Some(named)) => Some(crate::redis::url::read_password_file(named, path)?),
            _ => None,
        };
        let sentinel = crate::redis::sentinel::SentinelAuth {
            username: global.sentinel_user.clone(),
            password: match &global.sentinel_password_file {
                Some(path) => Some(crate::redis::url::read_password_file(
                    &named("sentinel-password-file"),
                    path,
                )?),
                None => None,
            },
        };
        let urls = if global.urls.is_empty() {
            vec![crate::redis::url::DEFAULT_URL.to_string()]
        } else {
            rejoin_urls(&global.urls)
        };
        let tls = crate::redis::tls::Tls::load(
            global.tls_ca_file.as_deref(),
            global.tls_cert_file.as_deref(),
            global.tls_key_file.as_deref(),
            global.tls_insecure,
        )
        .map_err(|e| as_given(e, &["tls-ca-file", "tls-cert-file", "tls-key-file"]))?;
        let servers = urls
            .iter()
            .map(|url| {
                let server = Server::parse(url, password.as_deref(), &tls, &sentinel)?;
                Ok(match &password_file {
                    Some(named) => server.with_password_file(named.clone()),
                    None => server,
                })
            })
            .collect::<Result<Vec<_>>>()
            .map_err(|e| as_given(e, &["url"]))?;
        if tls.insecure && servers.iter().any(Server::is_tls) {
            log::warn(
                "tls_insecure",
                "--tls-insecure: the server's certificate is not verified; anyone between here \
                 and Redis can impersonate it and see the password",
                &[],
            );
        }
        if servers.len() > 1 && servers.iter().any(|s| !s.is_direct()) {
            return Err(usage(
                "a redis+cluster:// or redis+sentinel:// URL cannot be one node of a quorum; \
                 give it as the only --url",
            ));
        }
        // A server named twice would be counted twice: said here when the URLs show it (the
        // same host and port, or socket) or their names resolve to one address (`localhost`
        // and `127.0.0.1`), before anything is contacted, so a server that is slow to answer
        // cannot slip through; other ways of naming one server twice (a socket and its port)
        // are found by what the servers are when the nodes connect (`lock::nodes`).
        if servers.len() > 1 {
            let resolved: Vec<Vec<std::net::SocketAddr>> = servers.iter().map(resolve).collect();
            for (i, server) in servers.iter().enumerate() {
                if let Some(twin) = servers[..i].iter().enumerate().find_map(|(j, s)| {
                    let same_text = s.address().is_some() && s.address() == server.address();
                    let same_address = resolved[j].iter().any(|a| resolved[i].contains(a));
                    (same_text || same_address).then_some(s)
                }) {
                    return Err(usage(format!(
                        "{} and {} are one Redis server: a quorum counts each server once, so \
                         give independent servers, each once",
                        twin.name(),
                        server.name()
                    )));
                }
            }
        }
        if global.timeout.is_zero() {
            return Err(usage(format!(
                "{} must be greater than 0",
                named("timeout")
            )));
        }
        Ok(Context {
            servers,
            prefix: global.prefix.clone(),
            timeout: global.timeout,
        })
    }

    /// The keys named on the command line as arguments (`status KEY...` and the others), under
    /// the prefix (64 for a bad one).
    pub fn keys(&self, names: &[String]) -> Result<Vec<crate::lock::keys::Keys>> {
        crate::lock::keys::not_empty(names, "KEY")?;
        names
            .iter()
            .map(|k| crate::lock::keys::Keys::new(&self.prefix, k))
            .collect()
    }

    /// The shape `--shared` / `--slots N` ask for, checked before anything is contacted: a
    /// quorum refuses both (64). A majority vote does not keep a count: with 3 nodes and
    /// `--slots 2`, holders granted by nodes {1,2}, {2,3} and {1,3} each win a majority while
    /// no node holds more than 2, so 3 would run. Shared holds would be sound under a majority
    /// (every shared and exclusive majority meet on a node), but a quorum's renewals heal and
    /// raise fences for the one string holder only, so they are refused too.
    pub fn shape(&self, shared: bool, slots: Option<u32>) -> Result<crate::lock::Shape> {
        let shape = crate::lock::Shape::from_flags(shared, slots)?;
        if shape != crate::lock::Shape::Exclusive && self.servers.len() > 1 {
            let flag = if shared { "--shared" } else { "--slots" };
            return Err(crate::report::error::usage(format!(
                "{flag} cannot be used with several --url (a quorum): a majority vote does not \
                 keep a count of holders; use one server, a Cluster or Sentinel"
            )));
        }
        Ok(shape)
    }

    /// Whether the server is a Redis Cluster (several keys must then share a hash slot).
    pub fn is_cluster(&self) -> bool {
        self.servers
            .iter()
            .any(crate::redis::server::Server::is_cluster)
    }

    /// `--replicas N`, checked before anything is contacted: a quorum of independent masters
    /// has no replicas to wait for (64).
    pub fn replicas(&self, replicas: u32) -> Result<u32> {
        if replicas > 0 && self.servers.len() > 1 {
            return Err(usage(
                "--replicas cannot be used with several --url (a quorum): independent masters \
                 have no replicas to wait for, and a majority of them is what keeps the lock; \
                 use it with one server, Sentinel or a Cluster",
            ));
        }
        Ok(replicas)
    }

    /// The lock's servers, each bounded by `timeout` per connect and command.
    pub fn nodes(&self, timeout: Duration) -> nodes::Nodes {
        nodes::Nodes::new(&self.servers, timeout)
    }
}

/// A usage error about one of `longs` (the `--url` that is not one, a certificate file that
/// cannot be read), naming the environment variable instead of the flag when the value came
/// from there (`REDLOCK_URL=...`): the messages below `context.rs` know only the flag.
fn as_given(err: anyhow::Error, longs: &[&str]) -> anyhow::Error {
    let Some(failure) = err.downcast_ref::<Failure>() else {
        return err;
    };
    for long in longs {
        let flag = format!("--{long}");
        let name = named(long);
        if name == flag {
            continue;
        }
        let message = &failure.message;
        let renamed = if let Some(rest) = message.strip_prefix(&format!("{flag} ")) {
            format!("{name}={rest}")
        } else if message.contains(&format!(" {flag} ")) {
            message.replacen(&format!(" {flag} "), &format!(" {name}="), 1)
        } else {
            continue;
        };
        return usage(renamed);
    }
    err
}

/// `--url` values are split on commas (so `REDLOCK_URL` can list a quorum), but a cluster or
/// Sentinel URL lists its own nodes with commas: a piece without a scheme belongs to the URL
/// before it.
fn rejoin_urls(pieces: &[String]) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    for piece in pieces {
        match urls.last_mut() {
            Some(last) if !piece.contains("://") => {
                last.push(',');
                last.push_str(piece);
            }
            _ => urls.push(piece.clone()),
        }
    }
    urls
}

/// The addresses a TCP server's host and port resolve to (none for a socket, or a name that
/// does not resolve: that node then fails as unreachable, as it would anyway).
fn resolve(server: &Server) -> Vec<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    server
        .address()
        .filter(|a| !a.starts_with('/'))
        .and_then(|a| a.to_socket_addrs().ok())
        .map_or_else(Vec::new, |addrs| {
            addrs
                .map(|a| match a {
                    // ::ffff:127.0.0.1 is 127.0.0.1.
                    std::net::SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
                        Some(v4) => std::net::SocketAddr::from((v4, v6.port())),
                        None => a,
                    },
                    a => a,
                })
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_and_sentinel_urls_keep_their_own_commas() {
        let pieces: Vec<String> = [
            "redis://a:1",
            "redis+cluster://b:1",
            "c:2",
            "redis+sentinel://d:1",
            "e:2/mymaster",
        ]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
        assert_eq!(
            rejoin_urls(&pieces),
            vec![
                "redis://a:1",
                "redis+cluster://b:1,c:2",
                "redis+sentinel://d:1,e:2/mymaster"
            ]
        );
    }
}
