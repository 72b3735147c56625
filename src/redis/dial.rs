//! Opening the socket of a connection (`wire.rs`): a unix socket or TCP, every timeout set, and
//! why none could be opened in words a message can use (`reach.rs`).

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A unix socket connection with both timeouts set, the connect bounded by `connect` (the
/// send timeout bounds it: a server whose backlog is full does not accept).
pub(super) fn unix(
    path: &std::path::Path,
    connect: Duration,
    timeout: Duration,
) -> io::Result<UnixStream> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: a new socket; on success it is owned by the UnixStream below and nothing else.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    stream.set_write_timeout(Some(connect))?;
    // SAFETY: sockaddr_un is plain data; zeroed is a valid empty address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the socket path {} is too long", path.display()),
        ));
    }
    for (to, from) in addr.sun_path.iter_mut().zip(bytes) {
        *to = *from as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
    let rc = unsafe { libc::connect(fd, (&raw const addr).cast(), len) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        // A connect that ran out of its send timeout says EAGAIN/EINPROGRESS.
        return Err(match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EINPROGRESS) => {
                io::Error::new(io::ErrorKind::TimedOut, "connecting timed out")
            }
            _ => e,
        });
    }
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

/// Why no TCP connection was made, kept inside the `io::Error` so that messages can tell an
/// unknown host and a handshake nobody answered from other failures (`reach.rs`).
#[derive(Debug)]
pub enum Unconnected {
    /// The host name resolves to no address: the host, and the resolver's words.
    UnknownHost(String, String),
    /// The TCP handshake got no answer within the connect timeout.
    NoHandshake,
}

impl std::fmt::Display for Unconnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unconnected::UnknownHost(host, why) => write!(f, "cannot resolve {host}: {why}"),
            Unconnected::NoHandshake => f.write_str("connecting timed out"),
        }
    }
}

impl std::error::Error for Unconnected {}

/// A TCP connection with Nagle off and both timeouts set, tried on each address of `host`.
pub(super) fn tcp(
    host: &str,
    port: u16,
    connect: Duration,
    timeout: Duration,
) -> io::Result<TcpStream> {
    // Not `NotFound`: the redis crate reads that kind as a refused connection.
    let unknown = |why: String| io::Error::other(Unconnected::UnknownHost(host.into(), why));
    let addrs = (host, port).to_socket_addrs().map_err(|e| {
        let why = e.to_string();
        let why = why.strip_prefix("failed to lookup address information: ");
        unknown(why.unwrap_or(&e.to_string()).to_string())
    })?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, connect) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                last = Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    Unconnected::NoHandshake,
                ));
            }
            // No route to it: Linux refuses the connect at once, with EINVAL for a blackhole
            // route (what a partition often is), whose own words ("Invalid argument") would
            // blame the caller.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::ENETUNREACH | libc::EHOSTUNREACH)
                ) =>
            {
                last = Some(io::Error::new(
                    io::ErrorKind::HostUnreachable,
                    format!("cannot reach {addr}: no route to it (the network is cut there?)"),
                ));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| unknown("no address".into())))
}
