//! The integration tests of `staunch-client`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod fake;

mod http_fake;
mod http_resume;
mod jobs_tasks;
mod stateless_fake;
mod timeouts;
