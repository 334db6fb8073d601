//! Writes by hand: `delete`, `finalize` and `requeue`.

use beehive::{EventSpec, engine::AdminClient};

use super::{Context, error, find};
use crate::failure::Failure;
use crate::protocol::{Outcome, Reply};

pub(super) async fn delete(ctx: &Context, kind: &str, name: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    client.delete(object.meta.id).await.map_err(error)?;
    let label = object.meta.label();
    let message = if ctx.host.is_none() {
        format!("{label} marked for deletion (a running host collects it)")
    } else if object.meta.finalizers.is_empty() {
        format!("{label} marked for deletion (collected once nothing holds it)")
    } else {
        format!(
            "{label} marked for deletion (waiting on finalizers: {})",
            object.meta.finalizers.join(", ")
        )
    };
    Ok(Reply::Done { message })
}

/// Removes `finalizer` from the object, and records that on its timeline:
/// whatever cleanup the finalizer held the object for was skipped by hand.
pub(super) async fn remove_finalizer(
    ctx: &Context,
    kind: &str,
    name: &str,
    finalizer: &str,
) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let label = object.meta.label();
    if !object.meta.finalizers.iter().any(|f| f == finalizer) {
        let has = match object.meta.finalizers.is_empty() {
            true => "none".to_string(),
            false => object.meta.finalizers.join(", "),
        };
        return Err(Failure::not_found(format!(
            "{label} has no finalizer {finalizer} (it has: {has})"
        )));
    }
    let admin = AdminClient::new(&ctx.store, client.group_kind().clone());
    let id = object.meta.id;
    admin.delete_finalizer(id, finalizer).await.map_err(error)?;
    let event = EventSpec::warning("FinalizerRemoved").message(format!(
        "finalizer {finalizer} removed by an operator; its cleanup was skipped"
    ));
    // The object may be collected the moment its last finalizer goes: then
    // there is no timeline left to record on, and nothing is lost.
    let _ = admin.add_event(id, event).await;
    let then = if object.meta.deletion_requested_at.is_some() {
        "; it is collected once nothing else holds it"
    } else {
        ""
    };
    Ok(Reply::Done {
        message: format!("{label}: finalizer {finalizer} removed, its cleanup skipped{then}"),
    })
}

pub(super) fn requeue(ctx: &Context, kind: &str, name: &str) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let Some(host) = &ctx.host else {
        return Err(Failure::unreachable(
            "requeue needs a running host: start one with `beehive run` (objects that owe a pass get one when it starts)",
        ));
    };
    host.requeue(client.group_kind(), object.meta.id, true)
        .map_err(error)?;
    Ok(Reply::Done {
        message: format!("{} queued for a pass", object.meta.label()),
    })
}
