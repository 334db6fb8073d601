//! The host library's integration tests, through its public API only.
//!
//! One test binary for the crate: each separate binary would link the whole
//! library (wasmtime included) again.

mod common;

mod admin;
mod client;
mod dependencies;
mod drivers;
mod engine;
mod migration;
mod transactions;
mod triggers;
mod watch;
