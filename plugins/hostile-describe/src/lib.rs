//! A plugin whose `describe` never returns: the host must bound the call
//! and refuse the plugin, not hang its start or a hot swap.

use beehive_guest::{Action, Client, Controller, Object, Registration, Result};

/// The controller.
#[derive(Default)]
pub struct Stuck;

impl Controller for Stuck {
    type Spec = serde::de::IgnoredAny;
    type Status = ();

    fn registration() -> Registration {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn reconcile(
        &self,
        _client: &Client<'_, ()>,
        _object: &Object<Self::Spec, ()>,
    ) -> Result<Action> {
        Ok(Action::settled())
    }
}

beehive_guest::export!(Stuck);
