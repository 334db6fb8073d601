//! The schema layer: the numbered migrations of each dialect, run at open
//! before anything else touches the database. Each dialect's list is
//! frozen once released: a change is a new migration, never an edit.

pub(crate) mod postgres;
pub(crate) mod sqlite;
