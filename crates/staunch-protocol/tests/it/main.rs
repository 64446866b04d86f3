//! The integration tests of `staunch-protocol`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod frame_parser;
mod fuzz_regressions;
