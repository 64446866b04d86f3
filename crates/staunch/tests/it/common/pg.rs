//! PostgreSQL for multi-instance tests: the kit's (`staunch_testkit::pg`).

pub use staunch_testkit::pg::{drop_schema, fresh_schema};
