//! The rows layer: the SQL of each table, on any connection (the writer's
//! inside a job, or a pooled reader), and [`Reader`], every question the
//! rest of the crate asks the store.
//!
//! A function here runs statements and maps rows. It pushes nothing and
//! decides nothing about what a write logs: those belong to `ops`.

pub(crate) mod conditions;
pub(crate) mod edges;
pub(crate) mod events;
pub(crate) mod lease;
pub(crate) mod objects;
pub(crate) mod observed;
pub(crate) mod plugin_sets;
pub(crate) mod reader;
pub(crate) mod registrations;
pub(crate) mod retention;
pub(crate) mod rollouts;
pub(crate) mod scan;
pub(crate) mod signatures;
pub(crate) mod snapshot;
pub(crate) mod write_log;

pub(crate) use reader::Reader;
