//! The container images (`deploy/Containerfile`, `scripts/build-image`) and the Kubernetes
//! manifests (`deploy/kubernetes/`).
//!
//! No container daemon runs here: the test stages the build context as `scripts/build-image
//! --context-only` does, assembles each stage's root file system by following the
//! Containerfile's own instructions, and runs redlock there as PID 1 in new PID and mount
//! namespaces (`unshare --pid --fork --mount --mount-proc --root`), as a container runtime
//! would: against a test Redis, SIGTERM forwarded, status 143, the lock released.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use yaml_rust2::{Yaml, YamlLoader};

use crate::support::process::{Pid, send_signal};
use crate::support::{RedisServer, Redlock, TempDir, wait_until};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn output(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{shown} did not start: {e}"));
    assert!(
        out.status.success(),
        "{shown} failed with {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tags `scripts/build-image` gives the two images: the scratch one, then the init one.
fn image_tags() -> (String, String) {
    let tags = output(Command::new(repo("scripts/build-image")).arg("--print-tags"));
    let mut lines = tags.lines().map(str::to_owned);
    (lines.next().unwrap(), lines.next().unwrap())
}

/// A stage of the Containerfile, assembled into `root`: its base (scratch, or busybox, for
/// which the host's static busybox stands in), then its COPY instructions from `context`.
/// Returns the stage's ENTRYPOINT. Any other instruction fails the test, so that a change to
/// the Containerfile is followed here.
fn assemble(stage: &str, context: &Path, root: &Path) -> Vec<String> {
    let text = fs::read_to_string(repo("deploy/Containerfile")).expect("deploy/Containerfile");
    let mut in_stage = false;
    let mut entrypoint = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (op, rest) = line.split_once(' ').unwrap_or((line, ""));
        if op == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            in_stage = words.get(2) == Some(&stage);
            if in_stage {
                fs::create_dir_all(root).unwrap();
                match words[0] {
                    "scratch" => {}
                    base if base.contains("/busybox:") => {
                        let busybox = Path::new("/bin/busybox");
                        assert!(
                            busybox.exists(),
                            "the init stage needs a static busybox to stand in for {base} \
                             (Debian: apt-get install busybox-static)"
                        );
                        fs::create_dir_all(root.join("bin")).unwrap();
                        fs::copy(busybox, root.join("bin/busybox")).unwrap();
                        for applet in ["cp", "sh", "ls"] {
                            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))
                                .unwrap();
                        }
                    }
                    other => panic!("the test knows no base image {other}"),
                }
            }
            continue;
        }
        if !in_stage {
            continue;
        }
        match op {
            "COPY" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [from, to] = words[..] else {
                    panic!("COPY with other than one source and one destination: {line}");
                };
                let to = root.join(to.trim_start_matches('/'));
                fs::create_dir_all(to.parent().unwrap()).unwrap();
                fs::copy(context.join(from), &to)
                    .unwrap_or_else(|e| panic!("{line}: {e} (context {})", context.display()));
            }
            "ENTRYPOINT" => {
                entrypoint = serde_json::from_str(rest)
                    .unwrap_or_else(|e| panic!("ENTRYPOINT is not a JSON array: {e}"));
            }
            _ => panic!("the test does not know the instruction {op}: {line}"),
        }
    }
    assert!(
        !entrypoint.is_empty(),
        "no stage {stage} with an ENTRYPOINT"
    );
    // The runtime's mount points.
    fs::create_dir_all(root.join("proc")).unwrap();
    entrypoint
}

/// The build context, staged by the documented command from the binary under test.
fn stage_context(dir: &TempDir) -> PathBuf {
    let context = dir.join("context");
    let printed = output(
        Command::new(repo("scripts/build-image"))
            .arg("--binary")
            .arg(env!("CARGO_BIN_EXE_redlock"))
            .arg("--context-only")
            .arg(&context),
    );
    assert_eq!(Path::new(printed.trim()), context);
    context
}

/// Bytes in the files under `root`.
fn size_of(root: &Path) -> u64 {
    fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let meta = fs::symlink_metadata(e.path()).unwrap();
            if meta.is_dir() {
                size_of(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// Runs `argv` as PID 1 of new PID and mount namespaces with `root` as its root; the
/// environment is only what a CronJob would give it.
fn start_pid1(root: &Path, argv: &[&str], server: &RedisServer, log: &Path) -> Child {
    Command::new("unshare")
        .args(["--pid", "--fork", "--mount", "--mount-proc"])
        .arg(format!("--root={}", root.display()))
        .args(argv)
        .env_clear()
        .env("REDLOCK_URL", server.url())
        .env("PATH", "/usr/local/bin:/bin")
        .stdin(Stdio::null())
        .stdout(fs::File::create(log.with_extension("out")).unwrap())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start unshare (util-linux): {e}"))
}

/// The host pid of the process `unshare` forked (PID 1 inside).
fn pid1_of(unshare: &Child) -> Pid {
    let children = format!("/proc/{0}/task/{0}/children", unshare.id());
    wait_until("unshare's child", Duration::from_secs(10), || {
        fs::read_to_string(&children)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the container did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The CronJob scenario in an assembled root: redlock as PID 1 runs a job (redlock itself,
/// waiting for a lock someone else holds: the only program a scratch image has), gets the
/// SIGTERM of a pod deletion, forwards it, and exits 143 with the lock released.
fn sigterm_as_pid1(root: &Path, redlock: &str, logs: &TempDir) {
    let server = RedisServer::start();
    let _: String = server.query(&["SET", "blocker", "someone-else", "PX", "60000"]);
    let log = logs.join("pid1.log");
    let calls = server.script_calls();
    let argv = [
        redlock,
        "run",
        "--key",
        "job",
        "--ttl",
        "30s",
        "--",
        redlock,
        "run",
        "--key",
        "blocker",
        "--ttl",
        "5s",
        "--wait",
        "1m",
        "--",
        redlock,
        "--version",
    ];
    let mut container = start_pid1(root, &argv, &server, &log);
    let pid1 = pid1_of(&container);
    let status = fs::read_to_string(format!("/proc/{pid1}/status")).unwrap_or_default();
    let nspid = status
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .unwrap_or("");
    assert!(
        nspid.ends_with("\t1"),
        "redlock is not PID 1 inside: {nspid:?}"
    );
    wait_until("the job's lock to be held", Duration::from_secs(10), || {
        server.get("job").map(|_| ())
    });
    // The job tries for `blocker` (a second script call after redlock's own acquire) and
    // queues; no renewal of `job` (30s TTL) comes meanwhile.
    wait_until(
        "the job to try for its lock",
        Duration::from_secs(10),
        || (server.script_calls() >= calls + 2).then_some(()),
    );

    send_signal(pid1, libc::SIGTERM);
    let exit = wait_exit(&mut container, Duration::from_secs(20));
    let stderr = fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(exit.code(), Some(143), "status {exit}, stderr:\n{stderr}");
    assert_eq!(
        server.get("job"),
        None,
        "the lock was not released\n{stderr}"
    );
    assert_eq!(
        server.get("blocker").as_deref(),
        Some("someone-else"),
        "the other holder's lock was touched"
    );
}

#[test]
fn the_scratch_image_runs_redlock_as_pid_1_which_forwards_sigterm_and_releases() {
    let dir = TempDir::new("image");
    let context = stage_context(&dir);
    let root = dir.join("root");
    let entrypoint = assemble("redlock", &context, &root);
    assert_eq!(entrypoint, ["/usr/local/bin/redlock"]);
    // Nothing but the binary and the CA bundle (and the runtime's mount point).
    let mut found: Vec<String> = Vec::new();
    fn walk(dir: &Path, root: &Path, into: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            if e.path().is_dir() {
                walk(&e.path(), root, into);
            } else {
                into.push(format!(
                    "/{}",
                    e.path().strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    walk(&root, &root, &mut found);
    found.sort();
    assert_eq!(
        found,
        [
            "/etc/ssl/certs/ca-certificates.crt",
            "/usr/local/bin/redlock"
        ]
    );
    eprintln!("the scratch image's root: {} bytes", size_of(&root));
    sigterm_as_pid1(&root, "/usr/local/bin/redlock", &dir);
}

#[test]
fn the_init_image_copies_redlock_into_a_volume_that_wraps_an_unchanged_image() {
    assert!(
        Path::new("/bin/busybox").exists(),
        "no /bin/busybox to stand in for the init stage's busybox base: install it \
         (Debian: apt-get install busybox-static; .ci/run does)"
    );
    let dir = TempDir::new("init");
    let context = stage_context(&dir);
    let init = dir.join("init");
    let entrypoint = assemble("init", &context, &init);
    // The init container, with the shared volume at the path the manifest mounts it.
    let volume = init.join("opt/redlock");
    fs::create_dir_all(&volume).unwrap();
    let argv: Vec<&str> = entrypoint.iter().map(String::as_str).collect();
    output(
        Command::new("unshare")
            .args(["--pid", "--fork", "--mount", "--mount-proc"])
            .arg(format!("--root={}", init.display()))
            .args(&argv)
            .env_clear(),
    );
    // The application container: an image of its own (here one with nothing in it) and the
    // volume, which holds the copied binary and runs as PID 1.
    let app = dir.join("app");
    fs::create_dir_all(app.join("proc")).unwrap();
    fs::create_dir_all(app.join("opt")).unwrap();
    fs::rename(&volume, app.join("opt/redlock")).unwrap();
    let manifest = cronjobs()
        .into_iter()
        .find(|(name, _)| name == "cronjob-init-container.yaml")
        .expect("the init container's CronJob")
        .1;
    let command =
        manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][0]
            .as_str()
            .expect("the container's command")
            .to_owned();
    assert!(
        app.join(command.trim_start_matches('/')).is_file(),
        "the init container did not put {command} in the volume"
    );
    sigterm_as_pid1(&app, &command, &dir);
}

/// Every CronJob manifest in deploy/kubernetes, parsed.
fn cronjobs() -> Vec<(String, Yaml)> {
    manifests()
        .into_iter()
        .filter(|(_, doc)| doc["kind"].as_str() == Some("CronJob"))
        .collect()
}

fn manifests() -> Vec<(String, Yaml)> {
    let mut all = Vec::new();
    let dir = repo("deploy/kubernetes");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("deploy/kubernetes")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&file).unwrap();
        let docs =
            YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
        for doc in docs {
            assert!(
                doc["apiVersion"].as_str().is_some() && doc["kind"].as_str().is_some(),
                "{name}: a document without apiVersion and kind"
            );
            all.push((name.clone(), doc));
        }
    }
    all
}

fn strings(list: &Yaml) -> Vec<String> {
    list.as_vec()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_kubernetes_manifests_parse_and_name_the_images_the_containerfile_builds() {
    let (scratch, init) = image_tags();
    let all = manifests();
    let secret = all
        .iter()
        .find(|(_, d)| d["kind"].as_str() == Some("Secret"))
        .map(|(_, d)| d["metadata"]["name"].as_str().unwrap().to_owned())
        .expect("a Secret");
    let jobs = cronjobs();
    assert_eq!(
        jobs.len(),
        2,
        "two CronJobs: redlock in the image, and an init container"
    );
    let server = RedisServer::start();
    for (name, job) in &jobs {
        let spec = &job["spec"];
        assert_eq!(spec["concurrencyPolicy"].as_str(), Some("Forbid"), "{name}");
        let job_spec = &spec["jobTemplate"]["spec"];
        let pod = &job_spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"].as_str(), Some("Never"), "{name}");
        let container = &pod["containers"][0];
        // podFailurePolicy, by exit status: tests/cli/deploy_kubernetes.rs.
        // Configuration from the Secret: the URL as an env var, the password as a file.
        let env = container["env"].as_vec().expect("env");
        let url = env
            .iter()
            .find(|e| e["name"].as_str() == Some("REDLOCK_URL"))
            .expect("REDLOCK_URL");
        assert_eq!(
            url["valueFrom"]["secretKeyRef"]["name"].as_str(),
            Some(secret.as_str()),
            "{name}"
        );
        let secret_volume = pod["volumes"]
            .as_vec()
            .unwrap()
            .iter()
            .any(|v| v["secret"]["secretName"].as_str() == Some(secret.as_str()));
        assert!(
            secret_volume,
            "{name}: the password file comes from the Secret"
        );
        // The command line is one redlock accepts (the job replaced by `true`), and the grace
        // period covers --kill-after.
        let args = strings(&container["args"]);
        let end = args
            .iter()
            .position(|a| a == "--")
            .expect("a `--` before the job");
        Redlock::new(&server)
            .args(&args[..=end])
            .arg("true")
            .exits_with(0);
        let _: String = server.query(&["FLUSHALL"]);
        let kill_after = args
            .iter()
            .position(|a| a == "--kill-after")
            .map(|i| humantime::parse_duration(&args[i + 1]).unwrap())
            .expect("--kill-after");
        let grace = pod["terminationGracePeriodSeconds"]
            .as_i64()
            .expect("grace");
        assert!(
            Duration::from_secs(grace as u64) >= kill_after + Duration::from_secs(16),
            "{name}: terminationGracePeriodSeconds {grace} leaves no room after --kill-after"
        );

        let command = strings(&container["command"]);
        match name.as_str() {
            "cronjob.yaml" => {
                // The application image has redlock copied in from the scratch image, where
                // the scratch image keeps it.
                assert_eq!(command, ["/usr/local/bin/redlock"], "{name}");
                let app = fs::read_to_string(repo("deploy/kubernetes/report.Containerfile"))
                    .expect("report.Containerfile");
                assert!(
                    app.contains(&format!(
                        "COPY --from={scratch} /usr/local/bin/redlock /usr/local/bin/redlock"
                    )),
                    "report.Containerfile does not copy redlock from {scratch}"
                );
            }
            "cronjob-init-container.yaml" => {
                let init_container = &pod["initContainers"][0];
                assert_eq!(
                    init_container["image"].as_str(),
                    Some(init.as_str()),
                    "{name}"
                );
                let mount = |c: &Yaml| {
                    c["volumeMounts"]
                        .as_vec()
                        .unwrap()
                        .iter()
                        .find(|m| m["name"].as_str() == Some("redlock"))
                        .and_then(|m| m["mountPath"].as_str().map(str::to_owned))
                        .expect("the redlock volume mounted")
                };
                assert_eq!(mount(init_container), "/opt/redlock", "{name}");
                assert_eq!(mount(container), "/opt/redlock", "{name}");
                assert_eq!(command, ["/opt/redlock/redlock"], "{name}");
            }
            other => panic!("a CronJob the test does not know: {other}"),
        }
    }
}
