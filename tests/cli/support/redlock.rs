//! A builder around the `redlock` binary, in the manner of ripgrep's and just's test helpers.
//!
//! Every process the tests start has a deadline: `wait` kills redlock with SIGKILL and fails
//! the test when it runs longer than its timeout, and `Running`'s `Drop` kills a redlock the
//! test no longer waits for. On any failed expectation the whole story is printed: the
//! command line, the exit status, stdout and stderr.
//!
//! The child's environment is the test's, minus every `REDLOCK_*` variable (so a developer's
//! own settings never leak into a test), plus what the test sets explicitly.

use std::ffi::OsStr;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use std::{env, io};

use super::process::{Pid, send_signal, signal_name};
use super::redis_server::RedisServer;

/// How long any single redlock process may run before the test fails.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(20);

/// After redlock exits, how long to keep collecting output that is still in flight. A
/// descendant that outlived redlock may hold the pipes open; the test must not hang on it.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// Signals the tests send to redlock and expect it to handle. A test runner started from a
/// non-interactive shell in the background may have some of them ignored, and ignored
/// dispositions survive exec; redlock (and through it the child) starts with the defaults,
/// as it would from a terminal or an init system.
const RESET_SIGNALS: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

pub struct Redlock {
    command: Command,
    shown: Vec<String>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl Redlock {
    /// `run --key KEY --ttl 10s --replace --wait 30s` on `server`: a deploy that replaces the
    /// holder; its command follows (`-c`, or `--` and the command).
    pub fn replacing(server: &RedisServer, key: &str) -> Redlock {
        Redlock::new(server).args([
            "run",
            "--key",
            key,
            "--ttl",
            "10s",
            "--replace",
            "--wait",
            "30s",
        ])
    }

    /// `redlock --url redis://127.0.0.1:PORT` for `server`; add the subcommand and its flags.
    pub fn new(server: &RedisServer) -> Redlock {
        Redlock::without_url().args(["--url", &server.url()])
    }

    /// `redlock` with no URL at all: for URLs given otherwise, or none.
    pub fn without_url() -> Redlock {
        let binary = env!("CARGO_BIN_EXE_redlock");
        let mut command = Command::new(binary);
        for (name, _) in env::vars_os() {
            if name.to_string_lossy().starts_with("REDLOCK_") {
                command.env_remove(name);
            }
        }
        Redlock {
            command,
            shown: vec!["redlock".to_owned()],
            stdin: None,
            timeout: PROCESS_TIMEOUT,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Redlock {
        self.shown
            .push(shell_quote(&arg.as_ref().to_string_lossy()));
        self.command.arg(arg);
        self
    }

    pub fn args<I, S>(self, args: I) -> Redlock
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        args.into_iter().fold(self, Redlock::arg)
    }

    /// Runs redlock as if on another machine named `host`: in a UTS namespace of its own (the
    /// tests run as root) with that host name, which its records and audit log then name.
    pub fn on_host(mut self, host: &str) -> Redlock {
        self.shown.insert(0, format!("(on {host})"));
        let name = host.as_bytes().to_vec();
        // SAFETY: unshare(2) and sethostname(2) are plain system calls, async-signal-safe; the
        // closure reads only the bytes it owns.
        unsafe {
            self.command.pre_exec(move || {
                if libc::unshare(libc::CLONE_NEWUTS) != 0
                    || libc::sethostname(name.as_ptr().cast(), name.len()) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<OsStr>) -> Redlock {
        let value = value.as_ref();
        self.shown.insert(
            0,
            format!("{name}={}", shell_quote(&value.to_string_lossy())),
        );
        self.command.env(name, value);
        self
    }

    /// Bytes to feed on redlock's stdin (for `run`); without this, stdin is empty.
    pub fn stdin(mut self, bytes: &[u8]) -> Redlock {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// Starts redlock inside the cgroup v2 directory `dir` (as systemd starts a unit's main
    /// process in the unit's cgroup): the child writes itself to `cgroup.procs` before exec,
    /// and the spawn fails if the kernel refuses.
    pub fn in_cgroup(mut self, dir: &std::path::Path) -> Redlock {
        use std::os::unix::ffi::OsStrExt;
        let procs = std::ffi::CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .expect("a cgroup path without NUL");
        self.shown.insert(0, format!("[in {}]", dir.display()));
        // SAFETY: open, write and close are async-signal-safe; the path was made before the
        // fork and is only read.
        unsafe {
            self.command.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                let error = io::Error::last_os_error();
                libc::close(fd);
                if written == 1 { Ok(()) } else { Err(error) }
            });
        }
        self
    }

    /// Overrides the default deadline of `PROCESS_TIMEOUT`.
    pub fn timeout(mut self, timeout: Duration) -> Redlock {
        self.timeout = timeout;
        self
    }

    /// Runs redlock to completion (within its timeout) and returns what happened.
    pub fn run(self) -> Outcome {
        let input = self.stdin.clone().unwrap_or_default();
        let mut running = self.spawn();
        let stdin = running.stdin.take().expect("stdin is piped");
        thread::spawn(move || {
            let mut stdin = stdin;
            // The child may exit without reading; a broken pipe is not the test's concern.
            let _ = stdin.write_all(&input);
        });
        running.wait()
    }

    /// Runs redlock and expects exit status `code`; returns the outcome for further checks.
    pub fn exits_with(self, code: i32) -> Outcome {
        let outcome = self.run();
        outcome.expect_code(code);
        outcome
    }

    /// Starts redlock in the background. Its stdin is a pipe the test holds: a child that
    /// reads stdin (`read _`) runs until the test calls `close_stdin`.
    pub fn spawn(mut self) -> Running {
        let cmdline = self.shown.join(" ");
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: signal(2) and prctl(2) are async-signal-safe and touch no memory of this
        // process. PDEATHSIG makes a redlock whose test thread died go with it.
        unsafe {
            self.command.pre_exec(|| {
                for signal in RESET_SIGNALS {
                    libc::signal(signal, libc::SIG_DFL);
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = self
            .command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
        let pid = Pid::try_from(child.id()).expect("pid fits in pid_t");

        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (line_tx, lines) = mpsc::channel();
        let (done_tx, output_done) = mpsc::channel();
        let out = child.stdout.take().expect("stdout is piped");
        let err = child.stderr.take().expect("stderr is piped");
        {
            let (buffer, done) = (Arc::clone(&stdout), done_tx.clone());
            thread::spawn(move || {
                let mut reader = BufReader::new(out);
                let mut line = Vec::new();
                while let Ok(n) = reader.read_until(b'\n', &mut line) {
                    if n == 0 {
                        break;
                    }
                    lock(&buffer).extend_from_slice(&line);
                    let text = String::from_utf8_lossy(&line);
                    let _ = line_tx.send(text.trim_end_matches(['\n', '\r']).to_owned());
                    line.clear();
                }
                let _ = done.send(());
            });
        }
        {
            let buffer = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut reader = BufReader::new(err);
                let mut chunk = [0u8; 4096];
                while let Ok(n) = reader.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    lock(&buffer).extend_from_slice(&chunk[..n]);
                }
                let _ = done_tx.send(());
            });
        }
        let stdin = child.stdin.take();
        let (exit_tx, exit) = mpsc::channel();
        thread::spawn(move || {
            let status = child.wait();
            let _ = exit_tx.send((status, Instant::now()));
        });

        Running {
            cmdline,
            pid,
            started,
            deadline: started + self.timeout,
            timeout: self.timeout,
            stdin,
            lines,
            stdout,
            stderr,
            output_done,
            exit,
            exited: None,
        }
    }
}

/// A redlock process started with `Redlock::spawn`.
pub struct Running {
    cmdline: String,
    pid: Pid,
    started: Instant,
    deadline: Instant,
    timeout: Duration,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    output_done: Receiver<()>,
    exit: Receiver<(io::Result<ExitStatus>, Instant)>,
    exited: Option<(ExitStatus, Instant)>,
}

impl Running {
    /// redlock's own pid (not the command's).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Waits for the next stdout line equal to `expected`, skipping others; returns when it
    /// arrived. Fails when redlock exits first or the deadline passes.
    pub fn expect_line(&mut self, expected: &str) -> Instant {
        self.next_line_where(&format!("a line {expected:?}"), |line| {
            (line == expected).then_some(())
        });
        Instant::now()
    }

    /// Waits for the next stdout line starting with `prefix` and returns the rest of it.
    pub fn expect_line_starting(&mut self, prefix: &str) -> String {
        self.next_line_where(&format!("a line starting {prefix:?}"), |line| {
            line.strip_prefix(prefix).map(str::to_owned)
        })
    }

    /// Waits for the next stdout line that contains `part` and returns it.
    pub fn expect_line_containing(&mut self, part: &str) -> String {
        self.next_line_where(&format!("a line containing {part:?}"), |line| {
            line.contains(part).then(|| line.to_owned())
        })
    }

    /// Whether redlock has written `part` to stderr so far (for polling, e.g. a waiter's
    /// "waiting for" line with `-v`).
    pub fn stderr_contains(&self, part: &str) -> bool {
        String::from_utf8_lossy(&lock(&self.stderr)).contains(part)
    }

    /// Waits for a line `NAME PID` and returns the pid, e.g. for `echo "child $$"`.
    pub fn expect_pid(&mut self, name: &str) -> Pid {
        let rest = self.expect_line_starting(&format!("{name} "));
        rest.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name} pid {rest:?} is not a number: {e}"))
    }

    fn next_line_where<T>(&mut self, what: &str, mut matches: impl FnMut(&str) -> Option<T>) -> T {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(found) = matches(&line) {
                        return found;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill9();
                    let outcome = self.collect();
                    panic!("timed out waiting for {what} on stdout\n{outcome}");
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let outcome = self.collect();
                    panic!("stdout closed before {what}\n{outcome}");
                }
            }
        }
    }

    /// Closes redlock's stdin: a child blocked in `read` gets end-of-file and goes on.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn signal(&self, signal: i32) {
        assert!(
            self.exited.is_none(),
            "cannot send {} to {}: it already exited",
            signal_name(signal),
            self.cmdline
        );
        send_signal(self.pid, signal);
    }

    /// Whether redlock has exited (without waiting).
    pub fn has_exited(&mut self) -> bool {
        self.try_exit().is_some()
    }

    /// Sends `signal` unless redlock has exited already; returns whether it was sent.
    pub fn signal_if_running(&mut self, signal: i32) -> bool {
        if self.has_exited() {
            return false;
        }
        // SAFETY: kill(2) has no memory-safety preconditions; a process that exited a moment
        // ago (not yet reaped) yields ESRCH or nothing.
        unsafe { libc::kill(self.pid, signal) == 0 }
    }

    /// Kills redlock itself with SIGKILL (its child is not signalled by the test).
    pub fn kill9(&mut self) {
        if self.try_exit().is_none() {
            kill_quietly(self.pid);
        }
    }

    /// Waits (until the deadline) for redlock to exit and returns what happened. A redlock
    /// still running at the deadline is killed and the test fails.
    pub fn wait(mut self) -> Outcome {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if self.exited.is_none() {
            match self.exit.recv_timeout(left) {
                Ok((status, at)) => self.record_exit(status, at),
                Err(_) => {
                    self.kill9();
                    let outcome = self.collect();
                    panic!(
                        "redlock did not finish within {:?}; killed it\n{outcome}",
                        self.timeout
                    );
                }
            }
        }
        self.collect()
    }

    /// Waits for redlock to exit and expects exit status `code`.
    pub fn exits_with(self, code: i32) -> Outcome {
        let outcome = self.wait();
        outcome.expect_code(code);
        outcome
    }

    fn try_exit(&mut self) -> Option<(ExitStatus, Instant)> {
        if self.exited.is_none()
            && let Ok((status, at)) = self.exit.try_recv()
        {
            self.record_exit(status, at);
        }
        self.exited
    }

    fn record_exit(&mut self, status: io::Result<ExitStatus>, at: Instant) {
        let status = status.unwrap_or_else(|e| panic!("waiting for {}: {e}", self.cmdline));
        self.exited = Some((status, at));
    }

    /// What happened so far, after waiting (briefly) for redlock to exit and its output to end.
    fn collect(&mut self) -> Outcome {
        if self.exited.is_none()
            && let Ok((status, at)) = self.exit.recv_timeout(OUTPUT_GRACE)
        {
            self.record_exit(status, at);
        }
        self.stdin = None;
        let grace_end = Instant::now() + OUTPUT_GRACE;
        for _ in 0..2 {
            let left = grace_end.saturating_duration_since(Instant::now());
            if self.output_done.recv_timeout(left).is_err() {
                break;
            }
        }
        let (status, elapsed) = match self.exited {
            Some((status, at)) => (Some(status), at.duration_since(self.started)),
            None => (None, self.started.elapsed()),
        };
        Outcome {
            cmdline: self.cmdline.clone(),
            status,
            elapsed,
            exited_at: self.exited.map(|(_, at)| at),
            stdout: String::from_utf8_lossy(&lock(&self.stdout)).into_owned(),
            stderr: String::from_utf8_lossy(&lock(&self.stderr)).into_owned(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stdin = None;
        if self.try_exit().is_none() {
            kill_quietly(self.pid);
            let _ = self.exit.recv_timeout(OUTPUT_GRACE);
        }
    }
}

/// What a finished redlock did.
pub struct Outcome {
    pub cmdline: String,
    /// `None` only when redlock could not be waited for at all.
    pub status: Option<ExitStatus>,
    /// From spawn to exit.
    pub elapsed: Duration,
    pub exited_at: Option<Instant>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    pub fn expect_code(&self, code: i32) {
        if self.code() != Some(code) {
            panic!("expected exit status {code}\n{self}");
        }
    }

    /// Panics with the whole story and `message`.
    pub fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{self}");
    }

    /// redlock's own error line: exactly one stderr line starting `redlock:`.
    pub fn error_line(&self) -> &str {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|line| line.starts_with("redlock:"))
            .collect();
        match lines.as_slice() {
            [line] => line,
            _ => self.fail(&format!(
                "expected exactly one stderr line starting `redlock:`, found {}",
                lines.len()
            )),
        }
    }

    /// Expects the error line to contain one of `words` (case-insensitive).
    pub fn error_mentions(&self, words: &[&str]) -> &Outcome {
        self.expect_mention(self.error_line(), words)
    }

    /// The last stderr line starting `redlock:`: the final error line when warnings (a
    /// renewal that failed and was retried) may come before it.
    pub fn last_error_line(&self) -> &str {
        self.stderr
            .lines()
            .rfind(|line| line.starts_with("redlock:"))
            .unwrap_or_else(|| self.fail("expected a stderr line starting `redlock:`"))
    }

    /// Expects the last error line to contain one of `words` (case-insensitive).
    pub fn last_error_mentions(&self, words: &[&str]) -> &Outcome {
        self.expect_mention(self.last_error_line(), words)
    }

    fn expect_mention(&self, line: &str, words: &[&str]) -> &Outcome {
        let line = line.to_lowercase();
        if !words.iter().any(|w| line.contains(&w.to_lowercase())) {
            self.fail(&format!(
                "expected the error line to mention one of {words:?}"
            ));
        }
        self
    }

    /// Expects the error line not to contain `word` (case-insensitive).
    pub fn error_does_not_mention(&self, word: &str) -> &Outcome {
        if self
            .error_line()
            .to_lowercase()
            .contains(&word.to_lowercase())
        {
            self.fail(&format!("expected the error line not to mention {word:?}"));
        }
        self
    }

    /// Expects `secret` nowhere on stdout or stderr.
    pub fn never_shows(&self, secret: &str) -> &Outcome {
        if self.stdout.contains(secret) || self.stderr.contains(secret) {
            self.fail(&format!("output reveals the secret {secret:?}"));
        }
        self
    }

    /// The value of a `name=value` line the child printed on stdout.
    pub fn printed(&self, name: &str) -> String {
        let prefix = format!("{name}=");
        self.stdout
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(str::to_owned)
            .unwrap_or_else(|| self.fail(&format!("the command printed no `{name}=` line")))
    }

    /// The `fence=` line the child printed (`child::PRINT_LOCK_ENV`), as a number.
    pub fn printed_fence(&self) -> i64 {
        let fence = self.printed("fence");
        fence
            .parse()
            .unwrap_or_else(|e| self.fail(&format!("REDLOCK_FENCE {fence:?} is no integer: {e}")))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit status {code}"),
                (None, Some(signal)) => format!("killed by {} ({signal})", signal_name(signal)),
                _ => format!("{s}"),
            },
            None => "still running".to_owned(),
        };
        writeln!(f, "command: {}", self.cmdline)?;
        writeln!(f, "status:  {status} after {:?}", self.elapsed)?;
        writeln!(f, "--- stdout ---\n{}", self.stdout.trim_end())?;
        write!(f, "--- stderr ---\n{}\n---", self.stderr.trim_end())
    }
}

/// SIGKILL for a process that may have exited a moment ago (its exit not yet reported).
fn kill_quietly(pid: Pid) {
    // SAFETY: kill(2) has no memory-safety preconditions; ESRCH is the expected failure.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

fn lock(buffer: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    buffer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}
