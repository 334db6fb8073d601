//! What a controller is, what it returns, and how it is configured.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use tokio::sync::mpsc::Receiver;

use crate::engine::cadence::Cadence;
use crate::engine::controller_client::ControllerClient;
use crate::error::{Error, Result};
use crate::json::Json;
use crate::migration::Migrator;
use crate::object::{Object, ObjectId, RawObject};
use crate::sync::lock;
pub use beehive_types::{Action, Verdict};

/// Reconcile logic for one kind: the one trait a native controller
/// implements, in the shape of a plugin's.
///
/// A controller has no lifecycle of its own: the host calls `reconcile` for an
/// object that owes a pass, with a [`ControllerClient`] bound to that object
/// and that pass, and the object decoded into [`Controller::Spec`] and
/// [`Controller::Status`]. Write it to be idempotent: each client write
/// commits on its own, and the next pass works from whatever is stored.
/// Write `?` on every call; an `Err` goes to [`Controller::error_policy`].
///
/// Take the documents as stored with [`Json`] as both types. An object whose
/// spec or status does not decode is quarantined: logged, given a
/// `DecodeFailed` Warning event with the decoder's message, and counted as a
/// pass that settles nothing, so it comes back on the owed-pass cadence
/// (staying visible) instead of spinning under backoff. Plugins built with
/// the guest SDK follow the same policy. A WebAssembly [`Plugin`] is another
/// implementation of this trait.
///
/// [`Plugin`]: crate::plugin::Plugin
///
/// ```
/// use beehive::{Action, Controller, ControllerClient, Object, Result};
///
/// #[derive(serde::Deserialize)]
/// struct Spec { replicas: u32 }
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Status { ready: u32 }
///
/// struct Clusters;
///
/// impl Controller for Clusters {
///     type Spec = Spec;
///     type Status = Status;
///
///     async fn reconcile(&self, client: &ControllerClient, cluster: &Object<Spec, Status>) -> Result<Action> {
///         client.update_status(&Status { ready: cluster.spec.replicas }).await?;
///         Ok(Action::settled())
///     }
/// }
/// ```
pub trait Controller: Send + Sync + 'static {
    /// The kind's spec: a serde type, or [`Json`] for the stored document.
    type Spec: Document;
    /// The kind's status, as `Spec`.
    type Status: Document;

    /// Drives `object` toward its spec and reports what was observed.
    ///
    /// # Errors
    /// Whatever stopped the pass; [`Controller::error_policy`] decides what
    /// happens next.
    fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Self::Spec, Self::Status>,
    ) -> impl Future<Output = Result<Action>> + Send;

    /// What a pass that returned `error` does next. The default is the
    /// backoff ladder, with a `ReconcileFailed` event carrying the error.
    fn error_policy(&self, object: &Object<Self::Spec, Self::Status>, error: &Error) -> Action {
        let _ = object;
        Action::backoff(error)
    }
}

/// A controller shared with other owners serves as itself.
impl<C: Controller> Controller for Arc<C> {
    type Spec = C::Spec;
    type Status = C::Status;

    fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Self::Spec, Self::Status>,
    ) -> impl Future<Output = Result<Action>> + Send {
        C::reconcile(self, client, object)
    }

    fn error_policy(&self, object: &Object<Self::Spec, Self::Status>, error: &Error) -> Action {
        C::error_policy(self, object, error)
    }
}

/// What a controller's spec and status decode into: any serde type, or
/// [`Json`] to take the document as stored (no decoding, never refused).
pub trait Document: Sized + Send + Sync + 'static {
    /// Reads a stored document.
    ///
    /// # Errors
    /// The decoder's, when the document does not fit the type.
    fn from_json(json: &Json) -> std::result::Result<Self, serde_json::Error>;
}

impl<T: DeserializeOwned + Send + Sync + 'static> Document for T {
    fn from_json(json: &Json) -> std::result::Result<Self, serde_json::Error> {
        json.decode()
    }
}

impl Document for Json {
    fn from_json(json: &Json) -> std::result::Result<Self, serde_json::Error> {
        Ok(json.clone())
    }
}

/// The object a pass is handed, or the decoder's error.
fn decode<Spec: Document, Status: Document>(raw: &RawObject) -> Result<Object<Spec, Status>> {
    let status = match &raw.status {
        Some(status) => Some(decode_one(raw, "status", status)?),
        None => None,
    };
    Ok(Object {
        meta: raw.meta.clone(),
        spec: decode_one(raw, "spec", &raw.spec)?,
        status,
        relations: raw.relations.clone(),
        bookkeeping: raw.bookkeeping,
    })
}

fn decode_one<T: Document>(raw: &RawObject, what: &str, json: &Json) -> Result<T> {
    T::from_json(json).map_err(|source| Error::Decode {
        what: format!("{what} of {}", raw.meta.label()),
        source,
    })
}

/// The future the engine holds for one pass.
pub(crate) type PassFuture<'a> = Pin<Box<dyn Future<Output = Action> + Send + 'a>>;

/// [`Controller`] in the form the engine can store behind one pointer type:
/// an `async fn` in a trait cannot be called through `dyn`, so every
/// controller is boxed into this on registration.
pub(crate) trait StoredController: Send + Sync + 'static {
    /// Runs a pass: decodes `object`, reconciles it, and turns an error
    /// into the action the controller's policy names.
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
        Box::pin(async move {
            let typed = match decode::<C::Spec, C::Status>(object) {
                Ok(typed) => typed,
                Err(error) => return quarantine(client, object, &error).await,
            };
            match self.reconcile(client, &typed).await {
                Ok(action) => action,
                Err(error) => self.error_policy(&typed, &error),
            }
        })
    }
}

/// Records why `object` does not decode; the pass settles nothing.
/// The host logs the quarantine once per object and generation.
async fn quarantine(client: &ControllerClient, object: &RawObject, error: &Error) -> Action {
    let event = crate::EventSpec::warning(super::controller_client::DECODE_FAILED)
        .message(error.to_string());
    if let Err(failed) = client.add_event(event).await {
        tracing::warn!(object = %object.meta.label(), %failed, "cannot record DecodeFailed");
    }
    Action::unsettled()
}

/// Per-kind settings, given at registration. Unset values take the host's.
#[derive(Clone, Default)]
pub struct ControllerOptions {
    pub(crate) concurrency: Option<usize>,
    pub(crate) cadence: Cadence,
    pub(crate) finalizers: Vec<String>,
    pub(crate) source: Option<(String, Option<String>)>,
    pub(crate) migrator: Option<Arc<dyn Migrator>>,
    pub(crate) schemas: crate::validation::KindSchemas,
    pub(crate) validator: Option<Arc<dyn crate::validation::SpecValidator>>,
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
            .field("spec_schema", &self.schemas.spec.is_some())
            .field("validator", &self.validator.is_some())
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

    /// The JSON Schemas of the kind's spec and status, recorded with the
    /// registration. Every spec write of the kind, through any client of
    /// the store (in this process or, by the recorded copy, another),
    /// is checked against the spec's schema before it commits and refused
    /// with [`crate::Error::Invalid`] when it breaks it. Registering fails
    /// with [`crate::Error::InvalidOption`] for a schema that does not
    /// compile.
    pub fn schemas(mut self, schemas: crate::validation::KindSchemas) -> Self {
        self.schemas = schemas;
        self
    }

    /// Rules beyond the schema, checked after it on every spec write of the
    /// kind made through this process's clients while the controller is
    /// registered (see [`crate::validation::SpecValidator`]).
    pub fn validator(mut self, validator: Arc<dyn crate::validation::SpecValidator>) -> Self {
        self.validator = Some(validator);
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
