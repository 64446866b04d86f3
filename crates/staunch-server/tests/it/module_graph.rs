//! The crate's modules depend on each other in one direction only.
//!
//! Reads every source file, collects the `crate::<module>` paths it names (in `use` lines and
//! in code), and fails on any cycle among the top-level modules — the request core used to
//! import the session that imported it back. Doc comments are not code and are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let from = module_of(&src, &f);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("readable file");
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                let after = &rest[i + "crate::".len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != from && name != "protocol" {
                    edges.entry(from.clone()).or_default().insert(name);
                }
                rest = after;
            }
        }
    }
    edges
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let start = path.iter().position(|p| p == m).unwrap_or(0);
                    let mut c = path[start..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if !state.contains_key(n) {
            let mut path = Vec::new();
            if let Some(c) = visit(n, edges, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn modules_depend_on_each_other_in_one_direction() {
    let edges = graph();
    // The graph is real: the request core depends on the registry and the context.
    assert!(edges["request"].contains("registry"), "{edges:?}");
    assert!(edges["request"].contains("context"), "{edges:?}");
    if let Some(cycle) = find_cycle(&edges) {
        let listing: Vec<String> = edges
            .iter()
            .map(|(k, v)| format!("{k} -> {}", v.iter().cloned().collect::<Vec<_>>().join(" ")))
            .collect();
        panic!(
            "import cycle: {}\n{}",
            cycle.join(" -> "),
            listing.join("\n")
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert!(find_cycle(&edges).is_none());
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "c", "a"]);
}

/// The staunch crates each crate may not depend on (ARCHITECTURE.md, "Crates, and what each
/// may not use"): dependencies point one way, from the protocol up to the binary.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("staunch-protocol", &["staunch-"]),
    ("staunch-lifecycle", &["staunch-"]),
    ("staunch-store", &["staunch-"]),
    ("staunch-net", &["staunch-"]),
    (
        "staunch-server",
        &[
            "staunch-jobs",
            "staunch-command",
            "staunch-proxy",
            "staunch-client",
            "staunch-audit",
        ],
    ),
    (
        "staunch-jobs",
        &[
            "staunch-command",
            "staunch-proxy",
            "staunch-client",
            "staunch-audit",
        ],
    ),
    (
        "staunch-client",
        &["staunch-server", "staunch-store", "staunch-jobs"],
    ),
    ("staunch-command", &["staunch-proxy", "staunch-client"]),
    (
        "staunch-audit",
        &["staunch-server", "staunch-store", "staunch-jobs"],
    ),
    (
        "staunch-otel",
        &["staunch-jobs", "staunch-command", "staunch-proxy"],
    ),
];

/// The staunch crates named in a crate's `[dependencies]` (not its dev-dependencies).
fn staunch_dependencies(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && line.starts_with("staunch") {
            let name = line.split(['.', ' ', '=']).next().unwrap_or_default();
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn crate_dependencies_point_one_way() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for (krate, forbidden) in FORBIDDEN {
        let manifest = std::fs::read_to_string(crates.join(krate).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{krate}/Cargo.toml: {e}"));
        let deps = staunch_dependencies(&manifest);
        assert!(
            *krate != "staunch-server" || deps.iter().any(|d| d == "staunch-protocol"),
            "the manifest reader found nothing: {deps:?}"
        );
        for d in deps {
            if forbidden.iter().any(|f| d.starts_with(f)) {
                wrong.push(format!("{krate} depends on {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against ARCHITECTURE.md: {wrong:?}"
    );
}

#[test]
fn the_dependency_check_finds_a_forbidden_dependency() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nstaunch-jobs.workspace = true\n\
                    serde = \"1\"\n\n[dev-dependencies]\nstaunch-proxy.workspace = true\n";
    assert_eq!(staunch_dependencies(manifest), ["staunch-jobs"]);
}
