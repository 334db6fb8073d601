//! Objects as `get` shows them: the stored document with its owner named
//! the way a manifest's `owner` field takes it.

use std::collections::HashMap;

use beehive::object::{ObjectDocument, ObjectRef};
use beehive::{ObjectId, RawClient, RawObject, Store};

use crate::protocol::ObjectView;

/// Names owners for one reply, looking each up once: a list's children
/// mostly share a few owners.
pub struct OwnerNames {
    store: Store,
    names: HashMap<ObjectId, String>,
}

impl OwnerNames {
    pub fn new(store: &Store) -> Self {
        OwnerNames {
            store: store.clone(),
            names: HashMap::new(),
        }
    }

    /// `object` with its owner. An object read without its owner loaded
    /// has the owner looked up; one that is gone has none.
    pub fn view(&mut self, object: &RawObject) -> ObjectView {
        let owner = match object.owner() {
            Ok(owner) => owner.cloned(),
            Err(_) => RawClient::new(&self.store, object.meta.group_kind.clone())
                .get_owner(object.meta.id)
                .ok()
                .flatten(),
        };
        ObjectView {
            document: ObjectDocument::from(object),
            owner: owner.map(|owner| self.name(&owner)),
            last_pass_failed_at: None,
        }
    }

    fn name(&mut self, owner: &ObjectRef) -> String {
        let store = &self.store;
        self.names
            .entry(owner.id)
            .or_insert_with(|| {
                let name = RawClient::new(store, owner.group_kind.clone())
                    .get(owner.id)
                    .map_or_else(|_| format!("#{}", owner.id), |o| o.meta.name);
                format!("{}/{name}", owner.group_kind)
            })
            .clone()
    }
}
