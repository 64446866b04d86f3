//! `staunch.toml` validation: every mistake is reported, each with its line, column and field.

use std::path::Path;

use staunch_command::config::{
    CommandConfig, ConfigErrors, FlagArity, FlagShape, ResultMode, ServeFlags,
};

/// A few flags, shaped and checked as the binary's are.
struct Flags;

impl ServeFlags for Flags {
    fn keys(&self) -> Vec<String> {
        [
            "http",
            "store",
            "log_file",
            "no_log",
            "demo_tools",
            "max_in_flight",
            "allow_hosts",
        ]
        .map(String::from)
        .to_vec()
    }

    fn shape(&self, key: &str) -> Option<FlagShape> {
        let (arity, path) = match key {
            "http" | "max_in_flight" => (FlagArity::One, false),
            "store" | "log_file" => (FlagArity::One, true),
            "no_log" | "demo_tools" => (FlagArity::Switch, false),
            "allow_hosts" => (FlagArity::Many, false),
            _ => return None,
        };
        Some(FlagShape { arity, path })
    }

    fn check(&self, key: &str, values: &[String]) -> Result<(), String> {
        let one = values.first().map_or("", String::as_str);
        match key {
            "http" if one.parse::<std::net::SocketAddr>().is_err() => {
                Err(format!("{one:?} is not an address"))
            }
            "max_in_flight" if one.parse::<u32>().map_or(true, |n| n < 1) => {
                Err("must be at least 1".into())
            }
            _ => Ok(()),
        }
    }
}

fn parse(source: &str, path: &Path) -> Result<CommandConfig, ConfigErrors> {
    staunch_command::config::parse(source, path, &Flags)
}

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

/// Unknown keys do not hide the other mistakes: each one is reported where it is, with the
/// tool's path and the nearest known key, and the rest of the file is still checked.
#[test]
fn unknown_keys_are_reported_with_every_other_mistake() {
    let src = r#"verison = 1

[serve]
htp = "127.0.0.1:8080"

[[tool]]
name = "export"
description = "Exports."
program = "/bin/echo"
dedline = "10m"
deadline = "soon"
params.rows = { type = "integer", minimun = 1 }
env.alow = ["HOME"]

[[tool]]
name = "second"
description = "Second."
program = "no-such-program-anywhere"

[[upstream]]
name = "py"
command = ["python3", "server.py"]
isolated = true
tools.search = { shape = "streaming", dedline = "1m" }
"#;
    let errs = errors(src);
    has(&errs, 1, "verison: unknown key; did you mean \"version\"?");
    has(&errs, 4, "serve.htp: unknown key; did you mean \"http\"?");
    has(
        &errs,
        10,
        "tool[0] \"export\".dedline: unknown key; did you mean \"deadline\"?",
    );
    has(&errs, 11, "tool[0] \"export\".deadline");
    has(
        &errs,
        12,
        "tool[0] \"export\".params.rows.minimun: unknown key; did you mean \"minimum\"?",
    );
    has(
        &errs,
        13,
        "tool[0] \"export\".env.alow: unknown key; did you mean \"allow\"?",
    );
    has(&errs, 18, "not found");
    has(
        &errs,
        23,
        "upstream[0] \"py\".isolated: unknown key; did you mean \"isolate\"?",
    );
    has(
        &errs,
        24,
        "upstream[0] \"py\".tools.search.dedline: unknown key",
    );
    assert_eq!(errs.len(), 9, "{errs:#?}");
    // In the order they appear in the file.
    let lines: Vec<usize> = errs
        .iter()
        .map(|e| e.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{lines:?}");
    // A key nothing is close to lists what the table takes.
    let errs = errors(
        "[serve]
zzz = 1
",
    );
    has(
        &errs,
        2,
        "serve.zzz: unknown key: no flag of staunch serve has this name (this table takes: http, store",
    );
}

/// A tool without a required key is named with its path, beside the unknown keys — not as a
/// bare "missing field" at the top of the file.
#[test]
fn missing_required_keys_are_named_with_their_table() {
    let src = "[[tool]]\nname = \"export\"\nprogram = \"/bin/echo\"\ndedline = \"1m\"\n\n\
               [[tool]]\nname = \"b\"\ndescription = \"B.\"\nprogram = \"/bin/echo\"\n\
               params.n = { minimum = 1 }\n";
    let errs = errors(src);
    has(
        &errs,
        1,
        "tool[0] \"export\".description: missing; every tool needs a description",
    );
    has(&errs, 4, "tool[0] \"export\".dedline: unknown key");
    has(&errs, 10, "tool[1] \"b\".params.n.type: missing");
    assert!(
        !errs.iter().any(|e| e.contains("missing field")),
        "{errs:#?}"
    );
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
    assert_eq!(cfg.serve.get("store").unwrap().values, [":memory:"]);
    assert_eq!(
        cfg.serve.get("demo_tools").unwrap().values,
        Vec::<String>::new()
    );
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

#[test]
fn an_upstream_takes_how_long_a_parked_call_waits_for_its_answer() {
    let up = |line: &str| {
        format!("version = 1\n\n[[upstream]]\nname = \"py\"\ncommand = [\"python3\"]\n{line}\n")
    };
    let cfg = parse(
        &up("question_wait = \"90s\""),
        Path::new("/tmp/staunch.toml"),
    )
    .unwrap();
    assert_eq!(
        cfg.upstreams[0].question_wait,
        Some(std::time::Duration::from_secs(90))
    );
    let unset = parse(&up(""), Path::new("/tmp/staunch.toml")).unwrap();
    assert_eq!(unset.upstreams[0].question_wait, None);
    for (bad, why) in [("\"0s\"", "give up every question"), ("\"soon\"", "soon")] {
        let errs = errors(&up(&format!("question_wait = {bad}")));
        has(&errs, 6, "upstream[0] \"py\".question_wait");
        has(&errs, 6, why);
    }
}

#[test]
fn the_stop_policy_takes_a_grace_on_command_upstreams_only() {
    let src = "version = 1\n\n[[upstream]]\nname = \"py\"\ncommand = [\"python3\", \"s.py\"]\n\
               kill_after_cancel = \"2s\"\ntools.slow = { kill_after_cancel = \"500ms\" }\n";
    let cfg = parse(src, Path::new("/tmp/staunch.toml")).unwrap();
    let up = &cfg.upstreams[0];
    assert_eq!(
        up.kill_after_cancel,
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(
        up.tools["slow"].kill_after_cancel,
        Some(std::time::Duration::from_millis(500))
    );
    let url = "version = 1\n\n[[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
               tools.slow = { kill_after_cancel = \"1s\" }\n";
    let errs = errors(url);
    has(&errs, 6, "upstream[0] \"web\".tools.slow.kill_after_cancel");
    has(&errs, 6, "needs a command upstream");
    let bad = "version = 1\n\n[[upstream]]\nname = \"py\"\ncommand = [\"python3\"]\n\
               kill_after_cancel = \"soon\"\n";
    has(&errors(bad), 6, "upstream[0] \"py\".kill_after_cancel");
}

/// `[serve]` takes any flag the program defines, spelled as the file spells values: a switch
/// as a boolean, a repeatable flag as an array, a file relative to the configuration.
#[test]
fn the_serve_table_gives_each_flag_its_values() {
    let src = r#"
[serve]
http = "127.0.0.1:8080"
store = "state.db"
log_file = "/var/log/staunch.jsonl"
no_log = false
demo_tools = true
max_in_flight = 64
allow_hosts = ["mcp.example", "mcp.internal"]
"#;
    let cfg = parse(src, Path::new("/etc/staunch/staunch.toml")).unwrap();
    let values = |k: &str| cfg.serve.get(k).map(|s| s.values.clone());
    assert_eq!(values("http").unwrap(), ["127.0.0.1:8080"]);
    assert_eq!(values("store").unwrap(), ["/etc/staunch/state.db"]);
    assert_eq!(values("log_file").unwrap(), ["/var/log/staunch.jsonl"]);
    assert_eq!(values("no_log"), None, "a switch set to false sets nothing");
    assert_eq!(values("demo_tools").unwrap(), Vec::<String>::new());
    assert_eq!(values("max_in_flight").unwrap(), ["64"]);
    assert_eq!(
        values("allow_hosts").unwrap(),
        ["mcp.example", "mcp.internal"]
    );
}

/// A value of the wrong kind, or one the flag refuses, is a mistake at its line, beside the
/// file's other mistakes.
#[test]
fn a_serve_value_the_flag_refuses_is_named_at_its_line() {
    let errs = errors(
        "[serve]\nno_log = \"yes\"\nmax_in_flight = 0\nhttp = [\"127.0.0.1:1\"]\n\
         allow_hosts = { a = 1 }\nconfig = \"other.toml\"\n",
    );
    has(&errs, 2, "serve.no_log: a switch: true or false");
    has(&errs, 3, "serve.max_in_flight: must be at least 1");
    has(&errs, 4, "serve.http: takes one value, not an array");
    has(&errs, 5, "serve.allow_hosts: a string or a number");
    has(
        &errs,
        6,
        "serve.config: a configuration file cannot name one",
    );
    assert_eq!(errs.len(), 5, "{errs:#?}");
}
