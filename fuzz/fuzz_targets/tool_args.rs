//! Tool-argument decoding: any JSON gives the typed arguments or an error message naming what
//! is wrong, never a panic; the argument shapes are those of the demo tools (integers with
//! bounds, optional strings, nested objects, enums).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use staunch_server::decode_args;

#[derive(Deserialize, schemars::JsonSchema, Debug)]
#[allow(dead_code)]
struct Count {
    steps: u32,
    delay_ms: u64,
    tag: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema, Debug)]
#[allow(dead_code)]
#[serde(rename_all = "snake_case")]
enum How {
    Panic,
    ToolError,
    RpcError,
}

#[derive(Deserialize, schemars::JsonSchema, Debug)]
#[allow(dead_code)]
struct Fail {
    how: How,
}

#[derive(Deserialize, schemars::JsonSchema, Debug)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
struct Import {
    rows: u32,
    delay_ms: Option<u64>,
    idempotency_key: Option<String>,
    nested: Option<Vec<std::collections::BTreeMap<String, f64>>>,
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    check::<Count>(&args);
    check::<Fail>(&args);
    check::<Import>(&args);
    check::<serde_json::Value>(&args);
});

fn check<A: serde::de::DeserializeOwned>(args: &serde_json::Value) {
    if let Err(message) = decode_args::<A>(args.clone()) {
        assert!(
            message.starts_with("invalid arguments"),
            "an error names itself: {message}"
        );
    }
}
