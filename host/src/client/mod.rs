//! Clients for one kind of object: untyped ([`RawClient`]) and typed ([`Client`]).

mod options;
mod raw;
mod transaction;
mod typed;
mod typed_watch;
mod watch;

pub use crate::object::Loads;
pub use options::CreateOptions;
pub use raw::RawClient;
pub(crate) use raw::TransactionSource;
pub use transaction::Transaction;
pub use typed::Client;
pub use typed_watch::{TypedChange, TypedListStream};
pub use watch::{
    ChangeType, EventStream, ObjectChange, ObjectListStream, ObjectStream, WatchOptions,
    WatchStream,
};
