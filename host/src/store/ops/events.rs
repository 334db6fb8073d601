//! Appending to an object's event timeline, with run aggregation.

use crate::error::Result;
use crate::event::EventSpec;
use crate::json::Json;
use crate::object::ObjectRef;
use crate::store::ops::observed::require_own;
use crate::store::rows::events;
use crate::store::writer::WriteTx;

/// Records `event` on object `id`: extends the latest run of its timeline when
/// (type, reason) match, starts a new run otherwise. Moves no object version,
/// so an object watch stays quiet through a controller that records events.
pub(crate) fn add_event(
    tx: &mut WriteTx<'_>,
    object: &ObjectRef,
    event: &EventSpec,
    trace_id: Option<&str>,
) -> Result<()> {
    crate::event::validate(event)?;
    require_own(tx, object)?;
    let id = object.id;
    let detail = event.detail.as_ref().map(Json::from_value);
    if let Some(detail) = &detail {
        detail.check_limits()?;
    }
    let now = tx.now();
    let latest = events::latest_run(tx.conn(), id, &event.category)?;
    let resource_version = tx.next_resource_version();
    let written = events::Written {
        detail: detail.as_ref().map(Json::as_str),
        now,
        resource_version,
        trace_id,
    };
    match latest {
        Some(run) if run.type_ == event.type_.as_str() && run.reason == event.reason => {
            events::extend_run(tx.conn(), run.id, event, written)
        }
        _ => events::insert_run(tx.conn(), id, event, written),
    }
}
