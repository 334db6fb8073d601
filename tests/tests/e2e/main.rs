//! End-to-end tests: the real `beehive` binary and the real example plugins.
//!
//! One test binary for the suite: each separate binary would link the whole
//! host library (wasmtime included) again.

/// A greeting set of two, with the finalizer its controller clears.
const TEAM: &str = r#"
kind: GreetingSet.example.dev
name: team
spec: {names: [ada, grace]}
finalizers: [example.dev/greetings]
"#;

mod backup;
mod browser;
mod chaos;
mod check;
mod cli;
mod conditions_example;
mod console;
mod contain;
mod contracts;
mod grants;
mod holds;
mod hostile;
mod javascript;
mod observe;
mod plugins;
mod postgres;
mod python;
mod scaffold;
mod signed;
mod store_grants;
mod traces;
mod validate;
mod versions;
