//! The integration tests of `staunch-store`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod testsuite;

mod claim_cost;
mod memory;
mod postgres;
mod sqlite;
