//! The code stays easy to find one's way in: no source file so long that it holds several
//! subjects, no two modules that import each other (one of them is then the other's part, or
//! both need a third), and the performance page holds current figures, not their history
//! (`benches/HISTORY.md` does).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A file longer than this is split by subject.
const MAX_LINES: usize = 800;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn no_file_of_the_program_is_longer_than_800_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by subject (at most {MAX_LINES} lines a file):\n{}",
        long.join("\n")
    );
}

/// The module a file of `src/` is: `lock/acquire.rs` is `lock::acquire`, `lock/mod.rs` `lock`.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root().join("src")).expect("under src/");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts
}

/// The modules of `src/` that `file` (module `module`) names by path, outside its tests.
fn imports(
    file: &Path,
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let text = fs::read_to_string(file).expect("a source file");
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let is_dir = file.ends_with("mod.rs") || file.ends_with("main.rs");
    let base: Vec<String> = if is_dir {
        module.to_vec()
    } else {
        module[..module.len().saturating_sub(1)].to_vec()
    };
    let mut found = BTreeSet::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("crate::") || w.starts_with("super::"))
        .collect();
    for path in words {
        let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        let mut at: Vec<String> = if parts[0] == "crate" {
            parts.remove(0);
            Vec::new()
        } else {
            let mut at = base.clone();
            while parts.first() == Some(&"super") {
                parts.remove(0);
                at.pop();
            }
            at
        };
        let mut best = None;
        for part in parts {
            at.push(part.to_owned());
            if modules.contains(&at) {
                best = Some(at.clone());
            }
        }
        // A module's own ancestors (`super::` from a child) are its context, not a cycle.
        if let Some(best) = best.filter(|b| !module.starts_with(b)) {
            found.insert(best);
        }
    }
    found
}

#[test]
fn no_two_modules_import_each_other() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = files
        .iter()
        .map(|f| {
            let module = module_of(f);
            let uses = imports(f, &module, &modules);
            (module, uses)
        })
        .collect();
    let mut cycles = Vec::new();
    for (a, uses) in &graph {
        for b in uses.iter().filter(|b| a < *b) {
            if graph.get(b).is_some_and(|back| back.contains(a)) {
                cycles.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other (move what both need where one of them, or a third, \
         owns it):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_performance_page_is_current_figures_only() {
    let page = fs::read_to_string(root().join("docs/performance.md")).expect("docs/performance.md");
    let lines = page.lines().count();
    assert!(
        lines <= 120,
        "docs/performance.md has {lines} lines: keep the current figures there (at most 120 \
         lines) and move earlier ones to benches/HISTORY.md"
    );
    assert!(
        root().join("benches/HISTORY.md").exists(),
        "benches/HISTORY.md keeps the figures of earlier versions"
    );
}
