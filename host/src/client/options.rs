//! Options a create takes.

use crate::error::{Error, Result};
use crate::object::ObjectId;

/// Runs once, after the transaction that created the object committed.
pub(crate) type OnCreate = Box<dyn FnOnce() + Send>;

/// Options for `create`, `get_or_create` and `create_or_update`. They apply
/// only when the call actually inserts a row; a row that is found is returned
/// (or updated) without them, so nothing is ever re-parented.
///
/// ```
/// let options = beehive::CreateOptions::new()
///     .owner(7)
///     .finalizers(["acme.com/cleanup"])
///     .on_create(|| println!("created"));
/// ```
#[derive(Default)]
pub struct CreateOptions {
    pub(crate) owner: Option<ObjectId>,
    pub(crate) finalizers: Vec<String>,
    pub(crate) labels: Option<crate::object::Labels>,
    pub(crate) on_create: Option<OnCreate>,
    pub(crate) trace: Option<crate::trace::TraceContext>,
}

impl std::fmt::Debug for CreateOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateOptions")
            .field("owner", &self.owner)
            .field("finalizers", &self.finalizers)
            .field("labels", &self.labels)
            .field("on_create", &self.on_create.is_some())
            .field("trace", &self.trace)
            .finish()
    }
}

impl CreateOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an `owned_by` edge to `owner` in the same transaction as the
    /// create: deleting the owner then cascades to this object.
    pub fn owner(mut self, owner: ObjectId) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Finalizers that a controller must clear before the row can be removed.
    pub fn finalizers(mut self, finalizers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let finalizers = finalizers.into_iter().map(Into::into);
        self.finalizers.extend(finalizers);
        self
    }

    /// The object's labels. A create-or-update replaces the labels of an
    /// object that exists with these; without this option it leaves them
    /// as they are.
    pub fn labels(mut self, labels: crate::object::Labels) -> Self {
        self.labels = Some(labels);
        self
    }

    /// The trace context the write belongs to (a W3C `traceparent`, as
    /// `beehive apply` passes on from `TRACEPARENT`). It is stored with the
    /// spec, on create and on a create-or-update that changes the spec, and
    /// the passes that reconcile that generation are spans in its trace. A
    /// spec written without one clears what an earlier write stored.
    pub fn trace(mut self, context: crate::trace::TraceContext) -> Self {
        self.trace = Some(context);
        self
    }

    /// Runs `hook` once the row has really landed: after the outermost commit,
    /// never after a rollback, and only when this call inserted the row.
    pub fn on_create(mut self, hook: impl FnOnce() + Send + 'static) -> Self {
        self.on_create = Some(Box::new(hook));
        self
    }

    /// Checks what can be checked without the store; duplicates are dropped.
    pub(crate) fn validate(&mut self) -> Result<()> {
        if self.finalizers.iter().any(String::is_empty) {
            return Err(Error::InvalidOption("a finalizer must not be empty".into()));
        }
        if let Some(problem) = self
            .finalizers
            .iter()
            .find_map(|f| crate::naming::label_problem("a finalizer", f))
        {
            return Err(Error::InvalidOption(problem));
        }
        let mut seen = std::collections::HashSet::new();
        self.finalizers.retain(|f| seen.insert(f.clone()));
        if let Some(problem) = self.labels.as_ref().and_then(beehive_types::labels_problem) {
            return Err(Error::InvalidOption(problem));
        }
        Ok(())
    }
}
