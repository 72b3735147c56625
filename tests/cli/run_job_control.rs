//! Job control: redlock itself is never stopped by TSTP/TTIN/TTOU — a stopped redlock would
//! renew nothing while the command, in its own process group, ran on. They stop the command
//! instead, and CONT continues it; a command that reads the terminal is lent the foreground.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::process::is_running;
use crate::support::{RedisServer, Redlock, wait_until};

/// The state letter of a process (`R`, `S`, `T`, ...), from /proc.
fn state(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let end = stat.rfind(')')?;
    stat[end + 1..].split_whitespace().next().map(str::to_owned)
}

/// The state letters of every process in process group `pgid`.
fn group_states(pgid: i32) -> Vec<String> {
    let mut states = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(end) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[end + 1..].split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) {
            states.push(fields[0].to_owned());
        }
    }
    states
}

/// Whether the job in group `pgid` is stopped: some process stopped, none able to run. A
/// shell that was starting a command when the stop came waits, uninterruptibly (`D`), for a
/// vfork child that the same stop caught before its exec; the job as a whole is stopped.
fn job_stopped(pgid: i32) -> bool {
    let states = group_states(pgid);
    states.iter().any(|s| s == "T") && states.iter().all(|s| matches!(s.as_str(), "T" | "D"))
}

#[test]
fn sigtstp_stops_the_command_while_the_lease_is_kept_and_sigcont_resumes_it() {
    let server = RedisServer::start();
    let mut run = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "-c"])
        .arg(r#"echo "child $$"; echo ready; while :; do sleep 0.05; done"#)
        .spawn();
    let child = run.expect_pid("child");
    run.expect_line("ready");
    run.signal(libc::SIGTSTP);
    wait_until("the command to be stopped", Duration::from_secs(5), || {
        job_stopped(child).then_some(())
    });
    // Two TTLs later redlock still runs, renews, and the command is still stopped.
    let token = server.get("job").expect("the lock is held");
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        assert_eq!(
            server.get("job").as_deref(),
            Some(token.as_str()),
            "lease lost"
        );
        assert_ne!(
            state(run.pid()).as_deref(),
            Some("T"),
            "redlock itself stopped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(job_stopped(child), "{:?}", group_states(child));
    run.signal(libc::SIGCONT);
    wait_until("the command to run again", Duration::from_secs(5), || {
        group_states(child).iter().all(|s| s != "T").then_some(())
    });
    run.signal(libc::SIGTERM);
    run.exits_with(143);
    assert!(!is_running(child));
    assert!(!server.exists("job"));
}

#[test]
fn a_command_that_reads_the_terminal_is_lent_it() {
    let server = RedisServer::start();
    // script(1) gives redlock a terminal of its own; cat, in redlock's child process group,
    // must still be able to read from it.
    let command = format!(
        "{} --url {} run --key job --ttl 1s -- cat",
        env!("CARGO_BIN_EXE_redlock"),
        server.url()
    );
    let mut script = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("REDLOCK_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from bsdutils must be installed");
    let mut stdin = script.stdin.take().unwrap();
    // Wait until cat holds the lock before typing; then end the input with ^D.
    wait_until("the lock to be taken", Duration::from_secs(10), || {
        server.exists("job").then_some(())
    });
    // A whole line, then ^D at the start of the next: cat reads the line, then end of input.
    stdin.write_all(b"typed line\n\x04").unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = script.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = script.kill();
            panic!("redlock under a terminal did not finish: the command stayed stopped");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = script.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(status.success(), "exit {status}, output:\n{stdout}");
    // The terminal echoes the line and cat prints it again.
    assert!(
        stdout.matches("typed line").count() >= 2,
        "output:\n{stdout}"
    );
    assert!(!server.exists("job"));
}

/// A redlock stopped (SIGSTOP: a frozen VM, a debugger) while it waits for Redis's answer goes
/// on when it is continued: on Linux its socket read, which has a timeout, then fails with EINTR
/// even without a signal handler (signal(7)), and that read is simply read again.
#[test]
fn a_redlock_stopped_while_it_waits_for_an_answer_goes_on_when_continued() {
    let server = RedisServer::start();
    // The server takes the connection (the kernel does) and the acquire, and answers nothing.
    server.pause();
    let run = Redlock::new(&server)
        .args(["--timeout", "30s", "run", "--key", "job", "--ttl", "10s"])
        .args(["--", "true"])
        .spawn();
    let pid = run.pid();
    // Its main thread blocked in recvfrom(2) or read(2) on the acquire's answer.
    let reads: &[&str] = if cfg!(target_arch = "aarch64") {
        &["207", "63"]
    } else {
        &["45", "0"]
    };
    wait_until("redlock to wait in a read", Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .ok()
            .filter(|s| {
                s.split_whitespace()
                    .next()
                    .is_some_and(|n| reads.contains(&n))
            })
    });
    run.signal(libc::SIGSTOP);
    wait_until("redlock to stop", Duration::from_secs(5), || {
        (state(pid).as_deref() == Some("T")).then_some(())
    });
    server.resume();
    run.signal(libc::SIGCONT);
    run.exits_with(0);
}
