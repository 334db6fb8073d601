//! The library's integration tests: in-process, through its public API
//! only. Each test opens its own store with `beehive_e2e::store()`: SQLite,
//! or PostgreSQL under `scripts/with-postgres`.
//!
//! One test binary for the suite: each separate binary would link the whole
//! library (wasmtime included) again.

mod admin;
mod client;
mod dependencies;
mod drivers;
mod engine;
mod migration;
mod transactions;
mod triggers;
mod validation;
mod watch;
