//! `redlock`: guard shell commands and cron jobs with a Redis lock.
//!
//! `main` is the only place an outcome becomes an exit status; everything below returns
//! `anyhow::Result` and leaves the process alone, so destructors run.
//!
//! redlock defines the C `main` itself (`no_main`) rather than letting the Rust runtime start
//! first: the runtime's start-up reads `/proc/self/maps` and sets up an alternate signal stack
//! for a stack-overflow message, work every short run would pay for (see docs/performance.md).
//! What of it redlock needs is done in [`main`]: make sure fds 0–2 are open, ignore SIGPIPE
//! (a closed reader is an error to handle, not a death), and flush stdout at the end.

#![cfg_attr(not(test), no_main)]

mod cli;
mod commands;
mod context;
mod lock;
mod redis;
mod report;
mod supervise;

use anyhow::Result;
use clap::error::ErrorKind;

use crate::cli::{Cli, Command};
pub use crate::context::Context;
use crate::report::error::{self, classify};
use crate::report::exit::Exit;
use crate::report::log;

// Under `cargo test` the test harness brings its own entry point; this one is then unused.
#[cfg_attr(not(test), unsafe(no_mangle))]
#[cfg_attr(test, allow(dead_code))]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    standard_fds();
    // SAFETY: setting a disposition to SIG_IGN installs no handler.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = run_main();
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code.into()
}

/// Opens /dev/null on any of fds 0, 1, 2 that is closed, so that no connection redlock opens
/// later is mistaken for its stdout or stderr (as the Rust runtime does).
fn standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is valid for three entries; a zero timeout returns at once.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } <= 0 {
        return;
    }
    for pfd in fds {
        if pfd.revents & libc::POLLNVAL != 0 {
            // SAFETY: a valid NUL-terminated path; open takes the lowest free fd, this one.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

/// Runs redlock, and turns a panic (a bug) into its own status rather than an abort that
/// reads as "killed by SIGABRT" (134). A panic while a command runs ends redlock; its keeper
/// then kills the command's tree at once, and the lock expires by itself.
fn run_main() -> u8 {
    let _ = MAIN_THREAD.set(std::thread::current().id());
    std::panic::set_hook(Box::new(remember_panic));
    match std::panic::catch_unwind(run_guarded) {
        Ok(code) => code,
        Err(payload) => internal_error(payload.as_ref()),
    }
}

/// Where the last panic happened, with its message, for [`internal_error`]: the hook sees the
/// location, `catch_unwind` only the payload.
static PANICKED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

fn remember_panic(info: &std::panic::PanicHookInfo) {
    let text = format!(
        "{}{}",
        payload_text(info.payload()),
        info.location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default()
    );
    let on_main = MAIN_THREAD.get() == Some(&std::thread::current().id());
    if !on_main {
        // Another thread's panic ends that thread alone; say so, once.
        log::warn(
            "internal_error",
            &format!("internal error in a thread: {text}"),
            &[],
        );
    }
    *PANICKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(text);
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// The one line for a panic, and its status (70).
fn internal_error(payload: &(dyn std::any::Any + Send)) -> u8 {
    let text = PANICKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .unwrap_or_else(|| payload_text(payload).to_string());
    let exit = Exit::Internal;
    log::last(
        log::Level::Error,
        "internal_error",
        &format!("internal error (a bug in redlock; please report it): {text}"),
        &[("exit", exit.code().into())],
    );
    exit.code()
}

fn run_guarded() -> u8 {
    // A debug build can be made to panic here, so that tests can follow a panic's way out.
    if cfg!(debug_assertions) && std::env::var_os("REDLOCK_DEBUG_PANIC").is_some() {
        panic!("REDLOCK_DEBUG_PANIC is set");
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::parse_args(&args) {
        Ok(cli) => cli,
        Err(err) => return usage_error(err, &args),
    };
    log::init(cli.global.verbose, cli.global.quiet, cli.global.log_format);
    let result = Context::new(&cli.global).and_then(|ctx| dispatch(&ctx, cli.command));
    let exit = match result {
        Ok(exit) => {
            log::dropped_summary();
            exit
        }
        Err(err) => {
            let exit = classify(&err);
            log::last(
                log::Level::Error,
                event_name(exit),
                &error::render(&err),
                &[("exit", exit.code().into())],
            );
            exit
        }
    };
    exit.code()
}

fn dispatch(ctx: &Context, command: Command) -> Result<Exit> {
    match command {
        Command::Run(args) => commands::run::run(ctx, args),
        Command::Status(args) => commands::status::status(ctx, args),
        Command::Release(args) => commands::release::release(ctx, args),
        Command::Acquire(args) => commands::acquire::acquire(ctx, args),
        Command::Extend(args) => commands::extend::extend(ctx, args),
        Command::Doctor(args) => commands::doctor::doctor(ctx, &args),
        Command::Pause(args) => commands::pause::pause(ctx, args),
        Command::Resume(args) => commands::pause::resume(ctx, args),
        Command::Metrics(args) => commands::metrics::metrics(ctx, args),
        Command::Check(args) => commands::check::check(ctx, args),
        Command::Log(args) => commands::log::log(ctx, args),
        Command::GenerateDocs(args) => commands::generate::generate_docs(&args),
    }
}

fn event_name(exit: Exit) -> &'static str {
    match exit {
        Exit::Usage => "usage",
        Exit::Unavailable => "unavailable",
        Exit::Busy(_) => "busy",
        Exit::LeaseLost => "lease_lost",
        Exit::Permission => "permission",
        Exit::Config => "server_config",
        Exit::TimedOut => "timed_out",
        Exit::Internal => "internal_error",
        Exit::NotExecutable | Exit::NotFound => "spawn_failed",
        _ => "error",
    }
}

/// clap's own errors, reduced to the one `redlock:` line the contract promises (64), in the
/// words of `cli::usage` and in the format `--log-format` asks for. `--help` and `--version`
/// are not errors.
fn usage_error(err: clap::Error, args: &[std::ffi::OsString]) -> u8 {
    let format = cli::log_format_of(args);
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            return 0;
        }
        // `redlock` alone shows the help (on stderr, as a usage error); JSON lines get the one
        // line instead.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand if format == log::LogFormat::Text => {
            eprint!("{}", err.render());
            return Exit::Usage.code();
        }
        _ => {}
    }
    log::init(false, false, format);
    let line = cli::usage::explain(&err, args);
    let see = if line.contains("--help") {
        String::new()
    } else {
        " (see 'redlock --help')".to_string()
    };
    log::error(
        "usage",
        &format!("{line}{see}"),
        &[("exit", Exit::Usage.code().into())],
    );
    Exit::Usage.code()
}
