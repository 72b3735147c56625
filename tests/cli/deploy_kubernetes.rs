//! The Kubernetes manifests (`deploy/kubernetes/`) against the API of the release
//! `docs/deploy.md` names, validated offline by `kubernetes-validate` (which carries each
//! release's schemas; `scripts/test` installs it), and against redlock's exit statuses: each
//! CronJob's `podFailurePolicy` is the table in `docs/deploy.md`, and that table covers every
//! status of the README's. The Secret holds every key the CronJobs read, and the README's
//! manifest is `cronjob.yaml` itself.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn manifests() -> Vec<(String, Yaml)> {
    let mut files: Vec<PathBuf> = fs::read_dir(repo("deploy/kubernetes"))
        .expect("deploy/kubernetes")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let docs = YamlLoader::load_from_str(&fs::read_to_string(file).unwrap())
                .unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
            docs.into_iter().map(move |d| (name.clone(), d))
        })
        .collect()
}

/// The Kubernetes release docs/deploy.md names: "Kubernetes 1.N or later".
fn documented_release() -> String {
    let text = read("docs/deploy.md").replace('\n', " ");
    let at = text
        .find("Kubernetes 1.")
        .expect("docs/deploy.md names the Kubernetes release the manifests need");
    let version: String = text[at + "Kubernetes ".len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    version.trim_end_matches('.').to_owned()
}

/// `kubernetes-validate`: on PATH, or where `scripts/test` installs it.
fn validator() -> PathBuf {
    let installed = repo("target/tools/bin/kubernetes-validate");
    if installed.is_file() {
        return installed;
    }
    let on_path = Command::new("kubernetes-validate")
        .arg("--version")
        .output();
    assert!(
        on_path.is_ok_and(|o| o.status.success()),
        "kubernetes-validate is missing: scripts/test installs it (into target/tools), or \
         `pip install kubernetes-validate`"
    );
    PathBuf::from("kubernetes-validate")
}

#[test]
fn the_manifests_are_valid_for_the_documented_kubernetes_release() {
    let release = documented_release();
    let files: Vec<PathBuf> = manifests()
        .into_iter()
        .map(|(name, _)| repo("deploy/kubernetes").join(name))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(!files.is_empty());
    let out = Command::new(validator())
        .args(["--strict", "--kubernetes-version", &format!("{release}.0")])
        .args(&files)
        .output()
        .expect("run kubernetes-validate");
    assert!(
        out.status.success(),
        "the manifests are not valid for Kubernetes {release}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// docs/deploy.md's table under "Exit statuses": status → action (`FailJob`, `Count`,
/// `Ignore`, or `none` for a status no rule may name).
fn documented_actions() -> BTreeMap<i64, String> {
    let text = read("docs/deploy.md");
    let section = text
        .split("### Exit statuses\n")
        .nth(1)
        .expect("docs/deploy.md has an \"Exit statuses\" section");
    let mut actions = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let status = cells[1].split_whitespace().next().unwrap_or("");
        let Ok(status) = status.parse::<i64>() else {
            continue;
        };
        let action = cells[2].split([' ', ':']).next().unwrap_or("").to_owned();
        actions.insert(status, action);
    }
    actions
}

/// The numbered statuses of the README's exit table from 64 up (0–3 are other subcommands'
/// answers; 128+N is the job's).
fn readme_statuses() -> Vec<i64> {
    let readme = read("README.md");
    let section = readme
        .split("## Exit status\n")
        .nth(1)
        .expect("README's exit table");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1)?.trim().parse::<i64>().ok())
        .filter(|s| *s >= 64)
        .collect()
}

#[test]
fn pod_failure_policy_maps_every_exit_status_as_documented() {
    let documented = documented_actions();
    for status in readme_statuses() {
        assert!(
            documented.contains_key(&status),
            "docs/deploy.md's exit-status table does not say what a CronJob does with {status}"
        );
    }
    for (name, doc) in manifests() {
        if doc["kind"].as_str() != Some("CronJob") {
            continue;
        }
        let job = &doc["spec"]["jobTemplate"]["spec"];
        let container = &job["template"]["spec"]["containers"][0];
        let mut mapped: BTreeMap<i64, String> = BTreeMap::new();
        for rule in job["podFailurePolicy"]["rules"].as_vec().expect("rules") {
            let codes = &rule["onExitCodes"];
            if codes.is_badvalue() {
                continue;
            }
            assert_eq!(codes["containerName"], container["name"], "{name}");
            assert_eq!(codes["operator"].as_str(), Some("In"), "{name}");
            let values: Vec<i64> = codes["values"]
                .as_vec()
                .unwrap()
                .iter()
                .filter_map(Yaml::as_i64)
                .collect();
            let mut sorted = values.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                values, sorted,
                "{name}: the API wants the values ascending, once each"
            );
            for value in values {
                let action = rule["action"].as_str().unwrap().to_owned();
                assert!(
                    mapped.insert(value, action).is_none(),
                    "{name}: {value} in two rules"
                );
            }
        }
        for (status, action) in &documented {
            let got = mapped.get(status).map_or("none", String::as_str);
            let want = if action.starts_with("Count") && got == "none" {
                "none" // Count is also what happens to a status no rule names
            } else {
                action.as_str()
            };
            assert_eq!(got, want, "{name}: exit status {status}");
        }
        // 75 stays out of the policy because the run makes it 0.
        let args: Vec<&str> = container["args"]
            .as_vec()
            .unwrap()
            .iter()
            .filter_map(Yaml::as_str)
            .collect();
        if documented.get(&75).is_some_and(|a| a == "none") {
            assert!(
                args.windows(2).any(|w| w == ["--conflict-exit-code", "0"]),
                "{name}: 75 is left out of podFailurePolicy only with --conflict-exit-code 0"
            );
        }
    }
}

#[test]
fn the_secret_holds_every_key_the_cronjobs_read_and_rediss_comes_with_a_ca() {
    let all = manifests();
    let secrets: BTreeMap<String, Vec<String>> = all
        .iter()
        .filter(|(_, d)| d["kind"].as_str() == Some("Secret"))
        .map(|(_, d)| {
            let keys = d["stringData"]
                .as_hash()
                .or_else(|| d["data"].as_hash())
                .map(|h| {
                    h.keys()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (d["metadata"]["name"].as_str().unwrap().to_owned(), keys)
        })
        .collect();
    let has = |secret: &str, key: &str| {
        secrets
            .get(secret)
            .is_some_and(|k| k.iter().any(|x| x == key))
    };
    let secret = &all
        .iter()
        .find(|(_, d)| d["kind"].as_str() == Some("Secret"))
        .unwrap()
        .1;
    let url = secret["stringData"]["url"].as_str().unwrap_or("");
    for (name, doc) in all
        .iter()
        .filter(|(_, d)| d["kind"].as_str() == Some("CronJob"))
    {
        let pod = &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let env = container["env"].as_vec().expect("env");
        let var = |n: &str| env.iter().find(|e| e["name"].as_str() == Some(n));
        for e in env {
            let r = &e["valueFrom"]["secretKeyRef"];
            if !r.is_badvalue() {
                let (s, k) = (r["name"].as_str().unwrap(), r["key"].as_str().unwrap());
                assert!(has(s, k), "{name}: the Secret {s} has no key {k}");
            }
        }
        let mut files = BTreeMap::new();
        for volume in pod["volumes"].as_vec().unwrap() {
            let s = &volume["secret"];
            if s.is_badvalue() {
                continue;
            }
            let secret_name = s["secretName"].as_str().unwrap();
            assert!(
                secrets.contains_key(secret_name),
                "{name}: no Secret {secret_name}"
            );
            let mount = container["volumeMounts"]
                .as_vec()
                .unwrap()
                .iter()
                .find(|m| m["name"] == volume["name"])
                .and_then(|m| m["mountPath"].as_str())
                .expect("the Secret's volume mounted");
            for item in s["items"].as_vec().unwrap() {
                let key = item["key"].as_str().unwrap();
                assert!(
                    has(secret_name, key),
                    "{name}: the Secret {secret_name} has no key {key}"
                );
                files.insert(format!("{mount}/{}", item["path"].as_str().unwrap()), key);
            }
        }
        for file_var in ["REDLOCK_PASSWORD_FILE", "REDLOCK_TLS_CA_FILE"] {
            let path = var(file_var)
                .and_then(|v| v["value"].as_str())
                .unwrap_or_else(|| panic!("{name}: no {file_var}"));
            assert!(
                files.contains_key(path),
                "{name}: {file_var}={path} is no mounted file"
            );
        }
        assert!(
            url.starts_with("rediss://"),
            "the Secret's URL is TLS, which the CA file is for"
        );
    }
}

#[test]
fn the_readme_manifest_is_the_cronjob_file() {
    let readme = read("README.md");
    let file = read("deploy/kubernetes/cronjob.yaml");
    let block = readme
        .split("<!-- deploy/kubernetes/cronjob.yaml -->\n```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n").next())
        .expect("the README shows deploy/kubernetes/cronjob.yaml, marked as such");
    assert_eq!(
        block, file,
        "the README's manifest is not deploy/kubernetes/cronjob.yaml"
    );
}
