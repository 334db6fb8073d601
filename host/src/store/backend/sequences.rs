//! The store-wide counters (the last `resource_version` and object id handed
//! out): read at open and at each write transaction's start, saved by the
//! transactions that remove rows (`Conn::load_sequences`, `Conn::save_sequences`).

/// The store-wide counters the writer owns.
///
/// They are not written on every commit: every write that takes a version
/// appends it to the write log or the event log, and every create stores its
/// id, so at open the highest stored id and versions recover them. `kv` holds a floor under
/// both, written by the transactions that remove rows (see
/// `WriteTx::save_sequences`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sequences {
    /// The last `resource_version` handed out.
    pub(crate) resource_version: i64,
    /// The last object id handed out.
    pub(crate) object_id: i64,
}
