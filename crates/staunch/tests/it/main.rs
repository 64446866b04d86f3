//! The integration tests of `staunch`, in one test binary (one link instead of one
//! per file): each former `tests/*.rs` file is a module, and the helpers they share are
//! declared once here.

mod client_support;
mod common;

mod audit;
mod balancer;
mod call;
mod call_2026;
mod call_task_2026;
mod cli_errors;
mod command_tools;
mod doc_examples;
mod http_auth;
mod http_restart;
mod https;
mod jobs_cmd;
mod jobs_stdio;
mod jobs_tasks_http;
mod live_page;
mod live_page_auth;
mod metrics;
mod multi_instance_http;
mod multi_instance_jobs;
mod probe;
mod probe_2026;
mod proxy;
mod proxy_bridge;
mod proxy_stop;
mod real_clients_2026;
mod real_clients_http;
mod real_clients_stdio;
mod rmcp_tasks_client;
mod state_dir;
mod stdio_process;
mod stdio_unread_stdout;
mod tasks_2026_http;
mod tools_cmd;
mod traces;
