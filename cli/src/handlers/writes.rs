//! Writes by hand: `delete`, `patch`, `finalize` and `requeue`.

use beehive::client::Transaction;
use beehive::{EventSpec, Json, RawClient, RawObject, engine::AdminClient};
use serde_json::Value;

use super::apply::APPLY_HOLD_LIMIT;
use super::kinds::resolve_kind;
use super::{Context, error, find};
use crate::failure::{Code, Failure};
use crate::patch::{self, PatchType};
use crate::protocol::{Outcome, Reply};

/// Patches an object's spec: read, patched and written in one transaction,
/// so a write in between is never overwritten. The spec is validated as
/// any write's; a patch that leaves the spec as it was writes nothing.
pub(super) async fn patch_spec(
    ctx: &Context,
    kind: &str,
    name: &str,
    patch_type: PatchType,
    text: &str,
) -> Outcome {
    let patch: Value = serde_json::from_str(text)
        .map_err(|e| Failure::usage(format!("the patch is not JSON: {e}")))?;
    let (tx, client, object) = read_for_write(ctx, kind, name).await?;
    let label = object.meta.label();
    let invalid = |why: String| Failure::new(Code::Invalid, format!("{label}: {why}"));
    let before = serde_json::json!({ "spec": object.spec.to_value() });
    let patched = patch::apply(&before, patch_type, &patch).map_err(invalid)?;
    let spec = only_the_spec(patched).map_err(invalid)?;
    write_spec(tx, &client, &object, spec, "patched").await
}

/// The object `name` of `kind`, read in a transaction that its new spec
/// will be written in.
async fn read_for_write(
    ctx: &Context,
    kind: &str,
    name: &str,
) -> Result<(Transaction, RawClient, RawObject), Failure> {
    let group_kind = resolve_kind(&ctx.store, kind)?;
    let tx = ctx
        .store
        .transaction(APPLY_HOLD_LIMIT)
        .await
        .map_err(error)?;
    let client = tx.client(group_kind);
    let object = client.get_by_name(name).map_err(error)?;
    Ok((tx, client, object))
}

/// Writes `spec` over `object`'s and commits, saying `KIND/NAME {done}`;
/// a spec equal to the stored one writes nothing and says `unchanged`.
async fn write_spec(
    tx: Transaction,
    client: &RawClient,
    object: &RawObject,
    spec: Value,
    done: &str,
) -> Outcome {
    let label = object.meta.label();
    if spec == object.spec.to_value() {
        return Ok(Reply::Done {
            message: format!("{label} unchanged"),
        });
    }
    client
        .update(object.meta.id, Json::from_value(&spec))
        .await
        .map_err(|e| Failure::about(&label, e))?;
    tx.commit().map_err(error)?;
    Ok(Reply::Done {
        message: format!("{label} {done}"),
    })
}

/// Replaces an object's spec, as `edit` saved it, unless another write
/// changed the spec since it was read at `generation`: then nothing is
/// written, and the refusal says so.
pub(super) async fn replace_spec(
    ctx: &Context,
    kind: &str,
    name: &str,
    generation: i64,
    spec: &str,
) -> Outcome {
    let spec = Json::parse(spec).map_err(|e| Failure::new(Code::Invalid, e.to_string()))?;
    let (tx, client, object) = read_for_write(ctx, kind, name).await?;
    let label = object.meta.label();
    if object.meta.generation != generation {
        return Err(Failure::conflict(format!(
            "{label}: its spec changed while it was being edited (generation {generation}, \
             now {}): nothing was written; edit it again",
            object.meta.generation
        )));
    }
    write_spec(tx, &client, &object, spec.to_value(), "edited").await
}

/// The spec of a patched `{"spec": …}`, refusing a patch that reached
/// anything else.
fn only_the_spec(patched: Value) -> Result<Value, String> {
    let Value::Object(mut fields) = patched else {
        return Err("a patch changes the spec only: write {\"spec\": {...}}".into());
    };
    let spec = fields.remove("spec");
    let others: Vec<String> = fields.keys().cloned().collect();
    match (spec, others.is_empty()) {
        (Some(spec), true) => Ok(spec),
        (None, _) => Err("the patch removes the spec".into()),
        (Some(_), false) => Err(format!(
            "a patch changes the spec only, not {} (write {{\"spec\": {{...}}}})",
            others.join(", ")
        )),
    }
}

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

/// Sets and removes labels of one object, in one write.
pub(super) async fn label(
    ctx: &Context,
    kind: &str,
    name: &str,
    set: std::collections::BTreeMap<String, String>,
    remove: Vec<String>,
    overwrite: bool,
) -> Outcome {
    let (client, object) = find(&ctx.store, kind, name)?;
    let label = format!("{}/{}", client.group_kind(), object.meta.name);
    let relabeled = client
        .relabel(object.meta.id, move |current| {
            let mut labels = current.clone();
            for (key, value) in set {
                match labels.get(&key) {
                    Some(old) if *old != value && !overwrite => {
                        return Err(beehive::Error::InvalidOption(format!(
                            "label {key} already has the value {old:?}: add --overwrite to \
                             replace it with {value:?}"
                        )));
                    }
                    _ => _ = labels.insert(key, value),
                }
            }
            for key in remove {
                labels.remove(&key);
            }
            Ok(labels)
        })
        .await
        .map_err(|e| Failure::about(&label, e))?;
    let message = match relabeled.meta.resource_version == object.meta.resource_version {
        true => format!("{label} not labeled (no change)"),
        false => format!("{label} labeled"),
    };
    Ok(Reply::Done { message })
}
