//! Raw system calls for code that runs where the C library must not: the keeper, a process that
//! shares redlock's memory (and its thread pointer) but not its threads (see `keeper.rs`).
//!
//! The C library's wrappers store failures in `errno`, which lives in the calling thread's
//! thread-local block; the keeper runs with the main thread's thread pointer, so a failing
//! wrapper there would overwrite the main thread's `errno` behind its back. These wrappers
//! return the kernel's answer as it is (`-errno` on failure) and touch no memory but what they
//! are given. They allocate nothing, take no lock and cannot panic.

use libc::{c_int, c_long};

/// A system call with up to six arguments; returns the raw result (negative errno on failure).
///
/// # Safety
/// The arguments must be valid for system call `nr`: pointers must point to memory of the size
/// and kind the call expects, for as long as the call uses it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall(nr: c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the x86-64 Linux system call convention; rcx and r11 are clobbered by `syscall`.
    // The caller vouches for the arguments.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to six arguments; returns the raw result (negative errno on failure).
///
/// # Safety
/// The arguments must be valid for system call `nr`: pointers must point to memory of the size
/// and kind the call expects, for as long as the call uses it.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall(nr: c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the AArch64 Linux system call convention (number in x8, result in x0). The caller
    // vouches for the arguments.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

macro_rules! args {
    ($($a:expr),*) => {{
        let mut v = [0usize; 6];
        let given = [$($a as usize),*];
        let mut i = 0;
        while i < given.len() {
            v[i] = given[i];
            i += 1;
        }
        v
    }};
}

pub fn kill(pid: c_int, sig: c_int) -> isize {
    // SAFETY: kill takes no pointers.
    unsafe { syscall(libc::SYS_kill, args!(pid, sig)) }
}

pub fn read(fd: c_int, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is valid for writes of its length during the call.
    unsafe { syscall(libc::SYS_read, args!(fd, buf.as_mut_ptr(), buf.len())) }
}

pub fn close(fd: c_int) -> isize {
    // SAFETY: close takes no pointers.
    unsafe { syscall(libc::SYS_close, args!(fd)) }
}

/// Opens the NUL-terminated `path` relative to `dir` (`libc::AT_FDCWD` for the working directory).
pub fn openat(dir: c_int, path: &[u8], flags: c_int) -> isize {
    if path.last() != Some(&0) {
        return -(libc::EINVAL as isize);
    }
    // SAFETY: `path` is NUL-terminated and valid during the call.
    unsafe { syscall(libc::SYS_openat, args!(dir, path.as_ptr(), flags, 0)) }
}

pub fn getdents64(fd: c_int, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is valid for writes of its length during the call.
    unsafe { syscall(libc::SYS_getdents64, args!(fd, buf.as_mut_ptr(), buf.len())) }
}

/// Nanoseconds on CLOCK_BOOTTIME, which keeps counting while the machine is suspended.
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for writes during the call.
    unsafe {
        syscall(
            libc::SYS_clock_gettime,
            args!(libc::CLOCK_BOOTTIME, &raw mut ts),
        )
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn timerfd_create_boottime() -> isize {
    // SAFETY: takes no pointers.
    unsafe {
        syscall(
            libc::SYS_timerfd_create,
            args!(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC),
        )
    }
}

/// Arms `fd` to expire at `at_ns` on its clock (absolute); 0 disarms it.
pub fn timerfd_set_abs(fd: c_int, at_ns: u64) -> isize {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (at_ns % 1_000_000_000) as c_long,
        },
    };
    // SAFETY: `spec` is valid for reads during the call; the old value is not asked for.
    unsafe {
        syscall(
            libc::SYS_timerfd_settime,
            args!(fd, libc::TFD_TIMER_ABSTIME, &raw const spec, 0),
        )
    }
}

/// Waits until one of `fds` is ready, with every signal blocked meanwhile.
pub fn ppoll(fds: &mut [libc::pollfd]) -> isize {
    let all: u64 = !0;
    // SAFETY: `fds` is valid for reads and writes during the call; the signal mask is 8 bytes,
    // the size the kernel's sigset_t has on Linux.
    unsafe {
        syscall(
            libc::SYS_ppoll,
            args!(fds.as_mut_ptr(), fds.len(), 0, &raw const all, 8),
        )
    }
}

/// Blocks every signal that can be blocked in the calling thread.
pub fn block_all_signals() -> isize {
    let all: u64 = !0;
    // SAFETY: the mask is 8 bytes, the kernel's sigset_t size on Linux.
    unsafe {
        syscall(
            libc::SYS_rt_sigprocmask,
            args!(libc::SIG_SETMASK, &raw const all, 0, 8),
        )
    }
}

pub fn setpgid_self() -> isize {
    // SAFETY: takes no pointers.
    unsafe { syscall(libc::SYS_setpgid, args!(0, 0)) }
}

/// Names the calling thread (at most 15 bytes and a NUL) as `ps` and `top` show it.
pub fn set_name(name: &[u8]) -> isize {
    if name.last() != Some(&0) || name.len() > 16 {
        return -(libc::EINVAL as isize);
    }
    // SAFETY: `name` is NUL-terminated and at most 16 bytes.
    unsafe { syscall(libc::SYS_prctl, args!(libc::PR_SET_NAME, name.as_ptr())) }
}

/// Gives process `pid` the lowest real-time priority (SCHED_FIFO 1), so the keeper runs the
/// moment its timer fires even when every core is busy. Needs CAP_SYS_NICE or an
/// RLIMIT_RTPRIO; the result says whether it was granted.
pub fn realtime_priority(pid: c_int) -> isize {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is valid for reads during the call.
    unsafe {
        syscall(
            libc::SYS_sched_setscheduler,
            args!(pid, libc::SCHED_FIFO, &raw const param),
        )
    }
}

/// Back to the ordinary scheduler (SCHED_OTHER), e.g. before a real-time process's exit tears
/// down an address space, which must not take a core from everyone else.
pub fn ordinary_priority() -> isize {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is valid for reads during the call.
    unsafe {
        syscall(
            libc::SYS_sched_setscheduler,
            args!(0, libc::SCHED_OTHER, &raw const param),
        )
    }
}

pub fn exit(code: c_int) -> ! {
    loop {
        // SAFETY: takes no pointers; does not return.
        unsafe { syscall(libc::SYS_exit, args!(code)) };
    }
}

/// Sleeps for `ns` nanoseconds (monotonic; used only for short bounded back-offs).
pub fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as c_long,
    };
    // SAFETY: `ts` is valid for reads during the call; the remainder is not asked for.
    unsafe { syscall(libc::SYS_nanosleep, args!(&raw const ts, 0)) };
}

/// `struct clone_args` of clone3(2), as far as redlock uses it.
#[repr(C)]
#[derive(Default)]
pub struct CloneArgs {
    pub flags: u64,
    pub pidfd: u64,
    pub child_tid: u64,
    pub parent_tid: u64,
    pub exit_signal: u64,
    pub stack: u64,
    pub stack_size: u64,
    pub tls: u64,
    pub set_tid: u64,
    pub set_tid_size: u64,
    pub cgroup: u64,
}

/// clone3's flag that starts the child inside the cgroup whose directory `cgroup` refers to.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// clone3(2) that runs `f(arg)` in the child, on the stack `args` names, and exits with its
/// result: what glibc's `clone` does for clone(2), which it offers no wrapper for with clone3.
/// Returns the child's pid to the parent, or `-errno`.
///
/// # Safety
/// `args` must name a stack the child may use, 16-byte aligned at its top; with CLONE_VM the
/// child shares the caller's memory, so `f` must only do what is safe there (see
/// `child::exec_child`).
#[cfg(target_arch = "x86_64")]
pub unsafe fn clone3_run(
    args: &CloneArgs,
    f: extern "C" fn(*mut libc::c_void) -> c_int,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: in the parent, only `syscall` runs (clobbering rcx and r11). The child starts
    // on its own stack with the parent's registers, calls `f` with `arg` (kept in the
    // callee-saved r12/r13) and exits; it never returns into the parent's frames.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") f,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Closes every descriptor from `first` to `last` (inclusive); Linux ≥ 5.9.
pub fn close_range(first: c_int, last: c_int) -> isize {
    // SAFETY: takes no pointers.
    unsafe { syscall(libc::SYS_close_range, args!(first, last, 0)) }
}
