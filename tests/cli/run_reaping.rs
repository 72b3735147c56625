//! redlock reaps what it adopts: as a child subreaper it collects the command's orphaned
//! descendants, and as PID 1 of a container (a new PID namespace here) every orphan in it, so
//! no zombie piles up while the command runs.

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, Redlock, wait_until};

/// Whether the process table still has an entry for `pid`, zombie or not.
fn has_entry(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn orphans_of_the_command_are_reaped_while_it_runs() {
    let server = RedisServer::start();
    // The subshell starts a short sleep in the background and exits at once: the sleep is
    // orphaned, adopted by redlock, and must be reaped when it ends, long before the command.
    let mut run = Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "2s", "-c"])
        .arg("(sleep 0.2 & echo orphan $!); echo ready; read _ || true")
        .spawn();
    let orphan = run.expect_pid("orphan");
    run.expect_line("ready");
    wait_until(
        "the orphaned sleep to be reaped (no zombie left)",
        Duration::from_secs(5),
        || (!has_entry(orphan)).then_some(()),
    );
    run.close_stdin();
    run.exits_with(0);
}

#[test]
fn as_pid_1_redlock_reaps_every_orphan_and_passes_sigterm_on() {
    let server = RedisServer::start();
    // Inside a new PID namespace redlock is PID 1, as in a container. The command counts the
    // zombies it can see after an orphan of its own has ended, then waits for SIGTERM, which the
    // test sends to redlock from outside, as a kubelet does.
    let script = "trap 'echo got TERM; exit 0' TERM; (sleep 0.1 &); sleep 0.6; \
        z=0; for s in /proc/[0-9]*/stat; do read -r _ _ st _ < $s 2>/dev/null; \
        [ \"$st\" = Z ] && z=$((z+1)); done; echo \"zombies $z pid1 $(cat /proc/1/comm)\"; \
        while :; do sleep 0.05; done";
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(env!("CARGO_BIN_EXE_redlock"))
        .args([
            "--url",
            &server.url(),
            "run",
            "--key",
            "job",
            "--ttl",
            "2s",
            "-c",
            script,
        ])
        .env_remove("REDLOCK_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) must be installed, and this test run as root");
    let lines = line_reader(child.stdout.take().unwrap());
    let first = lines
        .recv_timeout(Duration::from_secs(10))
        .expect("the command's zombie count");
    assert_eq!(first, "zombies 0 pid1 redlock");
    // unshare's only child is redlock (PID 1 inside, an ordinary pid out here).
    let unshare = child.id();
    let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
        .expect("read unshare's children");
    let redlock: i32 = children.trim().parse().expect("one child pid");
    // SAFETY: kill(2) with a pid we just read; a stale pid at worst yields ESRCH.
    assert_eq!(unsafe { libc::kill(redlock, libc::SIGTERM) }, 0);
    let got = lines
        .recv_timeout(Duration::from_secs(10))
        .expect("the command's answer to SIGTERM");
    assert_eq!(got, "got TERM");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for unshare") {
            break status;
        }
        assert!(Instant::now() < deadline, "redlock as PID 1 did not finish");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "exit {status}\nstderr:\n{err}");
    assert!(!server.exists("job"), "the lock was not released");
}

fn line_reader(out: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
