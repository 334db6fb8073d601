//! The SDK a Beehive controller plugin is written against.
//!
//! A plugin is a WebAssembly component built for `wasm32-wasip2` against the
//! WIT contract in `wit/`. This crate will carry the typed object, the
//! controller client, the export macro and a fake client for unit tests; until
//! the plugin contract lands it holds nothing.
