//! Regression tests for what the fuzz target `frame_parser` (fuzz/, issue 14) found.

use staunch_protocol::parse_message;

/// fuzz `frame_parser`: `50e30` parsed to one double, written back as `5e31`, and `5e31`
/// parsed to its neighbour (4.999999999999999e31) — serde_json's default float parser is not
/// correctly rounded. A message relayed, stored and replayed must keep its numbers: the
/// workspace enables serde_json's `float_roundtrip`.
#[test]
fn numbers_survive_a_parse_and_serialise_round_trip() {
    for n in [
        "50e30",
        "0.2",
        "1e-320",
        "9007199254740993",
        "123456789.123456789e-5",
    ] {
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":7,"error":{{"code":1,"message":"m","data":[{n}]}}}}"#
        );
        let first = parse_message(frame.as_bytes()).expect("parses");
        let again = parse_message(&first.to_bytes()).expect("re-parses");
        assert_eq!(first, again, "{n} changed on the way through");
    }
}
