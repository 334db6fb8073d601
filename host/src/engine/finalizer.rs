//! A finalizer's whole life in one call: added on the first pass, cleanup
//! run when the object is being deleted, removed once cleanup settles. The
//! guest SDK's helper of the same name does the same for plugins.

use std::future::Future;

use crate::engine::controller::{Action, Verdict};
use crate::engine::controller_client::ControllerClient;
use crate::error::Result;
use crate::object::Object;

/// What the pass has to do.
#[derive(Debug)]
pub enum Event<'o, Spec, Status> {
    /// The object lives (and carries the finalizer): drive the world toward
    /// its spec.
    Apply(&'o Object<Spec, Status>),
    /// The object is being deleted and the finalizer still holds it: undo
    /// what it made. A settled action removes the finalizer (and lets the
    /// object go once no other holds it); anything else keeps it.
    Cleanup(&'o Object<Spec, Status>),
}

/// Runs `reconcile` for `object` under finalizer `name`: adds the finalizer
/// before the first `Apply`, calls `Cleanup` while the object is being
/// deleted and the finalizer is on it, and removes the finalizer when
/// cleanup settles. A deleting object without the finalizer has nothing left
/// to clean up and settles. Register the kind with the finalizer
/// ([`crate::ControllerOptions::finalizers`]) so the host knows who owns it.
///
/// ```
/// use beehive::engine::finalizer::{self, Event};
/// use beehive::{Action, Controller, ControllerClient, Json, Object, Result};
///
/// struct Buckets;
///
/// impl Controller for Buckets {
///     type Spec = Json;
///     type Status = Json;
///
///     async fn reconcile(&self, client: &ControllerClient, bucket: &Object) -> Result<Action> {
///         finalizer::run(client, "acme.com/bucket", bucket, |event| async move {
///             match event {
///                 Event::Apply(_) => Ok(Action::settled()),   // make the bucket
///                 Event::Cleanup(_) => Ok(Action::settled()), // delete it; settled removes the finalizer
///             }
///         })
///         .await
///     }
/// }
/// ```
///
/// # Errors
/// What `reconcile` returns, or what adding or removing the finalizer
/// returns.
pub async fn run<'o, Spec, Status, Pass, Done>(
    client: &ControllerClient,
    name: &str,
    object: &'o Object<Spec, Status>,
    reconcile: Pass,
) -> Result<Action>
where
    Pass: FnOnce(Event<'o, Spec, Status>) -> Done,
    Done: Future<Output = Result<Action>>,
{
    let holds = object.meta.finalizers.iter().any(|f| f == name);
    if object.meta.is_deleting() {
        if !holds {
            return Ok(Action::settled());
        }
        let action = reconcile(Event::Cleanup(object)).await?;
        if action.verdict() == &Verdict::Settled {
            client.delete_finalizer(name).await?;
        }
        return Ok(action);
    }
    if !holds {
        client.add_finalizer(name).await?;
    }
    reconcile(Event::Apply(object)).await
}
