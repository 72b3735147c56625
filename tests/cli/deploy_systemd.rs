//! systemd timers (`deploy/systemd/`): what the units say, and redlock under a unit on a real
//! cgroup v2 hierarchy arranged as systemd arranges a service — the unit's cgroup below a
//! slice, redlock started in it (or in a leaf below it, as `DelegateSubgroup=` does), and
//! `systemctl stop` with `KillMode=mixed` played by the test: SIGTERM to redlock alone, then
//! SIGKILL to whatever is left in the unit's cgroup.
//!
//! systemd itself does not run here: what its settings do is argued in docs/deploy.md from its
//! documentation; this file plays the part of it that redlock meets.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::process::{Pid, is_running, send_signal};
use crate::support::redlock::Running;
use crate::support::{RedisServer, Redlock, TempDir, wait_for_contender, wait_until};

const UNITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/systemd");

/// `Key=Value` settings of a unit file, in order (comments and section headers left out).
fn settings(name: &str) -> Vec<(String, String)> {
    let path = Path::new(UNITS).join(name);
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{name}: not a setting: {l:?}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn setting<'a>(unit: &'a [(String, String)], key: &str) -> Option<&'a str> {
    unit.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The value after `flag` in a command line.
fn flag<'a>(argv: &[&'a str], flag: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| *a == flag)
        .and_then(|i| argv.get(i + 1).copied())
}

fn duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text:?} is not a duration: {e}"))
}

#[test]
fn the_units_stop_through_redlock_and_leave_it_time_to_release() {
    let server = RedisServer::start();
    for name in ["report-daily.service", "report-daily-undelegated.service"] {
        let unit = settings(name);
        let exec = setting(&unit, "ExecStart").unwrap_or_else(|| panic!("{name}: no ExecStart"));
        let argv: Vec<&str> = exec.split_whitespace().collect();
        assert_eq!(
            argv[..2],
            ["/usr/bin/redlock", "run"],
            "{name}: ExecStart must run the packaged binary (/usr/bin/redlock) itself, so \
             that it is the unit's main process"
        );
        // mixed: systemd's SIGTERM goes to redlock alone (which stops the command's tree and
        // releases), its SIGKILL to every process left in the unit.
        assert_eq!(setting(&unit, "KillMode"), Some("mixed"), "{name}");
        assert_eq!(setting(&unit, "Type"), Some("oneshot"), "{name}");
        assert_eq!(setting(&unit, "SuccessExitStatus"), Some("75"), "{name}");
        let kill_after = duration(
            flag(&argv, "--kill-after")
                .unwrap_or_else(|| panic!("{name}: the ExecStart names no --kill-after")),
        );
        let io_timeout = flag(&argv, "--timeout").map_or(Duration::from_secs(3), duration);
        let stop = duration(
            setting(&unit, "TimeoutStopSec").unwrap_or_else(|| panic!("{name}: no TimeoutStopSec")),
        );
        // What redlock may take after SIGTERM beyond the command's own shutdown: the grace for
        // what the command left behind, and the release (a reconnect and the script call).
        let needed = kill_after + 2 * io_timeout;
        assert!(
            stop >= needed + Duration::from_secs(10),
            "{name}: TimeoutStopSec={stop:?} leaves no room for --kill-after {kill_after:?} and \
             a release of up to {:?}",
            2 * io_timeout
        );
        let delegated = setting(&unit, "Delegate");
        let contain = flag(&argv, "--contain");
        match name {
            "report-daily.service" => {
                assert_eq!(delegated, Some("yes"), "{name}");
                assert_eq!(
                    contain, None,
                    "{name}: a delegated unit gives the command a cgroup"
                );
            }
            _ => {
                assert_eq!(delegated, None, "{name}");
                assert_eq!(
                    contain,
                    Some("descendants"),
                    "{name}: without Delegate=yes redlock must make no cgroup in the unit's"
                );
            }
        }
        // The command line is one redlock accepts: run it with the job replaced by `true`.
        let end = argv
            .iter()
            .position(|a| *a == "--")
            .expect("a `--` before the job");
        Redlock::new(&server)
            .args(&argv[1..=end])
            .arg("true")
            .exits_with(0);
        let _: String = server.query(&["FLUSHALL"]);
    }
    let timer = settings("report-daily.timer");
    assert!(
        setting(&timer, "OnCalendar").is_some(),
        "the timer has no OnCalendar"
    );
    assert_eq!(
        setting(&timer, "Unit"),
        None,
        "report-daily.timer starts report-daily.service by its name"
    );
    assert_eq!(setting(&timer, "WantedBy"), Some("timers.target"));
}

/// The cgroup v2 mount and this process's own cgroup directory, as redlock finds them.
fn own_cgroup() -> Result<(PathBuf, PathBuf), String> {
    let text = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this host has no cgroup v2 hierarchy (no `0::` line in /proc/self/cgroup)")?;
    let mount = if text.lines().count() == 1 {
        "/sys/fs/cgroup"
    } else {
        "/sys/fs/cgroup/unified"
    };
    if !Path::new(mount).join("cgroup.procs").exists() {
        return Err(format!("cgroup v2 is not mounted at {mount}"));
    }
    let own = PathBuf::from(format!("{mount}{}", path.trim_end_matches('/')));
    Ok((PathBuf::from(mount), own))
}

/// A cgroup made for one test below this process's own (as systemd's slices hold units),
/// emptied and removed, with everything below it, when the test ends.
struct Slice {
    mount: PathBuf,
    dir: PathBuf,
}

impl Slice {
    /// `Err` says why this machine cannot host the test.
    fn new(label: &str) -> Result<Slice, String> {
        let (mount, own) = own_cgroup()?;
        let dir = own.join(format!("redlock-test-{label}-{}", std::process::id()));
        fs::create_dir(&dir).map_err(|e| {
            format!(
                "cannot make a cgroup below this test's own ({}): {e}; the test needs root or \
                 a delegated cgroup",
                own.display()
            )
        })?;
        Ok(Slice { mount, dir })
    }

    /// Makes the cgroup `rel` below the slice.
    fn make(&self, rel: &str) -> PathBuf {
        let dir = self.dir.join(rel);
        fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make the cgroup {}: {e}", dir.display()));
        dir
    }

    /// The path of `dir` as /proc/PID/cgroup shows it.
    fn name_of(&self, dir: &Path) -> String {
        format!("/{}", dir.strip_prefix(&self.mount).unwrap().display())
    }
}

impl Drop for Slice {
    fn drop(&mut self) {
        for _ in 0..200 {
            let left = procs_below(&self.dir);
            if left.is_empty() {
                break;
            }
            for pid in left {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        remove_tree(&self.dir);
    }
}

/// Every process in `dir` and the cgroups below it.
fn procs_below(dir: &Path) -> Vec<Pid> {
    let mut pids: Vec<Pid> = fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    for sub in subgroups(dir) {
        pids.extend(procs_below(&sub));
    }
    pids
}

fn subgroups(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn remove_tree(dir: &Path) {
    for sub in subgroups(dir) {
        remove_tree(&sub);
    }
    let _ = fs::remove_dir(dir);
}

/// Whether anything runs in the cgroup `dir` or below it (`populated` in `cgroup.events`).
fn populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events"))
        .unwrap_or_default()
        .lines()
        .any(|l| l == "populated 1")
}

/// The cgroup v2 path of `pid`, as /proc/PID/cgroup shows it.
fn cgroup_of(pid: Pid) -> String {
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line for pid {pid}"))
        .to_owned()
}

/// Writes `text` to a cgroup's control file.
fn write_control(path: &Path, text: &str) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The job of the stop tests: a worker that ignores SIGTERM, moved to a session of its own
/// with `setsid`, stamping `tick` lines into `$LOG`; then a `timeout` job, in a process group
/// of its own, in the foreground. Prints `worker PID`, `timeout PID` and `ready`, in order.
const JOB: &str = r#"setsid bash -c 'trap "" TERM; echo "worker $$"; while :; do echo "$EPOCHREALTIME tick" >> "$LOG"; sleep 0.01; done' &
while [ ! -s "$LOG" ]; do sleep 0.01; done
timeout 60 sh -c 'echo "timeout $$"; echo ready; exec sleep 300'"#;

const KILL_AFTER: Duration = Duration::from_secs(1);

/// Where the job's processes are expected to be.
enum Room<'a> {
    /// A cgroup `redlock.N` directly below this one.
    SlotBelow(&'a Path),
    /// This cgroup itself: redlock's descendants, in redlock's own cgroup.
    Descendants(&'a Path),
}

/// Starts the job under redlock in the cgroup `unit`, checks where its processes are, then
/// stops it as `systemctl stop` does with `KillMode=mixed` while a second run waits for the
/// lock. Returns redlock's stderr.
fn stop_like_systemd(slice: &Slice, run_in: &Path, room: Room, contain: &str) -> String {
    let server = RedisServer::start();
    let scratch = TempDir::new("systemd");
    let log = scratch.join("ticks.log");
    let kill_after = format!("{}s", KILL_AFTER.as_secs());
    let mut holder: Running = Redlock::new(&server)
        .in_cgroup(run_in)
        .env("LOG", &log)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "--kill-after",
            &kill_after,
        ])
        .args(["--contain", contain, "-c", JOB])
        .spawn();
    let worker = holder.expect_pid("worker");
    let timeout = holder.expect_pid("timeout");
    holder.expect_line("ready");
    for (what, pid) in [("worker", worker), ("timeout", timeout)] {
        let found = cgroup_of(pid);
        match room {
            Room::SlotBelow(dir) => {
                let parent = slice.name_of(dir);
                let slot = found
                    .strip_prefix(&format!("{parent}/redlock."))
                    .unwrap_or("");
                assert!(
                    !slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit()),
                    "the {what} runs in {found}, not in a cgroup redlock.N below {parent}"
                );
            }
            Room::Descendants(dir) => assert_eq!(
                found,
                slice.name_of(dir),
                "the {what} left redlock's cgroup"
            ),
        }
    }

    // The next holder, queued outside the unit: it stamps the moment it got the lock.
    let calls = server.script_calls();
    let second = Redlock::new(&server)
        .env("LOG", &log)
        .args(["run", "--key", "job", "--ttl", "5s", "--wait", "20s", "--"])
        .args(["bash", "-c", r#"echo "$EPOCHREALTIME second" >> "$LOG""#])
        .spawn();
    wait_for_contender(&server, "job", calls);

    // systemctl stop, KillMode=mixed: SIGTERM to the main process only.
    let stopped_at = Instant::now();
    send_signal(holder.pid(), libc::SIGTERM);
    let first = holder.wait();
    first.expect_code(143);
    let took = first.exited_at.expect("exited") - stopped_at;
    assert!(
        !is_running(worker) && !is_running(timeout),
        "the job outlived redlock\n{first}"
    );
    // The worker ignores SIGTERM: it was killed --kill-after later, before the release.
    assert!(
        took >= KILL_AFTER && took < KILL_AFTER + Duration::from_secs(6),
        "the stop took {took:?}, with --kill-after {KILL_AFTER:?} and a 3s --timeout"
    );
    // What systemd's SIGKILL would find in the unit: nothing of the job. redlock's keeper
    // leaves right after redlock.
    let unit = match room {
        Room::SlotBelow(dir) | Room::Descendants(dir) => dir,
    };
    wait_until(
        "the unit's cgroup to be empty once redlock has exited",
        Duration::from_secs(5),
        || (!populated(unit)).then_some(()),
    );

    let second = second.wait();
    second.expect_code(0);
    let text = fs::read_to_string(&log).expect("the log");
    let stamp = |l: &str| l.split(' ').next().and_then(|w| w.parse::<f64>().ok());
    let got = text
        .lines()
        .find(|l| l.ends_with(" second"))
        .and_then(stamp)
        .unwrap_or_else(|| panic!("the second run never got the lock\n{second}"));
    let last_tick = text
        .lines()
        .filter(|l| l.ends_with(" tick"))
        .filter_map(stamp)
        .fold(0.0, f64::max);
    assert!(
        last_tick > 0.0 && last_tick < got,
        "the worker ticked at {last_tick}, after the next holder got the lock at {got}"
    );
    first.stderr
}

/// The one line redlock says about its room, if any.
fn room_line(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|l| l.contains("runs as redlock's descendants"))
}

/// The slice of a test that arranges cgroups. A machine that cannot arrange them (no cgroup v2
/// hierarchy this user may write) fails the test saying so: a skipped test would pass unseen.
fn slice_for(label: &str) -> Slice {
    Slice::new(label).unwrap_or_else(|why| {
        panic!("this machine cannot arrange a cgroup v2 hierarchy, which the test needs: {why}")
    })
}

#[test]
fn a_delegated_unit_gives_the_command_a_cgroup_inside_it_and_stops_through_redlock() {
    let slice = slice_for("delegated");
    // Delegate=yes: the unit's cgroup is redlock's to make cgroups in.
    let unit = slice.make("report-daily.service");
    let stderr = stop_like_systemd(&slice, &unit, Room::SlotBelow(&unit), "auto");
    assert_eq!(room_line(&stderr), None, "{stderr}");
}

#[test]
fn a_unit_without_delegation_keeps_the_command_among_redlocks_descendants() {
    let slice = slice_for("undelegated");
    let unit = slice.make("report-daily.service");
    stop_like_systemd(&slice, &unit, Room::Descendants(&unit), "descendants");
    assert!(
        subgroups(&unit).is_empty(),
        "redlock made a cgroup in a unit that did not delegate: {:?}",
        subgroups(&unit)
    );
}

/// A controller that can be enabled in the slice's `cgroup.subtree_control`: one its parent
/// (this test's own cgroup) already enables, or, when that is the root (which may hold
/// processes beside child cgroups), one the root offers, enabled there. Enabling a controller
/// sets no limit; it is left enabled, as other tests may be using it at the same moment.
fn controller_for(slice: &Slice) -> Result<String, String> {
    let parent = slice.dir.parent().expect("the slice has a parent");
    let read = |name: &str| fs::read_to_string(parent.join(name)).unwrap_or_default();
    if let Some(c) = read("cgroup.subtree_control").split_whitespace().next() {
        return Ok(c.to_owned());
    }
    let is_root = !parent.join("cgroup.type").exists();
    let offered = read("cgroup.controllers");
    if is_root && let Some(c) = offered.split_whitespace().next() {
        write_control(&parent.join("cgroup.subtree_control"), &format!("+{c}"))
            .map_err(|e| format!("cannot enable {c} in the root cgroup: {e}"))?;
        return Ok(c.to_owned());
    }
    Err(format!(
        "no controller can be enabled below {}: its cgroup.subtree_control is empty, it offers \
         {offered:?}{} (cgroup v2 enables a domain controller only in a cgroup without \
         processes, the root excepted; on a hybrid host the controllers are on the v1 \
         hierarchies)",
        parent.display(),
        if is_root {
            ""
        } else {
            " and it holds this test's processes"
        }
    ))
}

#[test]
fn with_controllers_enabled_in_the_unit_redlock_in_its_leaf_keeps_the_command_inside() {
    let slice = slice_for("controllers");
    let controller = match controller_for(&slice) {
        Ok(c) => c,
        Err(why) => panic!("this machine offers no controller the test can enable: {why}"),
    };
    // The slice and the delegated unit pass the controller down; with it enabled, the unit
    // may not hold processes itself, so systemd (DelegateSubgroup=supervisor) or a wrapper
    // starts redlock in a leaf below it.
    write_control(
        &slice.dir.join("cgroup.subtree_control"),
        &format!("+{controller}"),
    )
    .expect("enable the controller in the slice");
    let unit = slice.make("report-daily.service");
    write_control(
        &unit.join("cgroup.subtree_control"),
        &format!("+{controller}"),
    )
    .expect("enable the controller in the unit");
    let leaf = slice.make("report-daily.service/supervisor");
    let stderr = stop_like_systemd(&slice, &leaf, Room::SlotBelow(&leaf), "auto");
    assert_eq!(room_line(&stderr), None, "{stderr}");
}

#[test]
fn a_domain_controller_cannot_be_enabled_where_redlock_runs() {
    // Why redlock never meets a domain controller enabled in its own cgroup (tree.rs): the
    // kernel refuses to enable one in a cgroup that holds a process.
    let slice = slice_for("refused");
    let controller = match controller_for(&slice) {
        Ok(c) => c,
        Err(why) => panic!("this machine offers no controller the test can enable: {why}"),
    };
    if ["cpu", "cpuset", "pids", "perf_event"].contains(&controller.as_str()) {
        panic!(
            "the controller offered here, {controller}, is a threaded one: the test needs a domain one"
        );
    }
    write_control(
        &slice.dir.join("cgroup.subtree_control"),
        &format!("+{controller}"),
    )
    .expect("enable the controller in the slice");
    let unit = slice.make("report-daily.service");
    let server = RedisServer::start();
    let mut holder = Redlock::new(&server)
        .in_cgroup(&unit)
        .args([
            "run",
            "--key",
            "job",
            "--ttl",
            "5s",
            "-c",
            "echo ready; read _ || true",
        ])
        .spawn();
    holder.expect_line("ready");
    let refused = write_control(
        &unit.join("cgroup.subtree_control"),
        &format!("+{controller}"),
    )
    .expect_err("the kernel enabled a domain controller beside redlock");
    assert_eq!(refused.raw_os_error(), Some(libc::EBUSY), "{refused}");
    holder.close_stdin();
    holder.exits_with(0);
}

#[test]
fn in_a_thread_root_redlock_says_why_the_command_gets_no_cgroup_and_still_stops_it_all() {
    let slice = slice_for("threaded");
    // A threaded child makes the unit a thread root ("domain threaded"), as threaded
    // controllers (pids, cpu) enabled beside its processes do: a new child of it is "domain
    // invalid" and cannot hold the command.
    let unit = slice.make("report-daily.service");
    let threads = slice.make("report-daily.service/threads");
    write_control(&threads.join("cgroup.type"), "threaded").expect("make a threaded child");
    assert_eq!(
        fs::read_to_string(unit.join("cgroup.type")).unwrap().trim(),
        "domain threaded"
    );
    let stderr = stop_like_systemd(&slice, &unit, Room::Descendants(&unit), "auto");
    let line = room_line(&stderr).unwrap_or_else(|| panic!("no line about the room:\n{stderr}"));
    assert!(
        line.starts_with("redlock:") && line.contains("thread root"),
        "{line}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains("descendants")).count(),
        1,
        "{stderr}"
    );
    assert!(
        !subgroups(&unit).iter().any(|d| d.ends_with("redlock.0")),
        "redlock made a cgroup it could not use"
    );
}
