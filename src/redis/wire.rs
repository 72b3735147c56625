//! One connection to one Redis server, kept by redlock itself: TCP, a unix socket, or TLS.
//!
//! The redis crate still packs the commands (`redis::Cmd`) and gives the replies their type
//! (`redis::Value`); the socket, its TLS and the reading of RESP2 replies are redlock's. That
//! buys what the crate's sync connection cannot give:
//!
//! * **Trusting a server's own certificate.** `--tls-ca-file` listing the very certificate a
//!   server presents is accepted (as OpenSSL-based clients do), even when that certificate says
//!   `CA:TRUE`, which is how most guides make a self-signed one ([`OwnCertificates`]): for a
//!   `rediss://` server, every cluster node (the crate's cluster router connects through
//!   `redis::cluster::Connect`, implemented here) and the sentinels and their master.
//! * **The socket itself.** A waiter can block on its grant and on its signals at once
//!   ([`Wire::fd`], [`Wire::reply_ready`]).
//! * **A cheaper start.** Each timeout is set once, the TLS roots are read once per process
//!   (the crate reads the system's trust store again for every connection), and replies are
//!   parsed without the crate's parser, whose first use detects the CPU's features (CPUID,
//!   which traps in a VM: a cost every run would pay, see docs/performance.md).
//! * **Errors in the crate's shapes.** Transport failures are `RedisError`s made from the
//!   `io::Error` (a timeout is one, a TLS refusal keeps the `rustls::Error` inside), error
//!   replies are the crate's `Value::ServerError`, and a refused password is
//!   `AuthenticationFailed`, so `error.rs` reads them as before.
//!
//! Invariants: every connection has connect, read and write timeouts; connecting sends `AUTH`
//! only when a password is set, `SELECT` only for a database other than 0 and `INFO server` only
//! when the caller asks which server it reached (a quorum's node, [`Wire::connect_identified`]),
//! all in one pipelined round trip, and nothing else (no `HELLO`, no `CLIENT SETINFO`); a reply
//! is parsed whole or not at all (a read that times out halfway leaves it to be parsed again).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use redis::{
    ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, RedisError, RedisResult, Value,
};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::dial::{tcp, unix};

/// A connection to one server.
pub struct Wire {
    pub(super) io: Io,
    /// What was read and not yet parsed: `read[at..]`; the reply being parsed starts at
    /// `start` (kept until it is whole, so that a read that times out halfway loses nothing).
    read: Vec<u8>,
    at: usize,
    start: usize,
    db: i64,
    open: bool,
}

pub(super) enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Io {
    fn socket(&self) -> RawFd {
        match self {
            Io::Tcp(s) => s.as_raw_fd(),
            Io::Unix(s) => s.as_raw_fd(),
            Io::Tls(s) => s.sock.as_raw_fd(),
        }
    }

    pub(super) fn set_write_timeout(&self, write: Option<Duration>) -> io::Result<()> {
        match self {
            Io::Tcp(s) => s.set_write_timeout(write),
            Io::Unix(s) => s.set_write_timeout(write),
            Io::Tls(s) => s.sock.set_write_timeout(write),
        }
    }

    pub(super) fn set_read_timeout(&self, read: Option<Duration>) -> io::Result<()> {
        match self {
            Io::Tcp(s) => s.set_read_timeout(read),
            Io::Unix(s) => s.set_read_timeout(read),
            Io::Tls(s) => s.sock.set_read_timeout(read),
        }
    }

    pub(super) fn set_timeouts(
        &self,
        read: Option<Duration>,
        write: Option<Duration>,
    ) -> io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
}

impl Read for Io {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.read(buf),
            Io::Unix(s) => s.read(buf),
            Io::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Io {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.write(buf),
            Io::Unix(s) => s.write(buf),
            Io::Tls(s) => s.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Io::Tcp(s) => s.write_all(buf),
            Io::Unix(s) => s.write_all(buf),
            // rustls buffers the record; flushing sends it.
            Io::Tls(s) => {
                s.write_all(buf)?;
                s.flush()
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Io::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

impl Wire {
    /// Connects to `info`'s address, with `tls` for a `TcpTls` one (`None` there is a usage
    /// mistake of the caller and refused), and authenticates. `connect` bounds the TCP
    /// connection; `timeout` is the read and write timeout from then on (the handshakes
    /// included); callers change it as they need.
    pub fn connect(
        info: &ConnectionInfo,
        tls: Option<&Arc<ClientConfig>>,
        connect: Duration,
        timeout: Duration,
    ) -> RedisResult<Wire> {
        Wire::open(info, tls, connect, timeout, false).map(|(wire, _)| wire)
    }

    /// [`Wire::connect`], and which server answered: its `run_id` (from `INFO server`), asked
    /// in the round trip of `AUTH` and `SELECT` when there is one. A quorum compares its nodes
    /// by it: URLs can name one server in many ways (an alias, another address, its unix
    /// socket), the server's own id cannot. The second result is the server's refusal of
    /// `INFO`, or an error when its reply has no `run_id`; the connection is usable either way.
    pub fn connect_identified(
        info: &ConnectionInfo,
        tls: Option<&Arc<ClientConfig>>,
        connect: Duration,
        timeout: Duration,
    ) -> RedisResult<(Wire, RedisResult<String>)> {
        let (wire, id) = Wire::open(info, tls, connect, timeout, true)?;
        Ok((wire, id.expect("asked")))
    }

    fn open(
        info: &ConnectionInfo,
        tls: Option<&Arc<ClientConfig>>,
        connect: Duration,
        timeout: Duration,
        identify: bool,
    ) -> RedisResult<(Wire, Option<RedisResult<String>>)> {
        let (connect, timeout) = (
            connect.max(Duration::from_millis(1)),
            timeout.max(Duration::from_millis(1)),
        );
        let io = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Io::Tcp(tcp(host, *port, connect, timeout)?),
            ConnectionAddr::TcpTls { host, port, .. } => {
                let Some(config) = tls else {
                    return Err((ErrorKind::InvalidClientConfig, "no TLS settings").into());
                };
                let name = ServerName::try_from(host.as_str())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
                    .to_owned();
                let client = rustls::ClientConnection::new(Arc::clone(config), name)
                    .map_err(io::Error::other)?;
                let mut stream =
                    rustls::StreamOwned::new(client, tcp(host, *port, connect, timeout)?);
                // The handshake now, so that its refusal is the connection's error.
                while stream.conn.is_handshaking() {
                    stream.conn.complete_io(&mut stream.sock)?;
                }
                Io::Tls(Box::new(stream))
            }
            ConnectionAddr::Unix(path) => Io::Unix(unix(path, connect, timeout)?),
            other => {
                return Err((
                    ErrorKind::InvalidClientConfig,
                    "unsupported address",
                    other.to_string(),
                )
                    .into());
            }
        };
        let settings = info.redis_settings();
        let mut wire = Wire {
            io,
            read: Vec::new(),
            at: 0,
            start: 0,
            db: settings.db(),
            open: true,
        };
        let id = wire.setup(
            settings.username(),
            settings.password(),
            settings.db(),
            identify,
        )?;
        Ok((wire, id))
    }

    /// `AUTH` and `SELECT` in one round trip, as the crate does (and its retry without the
    /// user name for a server older than ACLs), with `INFO server` after them when `identify`:
    /// the server's `run_id`.
    fn setup(
        &mut self,
        user: Option<&str>,
        password: Option<&str>,
        db: i64,
        identify: bool,
    ) -> RedisResult<Option<RedisResult<String>>> {
        let mut pipe = redis::pipe();
        // A URL that names a user without a password (`redis://locker@host`) means that user:
        // AUTH with an empty password, which a `nopass` user accepts and any other refuses
        // (WRONGPASS, 77), rather than going on as `default` unsaid.
        let password = password.or(user.filter(|u| !u.is_empty()).map(|_| ""));
        let auth = password.map(|pw| {
            let mut cmd = redis::cmd("AUTH");
            if let Some(user) = user {
                cmd.arg(user);
            }
            pipe.add_command(cmd.arg(pw).clone());
        });
        if db != 0 {
            pipe.cmd("SELECT").arg(db);
        }
        if identify {
            pipe.cmd("INFO").arg("server");
        }
        if pipe.is_empty() {
            return Ok(None);
        }
        let replies = self.req_packed_commands(&pipe.get_packed_pipeline(), 0, pipe.len())?;
        let mut replies = replies.into_iter();
        if auth.is_some() {
            match replies.next() {
                Some(Value::Okay) => {}
                Some(Value::ServerError(e))
                    if user.is_some()
                        && e.details().is_some_and(|d| {
                            d.contains("wrong number of arguments for 'auth' command")
                        }) =>
                {
                    return self.setup(None, password, db, identify);
                }
                // The server's own words tell a wrong password from one it has no use for.
                other => {
                    let why = match other {
                        Some(Value::ServerError(e)) => {
                            format!("{} {}", e.code(), e.details().unwrap_or_default())
                        }
                        _ => "no answer to AUTH".to_string(),
                    };
                    return Err((
                        ErrorKind::AuthenticationFailed,
                        "Password authentication failed",
                        why,
                    )
                        .into());
                }
            }
        }
        if db != 0
            && let Some(Value::ServerError(e)) = replies.next()
        {
            return Err((
                redis::ServerErrorKind::ResponseError.into(),
                "Redis server refused to switch database",
                e.details().unwrap_or_default().to_string(),
            )
                .into());
        }
        if !identify {
            return Ok(None);
        }
        Ok(Some(match replies.next() {
            Some(Value::BulkString(text)) => run_id(&text).ok_or_else(|| {
                (
                    redis::ServerErrorKind::ResponseError.into(),
                    "INFO server has no run_id",
                )
                    .into()
            }),
            Some(Value::ServerError(e)) => Err(e.into()),
            _ => Err(malformed("an INFO reply that is not text")),
        }))
    }

    /// Sends a packed command (or pipeline) without reading any reply.
    pub fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        let sent = self.io.write_all(cmd);
        if let Err(e) = &sent
            && e.kind() != io::ErrorKind::WouldBlock
            && e.kind() != io::ErrorKind::TimedOut
        {
            self.open = false;
        }
        Ok(sent?)
    }

    /// Reads one reply (an error reply is a `Value::ServerError`, as in the crate).
    pub fn recv_response(&mut self) -> RedisResult<Value> {
        self.start = self.at;
        let read = self.reply(0);
        if let Err(e) = &read {
            // Parsed again from its start by the next call (after a timeout, say).
            self.at = self.start;
            if e.is_connection_dropped() {
                self.open = false;
            }
        }
        read
    }

    /// Whether a reply can be read without waiting, or at least its first bytes. Over TLS a
    /// readable socket may bring no reply (a session ticket, say): what arrived is decrypted
    /// here, without waiting, and only plaintext counts.
    pub fn reply_ready(&mut self) -> bool {
        if self.at < self.read.len() {
            return true;
        }
        let mut fd = libc::pollfd {
            fd: self.io.socket(),
            events: libc::POLLIN,
            revents: 0,
        };
        if let Io::Tls(s) = &mut self.io {
            loop {
                match s.conn.process_new_packets() {
                    Ok(state) if state.plaintext_bytes_to_read() > 0 => return true,
                    Ok(state) if state.peer_has_closed() => return true,
                    Ok(_) => {}
                    // The read reports it.
                    Err(_) => return true,
                }
                // SAFETY: one valid pollfd, no wait.
                if unsafe { libc::poll(&mut fd, 1, 0) } <= 0 {
                    return false;
                }
                match s.conn.read_tls(&mut s.sock) {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        }
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut fd, 1, 0) > 0 }
    }

    /// One RESP2 reply (redlock never asks for RESP3), parsed here rather than by the crate's
    /// parser, whose first use detects the CPU's features for `memchr`: a few CPUID
    /// instructions, each of which traps in a VM, on every run's start-up path. Error
    /// replies, rare, are handed to the crate's parser, which knows their kinds.
    fn reply(&mut self, depth: usize) -> RedisResult<Value> {
        let line = self.line()?;
        let Some((&kind, rest)) = line.split_first() else {
            return Err(malformed("an empty line"));
        };
        match kind {
            b'+' if rest == b"OK" => Ok(Value::Okay),
            b'+' => String::from_utf8(rest.to_vec())
                .map(Value::SimpleString)
                .map_err(|_| malformed("a status that is not UTF-8")),
            b'-' => {
                let mut error = line;
                error.extend_from_slice(b"\r\n");
                redis::parse_redis_value(&error)
            }
            b':' => Ok(Value::Int(number(rest)?)),
            b'$' => match usize::try_from(number(rest)?) {
                Ok(len) => self.bulk(len).map(Value::BulkString),
                Err(_) => Ok(Value::Nil),
            },
            b'*' => match usize::try_from(number(rest)?) {
                Ok(_) if depth >= 100 => Err(malformed("replies nested too deeply")),
                Ok(len) => {
                    let mut items = Vec::with_capacity(len.min(1024));
                    for _ in 0..len {
                        items.push(self.reply(depth + 1)?);
                    }
                    Ok(Value::Array(items))
                }
                Err(_) => Ok(Value::Nil),
            },
            _ => Err(malformed("a reply type redlock does not ask for")),
        }
    }

    /// The next line, without its CRLF.
    fn line(&mut self) -> RedisResult<Vec<u8>> {
        // How many unparsed bytes are known to start no CRLF (a read may split one).
        let mut scanned = 0;
        loop {
            let from = self.at + scanned;
            if let Some(end) = self.read[from..].windows(2).position(|w| w == b"\r\n") {
                let end = from + end;
                let line = self.read[self.at..end].to_vec();
                self.at = end + 2;
                return Ok(line);
            }
            scanned = (self.read.len() - self.at).saturating_sub(1);
            self.fill()?;
        }
    }

    /// A bulk string's `len` bytes and its CRLF.
    fn bulk(&mut self, len: usize) -> RedisResult<Vec<u8>> {
        while self.read.len() - self.at < len + 2 {
            self.fill()?;
        }
        let data = self.read[self.at..self.at + len].to_vec();
        if &self.read[self.at + len..self.at + len + 2] != b"\r\n" {
            return Err(malformed("a bulk string longer than it said"));
        }
        self.at += len + 2;
        Ok(data)
    }

    /// Reads what the socket has (waiting up to the read timeout), after what is unparsed.
    fn fill(&mut self) -> RedisResult<()> {
        self.read.drain(..self.start);
        self.at -= self.start;
        self.start = 0;
        let len = self.read.len();
        self.read.resize(len + 8192, 0);
        // A read that a signal interrupted is read again: on Linux a socket read with a timeout
        // fails with EINTR when the process was stopped (SIGSTOP, a frozen VM) and continued,
        // even without a handler (signal(7)), and a frozen redlock must go on where it was.
        let got = loop {
            match self.io.read(&mut self.read[len..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                got => break got,
            }
        };
        self.read.truncate(len + *got.as_ref().unwrap_or(&0));
        match got {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )
            .into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The read timeout alone (a subscriber's tick).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        Ok(self.io.set_read_timeout(timeout)?)
    }

    /// Both timeouts at once.
    pub fn set_timeouts(&self, timeout: Duration) -> RedisResult<()> {
        let timeout = Some(timeout.max(Duration::from_millis(1)));
        Ok(self.io.set_timeouts(timeout, timeout)?)
    }

    /// The socket, to wait on beside other files (when no reply is half read).
    pub fn fd(&self) -> RawFd {
        self.io.socket()
    }

    /// The address of the server at the other end (`None` on a unix socket): whether two
    /// connections reach the same server, as a Sentinel client asks after a failover.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        match &self.io {
            Io::Tcp(s) => s.peer_addr().ok(),
            Io::Unix(_) => None,
            Io::Tls(s) => s.sock.peer_addr().ok(),
        }
    }

    /// Subscribes to `channels`, reading the confirmations. After this only
    /// [`Wire::recv_response`] makes sense (each message is one reply).
    pub fn subscribe(&mut self, channels: &[String]) -> RedisResult<()> {
        let mut cmd = redis::cmd("SUBSCRIBE");
        for channel in channels {
            cmd.arg(channel);
        }
        self.send_packed_command(&cmd.get_packed_command())?;
        for _ in channels {
            if let Value::ServerError(e) = self.recv_response()? {
                return Err(e.into());
            }
        }
        Ok(())
    }
}

impl ConnectionLike for Wire {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send_packed_command(cmd)?;
        self.recv_response()
    }

    /// A pipeline's replies, read until the first transport failure. The redis crate reads
    /// every reply even after one timed out, so on a server that stopped answering a pipeline
    /// of N commands would wait out the timeout N times. After a failure the connection is out
    /// of step and is dropped by its owner (`nodes/mod.rs`). Error replies from the server are
    /// values here, as in the crate (the pipeline decides what they mean). No MULTI
    /// pipelines are sent.
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send_packed_command(cmd)?;
        let mut replies = Vec::with_capacity(count);
        for index in 0..offset + count {
            let reply = self.recv_response()?;
            if index >= offset {
                replies.push(reply);
            }
        }
        Ok(replies)
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

/// The `run_id` field of an `INFO` reply: random at each start of the server, and the same
/// through every address, alias and socket it listens on.
fn run_id(info: &[u8]) -> Option<String> {
    info.split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"run_id:"))
        .map(|id| String::from_utf8_lossy(id.trim_ascii()).into_owned())
        .filter(|id| !id.is_empty())
}

/// A reply that is not RESP.
fn malformed(what: &'static str) -> RedisError {
    (ErrorKind::Parse, "malformed reply", what.to_string()).into()
}

/// A RESP integer.
fn number(digits: &[u8]) -> RedisResult<i64> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| malformed("a number that is not one"))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Write;

    /// A connection whose server is `peer`.
    pub(in crate::redis) fn pair() -> (Wire, UnixStream) {
        let (ours, peer) = UnixStream::pair().expect("a socket pair");
        ours.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let wire = Wire {
            io: Io::Unix(ours),
            read: Vec::new(),
            at: 0,
            start: 0,
            db: 0,
            open: true,
        };
        (wire, peer)
    }

    #[test]
    fn replies_are_read_as_the_crate_reads_them() {
        let replies: &[&[u8]] = &[
            b"+OK\r\n",
            b"+QUEUED\r\n",
            b":-42\r\n",
            b"$5\r\nhe\r\no\r\n",
            b"$0\r\n\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+x\r\n",
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
            b"-WRONGPASS invalid username-password pair\r\n",
        ];
        let (mut wire, mut peer) = pair();
        for reply in replies {
            peer.write_all(reply).unwrap();
        }
        for reply in replies {
            let expected = redis::parse_redis_value(reply).unwrap();
            assert_eq!(wire.recv_response().unwrap(), expected, "{reply:?}");
        }
        assert!(!wire.reply_ready());
    }

    #[test]
    fn a_reply_split_anywhere_is_put_together() {
        let reply = b"*2\r\n$10\r\n0123\r\n6789\r\n:7\r\n";
        for cut in 1..reply.len() {
            let (mut wire, mut peer) = pair();
            let writer = {
                let (head, tail) = (reply[..cut].to_vec(), reply[cut..].to_vec());
                peer.write_all(&head).unwrap();
                std::thread::spawn(move || {
                    peer.write_all(&tail).unwrap();
                    peer
                })
            };
            assert_eq!(
                wire.recv_response().unwrap(),
                redis::parse_redis_value(reply).unwrap(),
                "cut at {cut}"
            );
            drop(writer.join());
        }
    }

    #[test]
    fn a_read_that_times_out_halfway_loses_nothing() {
        let (mut wire, mut peer) = pair();
        wire.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        peer.write_all(b"*2\r\n$3\r\nabc\r\n").unwrap();
        assert!(wire.reply_ready());
        let e = wire.recv_response().unwrap_err();
        assert!(e.is_timeout(), "{e}");
        peer.write_all(b":5\r\n").unwrap();
        assert_eq!(
            wire.recv_response().unwrap(),
            Value::Array(vec![Value::BulkString(b"abc".to_vec()), Value::Int(5)])
        );
        assert!(!wire.reply_ready());
    }

    #[test]
    fn identifying_asks_info_server_in_the_round_trip_of_auth_and_select() {
        use std::io::Read;
        let (mut wire, mut peer) = pair();
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:5e1f00d\r\ntcp_port:6379\r\n";
        peer.write_all(format!("+OK\r\n+OK\r\n${}\r\n{info}\r\n", info.len()).as_bytes())
            .unwrap();
        let id = wire.setup(None, Some("pw"), 2, true).unwrap();
        assert_eq!(id.unwrap().unwrap(), "5e1f00d");
        drop(wire);
        let mut sent = String::new();
        peer.read_to_string(&mut sent).unwrap();
        // The three commands of the pipeline: every word sent but the RESP headers (`*N`, `$N`).
        let words: Vec<&str> = sent
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .collect();
        assert_eq!(words, ["AUTH", "pw", "SELECT", "2", "INFO", "server"]);
    }

    #[test]
    fn a_server_that_does_not_say_who_it_is_is_an_error_beside_a_usable_connection() {
        let (mut wire, mut peer) = pair();
        peer.write_all(b"$9\r\n# Server\n\r\n-NOPERM User may not run INFO\r\n")
            .unwrap();
        let id = wire.setup(None, None, 0, true).unwrap().unwrap();
        assert_eq!(
            id.unwrap_err().kind(),
            ErrorKind::Server(redis::ServerErrorKind::ResponseError)
        );
        let id = wire.setup(None, None, 0, true).unwrap().unwrap();
        assert_eq!(id.unwrap_err().code(), Some("NOPERM"));
        // Without `identify` nothing is sent at all.
        assert_eq!(wire.setup(None, None, 0, false).unwrap(), None);
    }

    #[test]
    fn a_closed_connection_and_garbage_are_errors() {
        let (mut wire, peer) = pair();
        drop(peer);
        let e = wire.recv_response().unwrap_err();
        assert!(e.is_connection_dropped(), "{e}");
        assert!(!wire.is_open());
        let (mut wire, mut peer) = pair();
        peer.write_all(b"?what\r\n").unwrap();
        assert_eq!(wire.recv_response().unwrap_err().kind(), ErrorKind::Parse);
    }
}
