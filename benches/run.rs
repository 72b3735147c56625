//! What `redlock run` costs: start-up, round trips, memory and lock hand-off.
//!
//! Run it with `cargo bench --bench run`. It needs `redis-server`, `flock` and `sh` on the PATH,
//! starts its own `redis-server` (or the server `REDLOCK_TEST_SERVER` names, as for the tests:
//! `valkey9`, `valkey8` or a path) (temp dir, `--save "" --appendonly no`, a free 127.0.0.1 port and a
//! unix socket) and kills it at the end, also when the bench fails. The binary under test is the
//! `redlock` that `cargo bench` builds with the bench profile (statically linked, see
//! `.cargo/config.toml`). It prints one table per measurement and a summary against the targets;
//! the summary only reports, the bench exits 0 whatever the figures are.
//!
//! 1. **Start-up cost.** Spawn-to-exit wall time of `true`, `flock -n FILE true` and
//!    `redlock run --key bench:k --ttl 10s -- true` (over TCP and over the unix socket), in
//!    interleaved rounds with a rotating order so drift in machine load hits every command alike;
//!    then once more launched from a shell, as cron does (`sh -c` running each command
//!    `SHELL_RUNS` times in a loop, flock and redlock alternating, the median loop compared).
//!    Target: redlock/flock ≤ 1.05 both ways.
//! 2. **Round trips per run.** `INFO stats commandstats` before and after a series of runs, with a
//!    `MONITOR` connection telling commands sent by clients from commands run inside Lua scripts
//!    (both count in `total_commands_processed`). Target: 2 (acquire and release, one script each).
//! 3. **Peak RSS** of the redlock process: `ru_maxrss` from `wait4`, and `VmHWM` read from
//!    `/proc/$PPID/status` by the child just before it exits (the child's parent is redlock), once
//!    for `-- true` and once for a child that outlives a few renewals (`--ttl 1s`, `sleep 1`).
//!    `ru_maxrss` also covers the children redlock reaped, so the `VmHWM` column is the clean one.
//!    Target: ≤ 3 MiB.
//! 5. **Other lock tools.** When `etcd` and `etcdctl` are installed (Debian: etcd-server,
//!    etcd-client), `etcdctl lock NAME true` against an etcd of its own, interleaved with
//!    `redlock run -- true`. Consul has no Debian package and is not measured.
//! 4. **Hand-off latency.** A holder runs `sh -c 'read x'`, a waiter runs with `--wait 10s` and
//!    waits on the server for its grant (a blocked client; or, where the server refuses the
//!    blocking pop, it is subscribed to its channel); the bench ends the holder by writing a line to its
//!    stdin and watches keyspace notifications of the lock key: the time from the holder's `del`
//!    to the waiter's `set` (both received on one connection) is the hand-off. Target: median
//!    ≤ 0.5 ms.
//!
//! 6. **The keeper.** A holder (`--ttl 500ms`) is frozen with SIGSTOP as soon as its command
//!    runs, so only the keeper can stop the command at the kill point; redlock, continued after
//!    the key expired, reports how late after the kill point the keeper issued the kill
//!    (`keeper_fired`, `late_us`). `KEEPER_RUNS` times on an idle machine and as many with both
//!    cores busy (two CPU hogs). The keeper runs with real-time priority where it may (root).
//!
//! 7. **Contention.** 50 waiters queued 10 ms apart behind a holder, each running a 20 ms
//!    section, then a 0 ms one, with `redlock run --wait` and with `flock -w` alike, in
//!    `CONTENTION_ROUNDS` rounds that alternate the tools; sections log `$EPOCHREALTIME` stamps.
//!    Efficiency (50×20 ms over the time from the holder's release to the last section's end),
//!    the hand-off per waiter, and order inversions; the medians of the rounds are compared.
//!    Targets: efficiency at least flock's, hand-off within 1.2× of flock's, no inversion.
//!
//! 8. **A dead head waiter.** A holder, a waiter at the head of the queue frozen with SIGSTOP
//!    (its connection open, as when its host dies) and the next waiter: from the holder's
//!    release to the next waiter's command. Target: ≤ 2 s.
//!
//! 9. **The server's bill.** redis-server's main-thread CPU (`/proc/PID/task/PID/schedstat`)
//!    per `run -- true`, in blocks alternating with the floor's, then with each peer client's
//!    (redis-py's `Lock` and python-redis-lock, a Python process per run taking, running `true`
//!    and releasing, from the venv `target/tools` that `scripts/test --prepare` fills; the bench
//!    says so when they are missing); target: at most redis-py `Lock`'s. The
//!    instructions the server executes per run, redlock's, the floor's, the peers' and a busy
//!    refusal's, with
//!    redis-server under callgrind (when valgrind is installed: exact counts, which show what a
//!    change to the scripts does where the CPU time moves by a quarter between runs); memory per
//!    idle lock and keys without a TTL; waiters' CPU, commands (every command the server runs,
//!    the scripts' own included) and connections, at 10, 300 and 1,000 waiters behind a holder
//!    that renews (target: ≤ 30 us per waiter per second, and a command rate per waiter that
//!    does not grow with the queue); and a herd of 500.
//!
//! 10. **Many locks.** `status --all`, `status --all --json`, `metrics --all` and `log --all`
//!     over 10,000 and then 100,000 idle locks (copies of a real run's records, made by a script
//!     on the server): wall time and redlock's peak RSS (`VmHWM` read every 2 ms; not
//!     `ru_maxrss`, which starts from the bench's own), median and maximum of 3 runs each. The
//!     listings are streamed: the time should grow with the locks, the memory should not.
//!
//! 11. **`--replicas 1`.** A replica of the bench's server (on loopback, in sync): spawn to
//!     exit of `redlock run -- true` and of `redlock extend` without and with `--replicas 1`,
//!     in interleaved rounds; the difference of the medians is what waiting for the replica
//!     adds to an acquire and to a renewal. And, apart from redlock, a `SET` alone against a
//!     `SET` followed by `WAIT 1` in one round trip.
//!
//! **The floor.** Sections 1, 1b and 7 also run the bench binary itself as the least a safe
//! lock client on Redis can do (`floor_client`: one `SET NX PX` script to take the key, one
//! compare-and-delete script to release it, a blocking pop of its turn to queue, nothing else),
//! so that what redlock's own work costs is measured apart from what any Redis lock pays.
//!
//! Figures depend on the machine; quote them together with the CPU and kernel they came from.
//! `cargo bench --bench run -- 7` runs section 7 only (any list of section numbers).

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");
const WARMUP_ROUNDS: usize = 20;
const ROUNDS: usize = 400;
const COUNTED_RUNS: usize = 200;
const HANDOFF_WARMUP: usize = 5;
const HANDOFF_ITERATIONS: usize = 100;
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const HANDOFF_KEY: &str = "bench:handoff";
const SHELL_ROUNDS: usize = 20;
const SHELL_RUNS: usize = 40;
const KEEPER_RUNS: usize = 20;
const CONTENTION_ROUNDS: usize = 5;
const DEAD_HEAD_RUNS: usize = 20;
const BILL_PAIRS: usize = 16;
const BILL_BLOCK_RUNS: usize = 50;
const IDLE_LOCKS: usize = 2000;
const BILL_WAITERS: [usize; 3] = [10, 300, 1000];
const BILL_WINDOW: Duration = Duration::from_secs(10);
/// The waiters' holder: a realistic TTL, renewed every third of it while the waiters wait, so
/// that the front of the queue follows an expiry that keeps moving.
const BILL_HOLDER_TTL: &str = "5s";
const HERD: usize = 500;
const MANY_LOCKS: [usize; 2] = [10_000, 100_000];
const MANY_LISTINGS: [&str; 4] = [
    "status --all",
    "status --all --json",
    "metrics --all",
    "log --all",
];
const RUN_TRUE: &str = "run --key bench:k --ttl 10s -- true";
/// Prints the parent's (redlock's) name and memory high-water mark, using shell built-ins only so
/// that nothing else is spawned while redlock waits for the child.
const PROBE: &str = "read -r c < /proc/$PPID/comm; echo \"comm $c\"; \
    while read -r k v u; do case $k in VmHWM:) echo \"VmHWM $v\";; esac; done < /proc/$PPID/status";

type Res<T> = Result<T, String>;
/// A summary line: figure, measured value, unit, target, whether a value meets it.
type Target = (
    &'static str,
    Option<f64>,
    &'static str,
    &'static str,
    fn(f64) -> bool,
);

fn main() {
    // Re-executed as the floor client (see `floor_client`): nothing else.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(FLOOR) {
        std::process::exit(floor_client(&args[2..]));
    }
    // `cargo bench` sets LD_LIBRARY_PATH (four directories of its own), which cron and a login
    // shell do not: every dynamically linked program started under it looks for each library
    // there first, and `flock -n FILE true` starts two such programs where redlock (static)
    // starts one. Measure the commands as cron runs them.
    // SAFETY: no other thread exists yet to read the environment.
    unsafe { std::env::remove_var("LD_LIBRARY_PATH") };
    // `cargo bench` has just written the binaries: until the kernel has written them back, a
    // page fault on a page under writeback waits for it, which slows the first few hundred
    // starts. Measure the steady state.
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let server = Server::start();
    println!("redlock bench: {BIN}");
    println!(
        "redis-server on 127.0.0.1:{} and {}\n",
        server.port,
        server.socket.display()
    );
    // `cargo bench --bench run -- 1 7` runs sections 1 and 7 only; no number runs them all.
    let only: Vec<u32> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let run = |n: u32| only.is_empty() || only.contains(&n);
    let ratio = run(1).then(|| startup(&server));
    let shell_ratio = run(1).then(|| shell_startup(&server));
    let per_run = run(2)
        .then(|| section("2. Round trips per run", round_trips(&server)))
        .flatten();
    let peak_kib = run(3)
        .then(|| section("3. Peak RSS of the redlock process", peak_rss(&server)))
        .flatten();
    let handoff = run(4)
        .then(|| section("4. Hand-off latency", handoff(&server)))
        .flatten();
    if run(5) {
        section("5. Other lock tools", other_tools(&server));
    }
    let keeper = run(6)
        .then(|| section("6. The keeper", keeper(&server)))
        .flatten();
    let queue = run(7)
        .then(|| section("7. Contention", contention(&server)))
        .flatten();
    let dead_head = run(8)
        .then(|| section("8. A dead head waiter", dead_head(&server)))
        .flatten();
    let bill = run(9)
        .then(|| section("9. The server's bill", bill(&server)))
        .flatten();
    if run(10) {
        section("10. Many locks", many_locks(&server));
    }
    if run(11) {
        section("11. --replicas 1", replicas(&server));
    }
    let (flock_eff, redlock_eff, inversions, handoff_ratio) = match queue.as_deref() {
        Some([fe, _, re, ri, _, _, fp, _, rp, ri0, _, _]) => {
            (Some(*fe), Some(*re), Some(ri + ri0), Some(rp / fp))
        }
        _ => (None, None, None, None),
    };

    println!("Summary (targets; reported only, the bench exits 0 either way)");
    let (peer_ratio, instructions_ratio, idle_bytes, untimed, waiter_cpu, waiter_growth) =
        match bill {
            Some(b) => (
                b.peer_ratio,
                b.instructions_ratio,
                Some(b.idle_bytes),
                Some(b.untimed),
                Some(b.waiter_cpu),
                Some(b.waiter_commands_growth),
            ),
            None => (None, None, None, None, None, None),
        };
    let rows: [Target; 16] = [
        (
            "start-up redlock/flock (TCP, medians)",
            ratio,
            "",
            "<= 1.05",
            |v| v <= 1.05,
        ),
        (
            "the same, launched from a shell",
            shell_ratio,
            "",
            "<= 1.05",
            |v| v <= 1.05,
        ),
        (
            "keeper late after the kill point (worst)",
            keeper,
            " ms",
            "<= 25 ms",
            |v| v <= 25.0,
        ),
        (
            "hand-off median (del -> set)",
            handoff,
            " ms",
            "<= 0.5 ms",
            |v| v <= 0.5,
        ),
        (
            "commands per run (client round trips)",
            per_run,
            "",
            "= 2",
            |v| v == 2.0,
        ),
        (
            "peak RSS",
            peak_kib.map(|k| k / 1024.0),
            " MiB",
            "<= 3 MiB",
            |v| v <= 3.0,
        ),
        (
            "queue efficiency, redlock - flock (20 ms)",
            redlock_eff.zip(flock_eff).map(|(r, f)| r - f),
            "",
            ">= 0",
            |v| v >= 0.0,
        ),
        (
            "queue order inversions (redlock)",
            inversions,
            "",
            "= 0",
            |v| v == 0.0,
        ),
        (
            "hand-off per waiter, redlock/flock (0 ms)",
            handoff_ratio,
            "",
            "<= 1.2",
            |v| v <= 1.2,
        ),
        (
            "a dead head waiter holds the queue (worst)",
            dead_head,
            " s",
            "<= 2 s",
            |v| v <= 2.0,
        ),
        (
            "server CPU per run, redlock/redis-py Lock",
            peer_ratio,
            "",
            "<= 1",
            |v| v <= 1.0,
        ),
        (
            "server instructions per run, redlock/floor",
            instructions_ratio,
            "",
            "<= 2.3",
            |v| v <= 2.3,
        ),
        (
            "server memory per idle lock",
            idle_bytes,
            " B",
            "<= 1024 B",
            |v| v <= 1024.0,
        ),
        ("keys without a TTL after runs", untimed, "", "= 0", |v| {
            v == 0.0
        }),
        (
            "server CPU per waiter per second (worst)",
            waiter_cpu,
            " us",
            "<= 30 us",
            |v| v <= 30.0,
        ),
        (
            "commands per waiter per second, most/fewest waiters",
            waiter_growth,
            "",
            "<= 1.1",
            |v| v <= 1.1,
        ),
    ];
    for (name, value, unit, target, meets) in rows {
        let shown = value.map_or("n/a".into(), |v| format!("{v:.3}{unit}"));
        let verdict = if value.is_some_and(meets) {
            "PASS"
        } else {
            "FAIL"
        };
        println!("  {name:<40} {shown:>10}   {target:<9} {verdict}");
    }
}

fn section<T>(title: &str, result: Res<T>) -> Option<T> {
    result.map_err(|e| println!("{title}: FAILED: {e}\n")).ok()
}

// ---------------------------------------------------------------------------------------------
// The floor: the least a safe lock client on Redis can do, for comparison

/// The bench binary's first argument that makes it the floor client.
const FLOOR: &str = "floor-client";
/// Takes the key if it is free: `SET NX PX`, as a script like redlock's acquire.
const FLOOR_TAKE: &str = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
/// Deletes the key if it still holds this token, and with ARGV[2] = '1' pushes the next turn.
const FLOOR_RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     redis.call('DEL', KEYS[1]) end \
     if ARGV[2] == '1' then redis.call('LPUSH', KEYS[2], 1) end return 1";

/// The least a client that keeps two holders' commands apart on one Redis server can do, as a
/// yardstick for what redlock's own work costs: connect, take the key with one script (`SET NX
/// PX`), run the command, release it with one compare-and-delete script, exit. As a waiter
/// (`FLOOR_WAIT=N`), its take waits on the server behind a blocking pop of its turn, `KEY:turn:N`,
/// sent in the same packet; its release pushes `FLOOR_NEXT`'s turn: first come, first served,
/// a hand-off in one pass of the server, as redlock's queue does. Nothing else: no lease
/// renewal, no keeper, no cgroup, no records, no fences, no queue upkeep, no signal handling.
/// `floor-client PORT KEY COMMAND...`; exits with the command's status, 75 when the key is held.
fn floor_client(args: &[String]) -> i32 {
    let run = || -> Res<i32> {
        let [port, key, command @ ..] = args else {
            return Err("usage: floor-client PORT KEY COMMAND...".into());
        };
        let token = std::process::id().to_string();
        let turn = |n: String| format!("{key}:turn:{n}");
        let mut conn = Conn::open(port.parse().map_err(text)?)?;
        let take: &[&str] = &["EVAL", FLOOR_TAKE, "1", key, &token, "30000"];
        let taken = match std::env::var("FLOOR_WAIT") {
            Ok(n) => {
                let turn = turn(n);
                conn.send(&[&["BLPOP", &turn, "0"], take])?;
                conn.read()?;
                conn.read()?
            }
            Err(_) => conn.cmd(take)?,
        };
        if !matches!(taken, Reply::Status(_)) {
            return Ok(75);
        }
        let (program, rest) = command.split_first().ok_or("no command")?;
        let status = Command::new(program).args(rest).status().map_err(text)?;
        let next = std::env::var("FLOOR_NEXT").ok();
        let push = if next.is_some() { "1" } else { "" };
        let next = turn(next.unwrap_or_default());
        conn.cmd(&["EVAL", FLOOR_RELEASE, "2", key, &next, &token, push])?;
        Ok(status.code().unwrap_or(1))
    };
    run().unwrap_or_else(|e| {
        eprintln!("floor-client: {e}");
        1
    })
}

/// The floor client, as a command.
fn floor(port: u16, key: &str, command: &[&str]) -> Command {
    let mut cmd = Command::new(bench_exe());
    cmd.arg(FLOOR).arg(port.to_string()).arg(key).args(command);
    cmd
}

fn bench_exe() -> PathBuf {
    std::env::current_exe().expect("the bench's own path")
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

// ---------------------------------------------------------------------------------------------
// 1. Start-up cost

fn startup(server: &Server) -> f64 {
    let lockfile = server.dir.join("flock.lock");
    std::fs::File::create(&lockfile).expect("create the flock file");
    let mut flock = Command::new("flock");
    flock.arg("-n").arg(&lockfile).arg("true");
    let mut cases = [
        ("true", Command::new("true")),
        ("flock -n FILE true", flock),
        (
            "redlock run -- true (TCP)",
            redlock(&server.url(), RUN_TRUE),
        ),
        (
            "redlock run -- true (unix socket)",
            redlock(&server.unix_url(), RUN_TRUE),
        ),
        (
            "the least safe client, TCP (floor)",
            floor(server.port, "bench:floor", &["true"]),
        ),
    ];
    for (_, cmd) in &mut cases {
        quiet(cmd);
    }
    let mut samples = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for round in 0..WARMUP_ROUNDS + ROUNDS {
        for offset in 0..cases.len() {
            let i = (round + offset) % cases.len();
            let (name, cmd) = &mut cases[i];
            let start = Instant::now();
            let status = cmd.status();
            let elapsed = start.elapsed();
            assert_success(name, cmd, status);
            if round >= WARMUP_ROUNDS {
                samples[i].push(millis(elapsed));
            }
        }
    }
    println!(
        "1. Start-up cost: spawn to exit, {ROUNDS} interleaved rounds after {WARMUP_ROUNDS} warm-up rounds"
    );
    println!(
        "   {:<36} {:>9} {:>9} {:>9}",
        "command", "median", "p90", "p99"
    );
    let mut medians = Vec::new();
    for ((name, _), s) in cases.iter().zip(&mut samples) {
        s.sort_by(f64::total_cmp);
        let (p50, p90, p99) = (
            percentile(s, 50.0),
            percentile(s, 90.0),
            percentile(s, 99.0),
        );
        println!("   {name:<36} {p50:>6.3} ms {p90:>6.3} ms {p99:>6.3} ms");
        medians.push(p50);
    }
    let ratio = medians[2] / medians[1];
    println!(
        "   medians: redlock/flock {ratio:.3} (TCP), {:.3} (unix socket); flock/true {:.3}",
        medians[3] / medians[1],
        medians[1] / medians[0]
    );
    println!(
        "   the floor: floor/flock {:.3}, redlock/floor {:.3} (TCP)\n",
        medians[4] / medians[1],
        medians[2] / medians[4]
    );
    ratio
}

/// The start-up comparison as cron makes it: a shell forks and execs each command. Each sample
/// is one `sh -c` loop of `SHELL_RUNS` runs; flock's and redlock's loops alternate.
fn shell_startup(server: &Server) -> f64 {
    let lockfile = server.dir.join("flock-shell.lock");
    std::fs::File::create(&lockfile).expect("create the flock file");
    let flock = format!("flock -n {} true", lockfile.display());
    let redlock = format!("{BIN} --url {} {RUN_TRUE}", server.url());
    let floor = format!(
        "{} {FLOOR} {} bench:floor true",
        bench_exe().display(),
        server.port
    );
    // The same run, with a line the hand reader leaves to clap (a key starting with '-' after
    // '='): what reading `run`'s line by hand saves (src/cli/by_hand.rs).
    let by_clap = format!(
        "{BIN} --url {} run --key=-bench:k --ttl 10s -- true",
        server.url()
    );
    let mut cases = [
        ("flock -n FILE true", flock),
        ("redlock run -- true (TCP)", redlock),
        ("the least safe client, TCP (floor)", floor),
        ("redlock run -- true, line read by clap", by_clap),
    ]
    .map(|(name, line)| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "i=0; while [ $i -lt {SHELL_RUNS} ]; do {line} || exit 1; i=$((i+1)); done"
        ));
        quiet(&mut cmd);
        (name, cmd)
    });
    let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for round in 0..SHELL_ROUNDS + 2 {
        for offset in 0..cases.len() {
            let i = (round + offset) % cases.len();
            let (name, cmd) = &mut cases[i];
            let start = Instant::now();
            let status = cmd.status();
            let per_run = millis(start.elapsed()) / SHELL_RUNS as f64;
            assert_success(name, cmd, status);
            if round >= 2 {
                samples[i].push(per_run);
            }
        }
    }
    println!(
        "1b. Start-up cost launched from a shell: {SHELL_ROUNDS} alternating loops of {SHELL_RUNS} runs each"
    );
    println!("   {:<36} {:>9}", "command (per run)", "median");
    let mut medians = [0.0; 4];
    for (i, ((name, _), s)) in cases.iter().zip(&mut samples).enumerate() {
        s.sort_by(f64::total_cmp);
        medians[i] = percentile(s, 50.0);
        println!("   {name:<36} {:>6.3} ms", medians[i]);
    }
    let ratio = medians[1] / medians[0];
    println!(
        "   medians: redlock/flock {ratio:.3}; floor/flock {:.3}, redlock/floor {:.3}",
        medians[2] / medians[0],
        medians[1] / medians[2]
    );
    println!(
        "   read by clap instead of by hand: {:.3}x the run ({:+.3} ms per run)\n",
        medians[3] / medians[1],
        medians[3] - medians[1]
    );
    ratio
}

// ---------------------------------------------------------------------------------------------
// 6. The keeper

/// How late after the kill point the keeper of a frozen redlock killed the command: median and
/// worst in milliseconds, idle and with both cores busy; returns the overall worst.
fn keeper(server: &Server) -> Res<f64> {
    println!(
        "6. The keeper: a holder frozen with SIGSTOP, --ttl 500ms; kill issued after the kill point"
    );
    println!("   {:<36} {:>9} {:>9}", "machine", "median", "worst");
    let mut worst: f64 = 0.0;
    for (label, hogs) in [("idle", 0), ("both cores busy (2 CPU hogs)", 2)] {
        let _hogs: Vec<Guard> = (0..hogs)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .map(Guard)
            })
            .collect::<io::Result<_>>()
            .map_err(text)?;
        let mut late = Vec::new();
        for i in 0..KEEPER_RUNS {
            late.push(keeper_once(server, &format!("bench:keeper:{hogs}:{i}"))?);
        }
        late.sort_by(f64::total_cmp);
        let last = *late.last().unwrap_or(&0.0);
        worst = worst.max(last);
        println!(
            "   {label:<36} {:>6.3} ms {last:>6.3} ms",
            percentile(&late, 50.0)
        );
    }
    println!();
    Ok(worst)
}

fn keeper_once(server: &Server, key: &str) -> Res<f64> {
    let mut cmd = redlock(
        &server.url(),
        &format!("-v --log-format json run --key {key} --ttl 500ms -- sh -c"),
    );
    cmd.arg("echo ready; exec sleep 60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut holder = Guard(die_with_parent(&mut cmd).spawn().map_err(text)?);
    let mut out = BufReader::new(holder.0.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line).map_err(text)?;
    if line.trim() != "ready" {
        return Err(format!("the holder said {line:?}"));
    }
    let pid = holder.0.id() as libc::pid_t;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let mut conn = Conn::open(server.port)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while conn.cmd(&["EXISTS", key])?.text() == "1" {
        if Instant::now() > deadline {
            return Err("the frozen holder's key never expired".into());
        }
        sleep(Duration::from_millis(5));
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let mut err = String::new();
    holder
        .0
        .stderr
        .take()
        .ok_or("no stderr")?
        .read_to_string(&mut err)
        .map_err(text)?;
    wait_exit(&mut holder.0, Duration::from_secs(10))?;
    err.lines()
        .find_map(|l| {
            let at = l.find("\"late_us\":")? + "\"late_us\":".len();
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<f64>().ok()
        })
        .map(|us| us / 1000.0)
        .ok_or_else(|| format!("the keeper did not fire: {err}"))
}

/// A run must succeed; when it did not, run it once more with stderr captured to say why.
fn assert_success(name: &str, cmd: &mut Command, status: io::Result<ExitStatus>) {
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            let again = cmd.stderr(Stdio::piped()).output();
            let why = again.map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
            panic!("`{name}` ended with {s}; once more it said: {why:?}");
        }
        Err(e) => panic!("`{name}` could not be started: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Round trips per run

fn round_trips(server: &Server) -> Res<f64> {
    let mut conn = Conn::open(server.port)?;
    let me = conn.cmd(&["CLIENT", "INFO"])?.text();
    let me = me
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap_or("?")
        .to_string();
    let mut monitor = Conn::open(server.port)?;
    monitor.cmd(&["MONITOR"])?;

    let (total_before, stats_before) = info(&mut conn)?;
    let mut run = redlock(&server.url(), RUN_TRUE);
    quiet(&mut run);
    for _ in 0..COUNTED_RUNS {
        let status = run.status();
        assert_success("redlock run -- true", &mut run, status);
    }
    let (total_after, stats_after) = info(&mut conn)?;

    // Read the MONITOR stream up to our second INFO; sort what redlock sent from what its
    // scripts ran.
    let (mut from_clients, mut in_scripts) = (BTreeMap::new(), BTreeMap::new());
    let mut own_infos = 0;
    while own_infos < 2 {
        let line = monitor.read()?.text();
        let Some((source, name)) = parse_monitor_line(&line) else {
            continue;
        };
        if source == me {
            own_infos += usize::from(name == "info");
        } else if source == "lua" {
            *in_scripts.entry(name).or_insert(0u64) += 1;
        } else {
            *from_clients.entry(name).or_insert(0u64) += 1;
        }
    }
    let total = total_after - total_before - 1; // our first INFO
    let scripted: u64 = in_scripts.values().sum();
    let per_run = (total - scripted) as f64 / COUNTED_RUNS as f64;
    println!("2. Round trips per run: {COUNTED_RUNS} runs of `redlock run -- true` (TCP)");
    println!(
        "   total_commands_processed: {total} ({:.2} per run, script-internal calls included)",
        total as f64 / COUNTED_RUNS as f64
    );
    println!(
        "   commands sent by clients: {} ({per_run:.2} per run)",
        total - scripted
    );
    println!(
        "   {:<24} {:>8} {:>8} {:>14} {:>14}",
        "commandstats delta", "calls", "per run", "from clients", "inside scripts"
    );
    for (name, after) in &stats_after {
        let mut delta = after - stats_before.get(name).unwrap_or(&0);
        if name == "info" {
            delta -= 1;
        }
        if delta > 0 {
            let seen = |m: &BTreeMap<String, u64>| m.get(name).copied().unwrap_or(0);
            let per = delta as f64 / COUNTED_RUNS as f64;
            println!(
                "   {name:<24} {delta:>8} {per:>8.2} {:>14} {:>14}",
                seen(&from_clients),
                seen(&in_scripts)
            );
        }
    }
    println!();
    Ok(per_run)
}

/// `total_commands_processed` and the `calls` of every command in `commandstats`.
fn info(conn: &mut Conn) -> Res<(u64, BTreeMap<String, u64>)> {
    let text = conn.cmd(&["INFO", "stats", "commandstats"])?.text();
    let mut total = None;
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("total_commands_processed:") {
            total = n.trim().parse().ok();
        } else if let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        {
            let n = rest
                .strip_prefix("calls=")
                .and_then(|r| r.split(',').next());
            calls.insert(
                name.to_string(),
                n.and_then(|n| n.parse().ok()).unwrap_or(0),
            );
        }
    }
    Ok((total.ok_or("INFO has no total_commands_processed")?, calls))
}

/// `1700000000.123456 [0 127.0.0.1:5000] "client" "setinfo" ...` → (`127.0.0.1:5000`,
/// `client|setinfo`), named as `commandstats` names them.
fn parse_monitor_line(line: &str) -> Option<(String, String)> {
    let (_, rest) = line.split_once('[')?;
    let (source, args) = rest.split_once(']')?;
    let source = source
        .split_once(' ')
        .map_or(source, |(_, s)| s)
        .to_string();
    let mut words = args
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_ascii_lowercase);
    let name = words.next()?;
    const CONTAINERS: [&str; 8] = [
        "client", "config", "script", "pubsub", "object", "memory", "command", "function",
    ];
    match words.next() {
        Some(sub) if CONTAINERS.contains(&name.as_str()) => Some((source, format!("{name}|{sub}"))),
        _ => Some((source, name)),
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Peak RSS

fn peak_rss(server: &Server) -> Res<f64> {
    let url = server.url();
    let mut conn = Conn::open(server.port)?;
    println!("3. Peak RSS of the redlock process (max of 3 runs each)");
    println!(
        "   {:<40} {:>22} {:>22} {:>12}",
        "run", "ru_maxrss (wait4)", "VmHWM (/proc)", "scripts/run"
    );
    #[rustfmt::skip]
    let cases: [(&str, &str, &[&str], &str); 2] = [
        ("run --ttl 10s -- true", "10s", &["true"], ""),
        ("run --ttl 1s, child sleeps 1s (renewals)", "1s", &["sleep", "1"], "sleep 1; "),
    ];
    let mut peak = 0u64;
    for (label, ttl, plain, probe_after) in cases {
        let (mut maxrss, mut hwm) = (0, 0);
        let scripts_before = script_calls(&mut conn)?;
        for _ in 0..3 {
            maxrss = maxrss.max(rusage_run(&url, ttl, plain)?.0);
            let (_, out) = rusage_run(&url, ttl, &["sh", "-c", &format!("{probe_after}{PROBE}")])?;
            if !out.lines().any(|l| l == "comm redlock") {
                return Err(format!("the child's parent is not redlock: {out:?}"));
            }
            let kib = out
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM "))
                .and_then(|v| v.parse().ok());
            hwm = hwm.max(kib.ok_or_else(|| format!("no VmHWM in {out:?}"))?);
        }
        let scripts = (script_calls(&mut conn)? - scripts_before) as f64 / 6.0;
        let show = |kib: u64| format!("{kib} KiB ({:.2} MiB)", kib as f64 / 1024.0);
        println!(
            "   {label:<40} {:>22} {:>22} {scripts:>12.1}",
            show(maxrss),
            show(hwm)
        );
        peak = peak.max(hwm).max(maxrss);
    }
    println!("   ru_maxrss also counts the children redlock reaped; the summary takes the larger.");
    println!("   scripts/run: script calls per run = acquire + release + renewals.");
    println!("   {}\n", layout());
    Ok(peak as f64)
}

/// How many of the names `build.rs` lays out first the binary has. A dependency's version or
/// features, or a change of redlock's own dependencies, renames symbols; a stale list costs
/// peak RSS and start-up (docs/performance.md) without failing anything.
fn layout() -> String {
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/link/startup-symbols.txt");
    let listed = std::fs::read_to_string(list).unwrap_or_default();
    let nm = Command::new("nm").arg(BIN).output();
    let Ok(nm) = nm.as_ref().map(|out| String::from_utf8_lossy(&out.stdout)) else {
        return "start-up layout: not checked (nm, from binutils, is missing)".into();
    };
    let symbols: std::collections::HashSet<&str> = nm
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let names: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    let present = names.iter().filter(|n| symbols.contains(*n)).count();
    let stale = if present * 10 < names.len() * 9 {
        ": stale, run scripts/startup-symbols.sh"
    } else {
        ""
    };
    format!(
        "start-up layout: {present} of {} names in link/startup-symbols.txt are in the binary{stale}",
        names.len()
    )
}

fn script_calls(conn: &mut Conn) -> Res<u64> {
    let (_, calls) = info(conn)?;
    let scripts = [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ];
    Ok(scripts.iter().filter_map(|s| calls.get(*s)).sum())
}

/// Runs redlock to completion and returns its `ru_maxrss` in KiB and its stdout.
fn rusage_run(url: &str, ttl: &str, command: &[&str]) -> Res<(u64, String)> {
    let mut cmd = redlock(url, &format!("run --key bench:rss --ttl {ttl} --"));
    cmd.args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = die_with_parent(&mut cmd).spawn().map_err(text)?;
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut status = 0;
    // SAFETY: rusage is plain old data, for which all zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child; both out-pointers are valid for writes.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        match reaped {
            -1 => return Err(io::Error::last_os_error().to_string()),
            0 if Instant::now() > deadline => {
                let _ = child.kill();
                // SAFETY: as above; reaps the child we just killed.
                unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                return Err(format!(
                    "redlock run -- {command:?} did not finish within 15 s"
                ));
            }
            0 => sleep(Duration::from_millis(1)),
            _ => break,
        }
    }
    let (mut out, mut err) = (String::new(), String::new());
    let _ = child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!(
            "redlock run -- {command:?} ended with wait status {status:#x}: {err}"
        ));
    }
    Ok((usage.ru_maxrss as u64, out))
}

// ---------------------------------------------------------------------------------------------
// 10. Many locks

/// Copies every key `lock` left to the locks `bench:many:NNNNNN` from `from` to `to` (not
/// included), with their time to live: a script on the server, 10,000 locks per call.
const COPY_LOCKS: &str = r"
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
for j = 3, #ARGV, 3 do
  local dump = redis.call('DUMP', ARGV[j])
  local ttl = math.max(redis.call('PTTL', ARGV[j]), 0)
  for i = from, to - 1 do
    local name = ARGV[j + 1] .. string.format('bench:many:%06d', i) .. ARGV[j + 2]
    redis.call('RESTORE', name, ttl, dump, 'REPLACE')
  end
end
return to - from";

fn many_locks(server: &Server) -> Res<()> {
    let url = server.url();
    let mut ctl = Conn::open(server.port)?;
    println!(
        "10. Many locks: the listings over idle locks (each a copy of a run's records), 3 runs each"
    );
    ctl.cmd(&["FLUSHALL"])?;
    let template = "bench:many:template";
    for command in ["true", "false"] {
        let mut cmd = redlock(
            &url,
            &format!("run --key {template} --ttl 10s -- {command}"),
        );
        let _ = quiet(&mut cmd).status();
    }
    let keys: Vec<String> = ctl
        .cmd(&["KEYS", &format!("*{template}*")])?
        .items()
        .iter()
        .map(Reply::text)
        .collect();
    let mut pieces = Vec::new();
    for key in &keys {
        let (before, after) = key
            .split_once(template)
            .ok_or_else(|| format!("{key} does not name {template}"))?;
        pieces.extend([key.clone(), before.to_string(), after.to_string()]);
    }
    println!(
        "   {:<22} {:>8} {:>12} {:>12} {:>16}",
        "listing", "locks", "time", "per lock", "peak RSS (max)"
    );
    let mut made = 0;
    for locks in MANY_LOCKS {
        while made < locks {
            let to = (made + 10_000).min(locks);
            let (from_arg, to_arg) = (made.to_string(), to.to_string());
            let mut args = vec!["EVAL", COPY_LOCKS, "0", &from_arg, &to_arg];
            args.extend(pieces.iter().map(String::as_str));
            ctl.cmd(&args)?;
            made = to;
        }
        for listing in MANY_LISTINGS {
            let mut times = Vec::new();
            let mut peak = 0;
            for _ in 0..3 {
                let (took, kib) = listing_run(&url, listing)?;
                times.push(millis(took));
                peak = peak.max(kib);
            }
            times.sort_by(f64::total_cmp);
            let median = percentile(&times, 50.0);
            println!(
                "   {listing:<22} {locks:>8} {:>9.0} ms {:>9.1} us {:>10.1} MiB",
                median,
                median * 1e3 / locks as f64,
                peak as f64 / 1024.0
            );
        }
    }
    println!();
    ctl.cmd(&["FLUSHALL"])?;
    Ok(())
}

/// Runs `redlock --url URL ARGS` to completion, its stdout to /dev/null: its wall time and its
/// peak RSS in KiB (`VmHWM`, read every 2 ms while it runs).
fn listing_run(url: &str, args: &str) -> Res<(Duration, u64)> {
    let mut cmd = redlock(url, args);
    let started = Instant::now();
    let mut child = die_with_parent(quiet(&mut cmd)).spawn().map_err(text)?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Some(kib) = std::fs::read_to_string(&status_file).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        }) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().map_err(text)? {
            if !status.success() {
                return Err(format!("redlock {args}: {status}"));
            }
            return Ok((started.elapsed(), peak));
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("redlock {args} did not finish within 300 s"));
        }
        sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------------------------------------
// 9. The server's bill

/// Runs of a measure of server instructions (`instructions`).
const TRACED_RUNS: usize = 100;

/// Instructions redis-server executes per run, redlock's and the floor's: the server runs under
/// callgrind, whose counts are exact where schedstat's CPU time moves by a quarter from one run
/// of the bench to the next on a shared machine, so a change to the scripts shows its effect.
/// The server's timer runs once a second (`--hz 1`): under callgrind it is 50 times slower and
/// would otherwise count in every run. Prints the figures (a line saying so without valgrind)
/// and returns redlock's over the floor's.
fn instructions() -> Res<Option<f64>> {
    let (Ok(_), Ok(control)) = (which("valgrind"), which("callgrind_control")) else {
        println!("   server instructions per run: not measured (no valgrind; Debian: valgrind)");
        return Ok(None);
    };
    // The dumps go to the server's directory (cg.out.1, cg.out.2, …), removed with it.
    let server = Server::launch(
        "-callgrind",
        &[
            "valgrind",
            "-q",
            "--tool=callgrind",
            "--dump-instr=no",
            "--callgrind-out-file=cg.out",
        ],
        &["--hz", "1"],
        Duration::from_secs(60),
    );
    let port = server.port;
    let url = format!("redis://127.0.0.1:{port}");
    let pid = server.child.id().to_string();
    let mut dumps = 0;
    // Instructions per run of `one`, after a few runs that load the scripts and the records.
    let mut count = |one: &mut dyn FnMut() -> Res<()>| -> Res<f64> {
        for _ in 0..5 {
            one()?;
        }
        let ctl = |what: &str| {
            quiet(Command::new(&control).args([what, &pid]))
                .status()
                .map_err(text)
        };
        ctl("-z")?;
        for _ in 0..TRACED_RUNS {
            one()?;
        }
        ctl("-d")?;
        dumps += 1;
        let file = server.dir.join(format!("cg.out.{dumps}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let dump = std::fs::read_to_string(&file).unwrap_or_default();
            if let Some(total) = dump
                .lines()
                .find_map(|l| l.strip_prefix("summary:"))
                .and_then(|n| n.trim().parse::<f64>().ok())
            {
                return Ok(total / TRACED_RUNS as f64);
            }
            if Instant::now() > deadline {
                return Err(format!("no callgrind dump in {}", file.display()));
            }
            sleep(Duration::from_millis(50));
        }
    };
    let run = |args: &str, expect: i32| -> Res<()> {
        let mut cmd = redlock(&url, args);
        let status = quiet(&mut cmd).status().map_err(text)?;
        if status.code() != Some(expect) {
            return Err(format!("redlock {args}: {status}, not {expect}"));
        }
        Ok(())
    };
    let redlock_run = count(&mut || run("run --key bench:cg --ttl 10s -- true", 0))?;
    let floor_run = count(&mut || {
        let mut cmd = floor(port, "bench:cg-floor", &["true"]);
        let status = quiet(&mut cmd).status();
        assert_success("the floor", &mut cmd, status);
        Ok(())
    })?;
    let mut peers = String::new();
    for (name, module, script) in PEERS {
        let Some(python) = peer_python(module) else {
            continue;
        };
        let theirs = count(&mut || {
            let mut cmd = peer(&python, script, port, "bench:cg-peer");
            let status = quiet(&mut cmd).status();
            assert_success(name, &mut cmd, status);
            Ok(())
        })?;
        peers.push_str(&format!(", {name} {theirs:.0}"));
    }
    run("acquire --key bench:cg --ttl 10m", 0)?;
    let refusal = count(&mut || run("run --key bench:cg --ttl 10s -- true", 75))?;
    println!(
        "   server instructions per run -- true (callgrind, {TRACED_RUNS} runs): redlock {redlock_run:.0}, the floor {floor_run:.0}: {:.2}x{peers}; a busy refusal {refusal:.0}",
        redlock_run / floor_run
    );
    Ok(Some(redlock_run / floor_run))
}

/// The peer clients section 9 measures beside redlock, in the venv `scripts/test` makes
/// (`target/tools`, with redis-py and python-redis-lock): a process per run, like redlock's,
/// that takes the lock, runs `true` and releases it. `{port}` and `{key}` are filled in.
const PEERS: [(&str, &str, &str); 2] = [
    (
        "redis-py Lock",
        "redis",
        "import redis, subprocess\n\
         r = redis.Redis(port={port})\n\
         l = r.lock('{key}', timeout=10)\n\
         assert l.acquire(blocking=False)\n\
         subprocess.run(['true'])\n\
         l.release()\n",
    ),
    (
        "python-redis-lock",
        "redis_lock",
        "import redis, redis_lock, subprocess\n\
         r = redis.Redis(port={port})\n\
         l = redis_lock.Lock(r, '{key}', expire=10)\n\
         assert l.acquire(blocking=False)\n\
         subprocess.run(['true'])\n\
         l.release()\n",
    ),
];

/// The venv's python, when it has `module`; `None` (said once by the caller) otherwise.
fn peer_python(module: &str) -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin/python3");
    let ok = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// One run of a peer client (its script with the port and key filled in).
fn peer(python: &Path, script: &str, port: u16, key: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(
        script
            .replace("{port}", &port.to_string())
            .replace("{key}", key),
    );
    cmd
}

/// What the shared Redis pays for redlock, beside the floor: server CPU per run, memory per
/// idle lock and keys without a TTL, waiters' CPU and connections, and a herd.
struct Bill {
    /// Server CPU per run, redlock's over redis-py Lock's (`None` without redis-py).
    peer_ratio: Option<f64>,
    /// Server instructions per run, redlock's over the floor's (`None` without valgrind).
    instructions_ratio: Option<f64>,
    idle_bytes: f64,
    untimed: f64,
    waiter_cpu: f64,
    /// Commands per waiter per second at the most waiters, over that at the fewest.
    waiter_commands_growth: f64,
}

/// CPU time redis-server's main thread has used, in ns.
fn server_cpu_ns(server: &Server) -> Res<u64> {
    let pid = server.child.id();
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/schedstat")).map_err(text)?;
    stat.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("unreadable schedstat {stat:?}"))
}

fn info_field(ctl: &mut Conn, section: &str, field: &str) -> Res<String> {
    let info = ctl.cmd(&["INFO", section])?.text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| format!("INFO {section} has no {field}"))
}

fn bill(server: &Server) -> Res<Bill> {
    let url = server.url();
    let mut ctl = Conn::open(server.port)?;
    println!("9. The server's bill: redis-server's main thread, from /proc/PID/task/PID/schedstat");

    // Server CPU per run, in pairs of blocks (redlock's and the floor's, in turn first): the
    // machine's speed drifts over seconds, and a pair's two blocks see the same speed, so each
    // pair gives a ratio, and the median ratio is the figure, with the middle half of them.
    let (mut redlock_us, mut floor_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..BILL_PAIRS {
        let block = |redlock_turn: bool| -> Res<f64> {
            let before = server_cpu_ns(server)?;
            for _ in 0..BILL_BLOCK_RUNS {
                let mut cmd = if redlock_turn {
                    redlock(&url, "run --key bench:bill --ttl 10s -- true")
                } else {
                    floor(server.port, "bench:bill-floor", &["true"])
                };
                let status = quiet(&mut cmd).status();
                assert_success("a run", &mut cmd, status);
            }
            Ok((server_cpu_ns(server)? - before) as f64 / BILL_BLOCK_RUNS as f64 / 1e3)
        };
        let (r, f) = if pair % 2 == 0 {
            let r = block(true)?;
            (r, block(false)?)
        } else {
            let f = block(false)?;
            (block(true)?, f)
        };
        redlock_us.push(r);
        floor_us.push(f);
        ratios.push(r / f);
    }
    for v in [&mut redlock_us, &mut floor_us, &mut ratios] {
        v.sort_by(f64::total_cmp);
    }
    let (r, f) = (percentile(&redlock_us, 50.0), percentile(&floor_us, 50.0));
    let ratio = percentile(&ratios, 50.0);
    println!(
        "   server CPU per run -- true: redlock {r:.0} us, the floor {f:.0} us: {ratio:.2}x, the middle half of the pairs {:.2}-{:.2}x ({BILL_PAIRS} pairs of blocks of {BILL_BLOCK_RUNS} runs)",
        percentile(&ratios, 25.0),
        percentile(&ratios, 75.0),
    );
    // The peers: server CPU per run, in blocks alternating with redlock's (each pair's ratio,
    // as above, since the machine's speed drifts). A Python client takes a tenth of a second
    // per run where redlock takes a few ms, and the idle server's own timer work over that
    // time would count as the peer's: the idle server's CPU per second, read before, is taken
    // off every block's reading for the block's wall time.
    let idle_rate = {
        let (before, at) = (server_cpu_ns(server)?, Instant::now());
        sleep(Duration::from_secs(2));
        (server_cpu_ns(server)? - before) as f64 / at.elapsed().as_nanos() as f64
    };
    println!(
        "   the idle server's own work: {:.0} us per second (taken off the peers' blocks and redlock's beside them)",
        idle_rate * 1e6
    );
    let mut peer_ratio = None;
    for (name, module, script) in PEERS {
        let Some(python) = peer_python(module) else {
            println!(
                "   {name}: not measured (no {module} in target/tools: scripts/test --prepare installs it)"
            );
            continue;
        };
        let (mut theirs, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for pair in 0..BILL_PAIRS / 2 {
            let block = |peer_turn: bool| -> Res<f64> {
                let (before, at) = (server_cpu_ns(server)?, Instant::now());
                for _ in 0..BILL_BLOCK_RUNS {
                    let mut cmd = if peer_turn {
                        peer(&python, script, server.port, "bench:bill-peer")
                    } else {
                        redlock(&url, "run --key bench:bill --ttl 10s -- true")
                    };
                    let status = quiet(&mut cmd).status();
                    assert_success(name, &mut cmd, status);
                }
                let cpu = (server_cpu_ns(server)? - before) as f64
                    - idle_rate * at.elapsed().as_nanos() as f64;
                Ok(cpu.max(0.0) / BILL_BLOCK_RUNS as f64 / 1e3)
            };
            let (p, r) = if pair % 2 == 0 {
                let p = block(true)?;
                (p, block(false)?)
            } else {
                let r = block(false)?;
                (block(true)?, r)
            };
            theirs.push(p);
            ours.push(r);
            ratios.push(r / p);
        }
        for v in [&mut theirs, &mut ours, &mut ratios] {
            v.sort_by(f64::total_cmp);
        }
        let ratio = percentile(&ratios, 50.0);
        println!(
            "   server CPU per run -- true beside {name}: redlock {:.0} us, {name} {:.0} us: {ratio:.2}x, the middle half of the pairs {:.2}-{:.2}x ({} pairs of blocks of {BILL_BLOCK_RUNS} runs)",
            percentile(&ours, 50.0),
            percentile(&theirs, 50.0),
            percentile(&ratios, 25.0),
            percentile(&ratios, 75.0),
            BILL_PAIRS / 2,
        );
        if module == "redis" {
            peer_ratio = Some(ratio);
        }
    }
    let instructions_ratio = instructions()?;

    // Memory per lock that ran once and sits idle, and keys without a TTL.
    ctl.cmd(&["FLUSHALL"])?;
    let used = |ctl: &mut Conn| -> Res<f64> {
        info_field(ctl, "memory", "used_memory")?
            .parse::<f64>()
            .map_err(text)
    };
    let before = used(&mut ctl)?;
    for i in 0..IDLE_LOCKS {
        let mut cmd = redlock(&url, &format!("run --key lock:order:{i} --ttl 10s -- true"));
        let status = quiet(&mut cmd).status();
        assert_success("a run", &mut cmd, status);
    }
    let idle_bytes = (used(&mut ctl)? - before) / IDLE_LOCKS as f64;
    let keyspace = info_field(&mut ctl, "keyspace", "db0").unwrap_or_default();
    let count = |name: &str| -> f64 {
        keyspace
            .split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let (keys, expiring) = (count("keys"), count("expires"));
    println!(
        "   {IDLE_LOCKS} locks run once each: {idle_bytes:.0} bytes of server memory per idle lock; {keys} keys, {} without a TTL",
        keys - expiring
    );
    ctl.cmd(&["FLUSHALL"])?;

    // Waiters: CPU and commands per waiter per second, and connections, while they wait behind
    // a holder that renews. The idle server's own upkeep moves by a few hundred us/s from one
    // window to the next, which swamps a few waiters: the smaller counts are measured in
    // several rounds, and the median taken. Commands are every command the server runs (the
    // scripts' own included), beyond the holder's renewals and the bench's own INFO.
    let (mut worst_waiter, mut commands_at) = (0.0f64, Vec::new());
    for waiters in BILL_WAITERS {
        let rounds = if waiters < 100 { 5 } else { 1 };
        let (mut per_waiter, mut per_waiter_commands, mut per_waiter_attempts) =
            (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let w = waiters_round(server, &mut ctl, &url, waiters, round)?;
            per_waiter.push(w.cpu);
            per_waiter_commands.push(w.commands);
            per_waiter_attempts.push(w.attempts);
            if round + 1 == rounds {
                for v in [
                    &mut per_waiter,
                    &mut per_waiter_commands,
                    &mut per_waiter_attempts,
                ] {
                    v.sort_by(f64::total_cmp);
                }
                let cpu = percentile(&per_waiter, 50.0).max(0.0);
                let commands = percentile(&per_waiter_commands, 50.0);
                println!(
                    "   {waiters:>5} waiters behind a --ttl {BILL_HOLDER_TTL} holder that renews: {cpu:.1} us of server CPU and {commands:.2} commands ({:.3} attempts) per waiter per second (median of {rounds} round(s), beyond the server and the holder without them); {:.2} connections per waiter",
                    percentile(&per_waiter_attempts, 50.0),
                    w.connections
                );
                println!(
                    "          then all {waiters} ran, one after another, in {:.2} s",
                    w.all_ran.as_secs_f64()
                );
                worst_waiter = worst_waiter.max(cpu);
                commands_at.push(commands);
            }
        }
    }
    // The queue's length must not raise a waiter's rate: the most waiters' against the fewest.
    let commands_growth = match (commands_at.first(), commands_at.last()) {
        (Some(&few), Some(&many)) if few > 0.0 => many / few,
        _ => f64::NAN,
    };
    println!(
        "   commands per waiter per second at {} waiters against {}: {commands_growth:.2}x",
        BILL_WAITERS[BILL_WAITERS.len() - 1],
        BILL_WAITERS[0]
    );

    // A herd: contenders started together, without --wait; the one that takes the lock holds
    // it for 3 s, so every other finds it held.
    let before = server_cpu_ns(server)?;
    let started = Instant::now();
    let mut herd = Vec::new();
    for _ in 0..HERD {
        let mut c = redlock(&url, "run --key bench:herd --ttl 10s -- sleep 3");
        herd.push(Some(Guard(
            die_with_parent(quiet(&mut c)).spawn().map_err(text)?,
        )));
    }
    let spawned = started.elapsed();
    let (mut ran, mut busy, mut last_busy) = (0, 0, Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(120);
    while herd.iter().any(Option::is_some) {
        if Instant::now() > deadline {
            return Err("the herd did not end within 120 s".into());
        }
        for slot in &mut herd {
            let Some(guard) = slot else { continue };
            if let Some(status) = guard.0.try_wait().map_err(text)? {
                match status.code() {
                    Some(0) => ran += 1,
                    Some(75) => {
                        busy += 1;
                        last_busy = started.elapsed();
                    }
                    other => return Err(format!("a contender ended with {other:?}")),
                }
                *slot = None;
            }
        }
        sleep(Duration::from_millis(2));
    }
    let cpu = (server_cpu_ns(server)? - before) as f64 / 1e3;
    println!(
        "   a herd of {HERD} contenders without --wait (started within {:.2} s): {ran} ran, {busy} exited 75, the last of them {:.2} s after the first start; {:.0} us of server CPU per contender\n",
        spawned.as_secs_f64(),
        last_busy.as_secs_f64(),
        cpu / HERD as f64
    );
    if ran != 1 {
        return Err(format!("{ran} of the herd ran"));
    }
    Ok(Bill {
        peer_ratio,
        instructions_ratio,
        idle_bytes,
        untimed: keys - expiring,
        waiter_cpu: worst_waiter,
        waiter_commands_growth: commands_growth,
    })
}

/// A `redlock run` holding `key` (TTL `ttl`) until a line is written to its stdin; returned
/// once it holds the lock.
fn holding(url: &str, key: &str, ttl: &str) -> Res<Guard> {
    let mut holder = redlock(url, &format!("run --key {key} --ttl {ttl} -- sh -c"));
    holder.arg("echo held; read x");
    let mut holder = Guard(
        die_with_parent(
            holder
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )
        .spawn()
        .map_err(text)?,
    );
    let mut held = BufReader::new(holder.0.stdout.take().ok_or("holder has no stdout")?);
    let mut line = String::new();
    held.read_line(&mut line).map_err(text)?;
    Ok(holder)
}

/// What one round of section 9's waiters measured, per waiter.
struct WaitersRound {
    /// Server CPU, us per waiter per second.
    cpu: f64,
    /// Commands the server ran (`total_commands_processed`, the scripts' own included) per
    /// waiter per second.
    commands: f64,
    /// Attempts (`EVALSHA`) per waiter per second.
    attempts: f64,
    /// Connections per waiter.
    connections: f64,
    /// How long all took to run once the holder let go.
    all_ran: Duration,
}

/// The server's counters a waiters round reads around its windows: main-thread CPU (ns),
/// commands run, EVALSHA calls, and when they were read.
fn bill_counters(server: &Server, ctl: &mut Conn) -> Res<(u64, f64, f64, Instant)> {
    let cpu = server_cpu_ns(server)?;
    let commands: f64 = info_field(ctl, "stats", "total_commands_processed")?
        .parse()
        .map_err(text)?;
    // cmdstat_evalsha:calls=N,usec=…
    let evalsha = info_field(ctl, "commandstats", "cmdstat_evalsha")
        .ok()
        .and_then(|v| v.strip_prefix("calls=")?.split(',').next()?.parse().ok())
        .unwrap_or(0.0);
    Ok((cpu, commands, evalsha, Instant::now()))
}

/// One round of section 9's waiters: `waiters` queued behind a holder that renews (TTL
/// `BILL_HOLDER_TTL`) for `BILL_WINDOW`; the server's CPU and command rates with them against
/// the rates with the holder alone just before they came, per waiter; the connections per
/// waiter, and how long all took to run once the holder let go.
fn waiters_round(
    server: &Server,
    ctl: &mut Conn,
    url: &str,
    waiters: usize,
    round: usize,
) -> Res<WaitersRound> {
    let key = format!("bench:waiters:{waiters}:{round}");
    let mut holder = holding(url, &key, BILL_HOLDER_TTL)?;
    let clients_before: f64 = info_field(ctl, "clients", "connected_clients")?
        .parse()
        .map_err(text)?;
    // The server's own upkeep (its cron), the holder's renewals and these readings, without
    // waiters.
    let rates = |server: &Server, ctl: &mut Conn| -> Res<(f64, f64, f64)> {
        let (cpu, commands, evalsha, at) = bill_counters(server, ctl)?;
        sleep(BILL_WINDOW);
        let (cpu2, commands2, evalsha2, at2) = bill_counters(server, ctl)?;
        let secs = (at2 - at).as_secs_f64();
        Ok((
            (cpu2 - cpu) as f64 / 1e3 / secs,
            (commands2 - commands) / secs,
            (evalsha2 - evalsha) / secs,
        ))
    };
    let idle = rates(server, ctl)?;
    let mut guards = Vec::new();
    for _ in 0..waiters {
        let mut w = redlock(
            url,
            &format!("run --key {key} --ttl 10s --wait 10m -- true"),
        );
        guards.push(Guard(die_with_parent(quiet(&mut w)).spawn().map_err(text)?));
    }
    let queue = format!("{{{key}}}:redlock:queue");
    let deadline = Instant::now() + Duration::from_secs(120);
    while ctl
        .cmd(&["ZCARD", &queue])?
        .text()
        .parse::<usize>()
        .unwrap_or(0)
        < waiters
    {
        if Instant::now() > deadline {
            return Err(format!("{waiters} waiters never all queued"));
        }
        sleep(Duration::from_millis(20));
    }
    // Past every waiter's first blocked attempt (a waiter away from the front of a held lock
    // tries again every 5 s), so the window sees the steady pace.
    sleep(Duration::from_secs(6));
    let busy = rates(server, ctl)?;
    let per = |with: f64, without: f64| (with - without) / waiters as f64;
    let clients: f64 = info_field(ctl, "clients", "connected_clients")?
        .parse()
        .map_err(text)?;
    let connections = (clients - clients_before) / waiters as f64;
    let all_started = Instant::now();
    holder
        .0
        .stdin
        .as_mut()
        .ok_or("holder has no stdin")?
        .write_all(b"\n")
        .map_err(text)?;
    for guard in guards.iter_mut().chain(std::iter::once(&mut holder)) {
        let status = wait_exit(&mut guard.0, Duration::from_secs(300))?;
        if !status.success() {
            return Err(format!("a waiter ended with {status}"));
        }
    }
    Ok(WaitersRound {
        cpu: per(busy.0, idle.0),
        commands: per(busy.1, idle.1),
        attempts: per(busy.2, idle.2),
        connections,
        all_ran: all_started.elapsed(),
    })
}

// ---------------------------------------------------------------------------------------------
// 8. A dead head waiter

/// A holder, a waiter at the head of the queue whose next attempt waits on the server, and the
/// next waiter; the head is frozen (SIGSTOP: its connection stays open, as when its host dies)
/// and the holder lets go. From the release to the next waiter's command: how long the dead
/// head held the queue up. Returns the worst delay, in seconds.
fn dead_head(server: &Server) -> Res<f64> {
    const KEY: &str = "bench:dead";
    let url = server.url();
    let mut ctl = Conn::open(server.port)?;
    let queue = format!("{{{KEY}}}:redlock:queue");
    let log = format!("{{{KEY}}}:redlock:audit");
    let (mut delays, mut granted) = (Vec::new(), 0);
    for _ in 0..DEAD_HEAD_RUNS {
        let mut holder = holding(&url, KEY, "10s")?;
        let queued = |ctl: &mut Conn, n: i64| -> Res<()> {
            let deadline = Instant::now() + Duration::from_secs(10);
            while ctl
                .cmd(&["ZCARD", &queue])?
                .text()
                .parse::<i64>()
                .unwrap_or(0)
                < n
                || blocked_clients(ctl)? < n
            {
                if Instant::now() > deadline {
                    return Err(format!("{n} waiters never waited on the server"));
                }
                sleep(Duration::from_millis(2));
            }
            Ok(())
        };
        let mut head = redlock(
            &url,
            &format!("run --key {KEY} --ttl 10s --wait 60s -- true"),
        );
        let mut head = Guard(die_with_parent(quiet(&mut head)).spawn().map_err(text)?);
        queued(&mut ctl, 1)?;
        let mut next = redlock(
            &url,
            &format!("run --key {KEY} --ttl 10s --wait 60s -- sh -c"),
        );
        next.arg("echo started");
        let mut next = Guard(
            die_with_parent(
                next.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null()),
            )
            .spawn()
            .map_err(text)?,
        );
        queued(&mut ctl, 2)?;
        let pid = head.0.id();
        // SAFETY: kill takes no pointers; `pid` is our child's.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        let released = Instant::now();
        holder
            .0
            .stdin
            .as_mut()
            .ok_or("holder has no stdin")?
            .write_all(b"\n")
            .map_err(text)?;
        let mut started = BufReader::new(next.0.stdout.take().ok_or("next has no stdout")?);
        started.read_line(&mut String::new()).map_err(text)?;
        delays.push(released.elapsed().as_secs_f64());
        let entries = ctl.cmd(&["LRANGE", &log, "0", "-1"])?.items();
        let by_head = entries.iter().map(Reply::text).any(|entry| {
            entry.contains("\x1facquired\x1f") && entry.contains(&format!("\x1fpid={pid}\x1f"))
        });
        granted += usize::from(by_head);
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        for (who, guard) in [
            ("next", &mut next),
            ("head", &mut head),
            ("holder", &mut holder),
        ] {
            let status = wait_exit(&mut guard.0, Duration::from_secs(30))?;
            if !status.success() {
                return Err(format!("the {who} ended with {status}"));
            }
        }
        ctl.cmd(&["DEL", &log])?;
    }
    delays.sort_by(f64::total_cmp);
    let worst = delays.last().copied().unwrap_or(0.0);
    println!(
        "8. A dead head waiter: {DEAD_HEAD_RUNS} runs; the head frozen (SIGSTOP) with its attempt waiting on the server"
    );
    println!(
        "   release -> next waiter's command: median {:.3} s, worst {worst:.3} s; the server granted the frozen head the lock in {granted} of {DEAD_HEAD_RUNS}\n",
        percentile(&delays, 50.0)
    );
    Ok(worst)
}

// ---------------------------------------------------------------------------------------------
// 4. Hand-off latency

fn handoff(server: &Server) -> Res<f64> {
    let url = server.url();
    let mut ctl = Conn::open(server.port)?;
    ctl.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kg$"])?;
    let mut events = Conn::open(server.port)?;
    events.cmd(&["SUBSCRIBE", &format!("__keyspace@0__:{HANDOFF_KEY}")])?;
    let released = format!("{{{HANDOFF_KEY}}}:redlock:released");
    let (mut handoffs, mut exits, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    let mut unready_waiters = 0;
    for i in 0..HANDOFF_WARMUP + HANDOFF_ITERATIONS {
        let mut holder = redlock(&url, &format!("run --key {HANDOFF_KEY} --ttl 10s -- sh -c"));
        quiet(holder.arg("read x")).stdin(Stdio::piped());
        let mut holder = Guard(die_with_parent(&mut holder).spawn().map_err(text)?);
        next_event(&mut events, "set")
            .map_err(|e| format!("the holder never took the lock: {e}"))?;

        let mut waiter = redlock(
            &url,
            &format!("run --key {HANDOFF_KEY} --ttl 10s --wait 10s -- true"),
        );
        let mut waiter = Guard(die_with_parent(quiet(&mut waiter)).spawn().map_err(text)?);
        // Ready: its next attempt waits on the server behind a blocking pop of its grant (one
        // server), or it listens on its channel (where the server refuses the pop).
        let deadline = Instant::now() + Duration::from_secs(3);
        while blocked_clients(&mut ctl)? < 1 && subscribers(&mut ctl, &released)? < 1 {
            if Instant::now() > deadline {
                unready_waiters += 1;
                break;
            }
            sleep(Duration::from_micros(500));
        }
        sleep(Duration::from_millis(5)); // let a listening waiter finish its attempt and block

        let told = Instant::now();
        let stdin = holder.0.stdin.as_mut().ok_or("holder has no stdin")?;
        stdin.write_all(b"\n").map_err(text)?;
        let deleted = next_event(&mut events, "del")?;
        let acquired = next_event(&mut events, "set")?;
        for (who, guard) in [("waiter", &mut waiter), ("holder", &mut holder)] {
            let status = wait_exit(&mut guard.0, Duration::from_secs(10))?;
            if !status.success() {
                return Err(format!("the {who} ended with {status}"));
            }
        }
        if i >= HANDOFF_WARMUP {
            handoffs.push(millis(acquired - deleted));
            exits.push(millis(deleted - told));
            totals.push(millis(acquired - told));
        }
    }
    println!(
        "4. Hand-off latency: {HANDOFF_ITERATIONS} iterations after {HANDOFF_WARMUP} warm-up, keyspace events of {HANDOFF_KEY}"
    );
    println!("   {:<52} {:>9} {:>9}", "interval", "median", "p99");
    for (name, s) in [
        ("release -> waiter acquires (del -> set)", &mut handoffs),
        ("holder's child told to exit -> release (del)", &mut exits),
        (
            "holder's child told to exit -> waiter acquires (set)",
            &mut totals,
        ),
    ] {
        s.sort_by(f64::total_cmp);
        println!(
            "   {name:<52} {:>6.3} ms {:>6.3} ms",
            percentile(s, 50.0),
            percentile(s, 99.0)
        );
    }
    if unready_waiters > 0 {
        println!(
            "   note: in {unready_waiters} iterations the waiter neither blocked on its grant nor \
             subscribed to {released} within 3 s"
        );
    }
    println!();
    Ok(percentile(&handoffs, 50.0))
}

/// The next keyspace event named `name` on a subscribed connection, with its time of receipt.
/// `etcdctl lock NAME true` against an etcd of its own, when `etcd` and `etcdctl` are installed
/// (Debian: etcd-server, etcd-client), next to `redlock run -- true`, interleaved. Consul has no
/// Debian package, so `consul lock` is not measured here.
fn other_tools(server: &Server) -> Res<()> {
    let (Ok(_), Ok(_)) = (which("etcd"), which("etcdctl")) else {
        println!("5. Other lock tools: etcd/etcdctl not installed; skipped\n");
        return Ok(());
    };
    let dir = server.dir.join("etcd");
    let client = free_port();
    let peer = free_port();
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let mut etcd = Command::new("etcd");
    etcd.arg("--data-dir")
        .arg(&dir)
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("default={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _etcd = Guard(die_with_parent(&mut etcd).spawn().map_err(text)?);
    let mut lock = Command::new("etcdctl");
    lock.env("ETCDCTL_API", "3")
        .args(["--endpoints", &client_url, "lock", "bench", "true"]);
    quiet(&mut lock);
    let ready = Instant::now() + Duration::from_secs(20);
    while !lock.status().map_err(text)?.success() {
        if Instant::now() > ready {
            return Err("etcd did not come up within 20 s".into());
        }
        sleep(Duration::from_millis(100));
    }
    let mut run = redlock(&server.url(), RUN_TRUE);
    quiet(&mut run);
    let rounds = 100;
    let (mut etcd_ms, mut redlock_ms) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (cmd, samples) in [(&mut lock, &mut etcd_ms), (&mut run, &mut redlock_ms)] {
            let start = Instant::now();
            let status = cmd.status();
            let elapsed = start.elapsed();
            assert_success("other tools", cmd, status);
            samples.push(millis(elapsed));
        }
    }
    etcd_ms.sort_by(f64::total_cmp);
    redlock_ms.sort_by(f64::total_cmp);
    println!("5. Other lock tools: {rounds} interleaved rounds, spawn to exit");
    println!("   {:<36} {:>9} {:>9}", "command", "median", "p90");
    for (name, s) in [
        ("etcdctl lock NAME true (etcd 3)", &etcd_ms),
        ("redlock run -- true (TCP)", &redlock_ms),
    ] {
        println!(
            "   {name:<36} {:>6.3} ms {:>6.3} ms",
            percentile(s, 50.0),
            percentile(s, 90.0)
        );
    }
    println!("   consul lock: not measured (no Debian package)\n");
    Ok(())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn which(name: &str) -> Result<PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

fn next_event(events: &mut Conn, name: &str) -> Res<Instant> {
    let deadline = Instant::now() + IO_TIMEOUT;
    while Instant::now() < deadline {
        let message = events.read()?.items();
        let received = Instant::now();
        if message.len() == 3 && message[0].text() == "message" && message[2].text() == name {
            return Ok(received);
        }
    }
    Err(format!("no `{name}` event within {IO_TIMEOUT:?}"))
}

/// How many clients wait in a blocking command (`INFO clients`).
fn blocked_clients(ctl: &mut Conn) -> Res<i64> {
    let info = ctl.cmd(&["INFO", "clients"])?.text();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "INFO clients has no blocked_clients".into())
}

/// Clients subscribed to `channel` or to one of its per-waiter channels (`channel:TICKET`).
fn subscribers(ctl: &mut Conn, channel: &str) -> Res<i64> {
    let mut n = 0;
    for listed in ctl
        .cmd(&["PUBSUB", "CHANNELS", &format!("{channel}*")])?
        .items()
    {
        let listed = listed.text();
        if listed != channel && !listed.starts_with(&format!("{channel}:")) {
            continue;
        }
        match ctl.cmd(&["PUBSUB", "NUMSUB", &listed])?.items().get(1) {
            Some(Reply::Int(k)) => n += k,
            other => {
                return Err(format!(
                    "PUBSUB NUMSUB answered {:?}",
                    other.map(Reply::text)
                ));
            }
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// 7. Contention: a queue of waiters, against flock -w

const WAITERS: usize = 50;
const WAITER_SPACING: Duration = Duration::from_millis(10);
/// The section each waiter runs: `I` is its arrival index; stamps come from bash without a fork.
const CONTENDED: &str = r#"echo "$I $EPOCHREALTIME" >> "$LOG"; [ -n "$WORK" ] && sleep "$WORK"; :"#;

/// What one tool did with one queue of waiters.
struct Contention {
    /// From the holder's release to the last section's end.
    total_ms: f64,
    /// Pairs of waiters that started in the other order than they arrived.
    inversions: usize,
    /// The most later arrivals that started before one waiter.
    worst_overtaken: usize,
}

fn contention(server: &Server) -> Res<Vec<f64>> {
    let lockfile = server.dir.join("contended.lock");
    std::fs::File::create(&lockfile).map_err(text)?;
    println!(
        "7. Contention: {WAITERS} waiters queued {} ms apart, after the holder's release; \
         {CONTENTION_ROUNDS} rounds, the tools alternating, medians compared",
        WAITER_SPACING.as_millis()
    );
    println!(
        "   {:<28} {:>9} {:>11} {:>11} {:>11} {:>10}",
        "tool, section", "total", "efficiency", "per waiter", "inversions", "overtaken"
    );
    let tools = ["flock -w", "redlock --wait", "floor"];
    let mut figures = Vec::new();
    for work in ["0.02", ""] {
        let section_ms = if work.is_empty() { 0.0 } else { 20.0 };
        // Per tool: the totals of its rounds, and its inversions over all rounds.
        let mut totals = [Vec::new(), Vec::new(), Vec::new()];
        let mut inversions = [0usize; 3];
        for round in 0..CONTENTION_ROUNDS {
            for offset in 0..tools.len() {
                let i = (round + offset) % tools.len();
                let c = contend(server, &lockfile, tools[i], work)?;
                println!(
                    "   {:<28} {:>6.0} ms {:>11} {:>8.2} ms {:>11} {:>10}",
                    format!("{}, {section_ms:.0} ms", tools[i]),
                    c.total_ms,
                    if section_ms > 0.0 {
                        format!("{:.2}", WAITERS as f64 * section_ms / c.total_ms)
                    } else {
                        "-".into()
                    },
                    c.total_ms / WAITERS as f64,
                    format!("{} of {}", c.inversions, WAITERS * (WAITERS - 1) / 2),
                    c.worst_overtaken
                );
                totals[i].push(c.total_ms);
                inversions[i] += c.inversions;
            }
        }
        let mut per_waiter = [0.0; 3];
        for (i, t) in totals.iter_mut().enumerate() {
            t.sort_by(f64::total_cmp);
            let median = percentile(t, 50.0);
            per_waiter[i] = median / WAITERS as f64;
            let efficiency = WAITERS as f64 * section_ms / median;
            if section_ms > 0.0 {
                println!(
                    "   median {:<21} {median:>6.0} ms {efficiency:>11.2} {:>8.2} ms",
                    tools[i], per_waiter[i]
                );
            }
            figures.push(if section_ms > 0.0 {
                efficiency
            } else {
                per_waiter[i]
            });
            figures.push(inversions[i] as f64);
        }
        println!(
            "   hand-off per waiter, redlock/flock (medians): {:.2}; floor/flock {:.2}",
            per_waiter[1] / per_waiter[0],
            per_waiter[2] / per_waiter[0]
        );
    }
    println!();
    // Per section length (20 ms, then 0 ms), per tool (flock, redlock, floor): the efficiency
    // (20 ms) or the time per waiter (0 ms), then the inversions.
    Ok(figures)
}

fn contend(server: &Server, lockfile: &Path, tool: &str, work: &str) -> Res<Contention> {
    let log = server.dir.join("contention.log");
    let _ = std::fs::remove_file(&log);
    let key = "bench:contended";
    // The floor's turns are lists named after the key: a key of its own for each queue.
    let floor_key = format!("bench:floor:{}", now_ns());
    let tool_cmd = |hold: bool| -> Command {
        let script = if hold { "read x" } else { CONTENDED };
        let mut cmd = match tool {
            "flock -w" => {
                let mut c = Command::new("flock");
                c.args(["-w", "120"]).arg(lockfile);
                c
            }
            "floor" => floor(server.port, &floor_key, &[]),
            _ => redlock(
                &server.url(),
                &format!("run --key {key} --ttl 30s --wait 2m --"),
            ),
        };
        cmd.args(["bash", "-c", script])
            .env("LOG", &log)
            .env("WORK", work)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let mut holder = tool_cmd(true);
    holder.stdin(Stdio::piped()).env("FLOOR_NEXT", "0");
    let mut holder = Guard(die_with_parent(&mut holder).spawn().map_err(text)?);
    sleep(Duration::from_millis(200));
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let mut waiter = tool_cmd(false);
        waiter
            .env("I", i.to_string())
            .env("FLOOR_WAIT", i.to_string())
            .env("FLOOR_NEXT", (i + 1).to_string())
            .stdin(Stdio::null());
        waiters.push(Guard(die_with_parent(&mut waiter).spawn().map_err(text)?));
        sleep(WAITER_SPACING);
    }
    sleep(Duration::from_millis(200));
    let released = SystemTime::now();
    let stdin = holder.0.stdin.as_mut().ok_or("holder has no stdin")?;
    stdin.write_all(b"\n").map_err(text)?;
    wait_exit(&mut holder.0, Duration::from_secs(10))?;
    for waiter in &mut waiters {
        let status = wait_exit(&mut waiter.0, Duration::from_secs(120))?;
        if !status.success() {
            return Err(format!("a {tool} waiter ended with {status}"));
        }
    }
    let ended = SystemTime::now();
    let mut starts: Vec<(f64, usize)> = std::fs::read_to_string(&log)
        .map_err(text)?
        .lines()
        .filter_map(|line| {
            let (i, stamp) = line.split_once(' ')?;
            Some((stamp.replace(',', ".").parse().ok()?, i.parse().ok()?))
        })
        .collect();
    if starts.len() != WAITERS {
        return Err(format!("{} of {WAITERS} {tool} sections ran", starts.len()));
    }
    starts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let order: Vec<usize> = starts.iter().map(|&(_, i)| i).collect();
    let mut inversions = 0;
    let mut worst_overtaken = 0;
    for (pos, &i) in order.iter().enumerate() {
        let overtaken = order[..pos].iter().filter(|&&j| j > i).count();
        inversions += overtaken;
        worst_overtaken = worst_overtaken.max(overtaken);
    }
    Ok(Contention {
        total_ms: millis(ended.duration_since(released).map_err(text)?),
        inversions,
        worst_overtaken,
    })
}

// ---------------------------------------------------------------------------------------------
// 11. --replicas 1

const REPLICA_ROUNDS: usize = 400;

fn replicas(server: &Server) -> Res<()> {
    let dir = server.dir.join("replica");
    std::fs::create_dir_all(&dir).map_err(text)?;
    let port = free_port();
    let mut cmd = Command::new(server_program());
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(&dir)
        .args(["--replicaof", "127.0.0.1", &server.port.to_string()]);
    let _replica = Guard(quiet(die_with_parent(&mut cmd)).spawn().map_err(text)?);
    let mut ctl = Conn::open(server.port)?;
    let deadline = Instant::now() + IO_TIMEOUT * 3;
    while !ctl
        .cmd(&["INFO", "replication"])?
        .text()
        .contains("state=online")
    {
        if Instant::now() > deadline {
            return Err("the replica did not come online".into());
        }
        sleep(Duration::from_millis(20));
    }
    let url = server.url();
    let token = |key: &str| -> Res<String> {
        let out = redlock(&url, &format!("acquire --key {key} --ttl 1h"))
            .output()
            .map_err(text)?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string())
    };
    let held = token("bench:replicas-held")?;
    let extend = format!("extend --key bench:replicas-held --token {held} --ttl 1h");
    let mut cases = [
        (
            "run -- true",
            redlock(&url, "run --key bench:r --ttl 10s -- true"),
        ),
        (
            "run --replicas 1 -- true",
            redlock(&url, "run --key bench:r --ttl 10s --replicas 1 -- true"),
        ),
        ("extend", redlock(&url, &extend)),
        (
            "extend --replicas 1",
            redlock(&url, &format!("{extend} --replicas 1")),
        ),
    ];
    for (_, cmd) in &mut cases {
        quiet(cmd);
    }
    let mut samples = vec![Vec::with_capacity(REPLICA_ROUNDS); cases.len()];
    let mut raw = [Vec::new(), Vec::new()];
    let mut conn = Conn::open(server.port)?;
    for round in 0..WARMUP_ROUNDS + REPLICA_ROUNDS {
        for offset in 0..cases.len() {
            let i = (round + offset) % cases.len();
            let (name, cmd) = &mut cases[i];
            let start = Instant::now();
            let status = cmd.status();
            let elapsed = start.elapsed();
            assert_success(name, cmd, status);
            if round >= WARMUP_ROUNDS {
                samples[i].push(millis(elapsed));
            }
        }
        for (i, waits) in [false, true].into_iter().enumerate() {
            let start = Instant::now();
            if waits {
                conn.send(&[&["SET", "bench:raw", "1"], &["WAIT", "1", "1000"]])?;
                conn.read()?;
                if conn.read()?.text() != "1" {
                    return Err("WAIT 1 did not count the replica".into());
                }
            } else {
                conn.cmd(&["SET", "bench:raw", "1"])?;
            }
            if round >= WARMUP_ROUNDS {
                raw[i].push(millis(start.elapsed()));
            }
        }
    }
    println!(
        "11. --replicas 1: one replica on loopback, in sync; spawn to exit, {REPLICA_ROUNDS} \
         interleaved rounds"
    );
    println!("   {:<36} {:>9} {:>9}", "command", "median", "p90");
    let (pairs, raw_pairs) = (samples.clone(), raw.clone());
    for ((name, _), s) in cases.iter().zip(&mut samples) {
        s.sort_by(f64::total_cmp);
        let (p50, p90) = (percentile(s, 50.0), percentile(s, 90.0));
        println!(
            "   {:<36} {p50:>6.3} ms {p90:>6.3} ms",
            format!("redlock {name}")
        );
    }
    for (name, s) in ["SET", "SET + WAIT 1 (one round trip)"]
        .iter()
        .zip(&mut raw)
    {
        s.sort_by(f64::total_cmp);
        let (p50, p90) = (percentile(s, 50.0), percentile(s, 90.0));
        println!("   {name:<36} {p50:>6.3} ms {p90:>6.3} ms");
    }
    // Each round's difference, with and without: the pairs share the machine's load of the
    // moment, which moves the medians more than the replica does.
    let paired = |with: &[f64], without: &[f64]| {
        let mut d: Vec<f64> = with.iter().zip(without).map(|(w, o)| w - o).collect();
        d.sort_by(f64::total_cmp);
        percentile(&d, 50.0)
    };
    println!(
        "   added by --replicas 1 (median of the rounds' differences): {:.3} ms per acquire, \
         {:.3} ms per renewal; WAIT alone {:.3} ms\n",
        paired(&pairs[1], &pairs[0]),
        paired(&pairs[3], &pairs[2]),
        paired(&raw_pairs[1], &raw_pairs[0])
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes

/// `redlock --url URL ARGS`, with ARGS split at spaces.
fn redlock(url: &str, args: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--url").arg(url).args(args.split(' '));
    cmd
}

fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The process gets SIGKILL when the bench dies, whichever way it dies. (Not used for the timed
/// spawns: a `pre_exec` hook makes std fork instead of using posix_spawn.)
fn die_with_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe and touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(
            || match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            },
        )
    }
}

/// Kills and reaps the process unless it already ended.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Res<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().map_err(text)? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            return Err(format!("a process did not exit within {limit:?}"));
        }
        sleep(Duration::from_micros(200));
    }
}

/// The server program: `redis-server`, or the one `REDLOCK_TEST_SERVER` names as the tests
/// read it (`valkey9` and `valkey8` are where `scripts/test` installs them).
fn server_program() -> std::path::PathBuf {
    match std::env::var("REDLOCK_TEST_SERVER")
        .unwrap_or_default()
        .as_str()
    {
        "" | "redis" => "redis-server".into(),
        path if path.contains('/') => path.into(),
        name => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/tools")
            .join(name)
            .join("bin/valkey-server"),
    }
}

/// The bench's own redis-server; dropping it kills it and removes its directory.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
    socket: PathBuf,
}

impl Server {
    fn start() -> Server {
        Server::launch("", &[], &[], IO_TIMEOUT)
    }

    /// A redis-server in a temp dir of its own (`suffix` tells it from the bench's), run from
    /// that dir through `wrapper` (a program and its arguments put in front of `redis-server`;
    /// none for the server itself), with `extra` arguments after the bench's, answering within
    /// `wait`.
    fn launch(suffix: &str, wrapper: &[&str], extra: &[&str], wait: Duration) -> Server {
        let dir =
            std::env::temp_dir().join(format!("redlock-bench-{}{suffix}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the server's temp dir");
        let port = free_port();
        let socket = dir.join("redis.sock");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(server_program());
                cmd
            }
            None => Command::new(server_program()),
        };
        let port_arg = port.to_string();
        cmd.args(["--port", &port_arg, "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--unixsocket")
            .arg(&socket)
            .args(["--unixsocketperm", "700", "--logfile"])
            .arg(dir.join("redis.log"))
            .args(extra)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let child = die_with_parent(&mut cmd)
            .spawn()
            .expect("start redis-server (is it installed?)");
        let server = Server {
            child,
            dir,
            port,
            socket,
        };
        let deadline = Instant::now() + wait;
        while !(server.socket.exists()
            && Conn::open(port).and_then(|mut c| c.cmd(&["PING"])).is_ok())
        {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer; see {}/redis.log",
                server.dir.display()
            );
            sleep(Duration::from_millis(10));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn unix_url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// A minimal RESP2 client: enough for INFO, MONITOR, PUBSUB and SUBSCRIBE, with timeouts.

enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Int(n) => n.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) | Reply::Array(_) => String::new(),
        }
    }

    fn items(self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(items)) => items,
            _ => Vec::new(),
        }
    }
}

struct Conn {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
}

impl Conn {
    fn open(port: u16) -> Res<Conn> {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        stream.set_nodelay(true).map_err(text)?;
        stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(text)?;
        stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(text)?;
        let reader = BufReader::new(stream.try_clone().map_err(text)?);
        Ok(Conn { reader, stream })
    }

    fn cmd(&mut self, args: &[&str]) -> Res<Reply> {
        self.send(&[args])?;
        match self.read()? {
            Reply::Error(e) => Err(format!("{}: {e}", args.join(" "))),
            reply => Ok(reply),
        }
    }

    /// Writes commands in one packet; their replies are read with `read`.
    fn send(&mut self, commands: &[&[&str]]) -> Res<()> {
        let mut packet = Vec::new();
        for args in commands {
            packet.extend(format!("*{}\r\n", args.len()).bytes());
            for arg in *args {
                packet.extend(format!("${}\r\n{arg}\r\n", arg.len()).bytes());
            }
        }
        self.stream
            .write_all(&packet)
            .map_err(|e| format!("{}: {e}", commands[0][0]))
    }

    fn read(&mut self) -> Res<Reply> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => return Err("the server closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("reading a reply: {e}")),
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let number = || {
            line[1..]
                .parse::<i64>()
                .map_err(|_| format!("bad reply line {line:?}"))
        };
        Ok(match line.as_bytes().first() {
            Some(b'+') => Reply::Status(line[1..].to_string()),
            Some(b'-') => Reply::Error(line[1..].to_string()),
            Some(b':') => Reply::Int(number()?),
            Some(b'$') => match usize::try_from(number()?) {
                Err(_) => Reply::Bulk(None),
                Ok(len) => {
                    let mut bytes = vec![0; len + 2];
                    self.reader.read_exact(&mut bytes).map_err(text)?;
                    bytes.truncate(len);
                    Reply::Bulk(Some(bytes))
                }
            },
            Some(b'*') => match usize::try_from(number()?) {
                Err(_) => Reply::Array(None),
                Ok(n) => Reply::Array(Some((0..n).map(|_| self.read()).collect::<Res<_>>()?)),
            },
            _ => return Err(format!("bad reply line {line:?}")),
        })
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}
