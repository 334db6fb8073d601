//! The check every store call of a plugin passes before it touches the
//! store: the plugin's own kind is read-write, any other kind only as its
//! policy's `[store]` section grants (see [`StoreGrants`]).
//!
//! The adversary is the plugin: it names any kind and any object id it
//! likes. So the kind checked is the one the call reaches, looked up for
//! calls by id (an object's edges and events, an owner, a dependency's
//! target), never the kind of the handle it called through. A denied call
//! writes nothing, counts in `beehive_plugin_denials_total`, is logged once
//! per pass and kind and verb, and leaves one Warning event
//! (`StoreAccessDenied`) on the pass's object for each.

use std::sync::Arc;

use beehive_types::{ContractError, StoreGrants, StoreVerb};

use crate::metrics::DenialCounter;
use crate::object::GroupKind;

/// How many distinct denials one pass remembers for its events; more are
/// still refused, counted and logged.
const MAX_DENIALS_PER_PASS: usize = 8;

/// One plugin store's view of its store grants.
pub(crate) struct StoreGate {
    plugin: Arc<str>,
    grants: Arc<StoreGrants>,
    counter: DenialCounter,
    /// Kinds and verbs denied since the pass began, each once.
    denied: Vec<(GroupKind, StoreVerb)>,
}

impl StoreGate {
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: Arc<StoreGrants>,
        counter: DenialCounter,
    ) -> StoreGate {
        StoreGate {
            plugin,
            grants,
            counter,
            denied: Vec::new(),
        }
    }

    /// Allows `verb` on `kind` for a plugin whose own kind is `own`, or
    /// says why not in the contract's terms.
    pub(crate) fn check(
        &mut self,
        own: &GroupKind,
        kind: &GroupKind,
        verb: StoreVerb,
    ) -> Result<(), ContractError> {
        if self.grants.allows(own, kind, verb) {
            return Ok(());
        }
        self.counter.count(&self.plugin, kind, verb);
        let seen = self.denied.iter().any(|(k, v)| k == kind && *v == verb);
        if !seen {
            tracing::warn!(
                plugin = &*self.plugin,
                %kind,
                verb = verb.as_str(),
                "store call denied: the plugin's policy does not grant it"
            );
            if self.denied.len() < MAX_DENIALS_PER_PASS {
                self.denied.push((kind.clone(), verb));
            }
        }
        Err(ContractError::NotGranted {
            kind: kind.clone(),
            verb,
        })
    }

    /// The kinds and verbs denied since the last call, each once.
    pub(crate) fn take_denials(&mut self) -> Vec<(GroupKind, StoreVerb)> {
        std::mem::take(&mut self.denied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn a_denial_is_counted_each_time_and_remembered_once() {
        let metrics = Metrics::new("unused.db".into());
        let grants = StoreGrants {
            read: vec!["Config.example.dev".parse().unwrap()],
            write: Vec::new(),
        };
        let mut gate = StoreGate::new("p".into(), Arc::new(grants), metrics.denials());
        let own = GroupKind::new("example.dev", "Own");
        let config = GroupKind::new("example.dev", "Config");
        assert!(gate.check(&own, &own, StoreVerb::Write).is_ok());
        assert!(gate.check(&own, &config, StoreVerb::Read).is_ok());
        for _ in 0..3 {
            let denied = gate.check(&own, &config, StoreVerb::Write).unwrap_err();
            assert!(matches!(denied, ContractError::NotGranted { .. }));
        }
        assert_eq!(gate.take_denials(), [(config, StoreVerb::Write)]);
        assert!(gate.take_denials().is_empty());
        let text = metrics.encode();
        assert!(
            text.contains(
                "beehive_plugin_denials_total{plugin=\"p\",kind=\"Config.example.dev\",verb=\"write\"} 3"
            ),
            "{text}"
        );
    }
}
