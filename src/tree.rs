//! The command's whole process tree: where it lives, how to signal all of it, when it is gone.
//!
//! "The command" is every process it starts, whatever process group or session that process
//! moves to (`timeout`, `setsid`, `set -m`, double forks). Two rooms, the stronger first:
//!
//! 1. **A cgroup of its own** (cgroup v2, Linux ≥ 5.14 for `cgroup.kill`): created next to
//!    redlock's own cgroup as `redlock.PID` when redlock may write there (root on the host, or a
//!    user with a delegated cgroup, e.g. a systemd user session). The command is cloned into it
//!    (`CLONE_INTO_CGROUP`, which unlike a write to `cgroup.procs` does not wait for an RCU
//!    grace period — milliseconds on an idle host), so everything it ever starts is born
//!    inside; `cgroup.kill` kills the lot atomically, fork bombs included. Nothing escapes but a process started *on the command's behalf* by a
//!    daemon outside the tree (`systemd-run`, `docker run`, `at`).
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
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use libc::c_int;

use crate::sys;

/// How many processes a walk can see at once; a host with more is walked in part.
const MAX_PROCS: usize = 32 * 1024;
/// A freeze that keeps finding new processes gives up after this many walks and kills what it
/// stopped (each walk stops every process it found, so a forking loop runs out of parents).
const MAX_FREEZE_PASSES: usize = 64;

pub const MODE_DESCENDANTS: u32 = 0;
pub const MODE_CGROUP: u32 = 1;

/// Where the command lives, shared (read-only but for the atomics) with the keeper.
pub struct Tree {
    /// [`MODE_CGROUP`] or [`MODE_DESCENDANTS`]; the spawned child falls back to descendants if
    /// it cannot join the cgroup, before it execs.
    pub mode: AtomicU32,
    /// The command's pid, which is also its process group; written by the child before exec.
    pub command: AtomicI32,
    /// The keeper's pid, left out of every walk.
    pub keeper: AtomicI32,
    pub redlock: c_int,
    cgroup: Option<Cgroup>,
}

struct Cgroup {
    /// The directory, NUL-terminated.
    dir: Vec<u8>,
    /// `cgroup.procs`, NUL-terminated.
    procs: Vec<u8>,
    /// The directory, open: the command is cloned into it (`CLONE_INTO_CGROUP`).
    fd: c_int,
    /// `cgroup.kill` opened for writing.
    kill: c_int,
}

/// The cgroup v2 mount points redlock looks at: a unified hierarchy, or the hybrid layout.
const CGROUP_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

impl Tree {
    /// A cgroup of its own when `cgroup` allows it and redlock may create one, otherwise
    /// redlock's descendants.
    pub fn prepare(cgroup: bool) -> Tree {
        let cgroup = cgroup.then(|| Cgroup::create().ok()).flatten();
        Tree {
            mode: AtomicU32::new(if cgroup.is_some() {
                MODE_CGROUP
            } else {
                MODE_DESCENDANTS
            }),
            command: AtomicI32::new(0),
            keeper: AtomicI32::new(0),
            // SAFETY: getpid has no preconditions.
            redlock: unsafe { libc::getpid() },
            cgroup,
        }
    }

    /// The cgroup's directory, open, for the command to be cloned into.
    pub fn cgroup_fd(&self) -> Option<c_int> {
        self.cgroup.as_ref().map(|c| c.fd)
    }

    pub fn in_cgroup(&self) -> bool {
        self.mode.load(Ordering::Acquire) == MODE_CGROUP
    }

    /// A short name for the room, for logs and the README's table.
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

    /// Kills every process of the command, now. `root` is where a walk starts: redlock while it
    /// lives, the command once redlock is gone.
    pub fn kill_all(&self, root: c_int, scratch: &mut Scratch) {
        if root <= 0 {
            // Descendants of "no process" would be every process on the machine.
            return;
        }
        if let (true, Some(cgroup)) = (self.in_cgroup(), &self.cgroup) {
            // Atomic in the kernel: nothing forks its way out.
            if sys::write(cgroup.kill, b"1") == 1 {
                return;
            }
        }
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
                if scratch.stopped[..scratch.stopped_len].contains(&pid) {
                    continue;
                }
                sys::kill(pid, libc::SIGSTOP);
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
        if pgid > 0 {
            sys::kill(-pgid, libc::SIGKILL);
        }
        for i in 0..scratch.stopped_len {
            sys::kill(scratch.stopped[i], libc::SIGKILL);
        }
        if pgid > 0 && root != pgid {
            sys::kill(pgid, libc::SIGKILL);
        }
    }

    /// The command's processes: the cgroup's, or the descendants of `root` (the keeper left
    /// out). A pid may have exited since; signalling it then fails harmlessly.
    pub fn members<'s>(&self, root: c_int, scratch: &'s mut Scratch) -> &'s [c_int] {
        scratch.members_len = 0;
        match (self.in_cgroup(), &self.cgroup) {
            (true, Some(cgroup)) => scratch.read_pids(&cgroup.procs),
            _ => {
                scratch.scan_proc();
                scratch.descendants(root, self.keeper.load(Ordering::Acquire));
            }
        }
        &scratch.members[..scratch.members_len]
    }

    /// Whether any process of the command is left. Every process the command started is a
    /// descendant of redlock (a subreaper), so the tree is empty exactly when redlock has no
    /// child left but the keeper, which is a "clone" child that `waitid` without `__WALL`
    /// does not see. Reap zombies first: an unreaped child still counts.
    pub fn occupied(&self) -> bool {
        // SAFETY: `info` is valid for writes; WNOWAIT leaves any waitable child in place.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
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

    /// Removes the (empty) cgroup, retrying for a moment while the last killed processes exit.
    pub fn remove_cgroup(&self) {
        let Some(cgroup) = &self.cgroup else {
            return;
        };
        for _ in 0..500 {
            let rc = sys::rmdir(&cgroup.dir);
            if rc == 0 || rc == -(libc::ENOENT as isize) {
                return;
            }
            sys::sleep_ns(10_000_000);
        }
    }
}

impl Cgroup {
    fn create() -> io::Result<Cgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or_else(|| io::Error::other("no cgroup v2"))?
            .trim_end();
        let mount = CGROUP_MOUNTS
            .iter()
            .find(|m| {
                std::fs::metadata(format!("{m}/cgroup.procs")).is_ok()
                    && std::fs::metadata(format!("{m}/cgroup.controllers")).is_ok()
            })
            .ok_or_else(|| io::Error::other("cgroup v2 is not mounted"))?;
        let parent = format!("{mount}{}", path.trim_end_matches('/'));
        // SAFETY: getpid has no preconditions.
        let dir = format!("{parent}/redlock.{}", unsafe { libc::getpid() });
        let cdir = CString::new(dir.clone())?;
        // SAFETY: `cdir` is a valid NUL-terminated path.
        if unsafe { libc::mkdir(cdir.as_ptr(), 0o755) } != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(err);
            }
            // Left behind by an earlier redlock with this pid, which died hard: reuse it if
            // it is empty (rmdir succeeds only then).
            // SAFETY: as above.
            if unsafe { libc::rmdir(cdir.as_ptr()) != 0 || libc::mkdir(cdir.as_ptr(), 0o755) != 0 }
            {
                return Err(io::Error::last_os_error());
            }
        }
        let remove = |e: io::Error| {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::rmdir(cdir.as_ptr()) };
            e
        };
        let open = |path: String, flags: c_int| -> io::Result<(Vec<u8>, c_int)> {
            let path = CString::new(path)?;
            // SAFETY: a valid NUL-terminated path.
            let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok((path.into_bytes_with_nul(), fd))
        };
        // No cgroup.kill (Linux < 5.14): the cgroup could not kill the tree atomically; the
        // walk of redlock's descendants does as well without one.
        let (_, kill) = open(format!("{dir}/cgroup.kill"), libc::O_WRONLY).map_err(remove)?;
        let (_, fd) = open(dir.clone(), libc::O_RDONLY | libc::O_DIRECTORY).map_err(|e| {
            sys::close(kill);
            remove(e)
        })?;
        let procs = CString::new(format!("{dir}/cgroup.procs"))?.into_bytes_with_nul();
        Ok(Cgroup {
            dir: cdir.into_bytes_with_nul(),
            procs,
            fd,
            kill,
        })
    }
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
        let mut path = [0u8; 32];
        let mut len = 0;
        for &b in b"/proc/" {
            path[len] = b;
            len += 1;
        }
        len += write_decimal(&mut path[len..], pid);
        for &b in b"/stat\0" {
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
        let n = sys::read(fd as c_int, &mut self.stat);
        sys::close(fd as c_int);
        if n <= 0 {
            return None;
        }
        let text = &self.stat[..n as usize];
        let close = text.iter().rposition(|&b| b == b')')?;
        // ") S PPID ..."
        let rest = text.get(close + 2..)?;
        let mut fields = rest.split(|&b| b == b' ');
        let state = fields.next()?;
        // A zombie has finished running; it waits only to be reaped.
        if state == b"Z" || state == b"X" {
            return None;
        }
        parse_pid(fields.next()?)
    }

    /// Fills `members` with every scanned process whose ancestry reaches `root`, leaving out
    /// `exclude` and whatever descends from it.
    fn descendants(&mut self, root: c_int, exclude: c_int) {
        self.members_len = 0;
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

    /// Reads the pids listed one per line in the file at the NUL-terminated `path`.
    fn read_pids(&mut self, path: &[u8]) {
        self.members_len = 0;
        let fd = sys::openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_CLOEXEC);
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
        scratch.descendants(parent, me);
        assert!(!scratch.members[..scratch.members_len].contains(&me));
    }
}
