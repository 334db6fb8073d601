//! What a controller is, what it returns, and how it is configured.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::Receiver;

use crate::engine::cadence::Cadence;
use crate::engine::controller_client::ControllerClient;
use crate::migration::Migrator;
use crate::object::Object;
use crate::object::{ObjectId, RawObject};
use crate::sync::lock;

/// Reconcile logic for one kind, over the untyped object.
///
/// A controller has no lifecycle of its own: the host calls `reconcile` for an
/// object that owes a pass, with a [`ControllerClient`] bound to that object
/// and that pass. Write it to be idempotent: each client write commits on its
/// own, and the next pass works from whatever is stored.
///
/// Most Rust code implements [`Reconciler`] instead and registers it wrapped
/// in [`Typed`]; a WebAssembly plugin is another implementation of this trait.
///
/// Implement it with an `async fn`:
///
/// ```
/// use beehive::{Controller, ControllerClient, RawObject, ReconcileResult};
///
/// struct Noop;
///
/// impl Controller for Noop {
///     async fn reconcile(&self, _: &ControllerClient, _: &RawObject) -> ReconcileResult {
///         ReconcileResult::settled()
///     }
/// }
/// ```
pub trait Controller: Send + Sync + 'static {
    /// Drives `object` toward its spec and reports what was observed.
    fn reconcile(
        &self,
        client: &ControllerClient,
        object: &RawObject,
    ) -> impl Future<Output = ReconcileResult> + Send;
}

/// A controller shared with other owners serves as itself.
impl<C: Controller> Controller for Arc<C> {
    fn reconcile(
        &self,
        client: &ControllerClient,
        object: &RawObject,
    ) -> impl Future<Output = ReconcileResult> + Send {
        C::reconcile(self, client, object)
    }
}

/// The future the engine holds for one pass.
pub(crate) type PassFuture<'a> = Pin<Box<dyn Future<Output = ReconcileResult> + Send + 'a>>;

/// [`Controller`] in the form the engine can store behind one pointer type:
/// an `async fn` in a trait cannot be called through `dyn`, so every
/// controller is boxed into this on registration.
pub(crate) trait StoredController: Send + Sync + 'static {
    /// Starts a pass; see [`Controller::reconcile`].
    fn start_pass<'a>(
        &'a self,
        client: &'a ControllerClient,
        object: &'a RawObject,
    ) -> PassFuture<'a>;
}

impl<C: Controller> StoredController for C {
    fn start_pass<'a>(
        &'a self,
        client: &'a ControllerClient,
        object: &'a RawObject,
    ) -> PassFuture<'a> {
        Box::pin(self.reconcile(client, object))
    }
}

/// Reconcile logic over decoded spec and status types.
pub trait Reconciler<Spec, Status>: Send + Sync + 'static {
    /// Drives `object` toward its spec and reports what was observed.
    fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Spec, Status>,
    ) -> impl Future<Output = ReconcileResult> + Send;
}

/// Adapts a [`Reconciler`] into a [`Controller`]: decodes each object before
/// the pass. An object that does not decode is quarantined: logged, given a
/// `DecodeFailed` Warning event with the decoder's message, and its pass
/// counted as a success that settles nothing, so it comes back on the
/// owed-pass cadence (staying visible) instead of spinning under backoff.
/// Plugins built with the guest SDK follow the same policy.
pub struct Typed<R, Spec, Status> {
    reconciler: R,
    _types: PhantomData<fn() -> (Spec, Status)>,
}

impl<R, Spec, Status> Typed<R, Spec, Status> {
    /// Wraps `reconciler`.
    pub fn new(reconciler: R) -> Self {
        Typed {
            reconciler,
            _types: PhantomData,
        }
    }
}

impl<R, Spec, Status> Controller for Typed<R, Spec, Status>
where
    R: Reconciler<Spec, Status>,
    Spec: Serialize + DeserializeOwned + Send + Sync + 'static,
    Status: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> ReconcileResult {
        match Object::<Spec, Status>::from_raw(object.clone()) {
            Ok(typed) => self.reconciler.reconcile(client, &typed).await,
            Err(error) => {
                tracing::warn!(object = %object.meta.label(), %error, "quarantined: the object does not decode");
                let event = crate::EventSpec::warning("DecodeFailed").message(error.to_string());
                if let Err(failed) = client.add_event(event).await {
                    tracing::warn!(object = %object.meta.label(), %failed, "cannot record DecodeFailed");
                }
                ReconcileResult::unsettled()
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Settled,
    Unsettled,
    Failed(String),
    Invalid(String),
}

/// What a pass reports. Build it with [`ReconcileResult::settled`],
/// [`ReconcileResult::unsettled`] or [`ReconcileResult::fail`]:
///
/// | result | records the generation | next pass |
/// |---|---|---|
/// | `settled()` | yes | none scheduled |
/// | `unsettled()` | no | after the owed-pass interval |
/// | either `.requeue_after(d)` | as above | after `d` (zero: as soon as the floor allows) |
/// | `fail(e)` | no | the backoff ladder; `requeue_after` is ignored |
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcileResult {
    pub(crate) verdict: Verdict,
    pub(crate) requeue_after: Option<Duration>,
}

impl ReconcileResult {
    /// The pass observed the object's current generation, which the host
    /// records. It claims nothing about health.
    pub fn settled() -> Self {
        Self::of(Verdict::Settled)
    }

    /// The pass did real work but the object has not caught up; nothing is
    /// recorded, and the object comes back after the owed-pass interval unless
    /// [`ReconcileResult::requeue_after`] says otherwise.
    pub fn unsettled() -> Self {
        Self::of(Verdict::Unsettled)
    }

    /// The pass failed: nothing is recorded and the object retries on the
    /// backoff ladder.
    pub fn fail(error: impl std::fmt::Display) -> Self {
        Self::of(Verdict::Failed(error.to_string()))
    }

    /// A result that cannot be used (a plugin's malformed answer); it fails
    /// the pass.
    pub(crate) fn invalid(why: impl Into<String>) -> Self {
        Self::of(Verdict::Invalid(why.into()))
    }

    fn of(verdict: Verdict) -> Self {
        ReconcileResult {
            verdict,
            requeue_after: None,
        }
    }

    /// Schedules the next pass after `delay`; zero means as soon as the
    /// per-object floor allows. Ignored on a failed pass.
    pub fn requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// The failure this result carries, if any.
    pub fn error(&self) -> Option<&str> {
        match &self.verdict {
            Verdict::Failed(message) | Verdict::Invalid(message) => Some(message),
            Verdict::Settled | Verdict::Unsettled => None,
        }
    }
}

/// Per-kind settings, given at registration. Unset values take the host's.
#[derive(Clone, Default)]
pub struct ControllerOptions {
    pub(crate) concurrency: Option<usize>,
    pub(crate) cadence: Cadence,
    pub(crate) finalizers: Vec<String>,
    pub(crate) source: Option<(String, Option<String>)>,
    pub(crate) migrator: Option<Arc<dyn Migrator>>,
    pub(crate) feeds: Vec<FeedSlot>,
}

impl std::fmt::Debug for ControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerOptions")
            .field("concurrency", &self.concurrency)
            .field("cadence", &self.cadence)
            .field("finalizers", &self.finalizers)
            .field("source", &self.source)
            .field("migrator", &self.migrator.is_some())
            .field("trigger_feeds", &self.feeds.len())
            .finish_non_exhaustive()
    }
}

impl ControllerOptions {
    /// The host's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many passes of this kind may run at once (default 1).
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = Some(workers);
        self
    }

    /// This kind's cadence; what it leaves unset comes from the host's. The
    /// values set here replace those set before.
    pub fn cadence(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence.over(self.cadence);
        self
    }

    /// Finalizers this controller owns, recorded with the registration.
    pub fn finalizers(mut self, finalizers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let finalizers = finalizers.into_iter().map(Into::into);
        self.finalizers.extend(finalizers);
        self
    }

    /// Upgrades the kind's stored specs and statuses on read and stamps
    /// writes with its versions (see [`Migrator`]). The kind's clients in
    /// this process read through it while the controller is registered.
    pub fn migrator(mut self, migrator: impl Migrator) -> Self {
        self.migrator = Some(Arc::new(migrator));
        self
    }

    /// [`ControllerOptions::migrator`] for one already shared.
    pub fn shared_migrator(mut self, migrator: Arc<dyn Migrator>) -> Self {
        self.migrator = Some(migrator);
        self
    }

    /// Requeues each object id received on `ids`, as [`crate::Host::requeue`]
    /// would (backoff kept), while the host runs. An id naming nothing of
    /// the kind is skipped; closing the channel ends the feed once what was
    /// sent has drained. For changes that live outside the store (a file
    /// watcher, a cloud API): a poke is a latency hint, not a write, so such
    /// a kind still wants a cadence of its own. Feeds accumulate.
    pub fn trigger_by_id(mut self, ids: tokio::sync::mpsc::Receiver<ObjectId>) -> Self {
        self.feeds.push(FeedSlot::new(Feed::ById(ids)));
        self
    }

    /// [`ControllerOptions::trigger_by_id`] keyed by name within the kind; a
    /// name that nothing holds (`""` included) is skipped.
    pub fn trigger_by_name(mut self, names: tokio::sync::mpsc::Receiver<String>) -> Self {
        self.feeds.push(FeedSlot::new(Feed::ByName(names)));
        self
    }

    /// Where the controller came from (a plugin file) and its content hash,
    /// recorded with the registration.
    pub fn source(mut self, source: impl Into<String>, content_hash: Option<String>) -> Self {
        self.source = Some((source.into(), content_hash));
        self
    }
}

/// One feed of addresses.
pub(crate) enum Feed {
    ById(Receiver<ObjectId>),
    ByName(Receiver<String>),
}

/// A feed given in options, which are cloned: the first registration that
/// takes it owns it.
#[derive(Clone)]
pub(crate) struct FeedSlot(Arc<Mutex<Option<Feed>>>);

impl FeedSlot {
    pub(crate) fn new(feed: Feed) -> Self {
        FeedSlot(Arc::new(Mutex::new(Some(feed))))
    }

    pub(crate) fn take(&self) -> Option<Feed> {
        lock(&self.0).take()
    }
}
