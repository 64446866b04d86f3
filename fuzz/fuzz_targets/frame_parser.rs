//! The JSON-RPC frame parser: any bytes give a message or a framing error, never a panic; an
//! error's response is valid JSON-RPC, and a parsed message serialises and parses back to
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staunch_protocol::parse_message;

fuzz_target!(|data: &[u8]| {
    match parse_message(data) {
        Ok(msg) => {
            let again = parse_message(&msg.to_bytes()).expect("a parsed message re-parses");
            assert_eq!(msg, again, "serialising a parsed message changes it");
        }
        Err(e) => {
            let _ = e.to_error();
            let bytes = e.to_response_bytes();
            let v: serde_json::Value =
                serde_json::from_slice(&bytes).expect("an error response is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            assert!(v["error"]["code"].is_i64());
        }
    }
});
