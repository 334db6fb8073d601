//! One pass over one object: load it, collect it if it is being deleted,
//! call the controller, then record the handshake.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;

use crate::engine::ControllerClient;
use crate::engine::controller::Verdict;
use crate::engine::kind::Kind;
use crate::engine::queue::Outcome;
use crate::error::Result;
use crate::event::EventSpec;
use crate::object::RawObject;
use crate::store::collect::{self, Collected};
use crate::store::{Store, events, observed, rows};

/// Runs one pass of object `id` of `kind` and says how it ended.
pub(crate) async fn run(store: &Store, kind: &Kind, id: i64) -> Outcome {
    match try_run(store, kind, id).await {
        Ok(outcome) => outcome,
        Err(error) => {
            tracing::warn!(kind = %kind.group_kind, id, %error, "pass failed in the store");
            Outcome::Failed
        }
    }
}

async fn try_run(store: &Store, kind: &Kind, id: i64) -> Result<Outcome> {
    let Some(object) = load(store, kind, id)? else {
        return Ok(Outcome::Gone);
    };
    if object.meta.deletion_requested_at.is_some() {
        match store.write(move |tx| collect::collect(tx, id)).await? {
            Collected::Removed => return Ok(Outcome::Gone),
            // A child's removal or a dependent's release pushes it again.
            Collected::Claimed => return Ok(Outcome::Succeeded { requeue: None }),
            Collected::AwaitingFinalizers | Collected::Live => {}
        }
    }
    reconcile(store, kind, object).await
}

/// The object, if it still exists and is of this kind.
fn load(store: &Store, kind: &Kind, id: i64) -> Result<Option<RawObject>> {
    let session = store.session();
    store.read(|conn| {
        let Some(object) = rows::select_by_id(conn, id)? else {
            return Ok(None);
        };
        if object.meta.group_kind != kind.group_kind {
            return Ok(None);
        }
        let mut objects = [object];
        rows::load_conditions(conn, session, &mut objects)?;
        let [object] = objects;
        Ok(Some(object))
    })
}

async fn reconcile(store: &Store, kind: &Kind, object: RawObject) -> Result<Outcome> {
    let id = object.meta.id;
    let label = object.meta.label();
    let controller = kind.controller();
    let client = ControllerClient::new(
        store.clone(),
        kind.group_kind.clone(),
        id,
        object.status.clone(),
    );
    let called = AssertUnwindSafe(controller.reconcile(&client, &object))
        .catch_unwind()
        .await;
    client.end();
    let result = match called {
        Ok(result) => result,
        Err(_) => crate::engine::ReconcileResult::invalid("the controller panicked"),
    };
    let settings = kind.settings();
    let requeue = result.requeue_after;
    match result.verdict {
        Verdict::Settled => {
            record_settled(store, kind, &object).await?;
            let cadence = (!settings.individual_pass_interval.is_zero())
                .then(|| jittered(settings.individual_pass_interval));
            Ok(Outcome::Succeeded {
                requeue: requeue.or(cadence),
            })
        }
        Verdict::Unsettled => {
            let owed = object.meta.reconcile_owed;
            if owed > 0 {
                store
                    .write(move |tx| observed::subtract_owed(tx, id, owed))
                    .await?;
            }
            Ok(Outcome::Succeeded {
                requeue: Some(requeue.unwrap_or(settings.owed_pass_interval)),
            })
        }
        Verdict::Failed(message) | Verdict::Invalid(message) => {
            tracing::warn!(object = %label, error = %message, "reconcile failed");
            let event = EventSpec::warning("ReconcileFailed")
                .category("reconcile")
                .message(message);
            if let Err(error) = store
                .write(move |tx| events::add_event(tx, id, &event))
                .await
            {
                tracing::warn!(object = %label, %error, "could not record the failure event");
            }
            Ok(Outcome::Failed)
        }
    }
}

/// The handshake: record the generation the pass was handed (never a fresh
/// read) and take away the owed passes seen at load. Costs no store call when
/// that generation is already recorded and nothing was owed.
async fn record_settled(store: &Store, kind: &Kind, object: &RawObject) -> Result<()> {
    let meta = &object.meta;
    let (id, generation, owed) = (meta.id, meta.generation, meta.reconcile_owed);
    if meta.observed_generation == Some(generation) && owed == 0 {
        return Ok(());
    }
    let group_kind = kind.group_kind.clone();
    store
        .write(move |tx| observed::stamp_observed(tx, &group_kind, id, generation, owed))
        .await
}

/// `interval` stretched by up to a tenth, so objects armed together drift apart.
pub(crate) fn jittered(interval: Duration) -> Duration {
    interval + random_below(interval / 10)
}

/// A random duration in `[0, bound)`, at millisecond grain.
pub(crate) fn random_below(bound: Duration) -> Duration {
    let millis = bound.as_millis() as u64;
    if millis == 0 {
        return Duration::ZERO;
    }
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_millis(random % millis)
}
