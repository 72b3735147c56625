//! `status --all`, `metrics --all` and `log --all` over 100,000 locks: every lock is listed
//! exactly once, the output is what its readers parse (serde_json, promtool), and redlock's
//! peak memory stays bounded: the listings are streamed a batch of locks at a time, not
//! collected first.
//!
//! The locks' records are copies of a real run's (`DUMP`/`RESTORE` of every key the run left,
//! whatever they are), written in pipelines: a few seconds for 100,000 locks. The peak memory
//! is the kernel's account of the process (`VmHWM`), not an estimate.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, Redlock, TempDir};

/// The locks under the prefix, besides the template they are copied from.
const LOCKS: usize = 100_000;

/// The peak resident memory a listing may reach, in KiB. Streamed, a listing holds one batch
/// of locks (and 8 bytes per lock listed); collected first, 100,000 locks took 300–700 MB.
const PEAK_RSS_KIB: i64 = 64 * 1024;

/// How long one listing may run: 100,000 locks in a debug build, on a loaded machine.
const LISTING_TIMEOUT: Duration = Duration::from_secs(240);

/// What a listing left: its exit status, where its stdout is, its stderr, its peak memory.
struct Listing {
    code: i32,
    stdout: PathBuf,
    stderr: String,
    peak_rss_kib: i64,
    took: Duration,
    shown: String,
}

impl Listing {
    fn lines(&self) -> impl Iterator<Item = String> {
        BufReader::new(File::open(&self.stdout).expect("the listing's stdout"))
            .lines()
            .map(|l| l.expect("a line"))
    }

    #[track_caller]
    fn expect_bounded(&self) {
        assert_eq!(self.code, 0, "{}: stderr: {}", self.shown, self.stderr);
        assert!(
            self.peak_rss_kib < PEAK_RSS_KIB,
            "{} peaked at {} KiB of memory (bound {PEAK_RSS_KIB} KiB) over {LOCKS} locks, in {:?}",
            self.shown,
            self.peak_rss_kib,
            self.took
        );
    }
}

/// Runs `redlock --url URL ARGS` with stdout to a file, and follows its peak resident set
/// (`VmHWM` in `/proc/PID/status`, every 10 ms) until it exits.
///
/// Not `wait4`'s `ru_maxrss`: Linux carries the memory a process had before `exec` into it,
/// and a process spawned by this test binary (with `vfork`, or `fork`) would start from the
/// whole test process's peak. `VmHWM` is the new program's own. Sampling may miss a peak in
/// the last 10 ms before the exit; a listing that collects its locks grows all the while it
/// reads them, which sampling sees.
fn listing(server: &RedisServer, dir: &TempDir, name: &str, args: &[&str]) -> Listing {
    let stdout = dir.join(&format!("{name}.out"));
    let stderr = dir.join(&format!("{name}.err"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_redlock"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("REDLOCK_") {
            command.env_remove(var);
        }
    }
    let child = command
        .args(["--url", &server.url()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).expect("create stdout"))
        .stderr(File::create(&stderr).expect("create stderr"))
        .spawn()
        .expect("start redlock");
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let shown = format!("redlock {}", args.join(" "));
    let mut peak_rss_kib = 0;
    let mut status = 0;
    loop {
        if let Some(hwm) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
                line.split_whitespace().nth(1)?.parse::<i64>().ok()
            })
        {
            peak_rss_kib = peak_rss_kib.max(hwm);
        }
        // SAFETY: waitpid on our own child, with a pointer to a local that outlives the call.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(rc >= 0, "waitpid: {}", std::io::Error::last_os_error());
        if rc == pid {
            break;
        }
        if started.elapsed() > LISTING_TIMEOUT {
            // SAFETY: kill(2) and a blocking waitpid on our own child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("{shown} ran longer than {LISTING_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(child);
    assert!(
        libc::WIFEXITED(status),
        "{shown} did not exit: wait status {status:#x}"
    );
    assert!(peak_rss_kib > 0, "{shown} ended before its memory was read");
    Listing {
        code: libc::WEXITSTATUS(status),
        stdout,
        stderr: std::fs::read_to_string(&stderr).unwrap_or_default(),
        peak_rss_kib,
        took: started.elapsed(),
        shown,
    }
}

/// The key of the `i`th copy.
fn key(i: usize) -> String {
    format!("lock:{i:06}")
}

/// Runs `template` twice (once ok, once failed), then copies every key the runs left to
/// [`LOCKS`] other locks, as they are (same type, content and time to live). Returns how many
/// audit entries each lock has.
fn many_locks(server: &RedisServer) -> usize {
    for command in ["true", "false"] {
        Redlock::new(server)
            .args(["run", "--key", "template", "--ttl", "10s", "--", command])
            .run();
    }
    let left: Vec<String> = server.query(&["KEYS", "*template*"]);
    assert!(
        left.iter().any(|k| k.ends_with(":redlock:fence")),
        "the runs left no fence counter: {left:?}"
    );
    let mut con = server.client();
    let dumps: Vec<(String, Vec<u8>, i64)> = left
        .iter()
        .map(|k| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut con).expect("DUMP");
            let pttl: i64 = redis::cmd("PTTL").arg(k).query(&mut con).expect("PTTL");
            (k.clone(), dump, pttl.max(0))
        })
        .collect();
    for chunk in (0..LOCKS).collect::<Vec<_>>().chunks(2000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            for (name, dump, pttl) in &dumps {
                pipe.cmd("RESTORE")
                    .arg(name.replace("template", &key(*i)))
                    .arg(*pttl)
                    .arg(dump.as_slice())
                    .arg("REPLACE")
                    .ignore();
            }
        }
        let () = pipe.query(&mut con).expect("RESTORE the copies");
    }
    let audit: Vec<String> = server.query(&["LRANGE", "{template}:redlock:audit", "0", "-1"]);
    audit.len()
}

/// Every key once: the template and the copies.
#[track_caller]
fn expect_each_once(counts: &HashMap<String, usize>, per_lock: usize, what: &str) {
    assert_eq!(counts.len(), LOCKS + 1, "{what}: locks listed");
    for i in (0..LOCKS).map(key).chain(["template".to_string()]) {
        assert_eq!(counts.get(&i), Some(&per_lock), "{what}: {i}");
    }
}

#[derive(serde::Deserialize)]
struct Document {
    locks: Vec<Lock>,
}

#[derive(serde::Deserialize)]
struct Lock {
    key: String,
    state: String,
}

#[derive(serde::Deserialize)]
struct Entry {
    key: String,
    time_ms: i64,
}

#[test]
fn status_metrics_and_log_over_100k_locks_are_streamed_in_bounded_memory() {
    let server = RedisServer::start();
    let entries_per_lock = many_locks(&server);
    let dir = TempDir::new("many-locks");

    let status = listing(&server, &dir, "status", &["status", "--all", "--json"]);
    status.expect_bounded();
    let document: Document =
        serde_json::from_reader(BufReader::new(File::open(&status.stdout).expect("stdout")))
            .unwrap_or_else(|e| panic!("status --all --json printed no JSON document: {e}"));
    let mut counts = HashMap::new();
    for lock in &document.locks {
        assert_eq!(lock.state, "free", "{}", lock.key);
        *counts.entry(lock.key.clone()).or_insert(0) += 1;
    }
    expect_each_once(&counts, 1, "status --all --json");
    drop((document, counts));

    let metrics = listing(&server, &dir, "metrics", &["metrics", "--all"]);
    metrics.expect_bounded();
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(File::open(&metrics.stdout).expect("stdout"))
        .output()
        .expect("promtool is not installed (apt-get install prometheus; .ci/run does)");
    assert!(
        promtool.status.success(),
        "promtool rejected metrics --all: {}{}",
        String::from_utf8_lossy(&promtool.stdout),
        String::from_utf8_lossy(&promtool.stderr)
    );
    // Each family's samples together, after its HELP and TYPE; every lock once in each
    // family that every lock has.
    let mut families: Vec<String> = Vec::new();
    let mut counts = HashMap::new();
    for line in metrics.lines() {
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let family = family.split(' ').next().expect("a name").to_string();
            assert!(!families.contains(&family), "{family} twice");
            families.push(family);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let name = line.split('{').next().expect("a name");
        assert_eq!(
            Some(name),
            families.last().map(String::as_str),
            "a sample away from its family: {line}"
        );
        if name == "redlock_runs_total" {
            let key = line
                .split("key=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .expect("a key label");
            *counts.entry(key.to_string()).or_insert(0) += 1;
        }
    }
    expect_each_once(&counts, 1, "metrics --all");
    drop(counts);

    let log = listing(&server, &dir, "log", &["log", "--all", "--json"]);
    log.expect_bounded();
    let mut counts = HashMap::new();
    let mut last_ms = 0;
    for line in log.lines() {
        let entry: Entry = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("log --all --json printed {line:?}: {e}"));
        assert!(entry.time_ms >= last_ms, "out of time order: {line}");
        last_ms = entry.time_ms;
        *counts.entry(entry.key).or_insert(0) += 1;
    }
    expect_each_once(&counts, entries_per_lock, "log --all --json");
    eprintln!(
        "{LOCKS} locks: status --all --json {:?} {} KiB, metrics --all {:?} {} KiB, \
         log --all --json {:?} {} KiB",
        status.took,
        status.peak_rss_kib,
        metrics.took,
        metrics.peak_rss_kib,
        log.took,
        log.peak_rss_kib
    );
}
