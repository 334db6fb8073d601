//! A plugin whose `describe` never returns: the host must bound the call
//! and refuse the plugin, not hang its start or a hot swap.

use beehive_guest::{Action, ClientOf, Controller, ObjectOf, Registration, Result};

/// The controller.
#[derive(Default)]
pub struct Stuck;

impl Controller for Stuck {
    type Spec = serde::de::IgnoredAny;
    type Status = ();

    fn reconcile(&self, _client: &ClientOf<'_, Self>, _object: &ObjectOf<Self>) -> Result<Action> {
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

beehive_guest::export!(Stuck);
