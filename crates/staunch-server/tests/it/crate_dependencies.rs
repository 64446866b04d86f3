//! Crates depend on each other in one direction only (ARCHITECTURE.md, "Crates, and what each
//! may not use"): a crate's `[dependencies]` never name a staunch crate above it. Import
//! circles between modules inside a crate, at every depth, are `scripts/module-graph`'s.

use std::path::Path;

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
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    (
        "staunch-jobs",
        &[
            "staunch-command",
            "staunch-proxy",
            "staunch-client",
            "staunch-audit",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    (
        "staunch-client",
        &[
            "staunch-server",
            "staunch-store",
            "staunch-jobs",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    (
        "staunch-command",
        &[
            "staunch-proxy",
            "staunch-client",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    ("staunch-proxy", &["staunch-demo", "staunch-probe"]),
    (
        "staunch-audit",
        &[
            "staunch-server",
            "staunch-store",
            "staunch-jobs",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    (
        "staunch-otel",
        &[
            "staunch-jobs",
            "staunch-command",
            "staunch-proxy",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    (
        "staunch-demo",
        &[
            "staunch-command",
            "staunch-proxy",
            "staunch-client",
            "staunch-audit",
            "staunch-probe",
        ],
    ),
    (
        "staunch-live",
        &[
            "staunch-command",
            "staunch-client",
            "staunch-audit",
            "staunch-demo",
            "staunch-probe",
        ],
    ),
    // A test kit: it may use any library crate but those a test of the server never needs;
    // no crate may use it but as a dev-dependency (checked below).
    (
        "staunch-testkit",
        &[
            "staunch-command",
            "staunch-proxy",
            "staunch-client",
            "staunch-audit",
            "staunch-probe",
        ],
    ),
    (
        "staunch-probe",
        &[
            "staunch-server",
            "staunch-store",
            "staunch-jobs",
            "staunch-command",
            "staunch-proxy",
            "staunch-demo",
        ],
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
            if d == "staunch-testkit" || forbidden.iter().any(|f| d.starts_with(f)) {
                wrong.push(format!("{krate} depends on {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against ARCHITECTURE.md: {wrong:?}"
    );
}

/// Every library crate has its row: a new crate cannot slip past the check by being unlisted.
#[test]
fn every_library_crate_is_in_the_table() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("the crates directory") {
        let name = entry.expect("a crate directory").file_name();
        let name = name.to_string_lossy();
        if name != "staunch" && !FORBIDDEN.iter().any(|(k, _)| *k == name) {
            unlisted.push(name.into_owned());
        }
    }
    assert!(
        unlisted.is_empty(),
        "crates with no row in FORBIDDEN: {unlisted:?}"
    );
}

#[test]
fn the_dependency_check_finds_a_forbidden_dependency() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nstaunch-jobs.workspace = true\n\
                    serde = \"1\"\n\n[dev-dependencies]\nstaunch-proxy.workspace = true\n";
    assert_eq!(staunch_dependencies(manifest), ["staunch-jobs"]);
}

/// The lints every library crate keeps on (clippy, run with `-D warnings`, enforces them): its
/// public items documented, and `pub` only on what another crate can reach.
const LIBRARY_LINTS: &str = "#![warn(missing_docs, unreachable_pub)]";

/// Whether a crate root turns the library lints on (a line of its own, not a comment).
fn has_library_lints(lib_rs: &str) -> bool {
    lib_rs.lines().any(|l| l.trim() == LIBRARY_LINTS)
}

#[test]
fn every_library_crate_keeps_the_library_lints_on() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut without = Vec::new();
    for (krate, _) in FORBIDDEN {
        let lib = std::fs::read_to_string(crates.join(krate).join("src/lib.rs"))
            .unwrap_or_else(|e| panic!("{krate}/src/lib.rs: {e}"));
        if !has_library_lints(&lib) {
            without.push(*krate);
        }
    }
    assert!(
        without.is_empty(),
        "library crates without `{LIBRARY_LINTS}`: {without:?}"
    );
}

#[test]
fn the_lint_check_does_not_take_a_comment_or_a_subset_for_the_lints() {
    assert!(has_library_lints(
        "//! x\n\n#![warn(missing_docs, unreachable_pub)]\n"
    ));
    assert!(!has_library_lints(
        "// #![warn(missing_docs, unreachable_pub)]\n"
    ));
    assert!(!has_library_lints("#![warn(unreachable_pub)]\n"));
}

/// The top-level type names (struct, enum, type alias, trait) a crate's source defines more
/// than once. A definition right under a `#[cfg(…)]` is one of alternatives and not counted.
fn repeated_type_names(files: &[String]) -> Vec<String> {
    let def = |line: &str| -> Option<String> {
        let rest = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| line.strip_prefix(v))
            .unwrap_or(line);
        let rest = ["struct ", "enum ", "type ", "trait "]
            .iter()
            .find_map(|k| rest.strip_prefix(k))?;
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        name.starts_with(|c: char| c.is_ascii_uppercase())
            .then_some(name)
    };
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for text in files {
        let mut previous = "";
        for line in text.lines() {
            if let Some(name) = def(line)
                && !previous.trim_start().starts_with("#[cfg(")
            {
                *seen.entry(name).or_default() += 1;
            }
            if !line.trim().is_empty() {
                previous = line;
            }
        }
    }
    let mut twice: Vec<String> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect();
    twice.sort();
    twice
}

fn sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).expect("a source file"));
        }
    }
}

/// One name per type in a crate (ARCHITECTURE.md's names): two `State`s in one crate make
/// every search and every error message ambiguous.
#[test]
fn each_type_name_is_defined_once_per_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut repeated = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("the crates directory") {
        let dir = entry.expect("a crate directory").path().join("src");
        let mut files = Vec::new();
        sources(&dir, &mut files);
        for name in repeated_type_names(&files) {
            repeated.push(format!("{}: {name}", dir.display()));
        }
    }
    assert!(
        repeated.is_empty(),
        "type names defined twice: {repeated:?}"
    );
}

#[test]
fn the_name_check_finds_a_repeated_type_and_ignores_cfg_alternatives() {
    let a = "struct State {}\n#[cfg(unix)]\ntype Conn = u8;\npub(crate) enum Answer {}\n";
    let b = "pub struct State(u8);\n#[cfg(not(unix))]\ntype Conn = u16;\nimpl X {\n    type Answer = u8;\n}\n";
    assert_eq!(
        repeated_type_names(&[a.to_string(), b.to_string()]),
        ["State"]
    );
}
