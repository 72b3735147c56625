//! A cluster node's connection, for the redis crate's cluster router (MOVED, ASK, slot maps):
//! redlock's own [`Wire`], so nodes get the TLS of `rediss://`, and one that stays in step when
//! the router resends a command that timed out.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};
use rustls::ClientConfig;

use super::wire::Wire;

/// The TLS settings of every cluster node's connection. The cluster router connects to nodes
/// itself, as it discovers them, through [`redis::cluster::Connect`], which is handed only the
/// node's address: the settings are the process's, set by [`cluster_tls`] before the router
/// is built. That is sound because a process talks to one cluster at most: a cluster URL
/// cannot be one of several `--url`s (`context.rs` refuses it).
static CLUSTER_TLS: std::sync::Mutex<Option<Arc<ClientConfig>>> = std::sync::Mutex::new(None);

/// Sets the TLS settings of cluster nodes' connections ([`CLUSTER_TLS`]).
pub fn cluster_tls(config: Option<Arc<ClientConfig>>) {
    *CLUSTER_TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
}

/// A cluster node's connection: a [`Wire`] that stays in step when a reply is late.
///
/// The crate's cluster router answers a read timeout by sending the same command again on the
/// same connection; the late reply to the first one then arrives before the retry's. Like the
/// crate's own connection, a node's connection counts the replies it gave up on and skips as
/// many before reading the next one. A send that timed out may have left part of the command
/// (or, over TLS, all of it, buffered) to go out later, which no count can follow: the
/// connection is then broken, and its next use fails as a dropped connection, which the router
/// answers by connecting again. So no command of redlock's ever reads another's reply. (A single
/// server's [`Wire`] does the opposite on purpose: its owner drops it after a failure, or
/// writes a release behind the request that timed out, see `lock::abandon`.)
///
/// Connecting is redlock's own too: one TCP handshake, AUTH when a password is set, the TLS
/// settings of [`cluster_tls`] (so a node presenting its own certificate listed in
/// `--tls-ca-file` is trusted as on `rediss://`).
pub struct Node {
    wire: Wire,
    /// Replies still to come for requests that timed out.
    late: usize,
    /// A send failed without the connection dropping: what went out is unknown.
    broken: bool,
}

impl Node {
    /// Sends `cmd`, unless the connection is broken or this send breaks it.
    fn send(&mut self, cmd: &[u8]) -> RedisResult<()> {
        self.usable()?;
        let sent = self.wire.send_packed_command(cmd);
        if let Err(e) = &sent
            && !e.is_connection_dropped()
        {
            self.broken = true;
        }
        sent
    }

    /// An error that the router reads as a dropped connection, once the connection is broken.
    fn usable(&self) -> RedisResult<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "a request was only partly sent; connecting again",
            )
            .into());
        }
        Ok(())
    }

    /// The next reply to a request still waited for.
    fn reply(&mut self) -> RedisResult<Value> {
        while self.late > 0 {
            self.wire.recv_response()?;
            self.late -= 1;
        }
        self.wire.recv_response()
    }

    /// The one reply to a request sent.
    fn one_reply(&mut self) -> RedisResult<Value> {
        self.replies(0, 1).map(|mut one| one.remove(0))
    }

    /// `count` replies, the first `skip` of them dropped; after a failure, the ones not read
    /// are skipped by the next request.
    fn replies(&mut self, skip: usize, count: usize) -> RedisResult<Vec<Value>> {
        self.usable()?;
        let mut replies = Vec::with_capacity(count);
        for index in 0..skip + count {
            match self.reply() {
                Ok(reply) if index >= skip => replies.push(reply),
                Ok(_) => {}
                Err(e) => {
                    if !e.is_connection_dropped() {
                        self.late += skip + count - index;
                    }
                    return Err(e);
                }
            }
        }
        Ok(replies)
    }
}

impl redis::cluster::Connect for Node {
    fn connect<T>(info: T, timeout: Option<Duration>) -> RedisResult<Self>
    where
        T: redis::IntoConnectionInfo,
    {
        let info = info.into_connection_info()?;
        let timeout = timeout.unwrap_or(Duration::from_secs(5));
        let tls = CLUSTER_TLS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let wire = Wire::connect(&info, tls.as_ref(), timeout, timeout)?;
        Ok(Node {
            wire,
            late: 0,
            broken: false,
        })
    }

    fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        self.send(cmd)
    }

    /// `None` (which the router sets before redlock's own timeouts) keeps the timeout there
    /// is: no connection of redlock's ever blocks without one.
    fn set_write_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        match timeout {
            Some(_) => Ok(self.wire.io.set_write_timeout(timeout)?),
            None => Ok(()),
        }
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        match timeout {
            Some(_) => self.wire.set_read_timeout(timeout),
            None => Ok(()),
        }
    }

    fn recv_response(&mut self) -> RedisResult<Value> {
        self.one_reply()
    }
}

impl ConnectionLike for Node {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send(cmd)?;
        self.one_reply()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(cmd)?;
        self.replies(offset, count)
    }

    fn get_db(&self) -> i64 {
        self.wire.get_db()
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.wire.is_open() && !self.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::wire::tests::pair;
    use std::io::Write;

    #[test]
    fn a_cluster_node_skips_the_replies_it_gave_up_on() {
        let (wire, mut peer) = pair();
        wire.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut node = Node {
            wire,
            late: 0,
            broken: false,
        };
        let echo = |text: &str| redis::cmd("ECHO").arg(text).get_packed_command();
        // The first request's reply is late: the router sends it again.
        let e = node.req_packed_command(&echo("first")).unwrap_err();
        assert!(e.is_timeout(), "{e}");
        peer.write_all(b"$5\r\nfirst\r\n").unwrap();
        peer.write_all(b"$5\r\nagain\r\n").unwrap();
        assert_eq!(
            node.req_packed_command(&echo("again")).unwrap(),
            Value::BulkString(b"again".to_vec())
        );
        // A pipeline of three, one reply of which came before the timeout.
        let mut pipe = redis::pipe();
        pipe.cmd("ECHO")
            .arg("a")
            .cmd("ECHO")
            .arg("b")
            .cmd("ECHO")
            .arg("c");
        peer.write_all(b"$1\r\na\r\n").unwrap();
        let e = node
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, 3)
            .unwrap_err();
        assert!(e.is_timeout(), "{e}");
        peer.write_all(b"$1\r\nb\r\n$1\r\nc\r\n$4\r\nnext\r\n")
            .unwrap();
        assert_eq!(
            node.req_packed_command(&echo("next")).unwrap(),
            Value::BulkString(b"next".to_vec())
        );
        assert_eq!(node.late, 0);
    }

    #[test]
    fn a_cluster_node_whose_send_timed_out_is_connected_again() {
        let (wire, _peer) = pair();
        wire.io
            .set_timeouts(
                Some(Duration::from_millis(20)),
                Some(Duration::from_millis(20)),
            )
            .unwrap();
        let mut node = Node {
            wire,
            late: 0,
            broken: false,
        };
        // The peer reads nothing: a command larger than the socket's buffers cannot go out.
        let big = redis::cmd("ECHO")
            .arg(vec![b'x'; 4 << 20])
            .get_packed_command();
        let e = node.req_packed_command(&big).unwrap_err();
        assert!(!e.is_connection_dropped(), "{e}");
        assert!(!node.is_open());
        let echo = redis::cmd("ECHO").arg("next").get_packed_command();
        let e = node.req_packed_command(&echo).unwrap_err();
        assert!(e.is_connection_dropped(), "{e}");
    }
}
