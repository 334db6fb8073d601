//! Recording and forgetting which kinds have a controller.

use crate::error::Result;
use crate::object::GroupKind;
use crate::store::rows::registrations::{self, RegisteredKind};
use crate::store::rows::rollouts::{self, Rollout};
use crate::store::writer::WriteTx;

/// Records `registration`, replacing an earlier one of the same kind.
pub(crate) fn record(tx: &mut WriteTx<'_>, registration: &RegisteredKind) -> Result<()> {
    registrations::upsert(tx.conn(), registration)
}

/// Forgets the registration of `gk`.
pub(crate) fn remove(tx: &mut WriteTx<'_>, gk: &GroupKind) -> Result<()> {
    registrations::delete(tx.conn(), gk)
}

/// Records `rollout` as its kind's newest revision, superseding one still
/// rolling.
pub(crate) fn start_rollout(tx: &mut WriteTx<'_>, rollout: &Rollout) -> Result<()> {
    rollouts::insert(tx.conn(), rollout)
}

/// Records that a build of plugin `name` signed at `at` served (the newest
/// time stays).
pub(crate) fn record_signed_at(tx: &mut WriteTx<'_>, name: &str, at: i64) -> Result<()> {
    crate::store::rows::signatures::record(tx.conn(), name, at)
}

/// Records how far `rollout` has gone.
pub(crate) fn record_rollout_progress(tx: &mut WriteTx<'_>, rollout: &Rollout) -> Result<()> {
    rollouts::update_progress(tx.conn(), rollout)
}
