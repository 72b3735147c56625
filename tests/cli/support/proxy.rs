//! A loopback TCP proxy in front of a master that delays what the master sends its replicas,
//! to play replication that lags (a replica in another zone, a slow link), and whose links the
//! test can cut at once, to play the master's host going away.
//!
//! Every connection to [`DelayingProxy::port`] is passed on to the upstream port. A connection
//! is a replica's when, in its handshake, the replica names its listening port (`REPLCONF
//! listening-port N`): from then on the bytes the master sends on it (the replication stream,
//! and its requests for acknowledgements) reach the replica the delay given for N later. The
//! replica's own bytes (its acknowledgements) and every other connection (clients, sentinels)
//! pass at once. [`DelayingProxy::cut`] stops listening and closes every connection, dropping
//! the bytes still delayed: what the master wrote in the last delay never reaches the replica.
//!
//! Threads: one accepting (it polls, so that a cut stops it at once), and three per connection
//! (one each way, and one that sends the delayed bytes when they are due). All of them end
//! when the connection or the proxy is closed; `Drop` cuts.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How often the accepting thread looks for a cut.
const ACCEPT_POLL: Duration = Duration::from_millis(2);
/// How much of a connection's first bytes is searched for the replica's listening port.
const HANDSHAKE: usize = 4096;

pub struct DelayingProxy {
    port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    upstream: u16,
    /// Replicas by their listening port, and how late the master's bytes reach each.
    delays: Mutex<Vec<(u16, Duration)>>,
    cut: AtomicBool,
    /// Both sockets of every connection, to close at a cut.
    sockets: Mutex<Vec<TcpStream>>,
}

impl DelayingProxy {
    /// A proxy to `127.0.0.1:upstream`, delaying nothing until told ([`DelayingProxy::delay`]).
    pub fn start(upstream: u16) -> DelayingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let shared = Arc::new(Shared {
            upstream,
            delays: Mutex::new(Vec::new()),
            cut: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || accept(&listener, &accepting));
        DelayingProxy { port, shared }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The master's bytes to the replica listening on `replica_port` arrive `late`, on the
    /// connections it makes from now on.
    pub fn delay(&self, replica_port: u16, late: Duration) {
        lock(&self.shared.delays).push((replica_port, late));
    }

    /// Stops listening (a new connection is refused) and closes every connection; bytes still
    /// delayed are dropped.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        let sockets = std::mem::take(&mut *lock(&self.shared.sockets));
        for socket in sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // The accepting thread drops the listener at its next poll.
        thread::sleep(ACCEPT_POLL * 3);
    }
}

impl Drop for DelayingProxy {
    fn drop(&mut self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        for socket in std::mem::take(&mut *lock(&self.shared.sockets)) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.cut.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let shared = Arc::clone(shared);
                thread::spawn(move || connect(client, &shared));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(_) => thread::sleep(ACCEPT_POLL),
        }
    }
}

/// Joins `client` to a fresh upstream connection and pumps both ways until either closes.
fn connect(client: TcpStream, shared: &Arc<Shared>) {
    let _ = client.set_nonblocking(false);
    let Ok(upstream) = TcpStream::connect_timeout(
        &([127, 0, 0, 1], shared.upstream).into(),
        Duration::from_secs(1),
    ) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    {
        let mut sockets = lock(&shared.sockets);
        if shared.cut.load(Ordering::SeqCst) {
            return;
        }
        for socket in [&client, &upstream] {
            if let Ok(clone) = socket.try_clone() {
                sockets.push(clone);
            }
        }
    }
    // How late the master's bytes go out on this connection, in nanoseconds (0 until the
    // connection shows itself as a replica's).
    let delay = Arc::new(AtomicU64::new(0));
    let (Ok(client_in), Ok(upstream_out)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    {
        let (shared, delay) = (Arc::clone(shared), Arc::clone(&delay));
        thread::spawn(move || to_master(client_in, upstream_out, &shared, &delay));
    }
    let (due_tx, due_rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    {
        let shared = Arc::clone(shared);
        thread::spawn(move || deliver(&due_rx, client, &shared));
    }
    from_master(upstream, &due_tx, &delay);
}

/// The client's bytes, passed on at once; a replica's handshake sets the connection's delay.
fn to_master(mut client: TcpStream, mut upstream: TcpStream, shared: &Shared, delay: &AtomicU64) {
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if seen.len() < HANDSHAKE {
            seen.extend_from_slice(&buf[..n]);
            if let Some(port) = listening_port(&seen) {
                let late = lock(&shared.delays)
                    .iter()
                    .rev()
                    .find(|(p, _)| *p == port)
                    .map_or(0, |(_, late)| late.as_nanos() as u64);
                delay.store(late, Ordering::SeqCst);
                seen = vec![0; HANDSHAKE];
            }
        }
        if upstream.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = upstream.shutdown(Shutdown::Write);
}

/// The master's bytes, each chunk stamped with when it is due.
fn from_master(mut upstream: TcpStream, due: &mpsc::Sender<(Instant, Vec<u8>)>, delay: &AtomicU64) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match upstream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let late = Duration::from_nanos(delay.load(Ordering::SeqCst));
        if due
            .send((Instant::now() + late, buf[..n].to_vec()))
            .is_err()
        {
            break;
        }
    }
}

/// Writes each chunk to the client when it is due, in order; nothing after a cut.
fn deliver(due: &mpsc::Receiver<(Instant, Vec<u8>)>, mut client: TcpStream, shared: &Shared) {
    let mut pending: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    loop {
        let next = match pending.pop_front() {
            Some(next) => next,
            None => match due.recv() {
                Ok(next) => next,
                Err(_) => break,
            },
        };
        let (at, bytes) = next;
        while let Some(wait) = at.checked_duration_since(Instant::now()) {
            // Gather what arrives meanwhile, so a cut is seen within a few milliseconds.
            match due.recv_timeout(wait.min(Duration::from_millis(5))) {
                Ok(later) => pending.push_back(later),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    thread::sleep(wait.min(Duration::from_millis(5)));
                }
            }
            if shared.cut.load(Ordering::SeqCst) {
                return;
            }
        }
        if shared.cut.load(Ordering::SeqCst) || client.write_all(&bytes).is_err() {
            return;
        }
    }
    let _ = client.shutdown(Shutdown::Write);
}

/// The port in `REPLCONF listening-port N` (as RESP: `$14\r\nlistening-port\r\n$4\r\n6380\r\n`),
/// once the handshake has come that far.
fn listening_port(seen: &[u8]) -> Option<u16> {
    const NAME: &[u8] = b"listening-port\r\n";
    let at = seen.windows(NAME.len()).position(|w| w == NAME)? + NAME.len();
    let rest = &seen[at..];
    let text = std::str::from_utf8(rest).ok()?;
    let mut lines = text.split("\r\n");
    let _length = lines.next()?.strip_prefix('$')?;
    let port = lines.next()?;
    // The number is complete once its line ended.
    text.matches("\r\n").count().ge(&2).then_some(())?;
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::listening_port;

    #[test]
    fn the_replicas_listening_port_is_read_from_its_handshake() {
        let handshake =
            b"*1\r\n$4\r\nPING\r\n*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$5\r\n41234\r\n";
        assert_eq!(listening_port(handshake), Some(41234));
        assert_eq!(listening_port(&handshake[..handshake.len() - 4]), None);
        assert_eq!(listening_port(b"*1\r\n$4\r\nPING\r\n"), None);
    }
}
