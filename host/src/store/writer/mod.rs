//! The writer layer: the one connection every write goes through, group
//! commit onto it ([`group_commit`]), what a job sees while it runs
//! ([`write_tx`]), transactions held across a pass ([`session`]), and, on
//! PostgreSQL, hearing other processes' commits ([`listen`]).
//!
//! It runs jobs; it does not know what they write. The compositions that
//! give writes their meaning are a layer above, in `ops`.

pub(crate) mod group_commit;
pub(crate) mod listen;
pub(crate) mod session;
mod slot;
pub(crate) mod write_tx;

pub(crate) use group_commit::{Leader, Writer};
pub(crate) use session::Session;
pub(crate) use write_tx::{CommitListener, Committed, Hook, Push, Reopen, WriteTx, WriterConn};
