//! Beehive: an embedded, durable, self-healing control plane.
//!
//! Users declare desired state as objects (a `spec`); controllers reconcile
//! actual state toward it and report what they observed (a `status`). Every
//! object lives in a [`Store`] (a SQLite file, or PostgreSQL for a control
//! plane that must outlive its machine); clients read and write one kind of
//! object each.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> beehive::Result<()> {
//! use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
//!
//! let store = Store::temporary()?;
//! let clusters = RawClient::new(&store, GroupKind::new("acme.com", "Cluster"));
//!
//! let spec = Json::parse(r#"{"replicas": 3}"#)?;
//! let created = clusters.create("prod", spec, CreateOptions::new()).await?;
//! assert_eq!(created.meta.generation, 1);
//!
//! // The same content with keys in another order is the same bytes: nothing is written.
//! let again = clusters.update(created.meta.id, Json::parse(r#"{ "replicas":3 }"#)?).await?;
//! assert_eq!(again.meta.resource_version, created.meta.resource_version);
//!
//! let read = clusters.get_by_name("prod")?;
//! assert_eq!(read.spec.as_str(), r#"{"replicas":3}"#);
//! # Ok(()) }
//! ```
//!
//! # Where things are
//! The root re-exports the types most programs name. The rest is scoped by
//! module: [`client`] (read options, transactions, watches), [`engine`]
//! (the host's parts: admin writes, schedules, stop handles), [`object`]
//! (metadata, references, timestamps), [`event`] (timelines and filters),
//! [`migration`], [`store`], [`plugin`], [`metrics`], [`naming`] and
//! [`directory_watch`].
//!
//! # Concepts
//! - [`Store`]: one database file, or a PostgreSQL database, opened once per
//!   process (cheap to clone, lives as long as its last clone). One writer,
//!   shared by group commit: concurrent writes share a transaction, each
//!   inside its own savepoint, so one write's failure rolls back only that
//!   write. Reads run on the calling thread and never wait for the writer.
//!   On PostgreSQL several hosts share a store, one active at a time
//!   ([`engine::Tenure`]).
//! - [`RawClient`]: one kind's objects, spec and status as canonical [`Json`];
//!   [`Client`]: the same verbs over serde types. Clients are handles (clone
//!   freely); watches are streams that end when the host stops.
//! - [`Host`]: the control plane over one store. Controllers are registered
//!   per kind ([`Host::register`]), run between [`Host::start`] and
//!   [`engine::StopHandle::stop`], and are replaced or unregistered while it runs.
//!   Each kind has its own work queue, workers and cadences; a host costs a
//!   few tasks when idle and nothing per settled object.
//! - A controller implements [`Controller`]: a pass gets its object decoded
//!   into the controller's spec and status types, and a [`ControllerClient`]
//!   bound to it, and returns `Result<`[`Action`]`>`; an error goes to the
//!   controller's error policy (the backoff ladder by default), and
//!   [`engine::finalizer::run`] runs a finalizer's life in one call. Passes may
//!   run again at any time, so they are written to be idempotent.
//! - Plugins ([`plugin`]): controllers compiled to WebAssembly components. A
//!   [`plugin::Runtime`] (one per process: an engine, a compiled-code
//!   cache, the operator's limits) loads them; a [`plugin::Directory`]
//!   keeps a directory of them registered in a host and hot-swaps changed
//!   files. Each pass runs sandboxed under a CPU deadline, a wall-clock limit
//!   and a memory cap, with only what its policy file grants.
//! - [`metrics::Metrics`]: what the store, its hosts and plugins measure, in
//!   the Prometheus text format ([`Store::metrics`]).
//! - Names are required, unique per kind, immutable and opaque within the
//!   naming rules ([`naming`]: at most 253 bytes, no control characters).
//!   Ids are never reused.
//!
//! # One write, from `apply` to a plugin's pass
//! Following `beehive apply -f greeting.yaml` through the layers:
//!
//! 1. The CLI (crate `beehive-cli`) parses the manifest and, through the
//!    host's socket or on the database itself, calls
//!    [`RawClient::create_or_update`] for each object.
//! 2. The client checks the name ([`naming`]) and hands the store one job:
//!    `store::ops::create_or_update`, a composition run on the writer's
//!    open transaction (`WriteTx`). Group commit puts it in the next batch,
//!    inside its own savepoint.
//! 3. The composition writes the row and its write-log entry through
//!    `store::rows` (SQL written once for SQLite and PostgreSQL, run by
//!    `store::backend`), and pushes the object: it now owes a pass.
//! 4. After the COMMIT the writer tells the host's commit listener; the
//!    push lands in the work queue of the object's kind. (A lost push costs
//!    latency only: the owed-pass scan finds the object from the store.)
//! 5. A worker of the kind takes it and runs a pass: it loads the object,
//!    and calls the kind's controller. For a plugin that is a call into a
//!    fresh or reused WebAssembly instance, under its CPU deadline and
//!    memory cap, with a [`ControllerClient`] resource for its writes.
//! 6. The plugin's status and the handshake (the settled generation) are
//!    one more job through the same writer; watchers see them in the write
//!    log's order.
//!
//! # Crate features
//! - `testing`: hooks the workspace's test suites and benchmarks use to
//!   look inside (`Store::inspect`, `Plugin::prewarm`). Off by default, and
//!   not for programs.
//!
//! # Cancel safety
//! Every async write (creates, updates, deletes, statuses, conditions,
//! events, finalizers, dependencies) is a job handed to the store's one
//! writer. Dropping its future before the writer takes the job withdraws it
//! and nothing is written; dropping it after lets the write commit with
//! nobody to answer. A write whose future was dropped has therefore either
//! happened or not: read the object back (its `resource_version`) to know.
//! Reads never wait on the writer, and a watch's `next()` loses nothing when
//! it is dropped inside a `select!`.

#![deny(missing_docs)]

pub mod client;
pub mod directory_watch;
pub mod engine;
mod error;
pub mod event;
mod json;
#[cfg(test)]
mod layering;
mod memory;
pub mod metrics;
pub mod migration;
pub mod naming;
pub mod object;
mod operator_file;
mod percent;
pub mod plugin;
mod process;
pub mod store;
mod sync;
pub mod trace;
pub mod validation;

// The root holds what a newcomer needs to store objects and run controllers;
// everything else is reached through its module.
pub use client::{Client, CreateOptions, RawClient};
pub use engine::{Action, Controller, ControllerClient, ControllerOptions, Host, HostOptions};
pub use error::{Error, Result};
pub use event::EventSpec;
pub use json::Json;
pub use object::{Condition, ConditionStatus, GroupKind, Object, ObjectId, RawObject};
pub use store::Store;

// Compiles the README's Rust examples as doctests, so the README stays true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// The same for the plugin author's guide, which embeds a plugin directory.
#[doc = include_str!("../../docs/plugins.md")]
#[cfg(doctest)]
pub struct PluginGuideDoctests;
