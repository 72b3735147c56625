//! Nothing escapes the lease: the whole process tree of the command, whatever redlock itself
//! does (frozen, killed, its stderr full), in both rooms (`--contain auto`, which is a cgroup
//! of its own where the tests may create one, and `--contain descendants`).

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::process::{Pid, is_running};
use crate::support::sections::{CpuHogs, Dice, SECTION, expect_exclusive_sections};
use crate::support::{RedisServer, Redlock, TempDir, says, wait_until, wait_until_gone};

const ROOMS: [&str; 2] = ["auto", "descendants"];

/// Appends a stamped `tick` line to `$LOG` every 10 ms from a process that `timeout` moved
/// into a process group of its own; prints `ticker PID` and `ready` first.
const TICKER: &str = r#"timeout 60 bash -c 'echo "ticker $$"; echo ready; while :; do echo "$EPOCHREALTIME tick" >> "$LOG"; sleep 0.01; done'"#;

/// `redlock run --key job --ttl TTL --contain ROOM -c SCRIPT`, started.
fn hold(
    server: &RedisServer,
    ttl: &str,
    room: &str,
    script: impl AsRef<std::ffi::OsStr>,
) -> crate::support::redlock::Running {
    Redlock::new(server)
        .args(["run", "--key", "job", "--ttl", ttl, "--contain", room, "-c"])
        .arg(script)
        .spawn()
}

fn stamps(log: &std::path::Path, word: &str) -> Vec<f64> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.ends_with(word) || l.starts_with(word))
        .filter_map(|l| l.split(' ').find_map(|w| w.parse::<f64>().ok()))
        .collect()
}

#[test]
fn a_frozen_redlock_cannot_keep_its_command_running_past_the_lease() {
    for room in ROOMS {
        let server = RedisServer::start();
        let scratch = TempDir::new("frozen");
        let log = scratch.join("ticks.log");
        let mut holder = Redlock::new(&server)
            .env("LOG", &log)
            .args([
                "run",
                "--key",
                "job",
                "--ttl",
                "1s",
                "--contain",
                room,
                "-c",
                TICKER,
            ])
            .spawn();
        let ticker = holder.expect_pid("ticker");
        holder.expect_line("ready");
        let frozen_at = Instant::now();
        holder.signal(libc::SIGSTOP);

        // The keeper kills the ticker at the kill point, although redlock never runs again.
        let gone = wait_until_gone(ticker, "the frozen holder's ticker", Duration::from_secs(5));
        assert!(
            gone - frozen_at < Duration::from_millis(1000 + 1500),
            "[{room}] the ticker ran {:?} after redlock froze, past a 1s lease",
            gone - frozen_at
        );
        let second = Redlock::new(&server)
            .env("LOG", &log)
            .args(["run", "--key", "job", "--ttl", "1s", "--wait", "10s"])
            .args(["-c", r#"echo "$(date +%s.%N) second" >> "$LOG""#])
            .exits_with(0);
        let last_tick = stamps(&log, "tick").into_iter().fold(0.0, f64::max);
        let second_started = stamps(&log, "second")[0];
        assert!(
            last_tick < second_started,
            "[{room}] the frozen holder's command ticked at {last_tick} after the next holder \
             started at {second_started}\n{second}"
        );

        holder.signal(libc::SIGCONT);
        holder
            .exits_with(76)
            .error_mentions(says::LEASE_LOST)
            .error_mentions(&["keeper"]);
    }
}

#[test]
fn a_redlock_killed_at_once_takes_the_background_job_with_it() {
    for room in ROOMS {
        for start in ["sleep 300 &", "setsid sleep 300 &"] {
            let server = RedisServer::start();
            let mut holder = hold(
                &server,
                "5s",
                room,
                format!(r#"{start} echo "child $!"; wait"#),
            );
            let job = holder.expect_pid("child");
            holder.kill9();
            wait_until_gone(job, &format!("[{room}] {start}"), Duration::from_secs(5));
        }
    }
}

/// The same, many times over in the room of redlock's descendants, where the keeper finds what
/// the command started in a session of its own only through the command: killed at once,
/// redlock leaves the command's process group orphaned, and the keeper must not stop that group
/// before the kernel is done with redlock's exit, or the kernel's SIGHUP for a stopped orphaned
/// group kills the command first and its escaped child goes to init, out of the walk's reach.
#[test]
fn a_redlock_killed_at_once_never_leaves_an_escaped_job_behind() {
    let server = RedisServer::start();
    for round in 0..150 {
        let mut holder = Redlock::new(&server)
            .args(["run", "--key", &format!("job{round}"), "--ttl", "5s"])
            .args(["--contain", "descendants", "-c"])
            .arg(r#"setsid sleep 300 & echo "child $!"; wait"#)
            .spawn();
        let job = holder.expect_pid("child");
        holder.kill9();
        wait_until_gone(
            job,
            &format!("round {round}: setsid sleep 300 &"),
            Duration::from_secs(5),
        );
    }
    // Killed once its heartbeat thread runs (the first renewal is due at a third of the TTL):
    // each of redlock's threads exits on its own, and the last one out re-parents the command.
    for round in 0..5 {
        let mut holder = Redlock::new(&server)
            .args([
                "run",
                "--key",
                &format!("renewed{round}"),
                "--ttl",
                "1500ms",
            ])
            .args(["--contain", "descendants", "-c"])
            .arg(r#"setsid sleep 300 & echo "child $!"; wait"#)
            .spawn();
        let job = holder.expect_pid("child");
        let status = format!("/proc/{}/status", holder.pid());
        wait_until(
            "redlock's heartbeat thread",
            Duration::from_secs(10),
            || {
                fs::read_to_string(&status)
                    .is_ok_and(|s| s.lines().any(|l| l == "Threads:\t2"))
                    .then_some(())
            },
        );
        holder.kill9();
        wait_until_gone(
            job,
            &format!("renewed round {round}: setsid sleep 300 &"),
            Duration::from_secs(5),
        );
    }
}

/// The keeper closes its copy of redlock's connection as it starts (`keep_only`): the server
/// sees the connection end once the run is over, whether redlock exits or is killed while its
/// command runs.
#[test]
fn the_server_sees_the_connection_end_once_the_run_is_over() {
    let server = RedisServer::start();
    let clients = || server.info_number("clients", "connected_clients");
    // The test's own connection, once the server has seen the end of the start-up's PING
    // probes (under load it may count one still).
    let alone = 1;
    wait_until(
        "the start-up probes' connections to end",
        Duration::from_secs(5),
        || (clients() == alone).then_some(()),
    );
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    wait_until(
        "the run's connection to end",
        Duration::from_secs(5),
        || (clients() == alone).then_some(()),
    );
    let mut holder = hold(&server, "5s", "auto", r#"echo "child $$"; exec sleep 300"#);
    let child = holder.expect_pid("child");
    assert!(
        clients() > alone,
        "the holder's connection is open while it runs"
    );
    holder.kill9();
    wait_until_gone(
        child,
        "the command of a killed redlock",
        Duration::from_secs(5),
    );
    wait_until(
        "the killed run's connection to end",
        Duration::from_secs(5),
        || (clients() == alone).then_some(()),
    );
}

#[test]
fn sigterm_reaches_a_job_that_timeout_moved_to_its_own_group() {
    for room in ROOMS {
        let server = RedisServer::start();
        let mut holder = hold(
            &server,
            "5s",
            room,
            r#"timeout 60 sh -c 'echo "child $$"; exec sleep 300'"#,
        );
        let job = holder.expect_pid("child");
        holder.signal(libc::SIGTERM);
        holder.exits_with(143);
        assert!(!is_running(job), "[{room}] the job outlived redlock");
        assert_eq!(
            server.get("job"),
            None,
            "[{room}] the lock was not released"
        );
    }
}

#[test]
fn a_lost_lease_stops_processes_outside_the_commands_group() {
    for room in ROOMS {
        for start in [
            r#"timeout 60 sh -c 'echo "child $$"; exec sleep 300'"#,
            r#"setsid sleep 300 & echo "child $!"; wait"#,
            r#"bash -c 'set -m; sleep 300 & echo "child $!"; wait'"#,
        ] {
            let server = RedisServer::start();
            let mut holder = hold(&server, "2s", room, start);
            let job = holder.expect_pid("child");
            let _: i64 = server.query(&["DEL", "job"]);
            holder.exits_with(76).error_mentions(says::LEASE_LOST);
            assert!(
                !is_running(job),
                "[{room}] {start}: the job outlived the lease"
            );
        }
    }
}

#[test]
fn a_detached_worker_left_behind_is_stopped_before_the_release() {
    for room in ROOMS {
        let server = RedisServer::start();
        let scratch = TempDir::new("detached");
        let marker = scratch.join("worker");
        // The worker notes when it is told to stop; the release must come after that.
        let worker = format!(
            r#"setsid sh -c 'trap "echo stopped > {}; exit 0" TERM; echo "child $$"; while :; do sleep 0.05; done' &
               sleep 0.2"#,
            marker.display()
        );
        let mut holder = hold(&server, "5s", room, &worker);
        let job = holder.expect_pid("child");
        holder.exits_with(0);
        assert!(
            !is_running(job),
            "[{room}] the detached worker outlived redlock"
        );
        assert!(marker.exists(), "[{room}] the worker was not asked to stop");
        assert_eq!(server.get("job"), None);
    }
}

#[test]
fn forwarded_signals_reach_processes_outside_the_commands_group() {
    for room in ROOMS {
        let server = RedisServer::start();
        // The shell itself gets USR1 too (its group does); it waits for its detached child to
        // act on it before it exits.
        let script = r#"trap ':' USR1
            setsid sh -c 'trap "echo got-usr1; exit 0" USR1; echo ready; while :; do sleep 0.05; done' &
            child=$!
            wait $child; wait $child"#;
        let mut holder = hold(&server, "5s", room, script);
        holder.expect_line("ready");
        holder.signal(libc::SIGUSR1);
        holder.expect_line("got-usr1");
        holder.exits_with(0);
    }
}

/// A pipe whose read end the test holds but never reads, filled to the brim.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let flags = libc::fcntl(write.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let chunk = [b'x'; 4096];
    // SAFETY: writing from a local buffer to our own descriptor.
    while unsafe { libc::write(write.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    // SAFETY: as above; the write end goes to redlock blocking, as a shell would give it.
    unsafe {
        let flags = libc::fcntl(write.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    (read, write)
}

fn drain(read: &OwnedFd) -> String {
    // SAFETY: fcntl and read on our own descriptor, into a local buffer.
    unsafe {
        let flags = libc::fcntl(read.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(read.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        // SAFETY: as above.
        let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).replace('x', "")
}

/// The command for `redlock_with_stderr`: writes its pid to `pidfile`, then becomes `sleep`.
fn sleeper(pidfile: &std::path::Path, seconds: &str) -> String {
    format!("echo $$ > '{}'; exec sleep {seconds}", pidfile.display())
}

/// The pid `sleeper` wrote, once it has.
fn sleeper_pid(pidfile: &std::path::Path) -> Pid {
    wait_until("the command to start", Duration::from_secs(10), || {
        fs::read_to_string(pidfile).ok()?.trim().parse().ok()
    })
}

/// Once the command is gone, empties the full pipe while redlock is still there, so that what
/// redlock writes from then on gets through: its last line, written after the release, which
/// says how many earlier lines the full pipe cost. Returns what came through, read until
/// redlock (and its keeper) closed their ends.
fn drain_once_gone(read: OwnedFd, command: Pid) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        wait_until_gone(command, "the command", Duration::from_secs(30));
        let mut said = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let mut fd = libc::pollfd {
                fd: read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on our own descriptor, one valid pollfd.
            unsafe { libc::poll(&mut fd, 1, 100) };
            let chunk = drain(&read);
            said.push_str(&chunk);
            if fd.revents & libc::POLLHUP != 0 && fd.revents & libc::POLLIN == 0 {
                break;
            }
        }
        said
    })
}

fn redlock_with_stderr(server: &RedisServer, stderr: OwnedFd, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redlock"));
    command
        .args(["--url", &server.url(), "-v"])
        .args(args)
        .env_remove("REDLOCK_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    command
}

#[test]
fn a_full_stderr_never_holds_up_renewals_and_the_drops_are_counted() {
    let server = RedisServer::start();
    let scratch = TempDir::new("full-stderr");
    let pidfile = scratch.join("pid");
    let (read, write) = full_pipe();
    let started = Instant::now();
    // Three renewals are due while the command runs; each logs a line nobody can take.
    let mut redlock = redlock_with_stderr(
        &server,
        write,
        &[
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            &sleeper(&pidfile, "1.5"),
        ],
    )
    .spawn()
    .expect("start redlock");
    let said = drain_once_gone(read, sleeper_pid(&pidfile));
    let status = redlock.wait().expect("wait for redlock");
    let said = said.join().expect("drain stderr");
    assert_eq!(
        status.code(),
        Some(0),
        "the lease was not kept with stderr full"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The pipe had room again only once the command was gone: the timeline's lines were
    // dropped, and the last line, after the release, says how many.
    assert!(
        said.contains("messages were dropped: stderr was full"),
        "the count of dropped lines did not come through: {said:?}"
    );
}

#[test]
fn a_full_stderr_never_holds_up_the_kill_of_a_lost_lease() {
    let server = RedisServer::start();
    let scratch = TempDir::new("full-stderr");
    let pidfile = scratch.join("pid");
    let (read, write) = full_pipe();
    let mut child = redlock_with_stderr(
        &server,
        write,
        &[
            "run",
            "--key",
            "job",
            "--ttl",
            "1s",
            "-c",
            &sleeper(&pidfile, "300"),
        ],
    )
    .spawn()
    .expect("start redlock");
    let said = drain_once_gone(read, sleeper_pid(&pidfile));
    wait_until("the lock to be taken", Duration::from_secs(5), || {
        server.get("job").map(|_| ())
    });
    let _: i64 = server.query(&["DEL", "job"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for redlock") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("redlock did not stop its command with stderr full");
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(76));
    // The final line, written after the release, found the room the test made once the
    // command was gone.
    let said = said.join().expect("drain stderr");
    assert!(
        said.contains("lost") && said.contains("earlier messages were dropped"),
        "the final line did not come through whole: {said:?}"
    );
}

/// The redlock whose command is writing the last section of `log`, if it is still writing
/// (and, with `just_started`, has written only its `start` line).
fn supervisor_of_running_section(log: &std::path::Path, just_started: bool) -> Option<Pid> {
    let text = fs::read_to_string(log).ok()?;
    let last = text.lines().last()?;
    let mut words = last.split(' ').skip(1);
    let pid: Pid = words.next()?.parse().ok()?;
    let what = words.nth(1);
    if what == Some("end") || (just_started && what != Some("start")) || !is_running(pid) {
        return None;
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split(' ').nth(1)?.parse().ok()
}

/// Contenders take turns on one key while a chaos thread freezes their redlocks (SIGSTOP) for
/// random times up to twice the TTL; the stamped sections must never overlap. The first freeze
/// is sure to cut a section short (a holder frozen for twice the TTL just as its section of 1.5
/// TTL starts: only the keeper can stop it, at the kill point), and the test checks that the
/// log shows at least one cut section, so that it cannot pass without the keeper having acted.
fn frozen_supervisors_stress(ttl: &str, ttl_ms: u64, seconds: u64, hogs: usize) {
    const CONTENDERS: usize = 6;
    let _hogs = CpuHogs::start(hogs);
    let server = RedisServer::start();
    let scratch = TempDir::new("freeze-stress");
    let log = scratch.join("sections.log");
    let seed = Dice::seed_from_clock();
    let stop = Arc::new(AtomicBool::new(false));
    let current: Arc<Vec<AtomicI32>> =
        Arc::new((0..CONTENDERS).map(|_| AtomicI32::new(0)).collect());
    let until = Instant::now() + Duration::from_secs(seconds);

    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|i| {
            let (url, log, current) = (server.url(), log.clone(), Arc::clone(&current));
            let ttl = ttl.to_string();
            let tick = format!("{:.3}", ttl_ms as f64 / 20_000.0);
            thread::spawn(move || {
                let mut turns = 0;
                while Instant::now() < until {
                    let run = Redlock::without_url()
                        .args(["--url", &url])
                        .env("STRESS_LOG", &log)
                        // Sections of about 1.5 TTL: a freeze longer than what is left of the
                        // lease catches the command half-way, and the keeper must end it.
                        .env("TICKS", "30")
                        .env("TICK", &tick)
                        .args([
                            "run", "--key", "stress", "--ttl", &ttl, "--wait", "60s", "--",
                        ])
                        .args(SECTION)
                        .timeout(Duration::from_secs(120))
                        .spawn();
                    current[i].store(run.pid(), Ordering::SeqCst);
                    let outcome = run.wait();
                    current[i].store(0, Ordering::SeqCst);
                    // 76: frozen past its kill point, then continued. 69: a waiter frozen
                    // just after its queued attempt was sent, granted meanwhile, and continued
                    // too late to run anything under that grant, which it gives back.
                    let too_late = outcome.code() == Some(69)
                        && outcome.stderr.contains("too late to run anything under");
                    assert!(
                        matches!(outcome.code(), Some(0 | 76)) || too_late,
                        "unexpected exit\n{outcome}"
                    );
                    turns += 1;
                }
                turns
            })
        })
        .collect();

    let chaos = {
        let (stop, current, log) = (Arc::clone(&stop), Arc::clone(&current), log.clone());
        thread::spawn(move || {
            let mut dice = Dice::new(seed);
            // The first freeze: a holder whose section has only just started, frozen for
            // longer than any lease it can hold. Polled until one starts (sections start
            // one after another throughout the test).
            let mut freezes = 0;
            while freezes == 0 && !stop.load(Ordering::SeqCst) {
                let Some(pid) = supervisor_of_running_section(&log, true) else {
                    thread::sleep(Duration::from_millis(2));
                    continue;
                };
                // SAFETY: signals to a pid of ours; a process that already exited gives ESRCH.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                thread::sleep(Duration::from_millis(2 * ttl_ms));
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                freezes += 1;
            }
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50 + dice.below(200)));
                // Mostly the holder, caught in the middle of its section; sometimes a waiter.
                let pid: Pid = match dice.below(3) {
                    0 => current[dice.below(CONTENDERS as u64) as usize].load(Ordering::SeqCst),
                    _ => supervisor_of_running_section(&log, false).unwrap_or(0),
                };
                if pid <= 0 {
                    continue;
                }
                // SAFETY: signals to a pid of ours; a process that already exited gives ESRCH.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                thread::sleep(Duration::from_millis(dice.below(2 * ttl_ms)));
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                freezes += 1;
            }
            freezes
        })
    };
    let turns: usize = contenders
        .into_iter()
        .map(|c| c.join().expect("contender"))
        .sum();
    stop.store(true, Ordering::SeqCst);
    let freezes = chaos.join().expect("chaos");
    let sections = expect_exclusive_sections(&log);
    let cut = sections.iter().filter(|s| !s.ended).count();
    eprintln!(
        "seed {seed}: {turns} turns, {} sections ({cut} cut short), {freezes} freezes, {hogs} hogs",
        sections.len()
    );
    assert!(
        sections.len() >= CONTENDERS,
        "seed {seed}: too few sections ran: {}",
        sections.len()
    );
    assert!(
        cut > 0,
        "seed {seed}: no freeze cut a section short, so the keeper was never put to the test \
         ({freezes} freezes)"
    );
}

#[test]
fn frozen_supervisors_never_let_two_sections_overlap() {
    frozen_supervisors_stress("1s", 1000, 12, 0);
}

#[test]
fn frozen_supervisors_at_the_smallest_ttl_on_a_loaded_host_never_overlap() {
    frozen_supervisors_stress("500ms", 500, 12, 2);
}

#[test]
fn a_thousand_turns_run_one_at_a_time_with_fences_in_order() {
    const CONTENDERS: usize = 6;
    const TURNS: usize = 170;
    let server = RedisServer::start();
    let scratch = TempDir::new("turns");
    let log = scratch.join("sections.log");
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let (url, log) = (server.url(), log.clone());
            thread::spawn(move || {
                for _ in 0..TURNS {
                    Redlock::without_url()
                        .args(["--url", &url])
                        .env("STRESS_LOG", &log)
                        .env("TICKS", "1")
                        .args([
                            "run", "--key", "turns", "--ttl", "5s", "--wait", "60s", "--",
                        ])
                        .args(SECTION)
                        .timeout(Duration::from_secs(60))
                        .exits_with(0);
                }
            })
        })
        .collect();
    for contender in contenders {
        contender.join().expect("contender");
    }
    let sections = expect_exclusive_sections(&log);
    assert_eq!(sections.len(), CONTENDERS * TURNS);
    assert!(sections.iter().all(|s| s.ended));
}

#[test]
fn a_grant_that_comes_too_late_to_run_under_is_not_used() {
    let server = RedisServer::start();
    let scratch = TempDir::new("late");
    let marker = scratch.join("ran");
    // The server holds every write for 900 ms: the acquire's answer comes after the point
    // where a 1 s lease would already be stopping its command.
    let _: () = server.query(&["CLIENT", "PAUSE", "900", "WRITE"]);
    Redlock::new(&server)
        .args(["run", "--key", "job", "--ttl", "1s", "--", "touch"])
        .arg(&marker)
        .exits_with(69)
        .error_mentions(&["too late"]);
    assert!(
        !marker.exists(),
        "the command ran under a lease that had run out"
    );
    assert_eq!(server.get("job"), None, "the late grant was not released");
}
