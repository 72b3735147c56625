//! The keeper: a dead man's switch that kills the command at the kill point when the
//! supervisor cannot.
//!
//! The supervisor (`commands/run.rs`) stops the command before its lease can lapse — as long as
//! it runs. Frozen (`kill -STOP`, a debugger, a starved or swapped-out redlock) or killed, it
//! does nothing, while the lease expires on the server and another host's run starts. The
//! keeper does not depend on the supervisor being scheduled:
//!
//! * It is a separate process (its own thread group, its own process group), so a SIGSTOP or a
//!   SIGKILL aimed at redlock does not reach it; it blocks every signal it can.
//! * It sleeps on a CLOCK_BOOTTIME timer armed at the current kill point. redlock arms it once
//!   before the command starts, setting the keeper's timer itself through its own copy of the
//!   descriptor (the keeper is not woken: waking it then would take a core from the command's
//!   start), and re-arms it after each confirmed renewal by storing the new kill point in
//!   shared memory: when the timer fires, the keeper reads the kill point again and sleeps on
//!   if it moved. Re-arming costs one atomic store and no system call. The keeper itself only
//!   ever sets its timer to a kill point it has read, and the kill point only moves later, so
//!   its timer is never set past the kill point; at worst it fires early and is set again.
//! * When the kill point passes unrenewed, it kills the command's whole tree (`tree.rs`: every
//!   member of its cgroup, or every descendant of redlock, frozen first). When redlock dies
//!   without dismissing it (the pipe it reads reaches end-of-file), it does the same at once.
//!   Dismissal is a flag in shared memory, read when that end-of-file comes: the keeper does not
//!   wake while redlock releases the lock and the next holder takes it, and with real-time
//!   priority it would otherwise take a core from them at that very moment.
//! * Once the command runs, it has SCHED_FIFO priority 1 (redlock sets it right after the
//!   spawn; granted to root, or with an RLIMIT_RTPRIO), so its timer is served within
//!   microseconds even with every core busy; without it, it still only needs the CPU for a
//!   moment, where the supervisor needs several system calls.
//!
//! It exists before the command starts (it is armed before the spawn) and is dismissed only
//! once every process of the command is gone. It is cheap because it is created like a
//! thread: `clone(CLONE_VM)` shares redlock's memory (no page tables copied), with a stack of
//! its own and an exit signal of 0 (a "clone" child, which `waitid` without `__WALL` does not
//! see, see [`Tree::occupied`]). Sharing memory means it must not use the C library (it runs
//! with the main thread's thread pointer and `errno`), so it uses raw system calls (`sys.rs`),
//! allocates nothing and never panics; the memory it uses is leaked by redlock on purpose, as
//! the keeper may outlive redlock's interest in it (or redlock itself: the memory then stays
//! mapped for the keeper alone).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use libc::c_int;

use crate::supervise::lease::Moment;
use crate::supervise::sys;
use crate::supervise::tree::{Scratch, Tree};

/// The keeper's stack, above a guard page: an overflow faults instead of writing over
/// redlock's memory, which the keeper shares.
const STACK: usize = 64 * 1024;

/// Maps the keeper's stack with an inaccessible page below it, and returns the stack's lowest
/// usable address. Never unmapped: the keeper may outlive redlock's interest in it.
fn guarded_stack() -> io::Result<*mut u8> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    // A whole number of pages, so the stack's top stays page-aligned.
    let size = STACK.div_ceil(page) * page;
    // SAFETY: an anonymous private mapping at an address the kernel picks; nothing else is
    // touched. PROT_NONE on its first page makes that page the guard.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            page + size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
            let err = io::Error::last_os_error();
            libc::munmap(base, page + size);
            return Err(err);
        }
        Ok(base.cast::<u8>().add(page))
    }
}

struct Shared {
    tree: &'static Tree,
    /// The kill point on CLOCK_BOOTTIME, in nanoseconds; 0 while nothing is guarded.
    kill_at: AtomicU64,
    /// When the keeper killed the command, and the kill point it did that for; 0 if it never did.
    fired_at: AtomicU64,
    fired_for: AtomicU64,
    /// Set once the command's tree is empty: nothing is left to guard.
    dismissed: AtomicBool,
    /// The end of the pipe the keeper reads: nothing is written to it, and its end-of-file says
    /// "redlock is gone" (redlock's end is open until it exits; the keeper closes its copy).
    read_fd: c_int,
    /// The keeper's CLOCK_BOOTTIME timer (redlock keeps a copy, to arm it).
    timer: c_int,
    /// The keeper's own walk space, touched by no one else.
    scratch: *mut Scratch,
}

// SAFETY: `scratch` is used by the keeper alone; everything else is atomics or immutable.
unsafe impl Sync for Shared {}

/// redlock's handle on its keeper.
pub struct Keeper {
    shared: &'static Shared,
    pid: c_int,
    /// Set once its real-time priority has been given up.
    demoted: AtomicBool,
}

/// What redlock needs to arm the keeper (a system call, the first time) and the heartbeat to
/// move the kill point (a store, no system call).
#[derive(Clone, Copy)]
pub struct Arm {
    kill_at: &'static AtomicU64,
    /// redlock's copy of the keeper's timer.
    timer: c_int,
    keeper: c_int,
}

impl Arm {
    /// Moves the kill point to `kill_at` (never earlier: a renewal only adds time). The first
    /// time sets the keeper's timer, which is unset until then; later moves are only seen when
    /// the timer fires, which is soon enough, as they only ever move it later.
    pub fn arm(&self, kill_at: Moment) {
        if self.kill_at.fetch_max(kill_at.as_nanos(), Ordering::AcqRel) == 0 {
            let set = sys::timerfd_set_abs(self.timer, kill_at.as_nanos());
            // Cannot fail: our own timer, a valid absolute time.
            debug_assert_eq!(set, 0, "arming the keeper's timer");
        }
    }

    /// Gives the keeper its real-time priority, once the command has started: not while the
    /// acquire is on the wire (at real-time priority the keeper's start-up would take a core
    /// from the Redis server answering it), and not between the answer and the spawn, where
    /// changing a process's scheduling class would delay the command's start. Until
    /// then, and without it at all (not root, no RLIMIT_RTPRIO), the armed keeper still fires,
    /// only less promptly on a busy host — and the kill point is a lease's length away.
    pub fn promote(&self) {
        sys::realtime_priority(self.keeper);
    }
}

/// What the keeper did.
#[derive(Clone, Copy, Debug)]
pub struct Fired {
    pub kill_at: Moment,
    pub at: Moment,
}

impl Keeper {
    /// Starts the keeper for `tree`, disarmed.
    pub fn start(tree: &'static Tree) -> io::Result<Keeper> {
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` is valid for two ints; O_CLOEXEC keeps both ends out of the command.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Made here, not in the keeper, so that a keeper without a timer is never started.
        let timer = sys::timerfd_create_boottime();
        if timer < 0 {
            // SAFETY: our own descriptors.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(io::Error::from_raw_os_error(-timer as i32));
        }
        let timer = timer as c_int;
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            tree,
            kill_at: AtomicU64::new(0),
            fired_at: AtomicU64::new(0),
            fired_for: AtomicU64::new(0),
            dismissed: AtomicBool::new(false),
            read_fd: fds[0],
            timer,
            scratch: Box::into_raw(Scratch::new()),
        }));
        let stack = match guarded_stack() {
            Ok(stack) => stack,
            Err(e) => {
                // SAFETY: our own descriptors.
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                    libc::close(timer);
                }
                return Err(e);
            }
        };
        // SAFETY: the stack grows down from its top (page-aligned, so 16-byte aligned) and is
        // never unmapped; the keeper reads `shared` (leaked, so it lives as long as the address
        // space) and runs only raw system calls (see the module doc). Exit signal 0: a clone
        // child.
        let pid = unsafe {
            let top = stack.add(STACK);
            libc::clone(
                keeper_main,
                top.cast(),
                libc::CLONE_VM,
                (shared as *const Shared).cast_mut().cast(),
            )
        };
        let err = io::Error::last_os_error();
        // SAFETY: closing our copy of the pipe's read end; the keeper has its own. redlock keeps
        // its copy of the timer, to arm it.
        unsafe { libc::close(fds[0]) };
        if pid < 0 {
            // SAFETY: our own descriptors.
            unsafe {
                libc::close(fds[1]);
                libc::close(timer);
            }
            return Err(err);
        }
        tree.keeper.store(pid, Ordering::Release);
        Ok(Keeper {
            shared,
            pid,
            demoted: AtomicBool::new(false),
        })
    }

    pub fn arm(&self) -> Arm {
        Arm {
            kill_at: &self.shared.kill_at,
            timer: self.shared.timer,
            keeper: self.pid,
        }
    }

    /// Whether (and when) the keeper killed the command.
    pub fn fired(&self) -> Option<Fired> {
        let at = self.shared.fired_at.load(Ordering::Acquire);
        (at != 0).then(|| Fired {
            kill_at: Moment::from_nanos(self.shared.fired_for.load(Ordering::Acquire)),
            at: Moment::from_nanos(at),
        })
    }

    /// The command's tree is empty (or the command never started): the keeper has nothing
    /// left to guard, and leaves when redlock does. A keeper that was armed and is dropped
    /// without this (a panic unwinding) still kills the tree when redlock goes; one never armed
    /// has nothing to kill. Its real-time priority goes with [`Keeper::demote`], or when the
    /// handle is dropped, which the caller may leave until the release is on the wire: the
    /// hand-off need not wait for it.
    pub fn dismiss(&self) {
        self.shared.dismissed.store(true, Ordering::Release);
    }

    /// The keeper loses its real-time priority, without being woken: it leaves when redlock
    /// does, and as the last user of the address space it then tears it down, which must not
    /// take a core from the next holder. Once dismissed, it has nothing left to be prompt for.
    pub fn demote(&self) {
        if !self.demoted.swap(true, Ordering::AcqRel) {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: `param` is valid for reads; the keeper is our child.
            unsafe { libc::sched_setscheduler(self.pid, libc::SCHED_OTHER, &param) };
        }
    }
}

impl Drop for Keeper {
    /// Demoted here if not before (see [`Keeper::demote`]).
    fn drop(&mut self) {
        self.demote();
    }
}

extern "C" fn keeper_main(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the leaked `Shared`, alive for the life of the address space.
    let k = unsafe { &*(arg as *const Shared) };
    // SAFETY: only the keeper uses its scratch space.
    let scratch = unsafe { &mut *k.scratch };
    sys::block_all_signals();
    keep_only(&mut [k.read_fd, k.timer, k.tree.cgroup_fd().unwrap_or(k.read_fd)]);
    // Out of redlock's process group: `kill -STOP -PGID` or a Ctrl-Z meant for redlock's job
    // must not stop the keeper too.
    sys::setpgid_self();
    sys::set_name(b"redlock-keeper\0");
    let timer = k.timer;
    let mut timer_off = false;
    loop {
        // Unset (0) until redlock arms it; redlock sets the timer itself then. A kill point read
        // here may already have moved later: the timer then fires early, and is set again.
        let kill_at = k.kill_at.load(Ordering::Acquire);
        if !timer_off && kill_at != 0 {
            sys::timerfd_set_abs(timer, kill_at);
        }
        let mut fds = [
            libc::pollfd {
                fd: k.read_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if timer_off { -1 } else { timer },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        if sys::ppoll(&mut fds) < 0 {
            // Nothing interrupts it (every signal is blocked); do not spin on the unexpected.
            sys::sleep_ns(1_000_000);
            continue;
        }
        if fds[0].revents != 0 {
            let mut byte = [0u8; 1];
            match sys::read(k.read_fd, &mut byte) {
                // Nothing is written to the pipe; only its end matters.
                n if n > 0 || n == -(libc::EINTR as isize) || n == -(libc::EAGAIN as isize) => {
                    continue;
                }
                // Dismissed, or never armed (the command never started: the lock was busy,
                // the wait interrupted): nothing to guard.
                _ if k.dismissed.load(Ordering::Acquire)
                    || k.kill_at.load(Ordering::Acquire) == 0 =>
                {
                    leave()
                }
                _ => {
                    // redlock is gone without a word: nobody supervises the command any more.
                    // Its orphans went to init with it; the command's own tree is still there
                    // (unless the command was reaped already: its pid may be someone else's).
                    after_exit(k.tree.redlock, k.kill_at.load(Ordering::Acquire), scratch);
                    let root = if k.tree.reaped.load(Ordering::Acquire) {
                        0
                    } else {
                        k.tree.command.load(Ordering::Acquire)
                    };
                    fire(k, scratch, root);
                    // A process that was forking while the first pass ran.
                    sys::sleep_ns(20_000_000);
                    k.tree.kill_all(root, scratch);
                    // The cgroup is claimed until the keeper exits: leave it empty.
                    k.tree.await_empty_cgroup(scratch);
                    leave();
                }
            }
        }
        if fds[1].revents != 0 {
            let mut expirations = [0u8; 8];
            sys::read(timer, &mut expirations);
            let kill_at = k.kill_at.load(Ordering::Acquire);
            if k.dismissed.load(Ordering::Acquire) {
                timer_off = true;
            } else if kill_at != 0 && sys::boottime_ns() >= kill_at {
                // The kill point passed and the supervisor has not moved it: it is frozen or
                // starved. redlock still lives, so the tree hangs under it.
                fire(k, scratch, k.tree.redlock);
                timer_off = true;
            }
        }
    }
}

/// Waits until redlock has finished exiting: 100 ms at most, and not past the kill point
/// (`kill_at`) by more than 2 ms. Its end of the pipe closes with
/// its files, before the kernel re-parents its children and deals with the process groups its
/// death leaves orphaned: a group with a stopped member then gets SIGHUP and SIGCONT (POSIX's
/// rule for orphaned groups). Stopped by a walk that began too early, the command would die of
/// that SIGHUP, and whatever it had started in a session of its own (`setsid`) would go to
/// init with no parent left to find it through. Once redlock is a zombie with no thread left
/// (its heartbeat thread exits on its own, and re-parents what it inherited from the main
/// thread) or gone, nothing is stopped, so no such signal comes, and the command keeps its
/// children for the walk.
fn after_exit(redlock: c_int, kill_at: u64, scratch: &mut Scratch) {
    // Past the kill point already (redlock died just after it), the wait is short, not none.
    let now = sys::boottime_ns();
    let until = now
        .saturating_add(100_000_000)
        .min(kill_at.max(now.saturating_add(2_000_000)));
    while !scratch.exited(redlock) && sys::boottime_ns() < until {
        sys::sleep_ns(100_000);
    }
}

/// Closes every descriptor but `keep` in the keeper's own table: its copies of redlock's
/// stdio, sockets and whatever redlock inherited. A reader waiting for the end of redlock's
/// output, or a server for the end of a connection, must not wait for the keeper too.
fn keep_only(keep: &mut [c_int]) {
    keep.sort_unstable();
    let mut next = 0;
    for &fd in keep.iter() {
        if fd > next {
            sys::close_range(next, fd - 1);
        }
        next = next.max(fd + 1);
    }
    sys::close_range(next, c_int::MAX);
}

/// Exits at ordinary priority: when redlock is gone, the keeper is the last user of the address
/// space, and tearing it down at real-time priority would hold up the next holder.
fn leave() -> ! {
    sys::ordinary_priority();
    sys::exit(0)
}

fn fire(k: &Shared, scratch: &mut Scratch, root: c_int) {
    // Before the walk: a command spawned from now on sees it and does not start (`child.rs`).
    k.tree.fired.store(true, Ordering::SeqCst);
    let now = sys::boottime_ns();
    if k.fired_at.load(Ordering::Acquire) == 0 {
        k.fired_for
            .store(k.kill_at.load(Ordering::Acquire), Ordering::Release);
        k.fired_at.store(now, Ordering::Release);
    }
    k.tree.kill_all(root, scratch);
}

#[cfg(test)]
mod tests {
    /// The mapping of `/proc/self/maps` that holds `address`: its permissions.
    fn permissions_at(address: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
        maps.lines()
            .find_map(|line| {
                let mut words = line.split_whitespace();
                let (start, end) = words.next()?.split_once('-')?;
                let start = usize::from_str_radix(start, 16).ok()?;
                let end = usize::from_str_radix(end, 16).ok()?;
                (start <= address && address < end).then(|| words.next().unwrap_or("").into())
            })
            .unwrap_or_else(|| panic!("{address:#x} is not mapped"))
    }

    #[test]
    fn the_keepers_stack_has_an_inaccessible_page_below_it() {
        let stack = super::guarded_stack().expect("map a stack") as usize;
        assert!(permissions_at(stack - 1).starts_with("---"));
        assert!(permissions_at(stack).starts_with("rw"));
        assert!(permissions_at(stack + super::STACK - 1).starts_with("rw"));
    }
}
