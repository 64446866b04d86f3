//! Transports: how frames reach a [`crate::Session`] and how its messages leave.

pub mod http;
pub mod stdio;
mod stdio_fds;
