//! Many contenders on one key: every one of them runs, one at a time; a thousand waiters run
//! in the order they queued.

use std::time::Duration;

use crate::support::stress::{CRITICAL_SECTION, expect_serial_sections};
use crate::support::{RedisServer, Redlock, TempDir};

const CONTENDERS: usize = 16;

#[test]
fn sixteen_waiting_contenders_all_run_one_at_a_time() {
    let server = RedisServer::start();
    let scratch = TempDir::new("stress");
    let log = scratch.join("sections.log");
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            Redlock::new(&server)
                .env("STRESS_LOG", &log)
                .args(["run", "--key", "stress", "--ttl", "5s", "--wait", "30s"])
                .args(["-c", CRITICAL_SECTION])
                .timeout(Duration::from_secs(60))
                .spawn()
        })
        .collect();
    for contender in contenders {
        contender.exits_with(0);
    }

    expect_serial_sections(&log, CONTENDERS);
}

/// Waiters in the thousand-waiter test.
const THOUSAND: usize = 1000;

/// Kills whatever of the waiters is still running when the test ends, however it ends.
struct Waiters(Vec<std::process::Child>);

impl Drop for Waiters {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Raises this process's open-file limit (inherited by the server the test starts) to what a
/// thousand connections need, within the hard limit.
fn allow_files(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct passed, nothing else.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < wanted {
            assert!(
                limit.rlim_max >= wanted,
                "the hard open-file limit ({}) is below the {wanted} a thousand waiters need",
                limit.rlim_max
            );
            limit.rlim_cur = wanted;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}

#[test]
fn a_thousand_waiters_on_one_key_all_run_first_come_first_served_one_at_a_time() {
    allow_files(4096);
    let server = RedisServer::start();
    let scratch = TempDir::new("thousand");
    let log = scratch.join("sections.log");
    let queue = crate::support::companion_key("thousand", "queue");
    let queued = || server.query::<usize>(&["ZCARD", &queue]);
    // The holder holds while a thousand waiters join one after another, which on a loaded
    // machine takes longer than a process's default deadline.
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "thousand", "--ttl", "30s", "-c"])
        .arg(crate::support::child::HOLD)
        .timeout(Duration::from_secs(600))
        .spawn();
    holder.expect_line("ready");
    // Each waiter joins once the one before it is queued: the queue's order is known. A
    // section logs the waiter's number where the oracle expects a pid.
    let mut waiters = Waiters(Vec::with_capacity(THOUSAND));
    for n in 0..THOUSAND {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_redlock"))
            .args(["--url", &server.url(), "run", "--key", "thousand"])
            .args(["--ttl", "10s", "--wait", "10m", "--", "bash", "-c"])
            .arg(format!(
                r#"echo "$EPOCHREALTIME {n} $REDLOCK_FENCE start" >> "$STRESS_LOG"; echo "$EPOCHREALTIME {n} $REDLOCK_FENCE end" >> "$STRESS_LOG""#
            ))
            .env("STRESS_LOG", &log)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a waiter");
        waiters.0.push(child);
        crate::support::wait_until(
            &format!("waiter {n} to join the queue"),
            Duration::from_secs(30),
            || (queued() == n + 1).then_some(()),
        );
    }
    // Each waiter holds one connection to the server while it waits (the holder has its own).
    let clients: usize = server
        .info("clients")
        .get("connected_clients")
        .and_then(|c| c.parse().ok())
        .expect("connected_clients");
    assert!(
        clients <= THOUSAND + 4,
        "{clients} connections for {THOUSAND} waiters"
    );
    holder.close_stdin();
    holder.exits_with(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    for (n, child) in waiters.0.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for a waiter") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waiter {n} had not run five minutes after the release"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "waiter {n} exited with {status}");
    }
    let sections = crate::support::sections::expect_exclusive_sections(&log);
    let order: Vec<u32> = sections.iter().map(|s| s.pid).collect();
    let expected: Vec<u32> = (0..THOUSAND as u32).collect();
    assert_eq!(
        order, expected,
        "the waiters did not run in the order they queued"
    );
    assert_eq!(queued(), 0, "the queue was not emptied");
}
