//! A `MONITOR` connection: every command the server executes, in order, with who sent it.
//!
//! Used to count round trips. Commands a Lua script runs show up as coming from `lua`, so
//! what a client sent and what a script did inside one round trip can be told apart. What the
//! harness sent itself is left out: its marker, and whatever its connection sent when it was
//! made (the `redis` crate's `CLIENT SETINFO`, which Valkey and Redis 7.2 and later show).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::redis_server::RedisServer;

const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Monitor {
    reader: BufReader<UnixStream>,
}

/// One command as MONITOR reported it.
#[derive(Debug)]
pub struct Monitored {
    /// When the server executed it: seconds since the Unix epoch, on the server's clock.
    pub at: f64,
    /// `lua` for commands run by a script, otherwise the client's address.
    pub client: String,
    /// The command name and its arguments.
    pub args: Vec<String>,
}

impl Monitored {
    pub fn is_from_script(&self) -> bool {
        self.client == "lua"
    }

    /// True when any argument (after the command name) contains `text`.
    pub fn mentions(&self, text: &str) -> bool {
        self.args.iter().skip(1).any(|arg| arg.contains(text))
    }
}

impl Monitor {
    pub fn start(server: &RedisServer) -> Monitor {
        let mut stream = UnixStream::connect(server.socket_path()).expect("connect for MONITOR");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set read timeout");
        stream.write_all(b"MONITOR\r\n").expect("send MONITOR");
        let mut reader = BufReader::new(stream);
        let mut reply = String::new();
        reader.read_line(&mut reply).expect("MONITOR reply");
        assert_eq!(reply.trim_end(), "+OK", "MONITOR was refused");
        Monitor { reader }
    }

    /// Everything executed since the monitor started (or since the previous call), up to a
    /// marker command this call sends itself, but for the commands of the connection that sent
    /// the marker: the harness's own.
    pub fn commands_so_far(&mut self, server: &RedisServer) -> Vec<Monitored> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let marker = format!(
            "monitor-marker-{}-{}",
            process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let _: String = server.query(&["ECHO", &marker]);
        let mut commands = Vec::new();
        loop {
            let mut line = String::new();
            let n = self
                .reader
                .read_line(&mut line)
                .expect("read MONITOR output");
            assert!(n > 0, "MONITOR connection closed");
            let Some(command) = parse_line(line.trim_end()) else {
                continue;
            };
            if command.args.len() == 2
                && command.args[0].eq_ignore_ascii_case("echo")
                && command.args[1] == marker
            {
                commands.retain(|c: &Monitored| c.client != command.client);
                return commands;
            }
            commands.push(command);
        }
    }
}

/// Parses `+1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"`.
fn parse_line(line: &str) -> Option<Monitored> {
    let rest = line.strip_prefix('+')?;
    let at = rest.split_whitespace().next()?.parse().ok()?;
    let open = rest.find('[')?;
    let close = open + rest[open..].find(']')?;
    let client = rest[open + 1..close].split_once(' ')?.1.to_owned();
    let args = parse_quoted(&rest[close + 1..]);
    Some(Monitored { at, client, args })
}

/// Redis writes each argument as a double-quoted string with C-like escapes.
fn parse_quoted(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut bytes = Vec::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => bytes.push(b'\n'),
                    Some('r') => bytes.push(b'\r'),
                    Some('t') => bytes.push(b'\t'),
                    Some('a') => bytes.push(7),
                    Some('b') => bytes.push(8),
                    Some('x') => {
                        let hex: String = chars.by_ref().take(2).collect();
                        bytes.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                    }
                    Some(other) => {
                        let mut buf = [0; 4];
                        bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                    None => break,
                },
                other => {
                    let mut buf = [0; 4];
                    bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        args.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_are_split_into_client_and_arguments() {
        let line = r#"+1700000000.123456 [0 lua] "SET" "a \"b\"" "x\x41\n""#;
        let command = parse_line(line).expect("parses");
        assert_eq!(command.client, "lua");
        assert!((command.at - 1_700_000_000.123_456).abs() < 1e-6);
        assert_eq!(command.args, ["SET", "a \"b\"", "xA\n"]);
    }
}
