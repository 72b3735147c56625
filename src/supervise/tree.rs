//! The command's whole process tree: where it lives, how to signal all of it, when it is gone.
//!
//! "The command" is every process it starts, whatever process group or session that process
//! moves to (`timeout`, `setsid`, `set -m`, double forks). Two rooms, the stronger first:
//!
//! 1. **A cgroup of its own** (cgroup v2): a child of redlock's own cgroup, where redlock may
//!    create one (root on the host, or a user with a delegated cgroup, e.g. a systemd user
//!    session). The command is cloned into it (`CLONE_INTO_CGROUP`, which unlike a write to
//!    `cgroup.procs` does not wait for an RCU grace period — milliseconds on an idle host), so
//!    everything it ever starts is born inside, whatever becomes of its parents, and the
//!    cgroup's member list is complete. It is killed by the freeze-then-kill below over those
//!    members — not by `cgroup.kill`, which leaves a cgroup killing every process that later
//!    enters it (seen on Linux 6.18), so the cgroup could not be reused. Nothing escapes but a
//!    process started *on the command's behalf* by a daemon outside the tree (`systemd-run`,
//!    `docker run`, `at`). Needs Linux ≥ 5.7 (`CLONE_INTO_CGROUP`).
//!
//!    Creating and removing a cgroup costs more than the rest of a short run, so they are
//!    reused: `redlock.0`, `redlock.1`, … are made once, next to redlock's cgroup, and a run
//!    claims the first one it can `flock` — the lock belongs to the open directory, which
//!    redlock and its keeper share, so the cgroup stays claimed until both are gone, and no
//!    second run can ever share it. A claimed cgroup must be empty; one that is not (its run's
//!    redlock and keeper died together, e.g. by the OOM killer, which takes every process that
//!    shares the memory) has its processes killed and is left to the next run.
//!
//!    The walk of descendants below runs in cgroup mode too, and its finds are added to the
//!    cgroup's members: a process that the command moved into a cgroup of its own making, or
//!    out of this one, is still a descendant — while redlock lives. Killed, redlock takes the
//!    command with it (`PR_SET_PDEATHSIG`), and such a process, left without the parent the
//!    walk goes through, is no longer found (moving processes between cgroups takes root).
//!
//!    cgroup v2 lets a cgroup hold processes beside child cgroups only while it is a plain
//!    domain: once controllers are enabled in its `cgroup.subtree_control`, it may have
//!    children or processes, not both (the root excepted). The kernel refuses to enable a
//!    domain controller (memory, io) in a cgroup with processes, so a redlock that finds its
//!    own cgroup with controllers enabled is in the root (which may hold both) or in a thread
//!    root (threaded controllers such as pids or cpu, or a threaded child): there a new child
//!    is "domain invalid" and cannot take the command. Moving redlock into a leaf would not
//!    help (a new leaf would be invalid too), so redlock makes no cgroup there: the room is its
//!    descendants, and the run says why in one line ([`Tree::declined`]). Under systemd
//!    this never comes from the unit itself: systemd enables controllers only in slices, and
//!    a delegated unit's own `cgroup.subtree_control` is left to its processes
//!    (`docs/deploy.md`).
//! 2. **redlock's descendants.** redlock is a child subreaper, so a process whose parent exits
//!    is re-parented to redlock, never to init: every process the command starts stays in the
//!    tree under redlock. Found by a walk of `/proc`; killed by freezing first (SIGSTOP to each
//!    process found, walking again until a walk finds nothing new — a stopped process cannot
//!    fork) and then SIGKILL to all. As PID 1 of a container, every process is a descendant.
//!
//! Signals redlock forwards go to the command's process group (as a terminal would send them)
//! and to each member outside that group, once.
//!
//! Everything here that the keeper calls (`keeper.rs`) runs without the C library: raw system
//! calls (`sys.rs`), no allocation, preallocated [`Scratch`] space, no panics.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

use libc::c_int;

use crate::supervise::sys;

/// How many processes a walk can see at once; a host with more is walked in part.
const MAX_PROCS: usize = 32 * 1024;
/// A freeze that keeps finding new processes gives up after this many walks and kills what it
/// stopped (each walk stops every process it found, so a forking loop runs out of parents).
const MAX_FREEZE_PASSES: usize = 64;

pub const MODE_DESCENDANTS: u32 = 0;
pub const MODE_CGROUP: u32 = 1;

/// Where the command lives, shared (read-only but for the atomics) with the keeper.
///
/// # Who writes what
///
/// Three parties share a `Tree`: redlock's main thread (the supervisor), the spawned child
/// before it execs (in redlock's memory, `child.rs`), and the keeper (`keeper.rs`). Each
/// atomic has one writer, or one direction of change:
///
/// | field | written by | when | ordering |
/// |---|---|---|---|
/// | `command` | the child | first thing after `setpgid`, before it looks at `fired` | SeqCst store |
/// | `fired` | the keeper | `false` → `true`, before its first kill walk | SeqCst store |
/// | `mode` | the child | `MODE_CGROUP` → `MODE_DESCENDANTS`, when it cannot join the cgroup | Release store |
/// | `keeper` | the main thread | once, when the keeper has started | Release store |
/// | `reaped` | the main thread | `false` → `true`, once the command is reaped (or never ran) | Release store |
///
/// Readers load with Acquire, except the pair that decides whether a command may start:
/// the child stores `command` and then loads `fired`, while the keeper stores `fired` and then
/// walks (which reads `command` and the process table). Both sides are SeqCst, so at least
/// one of them sees the other: either the child sees `fired` and exits before exec, or the
/// keeper's walk finds the child. `reaped` tells the walks to stop treating `command` as
/// the command's pid (it may be anyone's once reaped), so it is stored only after `waitid`
/// returned the command's status, and before the supervisor forgets the pid. Nothing else
/// in a `Tree` changes after [`Tree::prepare`].
pub struct Tree {
    /// [`MODE_CGROUP`] or [`MODE_DESCENDANTS`]; the spawned child falls back to descendants if
    /// it cannot join the cgroup, before it execs.
    pub mode: AtomicU32,
    /// The command's pid, which is also its process group; written by the child before exec.
    pub command: AtomicI32,
    /// The keeper's pid, left out of every walk.
    pub keeper: AtomicI32,
    /// Set by the keeper before it kills: a command spawned after that does not start.
    pub fired: AtomicBool,
    /// Set once the command has been reaped: its pid may then be anyone's.
    pub reaped: AtomicBool,
    pub redlock: c_int,
    cgroup: Option<Cgroup>,
    /// Why no cgroup was made for a run that asked for one, when the reason is one an
    /// operator should hear about (not merely "no permission", the usual case of a user's
    /// cron job): the run says it in one line.
    pub declined: Option<String>,
}

struct Cgroup {
    /// The directory, open and `flock`ed: the command is cloned into it.
    fd: c_int,
}

/// The cgroup v2 mount points redlock looks at: a unified hierarchy, or the hybrid layout.
const CGROUP_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
/// How many cgroups runs under one parent cgroup share between them; with all of them busy,
/// a run's room is its descendants.
const SLOTS: usize = 256;

impl Tree {
    /// A cgroup of its own when `cgroup` allows it and redlock may create one, otherwise
    /// redlock's descendants.
    pub fn prepare(cgroup: bool) -> Tree {
        let mut declined = None;
        let cgroup = if cgroup {
            match Cgroup::claim() {
                Ok(claimed) => Some(claimed),
                Err(Claim::Unfit(why)) => {
                    declined = Some(why);
                    None
                }
                Err(Claim::Failed) => None,
            }
        } else {
            None
        };
        Tree {
            mode: AtomicU32::new(if cgroup.is_some() {
                MODE_CGROUP
            } else {
                MODE_DESCENDANTS
            }),
            command: AtomicI32::new(0),
            keeper: AtomicI32::new(0),
            fired: AtomicBool::new(false),
            reaped: AtomicBool::new(false),
            // SAFETY: getpid has no preconditions.
            redlock: unsafe { libc::getpid() },
            cgroup,
            declined,
        }
    }

    /// The cgroup's directory, open, for the command to be cloned into.
    pub fn cgroup_fd(&self) -> Option<c_int> {
        self.cgroup.as_ref().map(|c| c.fd)
    }

    pub fn in_cgroup(&self) -> bool {
        self.mode.load(Ordering::Acquire) == MODE_CGROUP
    }

    /// A short name for the room, for logs and the table of rooms in docs/design.md.
    pub fn describe(&self) -> &'static str {
        if self.in_cgroup() {
            "a cgroup of its own"
        } else {
            "redlock's descendants"
        }
    }

    /// Sends `sig` to the command's process group and to every member outside it.
    pub fn signal(&self, sig: c_int, scratch: &mut Scratch) {
        let pgid = self.command.load(Ordering::Acquire);
        if pgid > 0 {
            sys::kill(-pgid, sig);
        }
        let members = self.members(self.redlock, scratch);
        for &pid in members {
            if pgid <= 0 || getpgid(pid) != pgid {
                sys::kill(pid, sig);
            }
        }
    }

    /// Kills every process of the command, now: each member is stopped (SIGSTOP) and members
    /// are listed again until a pass finds no new one — a stopped process cannot fork, so a
    /// forking loop runs out of parents — then all get SIGKILL. `root` is where a walk of
    /// descendants starts: redlock while it lives, the command once redlock is gone.
    ///
    /// Every pass stops every member it finds again: one that a SIGCONT woke meanwhile (the
    /// kernel's, for a group a member's exit left orphaned) must not fork on. The SIGKILLs go
    /// to the members found last first (the walk goes down the tree) and to the command's
    /// group last: a process's exit can send SIGHUP and SIGCONT to its stopped children's
    /// groups, and by then those children have their SIGKILL pending.
    pub fn kill_all(&self, root: c_int, scratch: &mut Scratch) {
        let pgid = self.command.load(Ordering::Acquire);
        if pgid > 0 {
            sys::kill(-pgid, libc::SIGSTOP);
        }
        scratch.stopped_len = 0;
        for _ in 0..MAX_FREEZE_PASSES {
            let mut new = false;
            let found = self.members(root, scratch).len();
            for i in 0..found {
                let pid = scratch.members[i];
                sys::kill(pid, libc::SIGSTOP);
                if scratch.stopped[..scratch.stopped_len].contains(&pid) {
                    continue;
                }
                if scratch.stopped_len < MAX_PROCS {
                    scratch.stopped[scratch.stopped_len] = pid;
                    scratch.stopped_len += 1;
                }
                new = true;
            }
            if !new {
                break;
            }
        }
        for i in (0..scratch.stopped_len).rev() {
            sys::kill(scratch.stopped[i], libc::SIGKILL);
        }
        if pgid > 0 {
            sys::kill(-pgid, libc::SIGKILL);
            if !self.reaped.load(Ordering::Acquire) {
                sys::kill(pgid, libc::SIGKILL);
            }
        }
    }

    /// The command's processes: the cgroup's members, and the descendants of `root` (none
    /// when `root` is 0), the keeper left out — in a cgroup too, for a process the command
    /// moved to a cgroup of its own making or out of the cgroup is still a descendant. A pid
    /// may have exited since; signalling it then fails harmlessly.
    pub fn members<'s>(&self, root: c_int, scratch: &'s mut Scratch) -> &'s [c_int] {
        scratch.members_len = 0;
        if let (true, Some(cgroup)) = (self.in_cgroup(), &self.cgroup) {
            scratch.read_pids(cgroup.fd, b"cgroup.procs\0");
        }
        // Descendants of "no process" would be every process on the machine.
        if root > 0 {
            scratch.scan_proc();
            scratch.descendants(root, self.keeper.load(Ordering::Acquire));
        }
        &scratch.members[..scratch.members_len]
    }

    /// Whether any process of the command is left. Every process the command started is a
    /// descendant of redlock (a subreaper), so the tree is empty exactly when redlock has no
    /// child left but the keeper, which is a "clone" child that `waitid` without `__WALL`
    /// does not see. Reap zombies first: an unreaped child still counts.
    pub fn occupied(&self) -> bool {
        // SAFETY: `siginfo_t` is plain data, for which all-zero bytes are a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for writes; WNOWAIT leaves any waitable child in place.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        !(rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
    }

    /// Waits (a bounded time) until the cgroup is empty, after a kill: the next run to claim
    /// it must find it empty.
    pub fn await_empty_cgroup(&self, scratch: &mut Scratch) {
        let Some(cgroup) = &self.cgroup else {
            return;
        };
        for _ in 0..500 {
            scratch.members_len = 0;
            scratch.read_pids(cgroup.fd, b"cgroup.procs\0");
            if scratch.members_len == 0 {
                return;
            }
            sys::sleep_ns(10_000_000);
        }
    }
}

/// Why no cgroup was claimed.
enum Claim {
    /// redlock's own cgroup cannot have a child that holds processes (see the module doc).
    Unfit(String),
    /// Anything else, which the run does not mention: no cgroup v2, no permission (a user's
    /// cron job), every slot busy.
    Failed,
}

impl From<io::Error> for Claim {
    fn from(_: io::Error) -> Claim {
        Claim::Failed
    }
}

impl From<std::ffi::NulError> for Claim {
    fn from(_: std::ffi::NulError) -> Claim {
        Claim::Failed
    }
}

impl Cgroup {
    /// Claims a free cgroup below redlock's own, making one if none is free.
    fn claim() -> Result<Cgroup, Claim> {
        let (parent, mount) = own_cgroup_dir()?;
        if let Some(why) = unfit_parent(&parent) {
            return Err(Claim::Unfit(why));
        }
        for n in 0..SLOTS {
            let dir = CString::new(format!("{parent}/redlock.{n}"))?;
            let open = || {
                // SAFETY: a valid NUL-terminated path.
                unsafe {
                    libc::open(
                        dir.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                }
            };
            let mut fd = open();
            if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
                if !is_cgroup2(mount) {
                    return Err(io::Error::other("cgroup v2 is not mounted where expected").into());
                }
                // SAFETY: as above. Another run may make it at the same moment: EEXIST is fine.
                if unsafe { libc::mkdir(dir.as_ptr(), 0o755) } != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                {
                    return Err(io::Error::last_os_error().into());
                }
                fd = open();
            }
            if fd < 0 {
                return Err(io::Error::last_os_error().into());
            }
            // SAFETY: flock on our own descriptor.
            if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                sys::close(fd);
                continue;
            }
            if populated(fd) == Some(false) {
                return Ok(Cgroup { fd });
            }
            // Left behind by a run whose redlock and keeper died together (the OOM killer
            // takes both, as they share their memory): they should be dead; kill them, and
            // leave the cgroup to the next run.
            kill_escapees(fd);
            // Closing our descriptor releases the lock.
            sys::close(fd);
        }
        Err(io::Error::other("every redlock cgroup is busy").into())
    }
}

/// Why a child of the cgroup whose directory is `parent` (redlock's own) could not hold the
/// command, or `None` when it can. Its `cgroup.type` says so: a plain `domain` may hold
/// processes beside children; the root has no such file and may too; anything else (a thread
/// root, "domain threaded", or a threaded cgroup) makes new children "domain invalid".
fn unfit_parent(parent: &str) -> Option<String> {
    let kind = read_small(&format!("{parent}/cgroup.type"))?;
    if kind == "domain" {
        return None;
    }
    let enabled = read_small(&format!("{parent}/cgroup.subtree_control")).unwrap_or_default();
    let because = if !enabled.is_empty() {
        format!("has controllers enabled in its cgroup.subtree_control ({enabled})")
    } else if kind == "threaded" {
        "is a threaded cgroup".to_owned()
    } else {
        format!("is a thread root ({kind}: it has a threaded child)")
    };
    Some(format!(
        "the command runs as redlock's descendants, not in a cgroup of its own: redlock's \
         cgroup {parent} {because}, so a cgroup below it cannot hold processes; run redlock \
         in a plain domain cgroup (cgroup.type \"domain\") to give the command one"
    ))
}

/// A small file's text, trimmed; `None` when it cannot be read.
fn read_small(path: &str) -> Option<String> {
    let path = CString::new(path).ok()?;
    let fd = sys::openat(
        libc::AT_FDCWD,
        path.as_bytes_with_nul(),
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 256];
    let n = sys::read(fd as c_int, &mut buf);
    sys::close(fd as c_int);
    let text = buf.get(..usize::try_from(n).ok()?)?;
    Some(String::from_utf8_lossy(text).trim().to_owned())
}

/// Whether the cgroup whose directory is `dir` has a process in it or in a cgroup below it
/// (`populated` in `cgroup.events`); `None` when that cannot be read.
fn populated(dir: c_int) -> Option<bool> {
    let mut text = [0u8; 64];
    let fd = sys::openat(dir, b"cgroup.events\0", libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let n = sys::read(fd as c_int, &mut text);
    sys::close(fd as c_int);
    let text = text.get(..n.max(0) as usize)?;
    let at = text.windows(10).position(|w| w == b"populated ")?;
    text.get(at + 10).map(|&b| b == b'1')
}

/// Freezes and kills the processes found in an unclaimed cgroup (its own members only).
fn kill_escapees(dir: c_int) {
    let tree = Tree {
        mode: AtomicU32::new(MODE_CGROUP),
        command: AtomicI32::new(0),
        keeper: AtomicI32::new(0),
        fired: AtomicBool::new(false),
        reaped: AtomicBool::new(true),
        // SAFETY: getpid has no preconditions.
        redlock: unsafe { libc::getpid() },
        cgroup: Some(Cgroup { fd: dir }),
        declined: None,
    };
    tree.kill_all(0, &mut Scratch::new());
}

/// The directory of redlock's own cgroup in the cgroup v2 hierarchy.
///
/// `/proc/self/cgroup` names the cgroup; where the v2 hierarchy is mounted follows from the
/// same file, as systemd lays it out: one line (`0::…`) on a unified host, where it is
/// `/sys/fs/cgroup`; more (v1 controllers beside it) on a hybrid one, where it is
/// `/sys/fs/cgroup/unified`. The guess is checked before anything is created there.
fn own_cgroup_dir() -> io::Result<(String, &'static str)> {
    let mut buf = [0u8; 4096];
    let fd = sys::openat(
        libc::AT_FDCWD,
        b"/proc/self/cgroup\0",
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd as i32));
    }
    let n = sys::read(fd as c_int, &mut buf);
    sys::close(fd as c_int);
    let text = std::str::from_utf8(&buf[..n.max(0) as usize]).unwrap_or("");
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| io::Error::other("no cgroup v2"))?;
    let mount = if text.lines().count() == 1 {
        CGROUP_MOUNTS[0]
    } else {
        CGROUP_MOUNTS[1]
    };
    Ok((format!("{mount}{}", path.trim_end_matches('/')), mount))
}

/// Whether a cgroup v2 hierarchy is mounted at `mount`.
fn is_cgroup2(mount: &str) -> bool {
    let Ok(probe) = CString::new(format!("{mount}/cgroup.controllers")) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(probe.as_ptr(), libc::F_OK) == 0 }
}

fn getpgid(pid: c_int) -> c_int {
    // SAFETY: getpgid takes no pointers. It is not a raw call (see sys.rs), but it only fails
    // for a pid that is gone, and then the result is not used.
    unsafe { libc::syscall(libc::SYS_getpgid, pid) as c_int }
}

/// Room to walk `/proc` without allocating: what the keeper has when redlock cannot help.
pub struct Scratch {
    buf: [u8; 16 * 1024],
    stat: [u8; 512],
    /// (pid, parent pid) of every process, as the last scan saw them.
    procs: [(c_int, c_int); MAX_PROCS],
    procs_len: usize,
    members: [c_int; MAX_PROCS],
    members_len: usize,
    stopped: [c_int; MAX_PROCS],
    stopped_len: usize,
}

impl Scratch {
    /// A zeroed scratch area on the heap. The allocator hands out fresh (untouched) pages for
    /// a block this size, so it costs memory only when a walk uses it.
    pub fn new() -> Box<Scratch> {
        let layout = std::alloc::Layout::new::<Scratch>();
        // SAFETY: the layout is not zero-sized; all-zero bytes are a valid Scratch (integers
        // and arrays of integers), and a null pointer is handled before the Box takes it.
        unsafe {
            let ptr = std::alloc::alloc_zeroed(layout).cast::<Scratch>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(ptr)
        }
    }

    /// Reads every process's parent from `/proc/PID/stat`.
    fn scan_proc(&mut self) {
        self.procs_len = 0;
        let dir = sys::openat(
            libc::AT_FDCWD,
            b"/proc\0",
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let dir = dir as c_int;
        loop {
            let n = sys::getdents64(dir, &mut self.buf);
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off + 19 < n as usize {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name[].
                let reclen = u16::from_ne_bytes([self.buf[off + 16], self.buf[off + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let name_end = (off + reclen).min(n as usize);
                let pid = parse_pid(&self.buf[off + 19..name_end]);
                off += reclen;
                if let Some(pid) = pid
                    && let Some(ppid) = self.parent_of(pid)
                    && self.procs_len < MAX_PROCS
                {
                    self.procs[self.procs_len] = (pid, ppid);
                    self.procs_len += 1;
                }
            }
        }
        sys::close(dir);
    }

    /// The parent pid in `/proc/PID/stat`, the fourth field, after the parenthesised name
    /// (which may itself hold spaces and parentheses: the last ')' ends it).
    fn parent_of(&mut self, pid: c_int) -> Option<c_int> {
        // Zombies stay in: a process whose main thread exited shows Z while its other threads
        // run on, and signalling a true zombie does no harm.
        let rest = self.stat_after_name(pid)?;
        let mut fields = rest.split(|&b| b == b' ').skip(1);
        parse_pid(fields.next()?)
    }

    /// Whether `pid` has finished exiting: gone, or a zombie with no thread left but its main
    /// one. Each thread's exit re-parents what it had adopted and deals with the process
    /// groups that leaves orphaned, and the main thread shows Z as soon as it has exited
    /// itself, while another (redlock's heartbeat) may still be on its way out.
    pub fn exited(&mut self, pid: c_int) -> bool {
        // The walk's buffer: no walk is under way while this runs.
        let Some(n) = read_proc(pid, b"/status\0", &mut self.buf) else {
            return true;
        };
        let text = &self.buf[..n];
        let field = |name: &[u8]| {
            text.split(|&b| b == b'\n')
                .find_map(|line| line.strip_prefix(name))
                .map(<[u8]>::trim_ascii_start)
        };
        let zombie =
            field(b"State:").is_some_and(|s| matches!(s.first(), Some(b'Z' | b'X' | b'x')));
        let threads = field(b"Threads:").and_then(parse_pid);
        zombie && threads.is_none_or(|t| t <= 1)
    }

    /// `/proc/PID/stat` after the parenthesised name and its space: "S PPID ...".
    fn stat_after_name(&mut self, pid: c_int) -> Option<&[u8]> {
        let n = read_proc(pid, b"/stat\0", &mut self.stat)?;
        let text = &self.stat[..n];
        let close = text.iter().rposition(|&b| b == b')')?;
        text.get(close + 2..)
    }

    /// Adds to `members` every scanned process whose ancestry reaches `root` (or a member
    /// already listed), leaving out `exclude` and whatever descends from it.
    fn descendants(&mut self, root: c_int, exclude: c_int) {
        loop {
            let mut grew = false;
            for i in 0..self.procs_len {
                let (pid, ppid) = self.procs[i];
                if pid == exclude || pid == root {
                    continue;
                }
                let known = &self.members[..self.members_len];
                if (ppid == root || known.contains(&ppid))
                    && !known.contains(&pid)
                    && self.members_len < MAX_PROCS
                {
                    self.members[self.members_len] = pid;
                    self.members_len += 1;
                    grew = true;
                }
            }
            if !grew {
                return;
            }
        }
    }

    /// Adds to `members` the pids listed one per line in the file `name` (NUL-terminated)
    /// under `dir`.
    fn read_pids(&mut self, dir: c_int, name: &[u8]) {
        let fd = sys::openat(dir, name, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut carry = 0usize;
        loop {
            let n = sys::read(fd as c_int, &mut self.buf[carry..]);
            if n <= 0 {
                break;
            }
            let end = carry + n as usize;
            let mut start = 0;
            for i in 0..end {
                if self.buf[i] == b'\n' {
                    if let Some(pid) = parse_pid(&self.buf[start..i])
                        && self.members_len < MAX_PROCS
                    {
                        self.members[self.members_len] = pid;
                        self.members_len += 1;
                    }
                    start = i + 1;
                }
            }
            self.buf.copy_within(start..end, 0);
            carry = end - start;
        }
        sys::close(fd as c_int);
    }
}

/// A positive decimal pid, ignoring a trailing NUL.
fn parse_pid(text: &[u8]) -> Option<c_int> {
    let mut value: c_int = 0;
    let mut digits = 0;
    for &b in text {
        match b {
            b'0'..=b'9' => {
                value = value.checked_mul(10)?.checked_add((b - b'0') as c_int)?;
                digits += 1;
            }
            0 => break,
            _ => return None,
        }
    }
    (digits > 0 && value > 0).then_some(value)
}

/// Writes `n` (positive) in decimal at the start of `out`; returns how many bytes it took.
/// Reads `/proc/PID` followed by `tail` (NUL-terminated) into `out`; how many bytes, `None`
/// when the process is gone (or the file empty).
fn read_proc(pid: c_int, tail: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut path = [0u8; 40];
    let mut len = 0;
    for &b in b"/proc/" {
        path[len] = b;
        len += 1;
    }
    len += write_decimal(&mut path[len..], pid);
    for &b in tail {
        path[len] = b;
        len += 1;
    }
    let fd = sys::openat(
        libc::AT_FDCWD,
        &path[..len],
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return None;
    }
    let n = sys::read(fd as c_int, out);
    sys::close(fd as c_int);
    usize::try_from(n).ok().filter(|&n| n > 0)
}

fn write_decimal(out: &mut [u8], n: c_int) -> usize {
    let mut digits = [0u8; 12];
    let mut len = 0;
    let mut v = n.unsigned_abs();
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_parse_from_proc_names_and_cgroup_lines() {
        assert_eq!(parse_pid(b"1234"), Some(1234));
        assert_eq!(parse_pid(b"1234\0\0"), Some(1234));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
        assert_eq!(parse_pid(b"0"), None);
        assert_eq!(parse_pid(b"99999999999"), None);
    }

    #[test]
    fn decimals_are_written_without_allocating() {
        let mut out = [0u8; 12];
        let n = write_decimal(&mut out, 40213);
        assert_eq!(&out[..n], b"40213");
    }

    #[test]
    fn a_walk_finds_this_process_as_a_descendant_of_its_parent() {
        let mut scratch = Scratch::new();
        scratch.scan_proc();
        // SAFETY: no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        scratch.descendants(parent, 0);
        assert!(scratch.members[..scratch.members_len].contains(&me));
        scratch.members_len = 0;
        scratch.descendants(parent, me);
        assert!(!scratch.members[..scratch.members_len].contains(&me));
    }
}
