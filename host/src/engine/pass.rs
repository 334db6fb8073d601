//! One pass over one object: load it, collect it if it is being deleted,
//! call the controller, then record the handshake.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
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

/// How a pass ends: decided, or with the handshake still to commit.
pub(crate) enum Finish {
    /// The pass is over.
    Done(Outcome),
    /// The controller has returned; recording the handshake is what remains.
    /// The worker hands this off and takes the next object, so a commit never
    /// stands between two reconciles; the object stays running until it ends.
    Handshake(Pin<Box<dyn Future<Output = Outcome> + Send>>),
}

/// Runs one pass of object `id` of `kind`.
pub(crate) async fn run(store: &Store, kind: &Kind, id: i64) -> Finish {
    match try_run(store, kind, id).await {
        Ok(finish) => finish,
        Err(error) => Finish::Done(store_failure(kind, id, error)),
    }
}

fn store_failure(kind: &Kind, id: i64, error: crate::Error) -> Outcome {
    tracing::warn!(kind = %kind.group_kind, id, %error, "pass failed in the store");
    Outcome::Failed
}

async fn try_run(store: &Store, kind: &Kind, id: i64) -> Result<Finish> {
    let Some(object) = load(store, kind, id)? else {
        return Ok(Finish::Done(Outcome::Gone));
    };
    if object.meta.deletion_requested_at.is_some() {
        match store.write(move |tx| collect::collect(tx, id)).await? {
            Collected::Removed => return Ok(Finish::Done(Outcome::Gone)),
            // A child's removal or a dependent's release pushes it again.
            Collected::Claimed => return Ok(Finish::Done(Outcome::Succeeded { requeue: None })),
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

async fn reconcile(store: &Store, kind: &Kind, object: RawObject) -> Result<Finish> {
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
            let cadence = (!settings.individual_pass_interval.is_zero())
                .then(|| jittered(settings.individual_pass_interval));
            let settled = Outcome::Succeeded {
                requeue: requeue.or(cadence),
            };
            let meta = &object.meta;
            let (generation, owed) = (meta.generation, meta.reconcile_owed);
            if meta.observed_generation == Some(generation) && owed == 0 {
                // Already recorded and nothing owed: the handshake costs nothing.
                return Ok(Finish::Done(settled));
            }
            let store = store.clone();
            let group_kind = kind.group_kind.clone();
            Ok(Finish::Handshake(Box::pin(async move {
                let stamped = store
                    .write(move |tx| {
                        observed::stamp_observed(tx, &group_kind, id, generation, owed)
                    })
                    .await;
                match stamped {
                    Ok(()) => settled,
                    Err(error) => {
                        tracing::warn!(object = %label, %error, "could not record the pass");
                        Outcome::Failed
                    }
                }
            })))
        }
        Verdict::Unsettled => {
            let owed = object.meta.reconcile_owed;
            if owed > 0 {
                store
                    .write(move |tx| observed::subtract_owed(tx, id, owed))
                    .await?;
            }
            Ok(Finish::Done(Outcome::Succeeded {
                requeue: Some(requeue.unwrap_or(settings.owed_pass_interval)),
            }))
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
            Ok(Finish::Done(Outcome::Failed))
        }
    }
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
