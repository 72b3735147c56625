//! What operators watch, as shipped: the Prometheus rules (`deploy/prometheus/`), unit-tested
//! with `promtool test rules`, then evaluated by a real Prometheus that scrapes a real
//! node_exporter reading redlock's metrics files; and the Grafana dashboard
//! (`deploy/grafana/`), whose queries, like the rules', may name only the metrics and labels
//! real runs make `redlock metrics` print.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, Redlock, TempDir, child, free_port, wait_until};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

const RULES: &str = "deploy/prometheus/redlock.rules.yml";
const RULE_TESTS: &str = "deploy/prometheus/redlock.rules.test.yml";
const DASHBOARD: &str = "deploy/grafana/redlock.json";

#[track_caller]
fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .expect("promtool is not installed (apt-get install prometheus; scripts/test does)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn the_shipped_rules_pass_their_promtool_unit_tests() {
    promtool(&["check", "rules", repo(RULES).to_str().unwrap()]);
    let out = promtool(&["test", "rules", repo(RULE_TESTS).to_str().unwrap()]);
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert has a unit test.
    let tests = std::fs::read_to_string(repo(RULE_TESTS)).unwrap();
    for (name, _) in rules(&std::fs::read_to_string(repo(RULES)).unwrap()).alerts {
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{name} has no test in {RULE_TESTS}"
        );
    }
}

/// docs/monitoring.md shows how to give one key its own threshold, and says to run the unit
/// tests after the edit: the edit, made as shown, passes them.
#[test]
fn the_documented_per_key_threshold_edit_passes_the_unit_tests() {
    let page = std::fs::read_to_string(repo("docs/monitoring.md")).unwrap();
    let record = "      - record: redlock:max_since_success_seconds\n";
    let shown = page
        .split("```yaml\n")
        .filter_map(|block| block.split_once("```").map(|(b, _)| b))
        .find(|b| b.starts_with(record))
        .expect("docs/monitoring.md shows a per-key threshold edit");
    let shipped = std::fs::read_to_string(repo(RULES)).unwrap();
    let at = shipped.find(record).expect("the recording rule");
    let expr_at = at + record.len();
    let expr_end = expr_at + shipped[expr_at..].find('\n').unwrap() + 1;
    let edited = format!("{}{shown}{}", &shipped[..at], &shipped[expr_end..]);
    assert_ne!(edited, shipped);
    let dir = TempDir::new("edited-rules");
    std::fs::write(dir.join("redlock.rules.yml"), &edited).unwrap();
    std::fs::copy(repo(RULE_TESTS), dir.join("redlock.rules.test.yml")).unwrap();
    promtool(&[
        "check",
        "rules",
        dir.join("redlock.rules.yml").to_str().unwrap(),
    ]);
    let out = promtool(&[
        "test",
        "rules",
        dir.join("redlock.rules.test.yml").to_str().unwrap(),
    ]);
    assert!(out.contains("SUCCESS"), "{out}");
    // And the key has its own threshold.
    assert!(
        rules(&edited).records[0].1.contains("prod:sync:hourly"),
        "{edited}"
    );
}

/// The rules of a rules file: alerts and recording rules, each name with its expression.
struct Rules {
    alerts: Vec<(String, String)>,
    records: Vec<(String, String)>,
}

fn rules(text: &str) -> Rules {
    let docs = yaml_rust2::YamlLoader::load_from_str(text).expect("the rules are YAML");
    let mut out = Rules {
        alerts: Vec::new(),
        records: Vec::new(),
    };
    for group in docs[0]["groups"].as_vec().expect("groups") {
        for rule in group["rules"].as_vec().expect("rules") {
            let expr = rule["expr"].as_str().expect("expr").to_string();
            if let Some(name) = rule["alert"].as_str() {
                out.alerts.push((name.to_string(), expr));
            } else {
                let name = rule["record"].as_str().expect("alert or record");
                out.records.push((name.to_string(), expr));
            }
        }
    }
    out
}

/// What a PromQL expression names: metrics, labels (in matchers and in `by`, `on`, …
/// lists) and each matcher's label and value.
#[derive(Default, Debug)]
struct Named {
    metrics: BTreeSet<String>,
    labels: BTreeSet<String>,
    matchers: Vec<(String, String)>,
}

const KEYWORDS: [&str; 7] = [
    "and",
    "or",
    "unless",
    "offset",
    "bool",
    "group_left",
    "group_right",
];
/// Aggregations, which may be followed by `by (…)` rather than their parenthesis.
const AGGREGATIONS: [&str; 12] = [
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
];
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn named(expr: &str) -> Named {
    let mut out = Named::default();
    let s: Vec<char> = expr.chars().collect();
    let ident = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == '_' || s[*i] == ':') {
            *i += 1;
        }
        s[start..*i].iter().collect()
    };
    let string = |i: &mut usize| -> String {
        let quote = s[*i];
        *i += 1;
        let mut value = String::new();
        while s[*i] != quote {
            if s[*i] == '\\' {
                *i += 1;
            }
            value.push(s[*i]);
            *i += 1;
        }
        *i += 1;
        value
    };
    let skip_space = |i: &mut usize| {
        while *i < s.len() && s[*i].is_whitespace() {
            *i += 1;
        }
    };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '"' || c == '\'' {
            string(&mut i);
        } else if c == '[' {
            while s[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '$' {
            i += 1;
            ident(&mut i);
        } else if c == '{' {
            i += 1;
            loop {
                skip_space(&mut i);
                if s[i] == '}' {
                    i += 1;
                    break;
                }
                let label = ident(&mut i);
                skip_space(&mut i);
                while matches!(s[i], '=' | '!' | '~') {
                    i += 1;
                }
                skip_space(&mut i);
                let value = string(&mut i);
                skip_space(&mut i);
                if s[i] == ',' {
                    i += 1;
                }
                out.labels.insert(label.clone());
                out.matchers.push((label, value));
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let word = ident(&mut i);
            let mut j = i;
            skip_space(&mut j);
            let call = j < s.len() && s[j] == '(';
            if call && LABEL_LISTS.contains(&word.as_str()) {
                i = j + 1;
                loop {
                    skip_space(&mut i);
                    if s[i] == ')' {
                        i += 1;
                        break;
                    }
                    out.labels.insert(ident(&mut i));
                    skip_space(&mut i);
                    if s[i] == ',' {
                        i += 1;
                    }
                }
            } else if !call
                && !KEYWORDS.contains(&word.as_str())
                && !AGGREGATIONS.contains(&word.as_str())
            {
                out.metrics.insert(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn promql_names_are_read_from_expressions() {
    let n = named(
        r#"sum by (key) (rate(redlock_busy_total{key=~"$key", outcome="a b"}[$__rate_interval])) * 3600 > on(key) group_left redlock:x offset 15m and label_replace(vector(2), "key", "k", "", "") or time() - 1.5"#,
    );
    assert_eq!(
        n.metrics.iter().collect::<Vec<_>>(),
        ["redlock:x", "redlock_busy_total"]
    );
    assert_eq!(n.labels.iter().collect::<Vec<_>>(), ["key", "outcome"]);
    assert_eq!(n.matchers[1], ("outcome".into(), "a b".into()));
}

/// The samples of a real exposition: each metric with the labels and values it has.
fn exposition(text: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.rsplit_once(' ').expect("a sample").0;
        let (name, labels) = series.split_once('{').expect("labels");
        let known = out.entry(name.to_string()).or_default();
        for (label, value) in named(&format!("x{{{labels}")).matchers {
            known.entry(label).or_default().insert(value);
        }
    }
    out
}

/// `metrics --all` after real runs that leave a sample in every family: a running holder, a
/// run that ended ok, one that failed, a refusal, a pause that ran out, a lease that lapsed.
fn real_exposition() -> String {
    let server = RedisServer::start();
    Redlock::new(&server)
        .args(["run", "--key", "done", "--ttl", "3s", "--", "true"])
        .exits_with(0);
    Redlock::new(&server)
        .args(["run", "--key", "done", "--ttl", "3s", "--", "false"])
        .exits_with(1);
    let mut holder = Redlock::new(&server)
        .args(["run", "--key", "held", "--ttl", "3s", "-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    Redlock::new(&server)
        .args(["run", "--key", "held", "--ttl", "3s", "--", "true"])
        .exits_with(75);
    // A hold never released whose lease lapses, then a run that took the lock at the lapse:
    // the audit log shows the lapse.
    Redlock::new(&server)
        .args(["acquire", "--key", "lapsed", "--ttl", "1s"])
        .exits_with(0);
    Redlock::new(&server)
        .args([
            "run", "--key", "lapsed", "--ttl", "3s", "--wait", "15s", "--", "true",
        ])
        .exits_with(0);
    // A pause with an end, of a key never taken (`--all` finds it by its pause record).
    Redlock::new(&server)
        .args(["pause", "maintained", "--for", "1h"])
        .exits_with(0);
    let text = Redlock::new(&server)
        .args(["metrics", "--all"])
        .exits_with(0)
        .stdout;
    holder.close_stdin();
    holder.exits_with(0);
    text
}

#[test]
fn the_dashboard_and_the_rules_name_only_what_redlock_exports() {
    let real = exposition(&real_exposition());
    let shipped = rules(&std::fs::read_to_string(repo(RULES)).unwrap());
    let recorded: BTreeSet<String> = shipped.records.iter().map(|(n, _)| n.clone()).collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo(DASHBOARD)).unwrap())
            .expect("the dashboard is JSON");
    let mut queries: Vec<(String, String)> = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr").to_string();
            queries.push((format!("panel {:?}", panel["title"]), expr));
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        if let Some(q) = var["query"]["query"].as_str() {
            let q = q.trim_start_matches("label_values(").trim_end_matches(')');
            let (metric, label) = q.split_once(',').expect("label_values(METRIC, LABEL)");
            queries.push((
                format!("variable {}", var["name"]),
                format!("{}{{{}=\"x\"}}", metric.trim(), label.trim()),
            ));
        }
    }
    assert!(queries.len() > 10, "{queries:?}");
    let mut shown = BTreeSet::new();
    let rule_exprs = shipped.alerts.iter().chain(&shipped.records);
    let all = queries
        .iter()
        .map(|(w, e)| (w.clone(), e.clone(), false))
        .chain(rule_exprs.map(|(n, e)| (format!("rule {n}"), e.clone(), true)));
    for (what, expr, is_rule) in all {
        let n = named(&expr);
        assert!(!n.metrics.is_empty(), "{what} names no metric: {expr}");
        for metric in &n.metrics {
            let known = real.contains_key(metric) || (is_rule && recorded.contains(metric));
            assert!(
                known,
                "{what} names {metric}, which redlock does not export: {expr}"
            );
            if !is_rule {
                shown.insert(metric.clone());
            }
        }
        for label in &n.labels {
            assert!(
                real.values().any(|labels| labels.contains_key(label)),
                "{what} names the label {label}, which redlock does not export: {expr}"
            );
        }
        for (label, value) in &n.matchers {
            if label == "outcome" {
                for alternative in value.split('|') {
                    assert!(
                        real["redlock_last_run_outcome"]["outcome"].contains(alternative),
                        "{what} matches outcome {alternative:?}, which redlock never prints"
                    );
                }
            }
        }
    }
    // And the dashboard shows every family.
    for metric in real.keys() {
        assert!(
            shown.contains(metric),
            "the dashboard does not show {metric}"
        );
    }
}

/// A server the test started (node_exporter, Prometheus), killed when dropped.
struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(name: &'static str, program: &str, args: &[String], log: PathBuf) -> Daemon {
        let out = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        crate::support::process::dies_with_the_test(&mut command);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program} ({e}); scripts/test installs it"));
        Daemon { name, child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- {} log ---\n{}", self.name, self.log());
        }
    }
}

/// `GET path` on 127.0.0.1:port: the status code and the body (HTTP/1.0, so the server
/// closes the connection after the body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let code = reply.split(' ').nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n")?.1.to_string();
    Some((code, body))
}

/// The shipped rules with what a test may change and nothing else: every `for:` made 0s, and
/// thresholds given to some keys as the rules file says an operator does, by a term in front of
/// the recording rule's default. The test checks that every alert's expression is the shipped
/// one.
fn rules_for_test(overrides: &[(&str, &str, f64)]) -> String {
    let shipped = std::fs::read_to_string(repo(RULES)).unwrap();
    let mut text: String = shipped
        .lines()
        .map(|line| match line.split_once("for: ") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}for: 0s\n"),
            _ => format!("{line}\n"),
        })
        .collect();
    for (record, key, value) in overrides {
        let at = text
            .find(&format!("- record: {record}\n"))
            .unwrap_or_else(|| panic!("no recording rule {record}"));
        let expr = at + text[at..].find("expr: ").expect("its expr") + "expr: ".len();
        text.insert_str(
            expr,
            &format!("label_replace(vector({value}), \"key\", \"{key}\", \"\", \"\") or "),
        );
    }
    let (ours, theirs) = (rules(&text), rules(&shipped));
    assert_eq!(
        ours.alerts, theirs.alerts,
        "the alerts are the shipped ones"
    );
    for ((name, ours), (_, theirs)) in ours.records.iter().zip(&theirs.records) {
        assert!(ours.ends_with(theirs.as_str()), "{name}: {ours}");
    }
    text
}

/// The alerts Prometheus has firing: (alert name, key).
fn firing(prometheus: u16) -> BTreeSet<(String, String)> {
    let Some((200, body)) = get(prometheus, "/api/v1/alerts") else {
        return BTreeSet::new();
    };
    let doc: serde_json::Value = serde_json::from_str(&body).expect("alerts as JSON");
    doc["data"]["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["state"] == "firing")
        .map(|a| {
            (
                a["labels"]["alertname"].as_str().unwrap_or("").to_string(),
                a["labels"]["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Writes `metrics --all` of `prefix` into `dir` as the guide's cron line does: a temporary
/// file renamed over the collector's.
fn refresh(server: &RedisServer, prefix: &str, dir: &Path) {
    let text = Redlock::new(server)
        .args(["--prefix", prefix, "metrics", "--all"])
        .exits_with(0)
        .stdout;
    std::fs::write(dir.join("redlock.prom.tmp"), text).unwrap();
    std::fs::rename(dir.join("redlock.prom.tmp"), dir.join("redlock.prom")).unwrap();
}

/// Bounded: calls `check` every 200 ms (each call runs redlock and asks Prometheus) until it
/// holds.
fn until(what: &str, mut check: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(40), || {
        if check() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(200));
        None
    });
}

#[test]
fn a_real_prometheus_fires_the_shipped_alerts_and_resolves_them() {
    let started = Instant::now();
    let server = RedisServer::start();
    let dir = TempDir::new("prometheus");
    let textfiles = dir.join("textfile");
    std::fs::create_dir(&textfiles).unwrap();
    let exporter_port = free_port();
    let _exporter = Daemon::start(
        "node_exporter",
        "prometheus-node-exporter",
        &[
            format!("--web.listen-address=127.0.0.1:{exporter_port}"),
            "--collector.disable-defaults".into(),
            "--collector.textfile".into(),
            format!("--collector.textfile.directory={}", textfiles.display()),
        ],
        dir.join("node_exporter.log"),
    );
    // A failed job's per-run file (prefix `files:`), a lock held too long seen through the
    // cron line's `metrics --all` (prefix `cron:`): no key in two files.
    std::fs::write(
        dir.join("redlock.rules.yml"),
        rules_for_test(&[
            ("redlock:max_lease_age_seconds", "cron:stuck", 1.0),
            ("redlock:max_since_success_seconds", "files:nightly", 2.0),
        ]),
    )
    .unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [redlock.rules.yml]\n\
             scrape_configs:\n  - job_name: node\n    static_configs:\n      \
             - targets: ['127.0.0.1:{exporter_port}']\n"
        ),
    )
    .unwrap();
    let prometheus_port = free_port();
    let prometheus = Daemon::start(
        "prometheus",
        "prometheus",
        &[
            format!("--config.file={}", dir.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{prometheus_port}"),
        ],
        dir.join("prometheus.log"),
    );
    until("Prometheus to be ready", || {
        matches!(get(prometheus_port, "/-/ready"), Some((200, _)))
    });
    let up = "/api/v1/query?query=up";
    until("Prometheus to scrape node_exporter", || {
        get(prometheus_port, up)
            .is_some_and(|(_, body)| body.contains("\"value\":[") && body.contains("\"1\"]"))
    });

    // A run that fails, with its file, as the guide's per-run cron line writes it.
    let file = textfiles.join("redlock-nightly.prom");
    let file_arg = file.to_str().unwrap();
    let nightly = |command: &str, code: i32| {
        Redlock::new(&server)
            .args([
                "--prefix", "files:", "run", "--key", "nightly", "--ttl", "3s",
            ])
            .args(["--metrics-file", file_arg, "--", "sh", "-c", command])
            .exits_with(code);
    };
    nightly("exit 3", 3);
    let failed = (
        "RedlockLastRunFailed".to_string(),
        "files:nightly".to_string(),
    );
    let late = (
        "RedlockJobNotSucceeded".to_string(),
        "files:nightly".to_string(),
    );
    until("the failed run's alerts to fire", || {
        let now = firing(prometheus_port);
        now.contains(&failed) && now.contains(&late)
    });

    // A holder that keeps its lock past its threshold, seen through `metrics --all`.
    let mut holder = Redlock::new(&server)
        .args(["--prefix", "cron:", "run", "--key", "stuck", "--ttl", "3s"])
        .args(["-c", child::HOLD])
        .spawn();
    holder.expect_line("ready");
    let held = ("RedlockHeldTooLong".to_string(), "cron:stuck".to_string());
    until("the held-too-long alert to fire", || {
        refresh(&server, "cron:", &textfiles);
        firing(prometheus_port).contains(&held)
    });
    assert!(
        !firing(prometheus_port).contains(&(
            "RedlockRenewalsStopped".to_string(),
            "cron:stuck".to_string()
        )),
        "a holder that renews is not reported as stopped"
    );

    // Both resolve: the holder ends, the job runs ok.
    holder.close_stdin();
    holder.exits_with(0);
    nightly("true", 0);
    until("every alert to resolve", || {
        refresh(&server, "cron:", &textfiles);
        firing(prometheus_port).is_empty()
    });
    eprintln!(
        "node_exporter and Prometheus: the alerts fired and resolved in {:?}",
        started.elapsed()
    );
    drop(prometheus);
}
