//! The JSON Schemas in `schemas/` are what redlock prints: real outputs of real runs (`status
//! --json`, `acquire --json`, `check --json`, `log --json` and the lines of `--log-format json`)
//! are validated against them by a well-kept validator (Python's `jsonschema`, in the venv
//! `scripts/test` makes), every object the schemas describe is closed (`additionalProperties`
//! false, so a field written but not described fails), and every field a schema names is seen
//! in some output, so a schema does not keep a field that is gone. Every subcommand with a
//! `--json` flag has its schema.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::json::{Document, Json};
use crate::support::{RedisServer, Redlock, TempDir, free_port, wait_until};

/// The outputs with a schema: the file under `schemas/` and what prints it.
const SCHEMAS: [(&str, &str); 5] = [
    ("status.json", "status --json"),
    ("acquire.json", "acquire --json"),
    ("check.json", "check --json"),
    ("log.json", "log --json (a line)"),
    ("log-line.json", "--log-format json (a line on stderr)"),
];

/// Fields no run of this test prints, each with the reason.
const NOT_SEEN: [(&str, &str, &str); 3] = [
    (
        "log-line.json",
        "late_us",
        "the keeper fires only for a frozen redlock",
    ),
    ("log-line.json", "dropped", "only when stderr is full"),
    (
        "log.json",
        "replicas",
        "a take with --replicas needs a replica to acknowledge it (tests/cli/replicas.rs)",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let python = root().join("target/tools/bin/python3");
    assert!(
        python.exists(),
        "{} is missing: scripts/test installs the validator (jsonschema) into target/tools",
        python.display()
    );
    python
}

fn schema(name: &str) -> Json {
    let path = root().join("schemas").join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Validates each (schema, document) pair; returns the failures, one line each.
fn validate(documents: &[(&str, String)]) -> Vec<String> {
    let dir = TempDir::new("schemas");
    let mut pairs = Vec::new();
    for (i, (name, text)) in documents.iter().enumerate() {
        let path = dir.join(&format!("{i}.json"));
        fs::write(&path, text).expect("write a document");
        pairs.push(serde_json::json!([
            root().join("schemas").join(name),
            path,
            text.chars().take(200).collect::<String>()
        ]));
    }
    let list = dir.join("documents.json");
    fs::write(&list, Json::Array(pairs).to_string()).expect("write the list");
    let script = r#"
import json, sys
from jsonschema import Draft202012Validator
failures = []
schemas = {}
for schema_path, path, shown in json.load(open(sys.argv[1])):
    if schema_path not in schemas:
        schema = json.load(open(schema_path))
        Draft202012Validator.check_schema(schema)
        schemas[schema_path] = Draft202012Validator(schema)
    for error in schemas[schema_path].iter_errors(json.load(open(path))):
        where = "/".join(str(p) for p in error.absolute_path)
        failures.append(f"{schema_path.split('/')[-1]}: at /{where}: {error.message}: {shown}")
print("\n".join(failures))
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(&list)
        .output()
        .expect("python3 starts");
    assert!(
        out.status.success(),
        "the validator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every property name a schema describes, anywhere in it.
fn named(schema: &Json, into: &mut BTreeSet<String>) {
    match schema {
        Json::Object(fields) => {
            if let Some(Json::Object(props)) = fields.get("properties") {
                into.extend(props.keys().cloned());
            }
            fields.values().for_each(|v| named(v, into));
        }
        Json::Array(items) => items.iter().for_each(|v| named(v, into)),
        _ => {}
    }
}

/// Every field name a document has, anywhere in it.
fn fields(doc: &Json, into: &mut BTreeSet<String>) {
    match doc {
        Json::Object(map) => {
            for (k, v) in map {
                into.insert(k.clone());
                fields(v, into);
            }
        }
        Json::Array(items) => items.iter().for_each(|v| fields(v, into)),
        _ => {}
    }
}

/// The schema objects that are not closed: a described object must say
/// `"additionalProperties": false`.
fn open_objects(schema: &Json, at: &str, into: &mut Vec<String>) {
    match schema {
        Json::Object(map) => {
            if map.contains_key("properties")
                && map.get("additionalProperties") != Some(&Json::Bool(false))
            {
                into.push(at.to_owned());
            }
            for (k, v) in map {
                open_objects(v, &format!("{at}/{k}"), into);
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                open_objects(v, &format!("{at}/{i}"), into);
            }
        }
        _ => {}
    }
}

fn json_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(str::to_owned)
        .collect()
}

/// Runs what prints every kind of JSON redlock writes, in the states worth describing, and
/// returns each document with its schema's name.
fn real_outputs() -> Vec<(&'static str, String)> {
    let server = RedisServer::start();
    let _replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &server.port().to_string()]);
    wait_until("the replica to connect", Duration::from_secs(10), || {
        (server.info("replication").get("connected_slaves")? != "0").then_some(())
    });
    let mut docs: Vec<(&'static str, String)> = Vec::new();
    let lines = |docs: &mut Vec<(&'static str, String)>, text: &str| {
        for line in json_lines(text) {
            docs.push(("log-line.json", line));
        }
    };
    let rl = || Redlock::new(&server).args(["--log-format", "json", "-v"]);

    // Runs: ok, failed, a --once-per window, a refusal, a run stopped by --max-runtime.
    let ok = rl()
        .args(["run", "--key", "done", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    lines(&mut docs, &ok.stderr);
    let failed = rl()
        .args(["run", "--key", "failed", "--ttl", "5s", "--", "false"])
        .exits_with(1);
    lines(&mut docs, &failed.stderr);
    // The second run of a window is skipped.
    for _ in 0..2 {
        let once = rl()
            .args([
                "run",
                "--key",
                "once",
                "--ttl",
                "5s",
                "--once-per",
                "1h",
                "--",
                "true",
            ])
            .run();
        lines(&mut docs, &once.stderr);
    }
    let timed_out = rl()
        .args([
            "run",
            "--key",
            "slow",
            "--ttl",
            "5s",
            "--max-runtime",
            "200ms",
        ])
        .args(["--", "sleep", "30"])
        .exits_with(124);
    lines(&mut docs, &timed_out.stderr);

    // Holds for scripts: exclusive, slotted, shared, several keys.
    for args in [
        &["--key", "held"][..],
        &["--key", "slotted", "--slots", "2", "--label", "nightly"],
        &["--key", "shared", "--shared"],
        &["--key", "left", "--key", "right"],
    ] {
        let out = rl()
            .arg("acquire")
            .args(args)
            .args(["--ttl", "60s", "--json"])
            .exits_with(0);
        docs.push(("acquire.json", out.stdout.trim_end().to_owned()));
        lines(&mut docs, &out.stderr);
    }
    let busy = rl()
        .args(["run", "--key", "held", "--ttl", "5s", "--", "true"])
        .exits_with(75);
    lines(&mut docs, &busy.stderr);

    // A waiter in the queue of the held lock, shown by status while it waits.
    let waiter = rl()
        .args([
            "run", "--key", "held", "--ttl", "5s", "--wait", "60s", "--", "true",
        ])
        .spawn();
    server.wait_until_waiting_on_server("held", 1);

    // A pause of one key and of the prefix; a key that is not a lock; a lock whose record
    // cannot be read.
    Redlock::new(&server)
        .args(["pause", "paused", "--for", "1h", "--reason", "maintenance"])
        .exits_with(0);
    Redlock::new(&server)
        .args(["pause", "--all", "--reason", "freeze"])
        .exits_with(0);
    let _: () = server.query(&["HSET", "not-a-lock", "f", "v"]);
    let _: () = server.query(&["SET", "{unreadable}:redlock:stats", "a string"]);
    let _: () = server.query(&["SET", "unreadable", "someone"]);

    let keys = [
        "done",
        "failed",
        "once",
        "held",
        "slotted",
        "shared",
        "paused",
        "not-a-lock",
    ];
    let status = Redlock::new(&server)
        .args(["status", "--json", "--show-token"])
        .args(keys)
        .exits_with(78);
    docs.push(("status.json", status.stdout.trim_end().to_owned()));
    let status = Redlock::new(&server)
        .args(["status", "--json", "unreadable", "done"])
        .run();
    docs.push(("status.json", status.stdout.trim_end().to_owned()));
    let all = Redlock::new(&server)
        .args(["status", "--json", "--all"])
        .run();
    docs.push(("status.json", all.stdout.trim_end().to_owned()));

    Redlock::new(&server)
        .args(["resume", "--all"])
        .exits_with(0);

    // A quorum of two servers and one that does not answer.
    let second = RedisServer::start();
    let nobody = format!("redis://127.0.0.1:{}", free_port());
    let quorum = || {
        Redlock::without_url()
            .args([
                "--url",
                &server.url(),
                "--url",
                &second.url(),
                "--url",
                &nobody,
            ])
            .args(["--log-format", "json", "-v"])
    };
    let out = quorum()
        .args(["run", "--key", "q", "--ttl", "5s", "--", "true"])
        .exits_with(0);
    lines(&mut docs, &out.stderr);
    let out = quorum().args(["status", "--json", "q"]).exits_with(1);
    docs.push(("status.json", out.stdout.trim_end().to_owned()));

    waiter.signal(libc::SIGTERM);
    let out = waiter.wait();
    lines(&mut docs, &out.stderr);

    // The ends of holds: by token, forced, an expiry the log infers, a run whose lease was
    // taken from it (its `lost` is `noticed`).
    let token = Redlock::new(&server)
        .args(["acquire", "--key", "by-token", "--ttl", "60s"])
        .exits_with(0)
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    Redlock::new(&server)
        .args(["release", "by-token", "--token", &token])
        .exits_with(0);
    Redlock::new(&server)
        .args(["acquire", "--key", "lapses", "--ttl", "500ms"])
        .exits_with(0);
    // A waiter's take, which says how long it waited, after the lapse.
    let out = rl()
        .args([
            "run", "--key", "lapses", "--ttl", "5s", "--wait", "10s", "--", "true",
        ])
        .exits_with(0);
    lines(&mut docs, &out.stderr);
    let mut forced = rl()
        .args([
            "run",
            "--key",
            "forced",
            "--ttl",
            "3s",
            "-c",
            "echo ready; sleep 30",
        ])
        .spawn();
    forced.expect_line("ready");
    Redlock::new(&server)
        .args(["release", "forced", "--force"])
        .exits_with(0);
    let out = forced.exits_with(76);
    lines(&mut docs, &out.stderr);
    wait_until("the short lease to lapse", Duration::from_secs(10), || {
        (!server.exists("lapses")).then_some(())
    });
    let log = Redlock::new(&server)
        .args(["log", "--all", "--json"])
        .exits_with(0);
    for line in json_lines(&log.stdout) {
        docs.push(("log.json", line));
    }

    // Checks: OK, WARNING, CRITICAL.
    for (args, code) in [
        (&["done"][..], 0),
        (&["done", "failed", "never-ran"], 1),
        (&["held", "--max-age", "1ms"], 2),
    ] {
        let out = Redlock::new(&server)
            .args(["check", "--json"])
            .args(args)
            .exits_with(code);
        docs.push(("check.json", out.stdout.trim_end().to_owned()));
    }

    // Final error lines: bad input, nothing listening.
    let usage = Redlock::new(&server)
        .args([
            "--log-format",
            "json",
            "run",
            "--key",
            "k",
            "--ttl",
            "soon",
            "--",
            "true",
        ])
        .exits_with(64);
    lines(&mut docs, &usage.stderr);
    let unavailable = Redlock::without_url()
        .args(["--url", &nobody, "--log-format", "json", "status", "k"])
        .exits_with(69);
    lines(&mut docs, &unavailable.stderr);
    docs
}

#[test]
fn real_outputs_match_their_schemas_and_the_schemas_name_every_field() {
    let docs = real_outputs();
    let failures = validate(&docs);
    assert!(
        failures.is_empty(),
        "outputs that do not match their schema:\n{}",
        failures.join("\n")
    );
    // Every schema got documents, and every field it names was printed by some run.
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (name, text) in &docs {
        let doc = Json::parse(text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        fields(&doc, seen.entry(name).or_default());
    }
    let mut never = Vec::new();
    for (name, _) in SCHEMAS {
        let printed = seen
            .get(name)
            .unwrap_or_else(|| panic!("no output for {name}"));
        let mut described = BTreeSet::new();
        named(&schema(name), &mut described);
        for field in described.difference(printed) {
            if !NOT_SEEN.iter().any(|(s, f, _)| *s == name && f == field) {
                never.push(format!("{name}: {field}"));
            }
        }
    }
    for (name, field, _) in NOT_SEEN {
        if seen.get(name).is_some_and(|s| s.contains(field)) {
            never.push(format!(
                "{name}: {field} is printed now: take it off NOT_SEEN"
            ));
        }
    }
    assert!(
        never.is_empty(),
        "fields a schema names but no output of this test has (remove them from the schema, \
         or add a run that prints them, or list them in NOT_SEEN with why):\n{}",
        never.join("\n")
    );
}

#[test]
fn every_schema_is_closed_and_every_json_output_has_one() {
    let mut open = Vec::new();
    for (name, _) in SCHEMAS {
        open_objects(&schema(name), name, &mut open);
    }
    assert!(
        open.is_empty(),
        "objects without \"additionalProperties\": false: {open:?}"
    );
    let files: BTreeSet<String> = fs::read_dir(root().join("schemas"))
        .expect("schemas/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = SCHEMAS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(
        files, listed,
        "schemas/ and the outputs this test validates"
    );
    // Each subcommand with `--json` has a schema named after it.
    for sub in [
        "run", "status", "release", "acquire", "extend", "doctor", "pause", "resume", "metrics",
        "check", "log",
    ] {
        let help = Redlock::without_url().args([sub, "--help"]).exits_with(0);
        if help.stdout.contains("--json") {
            assert!(
                files.contains(&format!("{sub}.json")),
                "`redlock {sub} --json` has no schema in schemas/"
            );
        }
    }
}
