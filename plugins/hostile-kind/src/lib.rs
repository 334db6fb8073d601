//! A plugin whose registration names a kind with a newline in it, in a
//! 200 KiB group: the host must refuse it with a clear error, and no log line
//! or table may carry the text raw.

use beehive_guest::{Action, ClientOf, Controller, ObjectOf, Registration, Result};

/// The controller.
#[derive(Default)]
pub struct BadKind;

impl Controller for BadKind {
    type Spec = serde::de::IgnoredAny;
    type Status = ();

    fn reconcile(&self, _client: &ClientOf<'_, Self>, _object: &ObjectOf<Self>) -> Result<Action> {
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        Registration::new("g".repeat(200 << 10), "Bad\nERROR forged")
    }
}

beehive_guest::export!(BadKind);
