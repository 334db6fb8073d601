//! The ops layer: the write compositions, what a job handed to
//! [`Store::write`](crate::store::Store::write) or to a
//! [`Session`](crate::store::Session) may do. Each runs on a
//! [`WriteTx`](crate::store::WriteTx), reads and writes through `rows`,
//! logs what it changed and pushes what owes a pass.

pub(crate) mod collect;
pub(crate) mod dependencies;
pub(crate) mod events;
pub(crate) mod objects;
pub(crate) mod observed;
pub(crate) mod registrations;

pub(crate) use collect::collect;
pub(crate) use dependencies::{
    add_dependency, delete_dependency, record_watermark, save_waker_cursor,
};
pub(crate) use events::add_event;
pub(crate) use objects::{
    create, create_or_update, delete, delete_by_name, get_or_create, relabel, update,
    update_by_name,
};
pub(crate) use observed::{
    Settled, add_finalizer, delete_condition, delete_finalizer, set_conditions,
    set_last_pass_trace, set_requeue_at, settle_with_status, stamp_observed, subtract_owed,
    write_status,
};
pub(crate) use registrations::{
    record as record_registration, record_rollout_progress, record_signed_at,
    remove as remove_registration, start_rollout,
};
