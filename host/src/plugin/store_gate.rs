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
//!
//! The grants checked are the ones in force at the call, not at the
//! instance's start: an operator who removes a grant stops a pass that is
//! already running at its next store call ([`GrantsInForce`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};

use beehive_types::{ContractError, StoreGrants, StoreVerb};

use crate::metrics::DenialCounter;
use crate::object::GroupKind;
use crate::sync::{lock, read, write};

/// How many distinct denials one pass remembers for its events; more are
/// still refused, counted and logged.
const MAX_DENIALS_PER_PASS: usize = 8;

/// The store grants in force for one plugin file, shared by every instance
/// of every version loaded from it, and replaced the moment a sync reads a
/// changed policy (before the version it brings has compiled).
#[derive(Debug, Default)]
pub(crate) struct GrantsInForce(RwLock<Arc<StoreGrants>>);

impl GrantsInForce {
    fn replace(&self, grants: &StoreGrants) {
        let mut current = write(&self.0);
        if **current != *grants {
            *current = Arc::new(grants.clone());
        }
    }
}

/// Each plugin file's [`GrantsInForce`], while some version of it is
/// loaded.
#[derive(Debug, Default)]
pub(crate) struct GrantsByFile(Mutex<HashMap<PathBuf, Weak<GrantsInForce>>>);

impl GrantsByFile {
    /// The grants in force for `path`, set to `grants`: for a version being
    /// loaded from it.
    pub(crate) fn for_load(&self, path: &Path, grants: &StoreGrants) -> Arc<GrantsInForce> {
        let mut files = lock(&self.0);
        files.retain(|_, cell| cell.strong_count() > 0);
        let cell = match files.get(path).and_then(Weak::upgrade) {
            Some(cell) => cell,
            None => {
                let cell = Arc::new(GrantsInForce::default());
                files.insert(path.to_path_buf(), Arc::downgrade(&cell));
                cell
            }
        };
        cell.replace(grants);
        cell
    }

    /// Puts `grants` in force for every loaded version of `path` at once.
    pub(crate) fn revise(&self, path: &Path, grants: &StoreGrants) {
        if let Some(cell) = lock(&self.0).get(path).and_then(Weak::upgrade) {
            cell.replace(grants);
        }
    }
}

/// One plugin store's view of its store grants.
pub(crate) struct StoreGate {
    plugin: Arc<str>,
    grants: Arc<GrantsInForce>,
    counter: DenialCounter,
    /// Kinds and verbs denied since the pass began, each once.
    denied: Vec<(GroupKind, StoreVerb)>,
}

impl StoreGate {
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: Arc<GrantsInForce>,
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
        if read(&self.grants.0).allows(own, kind, verb) {
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
        let files = GrantsByFile::default();
        let cell = files.for_load(Path::new("p.wasm"), &grants);
        let mut gate = StoreGate::new("p".into(), cell, metrics.denials());
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

    #[test]
    fn a_revised_grant_holds_at_the_next_call_of_an_instance_already_made() {
        let metrics = Metrics::new("unused.db".into());
        let write = StoreGrants {
            read: Vec::new(),
            write: vec!["Config.example.dev".parse().unwrap()],
        };
        let files = GrantsByFile::default();
        let path = Path::new("p.wasm");
        let mut gate = StoreGate::new("p".into(), files.for_load(path, &write), metrics.denials());
        let own = GroupKind::new("example.dev", "Own");
        let config = GroupKind::new("example.dev", "Config");
        assert!(gate.check(&own, &config, StoreVerb::Write).is_ok());
        files.revise(path, &StoreGrants::default());
        assert!(gate.check(&own, &config, StoreVerb::Write).is_err());
        assert!(
            gate.check(&own, &own, StoreVerb::Write).is_ok(),
            "its own kind"
        );
        files.revise(Path::new("other.wasm"), &write);
        assert!(
            gate.check(&own, &config, StoreVerb::Write).is_err(),
            "another file's"
        );
        drop(gate);
        let _held = files.for_load(Path::new("q.wasm"), &write);
        assert_eq!(
            lock(&files.0).len(),
            1,
            "a file no version holds is forgotten"
        );
    }
}
