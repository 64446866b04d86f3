//! The integration tests of `staunch-jobs`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod faces;
mod jobs_stdio;
mod multi_instance;
mod runtime;
mod tasks_ext_http;
mod tasks_ext_pg;
mod tasks_http;
