//! A finalizer's whole life in one call: added on the first pass, cleanup
//! run when the object is being deleted, removed once cleanup is done.
//!
//! ```
//! use beehive_guest::finalizer::{self, Event};
//! use beehive_guest::{Action, Client, Object, Result};
//!
//! fn reconcile(client: &Client<'_, ()>, page: &Object<String, ()>) -> Result<Action> {
//!     finalizer::finalizer(client, "example.dev/cleanup", page, |event| match event {
//!         Event::Apply(page) => Ok(Action::settled()),   // make the world match
//!         Event::Cleanup(page) => Ok(Action::settled()), // undo it; settled removes the finalizer
//!     })
//! }
//! ```

use serde::Serialize;

use crate::client::Client;
use crate::types::{Action, Object, Result, Verdict};

/// What the pass has to do.
#[derive(Debug)]
pub enum Event<'o, Spec, Status> {
    /// The object lives (and carries the finalizer): drive the world
    /// toward its spec.
    Apply(&'o Object<Spec, Status>),
    /// The object is being deleted and the finalizer still holds it: undo
    /// what it made. A settled result removes the finalizer (and lets the
    /// object go once no other holds it); anything else keeps it.
    Cleanup(&'o Object<Spec, Status>),
}

/// Runs `reconcile` for `object` under finalizer `name`: adds the finalizer
/// before the first `Apply`, calls `Cleanup` while the object is being
/// deleted and the finalizer is on it, and removes the finalizer when
/// cleanup settles. A deleting object without the finalizer has nothing left
/// to clean up and settles.
///
/// # Errors
/// What `reconcile` returns, or what adding or removing the finalizer
/// returns.
pub fn finalizer<Spec, Status: Serialize>(
    client: &Client<'_, Status>,
    name: &str,
    object: &Object<Spec, Status>,
    reconcile: impl FnOnce(Event<'_, Spec, Status>) -> Result<Action>,
) -> Result<Action> {
    let holds = object.meta.finalizers.iter().any(|f| f == name);
    if object.meta.is_deleting() {
        if !holds {
            return Ok(Action::settled());
        }
        let action = reconcile(Event::Cleanup(object))?;
        if action.verdict() == &Verdict::Settled {
            client.delete_finalizer(name)?;
        }
        return Ok(action);
    }
    if !holds {
        client.add_finalizer(name)?;
    }
    reconcile(Event::Apply(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeClient;
    use crate::types::{Meta, Timestamp};

    fn object(finalizers: &[&str], deleting: bool) -> Object<(), ()> {
        Object {
            meta: Meta {
                finalizers: finalizers.iter().map(ToString::to_string).collect(),
                deletion_requested_at: deleting.then_some(Timestamp::from_millis(1)),
                ..Meta::default()
            },
            spec: (),
            status: None,
        }
    }

    fn run(fake: &FakeClient, object: &Object<(), ()>, cleanup: Action) -> (Action, &'static str) {
        let mut seen = "";
        let action = finalizer(&Client::new(fake), "x/f", object, |event| match event {
            Event::Apply(_) => {
                seen = "apply";
                Ok(Action::settled())
            }
            Event::Cleanup(_) => {
                seen = "cleanup";
                Ok(cleanup)
            }
        })
        .unwrap();
        (action, seen)
    }

    #[test]
    fn the_first_pass_adds_the_finalizer_then_applies() {
        let fake = FakeClient::new();
        assert_eq!(
            run(&fake, &object(&[], false), Action::settled()),
            (Action::settled(), "apply")
        );
        assert_eq!(fake.record().added_finalizers, ["x/f"]);
        let fake = FakeClient::new();
        let _ = run(&fake, &object(&["x/f"], false), Action::settled());
        assert!(fake.record().added_finalizers.is_empty(), "already there");
    }

    #[test]
    fn deletion_runs_cleanup_and_removes_the_finalizer_only_when_it_settles() {
        let fake = FakeClient::new();
        let (_, seen) = run(&fake, &object(&["x/f"], true), Action::unsettled());
        assert_eq!(seen, "cleanup");
        assert!(fake.record().deleted_finalizers.is_empty());
        let fake = FakeClient::new();
        let _ = run(&fake, &object(&["x/f"], true), Action::settled());
        assert_eq!(fake.record().deleted_finalizers, ["x/f"]);
        let fake = FakeClient::new();
        assert_eq!(
            run(&fake, &object(&[], true), Action::unsettled()),
            (Action::settled(), "")
        );
    }
}
