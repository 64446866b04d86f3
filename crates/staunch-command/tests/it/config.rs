//! `staunch.toml` validation: every mistake is reported, each with its line, column and field.

use std::path::Path;

use staunch_command::config::{ResultMode, parse};

fn errors(source: &str) -> Vec<String> {
    match parse(source, Path::new("/tmp/staunch.toml")) {
        Ok(_) => panic!("accepted:\n{source}"),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

fn has(errs: &[String], line: usize, needle: &str) {
    assert!(
        errs.iter()
            .any(|e| e.starts_with(&format!("{line}:")) && e.contains(needle)),
        "no error on line {line} containing {needle:?} in {errs:#?}"
    );
}

#[test]
fn every_mistake_is_named_with_its_line_and_field() {
    std::fs::create_dir_all("/tmp").ok();
    let src = r#"version = 1

[[tool]]
name = "export"
description = "Exports."
shape = "batch"
program = "/bin/echo"
args = ["{since}", "{files}x"]
stdout_overflow = "explode"
concurrency = 0
max_attempts = 3
params.files = { type = "array" }
params.verbose = { type = "string", flag = "-v" }
params.count = { type = "integer", default = "ten" }

[[tool]]
name = "export"
description = ""
program = "no-such-program-anywhere"
env.secrets = { TOKEN = "STAUNCH_TEST_SURELY_UNSET_VARIABLE" }
"#;
    let errs = errors(src);
    has(
        &errs,
        6,
        "tool[0] \"export\".shape: \"batch\" is not a shape",
    );
    has(&errs, 8, "{since} names no parameter");
    has(&errs, 8, "the array {files} must be a whole element");
    has(&errs, 9, "stdout_overflow");
    has(&errs, 10, "concurrency: must be at least 1");
    has(&errs, 11, "only job tools");
    has(&errs, 13, "params.verbose.flag: only a boolean has a flag");
    has(&errs, 14, "params.count.default");
    has(&errs, 17, "the tool name \"export\" is taken");
    has(&errs, 18, "tool[1] \"export\".description");
    has(&errs, 19, "not found");
    has(&errs, 20, "STAUNCH_TEST_SURELY_UNSET_VARIABLE is not set");
}

#[test]
fn job_faces_may_not_collide_with_other_tools() {
    let src = r#"
[[tool]]
name = "build"
description = "Builds."
shape = "job"
program = "/bin/true"

[[tool]]
name = "start_build"
description = "Clashes with build's start face."
program = "/bin/true"
"#;
    let errs = errors(src);
    has(&errs, 9, "the tool name \"start_build\" is taken");
}

#[test]
fn a_parse_error_names_its_line() {
    let errs = errors("[[tool]]\nname = \"x\"\ndescription = \"y\"\nprogram = [\n");
    assert!(
        errs[0].starts_with("5:") || errs[0].starts_with("4:"),
        "{errs:?}"
    );
    let errs = errors("[serve]\nhttp = \"nowhere\"\n");
    has(&errs, 2, "serve.http");
}

#[test]
fn a_valid_file_gives_its_tools() {
    let src = r#"
[serve]
store = ":memory:"
demo_tools = true

[[tool]]
name = "report"
description = "Writes a report."
shape = "job"
program = "/bin/true"
args = ["--out", "{out}", "{verbose}"]
result = "file"
result_file = "{out}"
retry_safe = true
max_attempts = 2
deadline = "10m"
grace = "2s"
max_stdout = "64KiB"
params.out = { type = "string", default = "report.txt" }
params.verbose = { type = "boolean", default = false, flag = "-v" }
"#;
    let cfg = parse(src, Path::new("/tmp/staunch.toml")).unwrap();
    assert_eq!(cfg.serve.store.as_deref(), Some(":memory:"));
    assert_eq!(cfg.serve.demo_tools, Some(true));
    let t = &cfg.tools[0];
    assert_eq!(t.name, "report");
    assert_eq!(t.max_attempts, Some(2));
    assert_eq!(t.deadline, Some(std::time::Duration::from_secs(600)));
    assert_eq!(t.limits.max_stdout, 65536);
    assert!(matches!(t.result, ResultMode::File(_)));
    assert_eq!(t.flag_of("verbose").as_deref(), Some("-v"));
    let schema = t.params.schema();
    assert_eq!(schema["required"], serde_json::json!([]));
    assert_eq!(schema["additionalProperties"], false);
}

#[test]
fn a_result_file_outside_cwd_in_its_literal_text_is_refused() {
    let tool = |file: &str| {
        format!(
            "[[tool]]\nname = \"r\"\ndescription = \"R.\"\nprogram = \"/bin/true\"\n\
             result = \"file\"\nresult_file = \"{file}\"\nparams.out.type = \"string\"\n"
        )
    };
    let errs = errors(&tool("/var/tmp/{out}"));
    has(&errs, 6, "tool[0] \"r\".result_file");
    has(&errs, 6, "is absolute");
    has(&errs, 6, "working directory");
    let errs = errors(&tool("out/../../{out}"));
    has(&errs, 6, "climbs out with `..`");
    // A placeholder may hold anything: that is checked at each call.
    for ok in ["{out}", "out/{out}.txt", "./{out}", "{out}..txt"] {
        parse(&tool(ok), Path::new("/tmp/staunch.toml")).unwrap();
    }
}
