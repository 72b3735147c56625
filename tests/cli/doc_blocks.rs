//! The documentation is executable: every fenced block of `README.md` and `docs/*.md` in a
//! shell language (`sh`, `bash`, `console`, `cron`) is run against a test Redis, or carries the
//! reason it cannot be in an HTML comment right before it (`<!-- not run: REASON -->`). A new
//! block is run by default: one this file has no setup for runs in an empty directory with
//! `redlock` on PATH and `REDLOCK_URL` naming the test server, and must exit 0.
//!
//! - `cron` lines run as cron runs them: `env -i` with cron's PATH, through `sh -c`, with the
//!   binary at the path the README installs it to; a line that says `--conflict-exit-code 0`
//!   runs as three hosts at once, and none of them may print anything (cron mails output).
//! - `console` blocks run their `$ ` lines and must print what the block shows, in shape: the
//!   same lines and words, with numbers, times, paths, hosts and users left open.
//! - A block marked `<!-- FILE -->` is a copy of FILE (leading comment lines aside).
//!
//! Beside the blocks: every backticked repository path exists, every `--flag` is one the
//! binary's `--help` lists, and every link inside the repository reaches a file and a heading.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::process::host_name;
use crate::support::{RedisServer, TempDir};

/// Where `scripts/install` puts the binary, and so where a crontab names it.
const INSTALLED: &str = "/usr/local/bin/redlock";
/// The password the README's password-file command writes.
const PASSWORD: &str = "the-password";
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);
const SHELLS: [&str; 4] = ["sh", "bash", "console", "cron"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_redlock")
}

#[derive(Debug, Clone)]
struct Block {
    file: String,
    line: usize,
    lang: String,
    text: String,
    marker: Option<String>,
}

impl Block {
    fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("").trim()
    }

    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The documents the tests hold to their blocks: the README and docs/*.md.
fn documents() -> Vec<String> {
    let mut docs = vec!["README.md".to_owned()];
    let mut more: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The fenced blocks of one document, with the HTML comment right before each, if any.
fn blocks_of(file: &str) -> Vec<Block> {
    let text = read(file);
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            let indent = line.len() - trimmed.len();
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim())
                .and_then(|l| l.strip_prefix("<!--"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|l| l.trim().to_owned());
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end].trim() != "```" {
                end += 1;
            }
            assert!(
                end < lines.len(),
                "{file}:{start}: a fence that is never closed"
            );
            let body: Vec<&str> = lines[start..end]
                .iter()
                .map(|l| {
                    l.get(indent.min(l.len() - l.trim_start().len())..)
                        .unwrap_or("")
                })
                .collect();
            blocks.push(Block {
                file: file.to_owned(),
                line: i + 1,
                lang: lang.trim().to_owned(),
                text: body.join("\n") + "\n",
                marker,
            });
            i = end + 1;
        } else {
            i += 1;
        }
    }
    blocks
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|d| blocks_of(d)).collect()
}

/// A scratch directory with `bin/redlock` (the binary under test) and the test's stand-ins.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = TempDir::new("doc");
        fs::create_dir_all(dir.join("bin")).unwrap();
        std::os::unix::fs::symlink(binary(), dir.join("bin/redlock")).unwrap();
        fs::create_dir_all(dir.join("textfile")).unwrap();
        let sandbox = Sandbox { dir };
        // The job of the cron recipes: it counts its runs and prints nothing.
        sandbox.script("run.sh", &format!("echo ran >> {}", sandbox.path("runs")));
        sandbox
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// An executable shell script `name` (relative to the sandbox) with `body`.
    fn script(&self, name: &str, body: &str) {
        let path = self.dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The block's placeholders made real: the lock server, the installed binary, the files
    /// a recipe names under /etc, /opt and /var, and no sudo (the files are the sandbox's).
    fn substitute(&self, text: &str, url: &str) -> String {
        text.replace("redis://locks.internal:6379", url)
            .replace(INSTALLED, binary())
            .replace("/etc/redlock/pass", &self.path("pass"))
            .replace("/opt/report/run.sh", &self.path("run.sh"))
            .replace("/opt/sync/run.sh", &self.path("run.sh"))
            .replace("/var/lib/node_exporter/textfile", &self.path("textfile"))
            .replace("sudo ", "")
    }

    fn runs(&self) -> usize {
        fs::read_to_string(self.dir.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Runs `script` with `sh -c` in the sandbox: PATH has `bin/` first, REDLOCK_URL is `url`.
    fn run(&self, script: &str, url: &str) -> Finished {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.path("bin")))
            .env("HOME", self.dir.path())
            .env("REDLOCK_URL", url);
        self.finish(cmd, script)
    }

    /// Runs the command part of a crontab line as cron does. `url` is what a `REDLOCK_URL=`
    /// line at the top of the crontab would give every line (a line's own assignment wins).
    fn cron(&self, command: &str, url: &str) -> std::process::Child {
        let mut cmd = Command::new("env");
        cmd.args(["-i", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"])
            .arg(format!("HOME={}", self.dir.path().display()))
            .arg(format!("REDLOCK_URL={url}"))
            .args(["sh", "-c", command]);
        self.spawn(cmd)
    }

    fn spawn(&self, mut cmd: Command) -> std::process::Child {
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        cmd.spawn().expect("start sh")
    }

    fn finish(&self, cmd: Command, shown: &str) -> Finished {
        let child = self.spawn(cmd);
        finished(child, shown)
    }
}

struct Finished {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Finished {
    fn story(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Waits for `child` (and its process group) within BLOCK_TIMEOUT, killing it past that.
fn finished(mut child: std::process::Child, shown: &str) -> Finished {
    let deadline = Instant::now() + BLOCK_TIMEOUT;
    let pid = i32::try_from(child.id()).expect("pid");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(out));
    let err = read_all(Box::new(err));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) on the process group this test started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("{shown:?} ran longer than {BLOCK_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A background job of the block that is still running is the block's leftover.
    // SAFETY: as above.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    Finished {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// What a block needs before it runs (shell lines, in its directory), and what it must show.
struct Setup {
    before: String,
    status: i32,
    check: fn(&Finished, &Sandbox, &RedisServer) -> Result<(), String>,
}

fn no_check(_: &Finished, _: &Sandbox, _: &RedisServer) -> Result<(), String> {
    Ok(())
}

/// A holder of report:daily that runs until `go` is written to, and the wait for it.
const HOLD_REPORT: &str = r#"mkfifo go
redlock run --key report:daily --ttl 3s -- /opt/report/run.sh &
i=0; until redlock status report:daily >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 2000 ] || exit 99; sleep 0.01; done
"#;

/// The setups of the blocks that need one, by their first line.
fn setup_for(block: &Block, sandbox: &Sandbox) -> Setup {
    let first = block.first_line();
    let plain = |before: &str| Setup {
        before: before.to_owned(),
        status: 0,
        check: no_check,
    };
    if first.starts_with("redlock run --key lock:report:daily") {
        sandbox.script("job.sh", "echo job");
        return plain("");
    }
    if first.starts_with("redlock acquire --key demo") {
        return Setup {
            before: String::new(),
            status: 0,
            check: |run, _, _| {
                let printed = |word: &str| run.stdout.lines().any(|l| l == word);
                (printed("next") && !printed("never") && run.stderr.contains("held by"))
                    .then_some(())
                    .ok_or_else(|| "expected `never` refused as held, then `next` run".to_owned())
            },
        };
    }
    if first.starts_with("out=$(redlock acquire --key deploy:prod") {
        sandbox.script("bin/step_one", r#"echo "step one $*""#);
        sandbox.script("bin/step_two", r#"echo "step two $*""#);
        return Setup {
            before: String::new(),
            status: 0,
            check: |run, _, server| {
                if !run.stdout.contains("step two --fence") {
                    return Err("step_two did not run with the fence".to_owned());
                }
                server.get("deploy:prod").map_or(Ok(()), |_| {
                    Err("the trap did not release deploy:prod".to_owned())
                })
            },
        };
    }
    if first.contains("/usr/local/bin/redlock doctor") {
        // The server as the recipe sets it up: its password, no eviction, AOF.
        let pass = sandbox.path("pass");
        return Setup {
            before: format!(
                "printf '%s\\n' '{PASSWORD}' > '{pass}'; chmod 600 '{pass}'\n\
                 for setting in 'appendonly yes' 'maxmemory-policy noeviction' \
                 'requirepass {PASSWORD}'; do\n\
                 redis-cli -u \"$REDLOCK_URL\" CONFIG SET $setting >/dev/null || exit 99\n\
                 done\n"
            ),
            status: 0,
            check: |run, _, _| {
                run.stdout
                    .lines()
                    .all(|l| l.starts_with("ok "))
                    .then_some(())
                    .ok_or_else(|| "doctor is not clean on the recipe's server".to_owned())
            },
        };
    }
    if first.starts_with("printf '%s\\n' 'the-password'") {
        return Setup {
            before: String::new(),
            status: 0,
            check: |_, sandbox, _| password_file_ok(sandbox),
        };
    }
    if first.starts_with("redlock run --key deploy:web") {
        sandbox.script("deploy.sh", "echo deployed");
        return plain("");
    }
    if first.starts_with("redlock --prefix prod: pause --all") {
        sandbox.script("migrate-database", "echo migrated");
        return plain("");
    }
    if first.starts_with("redlock run --key deploy:prod --ttl 5m -- ./release-all.sh") {
        sandbox.script("release-all.sh", "./deploy.sh");
        sandbox.script(
            "deploy.sh",
            "redlock run --key deploy:prod --ttl 1m -- echo nested-deploy",
        );
        return Setup {
            before: String::new(),
            status: 0,
            check: |run, _, _| {
                run.stdout
                    .contains("nested-deploy")
                    .then_some(())
                    .ok_or_else(|| "the nested run did not run".to_owned())
            },
        };
    }
    if first.starts_with("# on every web host") {
        sandbox.script("bin/systemctl", "exit 0");
        sandbox.script("wait-healthy", "exit 0");
        return plain("");
    }
    if first.starts_with("redlock run --key db:prod --shared") {
        sandbox.script("nightly-report.sh", "echo report");
        sandbox.script("backup.sh", "echo backup");
        return plain("");
    }
    if first.starts_with("# moves money between two ledgers") {
        sandbox.script("transfer", r#"[ -n "$2" ] && [ -n "$4" ]"#);
        return plain("");
    }
    if first.starts_with("redlock status --show-token report:daily") {
        return plain("redlock acquire --key report:daily --ttl 1m >/dev/null\n");
    }
    // console blocks
    if first == "$ redlock run --key report:daily --ttl 1m -- ./report.sh" {
        sandbox.script("report.sh", "echo report");
        return plain("redlock pause report:daily --for 2h --reason 'db migration' >/dev/null\n");
    }
    // The runbook's: a run that ended ok, then a holder (a job that waits for the fifo `go`).
    let held = || {
        sandbox.script("run.sh", "[ -p go ] && read _ < go; exit 0");
        sandbox.substitute(
            &format!(
                "redlock run --key report:daily --ttl 3s -- /opt/report/run.sh\n{HOLD_REPORT}"
            ),
            "",
        )
    };
    if first == "$ redlock check report:daily --max-age 2h --max-since-success 26h"
        || first == "$ redlock status report:daily"
    {
        return plain(&held());
    }
    if first == "$ redlock log report:daily --since 6h" {
        // Taken, refused as busy, released by force, lost at the next renewal.
        sandbox.script("run.sh", "[ -p go ] && read _ < go; exit 0");
        return plain(&sandbox.substitute(
            &format!(
                "{HOLD_REPORT}redlock run --key report:daily --ttl 3s -- /opt/report/run.sh 2>/dev/null\n\
                 redlock release report:daily --force >/dev/null 2>&1\nwait\n"
            ),
            "",
        ));
    }
    plain("")
}

/// The password file as the README's command leaves it: the password, mode 0600, owned by
/// the user who made it (the crontab's).
fn password_file_ok(sandbox: &Sandbox) -> Result<(), String> {
    let path = sandbox.dir.join("pass");
    let meta = fs::metadata(&path).map_err(|e| format!("no password file: {e}"))?;
    let text = fs::read_to_string(&path).unwrap();
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if meta.mode() & 0o777 != 0o600 || meta.uid() != uid || text.trim_end() != PASSWORD {
        return Err(format!(
            "password file mode {:o}, owner {}, text {text:?}",
            meta.mode() & 0o777,
            meta.uid()
        ));
    }
    Ok(())
}

/// The command part of a crontab line (after the five time fields), or None for a comment.
fn cron_command(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).expect("five time fields");
        rest = &rest[end..];
    }
    Some(rest.trim().to_owned())
}

/// One cron line, run as `hosts` hosts at once; each must exit 0 and print nothing.
fn run_cron_line(
    line: &str,
    sandbox: &Sandbox,
    url: &str,
    hosts: usize,
) -> Result<Vec<Finished>, String> {
    let command = sandbox.substitute(line, url);
    let children: Vec<_> = (0..hosts).map(|_| sandbox.cron(&command, url)).collect();
    let runs: Vec<Finished> = children.into_iter().map(|c| finished(c, line)).collect();
    for run in &runs {
        if run.status != Some(0) || !run.stdout.is_empty() || !run.stderr.is_empty() {
            return Err(format!(
                "a host's run of {line:?} was not a quiet success (cron mails output):\n{}",
                run.story()
            ));
        }
    }
    Ok(runs)
}

/// Runs a `cron` block: each line as cron would, on several hosts when the line says busy
/// hosts exit 0. The README's password file is made by the README's own command.
fn run_cron_block(block: &Block, all: &[Block]) -> Result<(), String> {
    for line in block.text.lines() {
        let Some(command) = cron_command(line) else {
            continue;
        };
        if command.contains('%') && !command.contains("\\%") {
            return Err(format!(
                "{command:?}: cron turns an unescaped % into a newline"
            ));
        }
        let program = command
            .split_whitespace()
            .find(|w| !w.contains('='))
            .unwrap_or("");
        if program != INSTALLED {
            return Err(format!(
                "{command:?}: cron's PATH is /usr/bin:/bin; name redlock as {INSTALLED}, \
                 where scripts/install puts it (found {program:?})"
            ));
        }
        let hosts = if command.contains("--conflict-exit-code 0") {
            3
        } else {
            1
        };
        let sandbox = Sandbox::new();
        if command.contains("/etc/redlock/pass") {
            let make = all
                .iter()
                .find(|b| {
                    b.lang == "sh"
                        && b.text.contains("install")
                        && b.text.contains("/etc/redlock/pass")
                })
                .ok_or("no block shows how to make /etc/redlock/pass")?;
            let server = RedisServer::start_with(&["--requirepass", PASSWORD]);
            let made = sandbox.run(
                &sandbox.substitute(&make.text, &server.url()),
                &server.url(),
            );
            if made.status != Some(0) {
                return Err(format!("{}: {}", make.at(), made.story()));
            }
            password_file_ok(&sandbox)?;
            run_cron_line(&command, &sandbox, &server.url(), hosts)?;
            check_runs(&command, &sandbox, hosts)?;
            // A Redis without a password, as the README says: the line without the file.
            let open = RedisServer::start();
            let without = command.replace("REDLOCK_PASSWORD_FILE=/etc/redlock/pass ", "");
            let sandbox = Sandbox::new();
            run_cron_line(&without, &sandbox, &open.url(), hosts)?;
            check_runs(&without, &sandbox, hosts)?;
        } else {
            let server = RedisServer::start();
            run_cron_line(&command, &sandbox, &server.url(), hosts)?;
            check_runs(&command, &sandbox, hosts)?;
        }
    }
    Ok(())
}

/// A line run on several hosts without `--wait` runs its job once.
fn check_runs(command: &str, sandbox: &Sandbox, hosts: usize) -> Result<(), String> {
    if command.contains("run.sh") && !command.contains("--wait") {
        let runs = sandbox.runs();
        if runs != 1 {
            return Err(format!(
                "{command:?} on {hosts} hosts ran the job {runs} times"
            ));
        }
    }
    Ok(())
}

/// A word of example output with what varies from run to run left open: numbers (with the
/// units and timestamps they are in), paths, the host and users.
fn shape(text: &str, host: &str, users: &[&str]) -> Vec<String> {
    text.lines()
        .map(|line| {
            let mut words: Vec<String> = Vec::new();
            let mut previous = String::new();
            for word in line.split_whitespace() {
                let core = word.trim_matches(|c: char| "()[],;:\"'".contains(c));
                let was_number = previous.chars().any(|c| c.is_ascii_digit());
                let open = if previous == "fence" && core.chars().all(|c| c.is_ascii_digit()) {
                    // Fences are microseconds on the server's clock: sixteen digits, not 118.
                    Some(if core.len() >= 13 {
                        "FENCE"
                    } else {
                        "SMALL-FENCE"
                    })
                } else if core.starts_with('/') || core.starts_with("./") {
                    Some("PATH")
                } else if core.chars().any(|c| c.is_ascii_digit()) || core == host {
                    Some("N")
                } else if previous == "user" || users.contains(&core) {
                    Some("USER")
                } else {
                    None
                };
                previous = core.to_owned();
                // "2h 4m 30s:" and "998ms:" are one duration: a later part only moves the
                // punctuation after it to the end of the word already shown.
                if open == Some("N") && was_number && word.starts_with(core) {
                    if let Some(last) = words.last_mut() {
                        let kept = last.trim_end_matches(|c: char| ",;:)]".contains(c)).len();
                        last.truncate(kept);
                        last.push_str(&word[core.len()..]);
                    }
                    continue;
                }
                let shown = match open {
                    Some(placeholder) => word.replace(core, placeholder),
                    None => word.to_owned(),
                };
                words.push(shown);
            }
            words.join(" ")
        })
        .collect()
}

/// Runs a `console` block: its `$ ` lines in one shell, each one's output compared in shape
/// with what the block shows after it.
fn run_console_block(block: &Block, setup: &Setup, sandbox: &Sandbox) -> Result<(), String> {
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    for line in block.text.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            commands.push((command.to_owned(), Vec::new()));
        } else if let Some((_, shown)) = commands.last_mut() {
            shown.push(line.to_owned());
        } else {
            return Err("a console block starts with a `$ ` line".to_owned());
        }
    }
    let server = RedisServer::start();
    let mut script = setup.before.clone();
    for (command, _) in &commands {
        // The guide's holder is two hours old; this one is as old as the wait for it.
        let command = command.replace("--max-age 2h", "--max-age 1ms");
        script.push_str(&format!(
            "{{ {command}\n}} 2>&1; s=$?; echo '@@ end'; (exit $s)\n"
        ));
    }
    // Lets a holder that still waits go (a read-write open of the fifo never blocks).
    script.push_str("[ -p go ] && { exec 3<>go; echo >&3; }; wait; exit 0\n");
    let run = sandbox.run(&script, &server.url());
    let outputs: Vec<&str> = run.stdout.split("@@ end\n").collect();
    let host = host_name();
    let me = current_user();
    for (i, (command, shown)) in commands.iter().enumerate() {
        let got = outputs.get(i).copied().unwrap_or("");
        let want = shape(
            &shown.join("\n"),
            &host,
            &["alice", "cron", "report", "sync"],
        );
        let have = shape(got, &host, &[me.as_str()]);
        if want != have {
            return Err(format!(
                "`{command}` prints, today:\n{got}\nwhich differs in shape from the block:\n  \
                 want {want:#?}\n  have {have:#?}\n(stderr: {})",
                run.stderr
            ));
        }
    }
    Ok(())
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The block as a copy of the file its marker names: equal, leading comment lines aside.
fn copy_of(block: &Block, file: &str) -> Result<(), String> {
    let strip = |text: &str| -> String {
        text.lines()
            .skip_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_owned()
    };
    let want = read(file);
    (strip(&block.text) == strip(&want))
        .then_some(())
        .ok_or_else(|| format!("the block is not {file}; show the file as it is"))
}

#[test]
fn every_fenced_block_names_its_language() {
    let bare: Vec<String> = all_blocks()
        .iter()
        .filter(|b| b.lang.is_empty())
        .map(Block::at)
        .collect();
    assert!(
        bare.is_empty(),
        "blocks without a language (```text for output, ```sh for commands, which are then \
         run): {bare:?}"
    );
}

#[test]
fn blocks_marked_as_a_file_are_that_file() {
    let mut problems = Vec::new();
    for block in all_blocks() {
        if let Some(file) = block
            .marker
            .as_deref()
            .filter(|m| !m.starts_with("not run"))
            && root().join(file).is_file()
            && let Err(e) = copy_of(&block, file)
        {
            problems.push(format!("{}: {e}", block.at()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_shell_block_runs_or_says_why_not() {
    let all = all_blocks();
    let mut problems = Vec::new();
    let (mut ran, mut skipped) = (0, Vec::new());
    for block in all.iter().filter(|b| SHELLS.contains(&b.lang.as_str())) {
        if let Some(marker) = &block.marker {
            match marker.strip_prefix("not run:") {
                Some(why) if !why.trim().is_empty() => {
                    skipped.push(format!("{}: {}", block.at(), why.trim()));
                    continue;
                }
                _ => {
                    problems.push(format!(
                        "{}: a marker that is not `not run: WHY`",
                        block.at()
                    ));
                    continue;
                }
            }
        }
        ran += 1;
        let result = if block.lang == "cron" {
            run_cron_block(block, &all)
        } else {
            let sandbox = Sandbox::new();
            let setup = setup_for(block, &sandbox);
            if block.lang == "console" {
                run_console_block(block, &setup, &sandbox)
            } else {
                let server = RedisServer::start();
                let script = format!(
                    "{}{}",
                    setup.before,
                    sandbox.substitute(&block.text, &server.url())
                );
                let run = sandbox.run(&script, &server.url());
                if run.status != Some(setup.status) {
                    Err(format!("expected status {}: {}", setup.status, run.story()))
                } else {
                    (setup.check)(&run, &sandbox, &server)
                        .map_err(|e| format!("{e}\n{}", run.story()))
                }
            }
        };
        if let Err(e) = result {
            problems.push(format!("{} ({}):\n{e}", block.at(), block.first_line()));
        }
    }
    eprintln!(
        "{ran} shell blocks run; not run:\n  {}",
        skipped.join("\n  ")
    );
    assert!(problems.is_empty(), "\n{}", problems.join("\n\n"));
}

#[test]
fn the_try_script_shows_one_run_and_one_busy_run() {
    let server = RedisServer::start();
    let sandbox = Sandbox::new();
    let mut cmd = Command::new(root().join("scripts/try"));
    cmd.arg("--no-install")
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", sandbox.path("bin")))
        .env("HOME", sandbox.dir.path())
        .env("REDLOCK_URL", server.url());
    let run = sandbox.finish(cmd, "scripts/try --no-install");
    assert_eq!(run.status, Some(0), "{}", run.story());
    assert!(
        run.stdout.contains("first: running") && run.stdout.contains("exit status 75"),
        "{}",
        run.story()
    );
    assert!(run.stderr.contains("held by"), "{}", run.story());
    assert_eq!(
        server.get("try:demo"),
        None,
        "the demonstration left its lock"
    );
}

/// Backticked spans of a Markdown text, outside fenced blocks.
fn spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let parts: Vec<&str> = line.split('`').collect();
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() {
                out.push((*part).to_owned());
            }
        }
    }
    out
}

const REPO_DIRS: [&str; 13] = [
    "src/",
    "schemas/",
    "tests/",
    "docs/",
    "deploy/",
    "scripts/",
    "man/",
    "completions/",
    "benches/",
    "model/",
    "link/",
    ".ci/",
    ".cargo/",
];

/// The prose the checks of names hold to the repository: the documents with blocks, the code
/// map and the changelog.
fn prose() -> Vec<String> {
    let mut docs = documents();
    docs.extend(["ARCHITECTURE.md".to_owned(), "CHANGELOG.md".to_owned()]);
    docs
}

/// Every file of the repository (outside `target/` and `.git/`), by path from the root.
fn repository_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name == ".git" {
                continue;
            }
            if path.is_dir() {
                walk(&path, into);
            } else {
                into.push(path.strip_prefix(root()).unwrap().to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    walk(root(), &mut files);
    files
}

/// The extensions of the files the docs name by a bare name (`wire.rs`, `audit.lua`); not
/// `.sh`, which the recipes use for the reader's own scripts (`deploy.sh`).
const FILE_EXTENSIONS: [&str; 7] = ["rs", "lua", "md", "toml", "pml", "txt", "json"];

/// Whether `name` is a file's name the repository has: a path from the root, from `src/`, from
/// one of `src/`'s modules or from `tests/cli/` (the code map names files inside the section of
/// their module), a directory (`wait/`), or a bare name that some file has.
fn names_a_file(name: &str, files: &[PathBuf]) -> bool {
    let path = name.trim_end_matches('/');
    let bases = [
        "",
        "src/",
        "tests/cli/",
        "src/lock/",
        "src/commands/",
        "src/redis/",
    ];
    if bases
        .iter()
        .any(|b| root().join(format!("{b}{path}")).exists())
    {
        return true;
    }
    if path.contains('/') {
        // `scripts/audit.lua` inside src/lock/, `record/` inside src/lock/: a file or a
        // directory whose path ends so.
        return files.iter().any(|f| {
            let f = f.to_string_lossy();
            f.ends_with(&format!("/{path}")) || f.contains(&format!("/{path}/"))
        });
    }
    files
        .iter()
        .any(|f| f.file_name().is_some_and(|n| n == path))
}

/// Whether a backticked span is a file the docs name: a repository directory's path, or a
/// bare file name with one of [`FILE_EXTENSIONS`].
fn file_span(span: &str) -> Option<&str> {
    let path = span.trim_end_matches('…').trim_end_matches('/');
    if path.is_empty() || path.contains(char::is_whitespace) || path.contains("://") {
        return None;
    }
    if REPO_DIRS.iter().any(|d| path.starts_with(d)) {
        return Some(path);
    }
    let (stem, ext) = path.rsplit_once('.')?;
    let plain = stem
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'));
    (plain && !stem.starts_with('.') && FILE_EXTENSIONS.contains(&ext)).then_some(path)
}

#[test]
fn every_file_the_docs_and_the_manifest_name_exists() {
    let files = repository_files();
    let mut missing = BTreeSet::new();
    for doc in prose() {
        for span in spans(&read(&doc)) {
            let Some(path) = file_span(&span) else {
                continue;
            };
            if path.contains('*') || names_a_file(path, &files) {
                continue;
            }
            missing.insert(format!("{doc}: `{span}`"));
        }
    }
    // Cargo.toml's comments say where a dependency is used: `wire.rs`, written bare.
    for line in read("Cargo.toml").lines() {
        let Some(comment) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        for word in comment.split(|c: char| c.is_whitespace() || "(),;`".contains(c)) {
            let word = word.trim_end_matches(['.', ':']);
            if let Some(path) = file_span(word)
                && !names_a_file(path, &files)
            {
                missing.insert(format!("Cargo.toml: {word} in `{}`", line.trim()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files the docs name that the repository does not have (moved or gone?):\n{missing:#?}"
    );
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let mut missing = BTreeSet::new();
    for doc in prose() {
        for span in spans(&read(&doc)) {
            let path = span.trim_end_matches('…').trim_end_matches('/');
            if path.contains(char::is_whitespace) || !REPO_DIRS.iter().any(|d| path.starts_with(d))
            {
                continue;
            }
            let exists = if let Some((dir, pattern)) = path.rsplit_once("/*") {
                fs::read_dir(root().join(dir)).is_ok_and(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().ends_with(pattern))
                })
            } else {
                root().join(path).exists()
            };
            if !exists {
                missing.insert(format!("{doc}: `{span}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that are not in the repository:\n{missing:#?}"
    );
}

const SUBCOMMANDS: [&str; 11] = [
    "run", "status", "release", "acquire", "extend", "doctor", "pause", "resume", "metrics",
    "check", "log",
];

/// The long flags `redlock [SUB] --help` lists.
fn help_flags(sub: Option<&str>) -> BTreeSet<String> {
    let mut cmd = Command::new(binary());
    cmd.args(sub).arg("--help");
    let out = cmd.output().expect("redlock --help");
    let text = String::from_utf8_lossy(&out.stdout);
    // The option lines only (`  -q, --quiet`, `      --key <KEY>`), not the prose.
    text.lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| flags_in(l.split("  ").find(|p| !p.is_empty()).unwrap_or("")))
        .collect()
}

fn flags_in(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let before = text[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.len() > 1 && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

/// Other programs' flags the docs name (cargo's, the scripts', unshare's, dpkg's, …), and the
/// secret-looking flags of commands whose lines redlock's records redact.
const OTHERS: [&str; 30] = [
    "--remap-path-prefix",
    "--api-key",
    "--flag",
    "--password",
    "--locked",
    "--path",
    "--all-targets",
    "--check",
    "--proto",
    "--target",
    "--binary",
    "--image",
    "--context-only",
    "--print-tags",
    "--no-install",
    "--instdir",
    "--root",
    "--pid",
    "--fork",
    "--mount",
    "--mount-proc",
    "--now",
    "--verify",
    "--test",
    "--release",
    "--out",
    "--ca-bundle",
    "--tls-port",
    "--requirepass",
    "--save",
];

#[test]
fn every_flag_the_docs_name_is_in_the_help() {
    let global = help_flags(None);
    let per_sub: HashMap<&str, BTreeSet<String>> = SUBCOMMANDS
        .iter()
        .map(|sub| (*sub, help_flags(Some(sub))))
        .collect();
    let every: BTreeSet<String> = per_sub.values().flatten().chain(&global).cloned().collect();
    let mut unknown = BTreeSet::new();
    for doc in prose() {
        let text = read(&doc);
        // The flags after `redlock [globals] SUB` on a line of a block or in a backticked span,
        // up to a lone `--` or a comment.
        let mut lines: Vec<String> = blocks_of(&doc)
            .iter()
            .flat_map(|b| b.text.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        lines.extend(spans(&text));
        for line in &lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            let words: Vec<&str> = words
                .into_iter()
                .take_while(|w| !w.starts_with('#'))
                .collect();
            let Some(at) = words
                .iter()
                .position(|w| *w == "redlock" || (w.starts_with('/') && w.ends_with("/redlock")))
            else {
                continue;
            };
            let rest = &words[at + 1..];
            let sub = rest.iter().find(|w| SUBCOMMANDS.contains(w));
            let known = sub.map_or(&every, |s| &per_sub[*s]);
            for word in rest
                .iter()
                .take_while(|w| **w != "--" && !w.starts_with('#'))
            {
                for flag in flags_in(word) {
                    if !known.contains(&flag) && !global.contains(&flag) {
                        unknown
                            .insert(format!("{doc}: {flag} in `redlock {}`", sub.unwrap_or(&"")));
                    }
                }
            }
        }
        for span in spans(&text) {
            if span.starts_with("--") {
                for flag in flags_in(&span) {
                    if !every.contains(&flag) && !OTHERS.contains(&flag.as_str()) {
                        unknown.insert(format!("{doc}: `{span}`"));
                    }
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "flags no `redlock --help` lists:\n{unknown:#?}"
    );
}

#[test]
fn the_readme_synopsis_names_every_flag_of_each_subcommand() {
    let readme = read("README.md");
    let synopsis = readme
        .split("## Commands\n\n```text\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("README's Commands section opens with a ```text synopsis");
    let global = help_flags(None);
    let mut missing = Vec::new();
    for sub in SUBCOMMANDS {
        let lines: String = synopsis
            .split("\nredlock ")
            .find(|part| {
                part.trim_start_matches("redlock ")
                    .starts_with(&format!("{sub} "))
            })
            .unwrap_or_else(|| panic!("no `redlock {sub}` in the synopsis"))
            .to_owned();
        let shown = flags_in(&lines);
        for flag in help_flags(Some(sub)).difference(&global) {
            if flag != "--help" && !shown.contains(flag) {
                missing.push(format!("redlock {sub} {flag}"));
            }
        }
    }
    assert!(missing.is_empty(), "the synopsis lacks {missing:?}");
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped,
/// spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(file: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(file).unwrap_or_default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let base = anchor(line.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

#[test]
fn every_link_inside_the_repository_reaches_a_file_and_a_heading() {
    let mut broken = Vec::new();
    let mut files = documents();
    files.push("ARCHITECTURE.md".to_owned());
    for doc in files {
        let text = read(&doc);
        let dir = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for (i, _) in text.match_indices("](") {
            let target: String = text[i + 2..].chars().take_while(|c| *c != ')').collect();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file: PathBuf = if path.is_empty() {
                root().join(&doc)
            } else {
                root().join(dir).join(path)
            };
            if !file.exists() {
                broken.push(format!("{doc}: ({target}): no such file"));
            } else if !fragment.is_empty() && !anchors(&file).contains(fragment) {
                broken.push(format!("{doc}: ({target}): no such heading"));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// `FILE.md#anchor` written anywhere, in a link or not: the docs, the schemas' descriptions
/// and the code's comments point to sections so.
#[test]
fn every_section_named_anywhere_exists() {
    let mut places = prose();
    for file in repository_files() {
        let name = file.to_string_lossy().into_owned();
        if (name.starts_with("src/") && name.ends_with(".rs"))
            || (name.starts_with("schemas/") && name.ends_with(".json"))
            || name == "benches/HISTORY.md"
        {
            places.push(name);
        }
    }
    let mut broken = BTreeSet::new();
    for place in places {
        let text = read(&place);
        let dir = Path::new(&place).parent().unwrap_or(Path::new(""));
        for (i, _) in text.match_indices(".md#") {
            let path: String = text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || "_./-".contains(*c))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let fragment: String = text[i + 4..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            let file = format!("{path}.md");
            let found = [root().join(dir).join(&file), root().join(&file)]
                .into_iter()
                .find(|f| f.exists());
            match found {
                None => {
                    broken.insert(format!("{place}: {file}#{fragment}: no such file"));
                }
                Some(f) if !anchors(&f).contains(&fragment) => {
                    broken.insert(format!("{place}: {file}#{fragment}: no such heading"));
                }
                Some(_) => {}
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}
