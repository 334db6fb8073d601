//! The versions of the plugin contract this host serves, side by side.
//!
//! A plugin is built against one version of the WIT package
//! `beehive:controller`; its imports and exports name it. The host links
//! every version it serves into one linker (their names differ by
//! version), reads from a component's exports which one it was built for,
//! and calls it in that version's terms. What each host call does is
//! written once, in [`super::verbs`]; a version's module converts its
//! types to and from the host's. See
//! `docs/adr/2026-12-07-contract-versions.md`.

#[macro_use]
mod shared;
pub(crate) mod v0_1;
pub(crate) mod v0_2;

use wasmtime::Store;
use wasmtime::component::{Component, Instance, Linker, Resource};

use crate::object::RawObject;
use crate::plugin::state::{ControllerClientHandle, PluginState};

/// The package every version shares.
pub(crate) const PACKAGE: &str = "beehive:controller";

/// A version of the plugin contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Contract {
    /// `beehive:controller@0.1.0`: objects without labels, optional
    /// exports as separate interfaces (one world per combination).
    V0_1,
    /// `beehive:controller@0.2.0`: labels and selectors, the typed
    /// `not-granted` error, a leaner pass, one `controller` interface.
    V0_2,
}

impl Contract {
    /// Every version this host serves, oldest first.
    pub const SERVED: [Contract; 2] = [Contract::V0_1, Contract::V0_2];

    /// The newest version: what the SDKs build and `beehive new` scaffolds.
    pub const NEWEST: Contract = Contract::V0_2;

    /// Its version number, as the package names it (`0.2.0`).
    pub fn version(self) -> &'static str {
        match self {
            Contract::V0_1 => "0.1.0",
            Contract::V0_2 => "0.2.0",
        }
    }

    /// The version a package version names, if this host serves it.
    pub fn of_version(version: &str) -> Option<Contract> {
        Contract::SERVED
            .into_iter()
            .find(|contract| contract.version() == version)
    }

    /// The full name of `interface` in this version
    /// (`beehive:controller/controller@0.2.0`).
    pub(crate) fn interface(self, interface: &str) -> String {
        format!("{PACKAGE}/{interface}@{}", self.version())
    }

    /// The version `component` was built for: the one whose `controller`
    /// interface it exports.
    pub(crate) fn of_component(component: &Component) -> Option<Contract> {
        let engine = component.engine();
        let exports: Vec<String> = component
            .component_type()
            .exports(engine)
            .map(|(name, _)| name.to_string())
            .collect();
        Contract::SERVED
            .into_iter()
            .rev()
            .find(|contract| exports.contains(&contract.interface("controller")))
    }
}

/// The versions this host serves, for messages: `beehive:controller@0.1.0,
/// beehive:controller@0.2.0`.
pub(crate) fn served() -> String {
    Contract::SERVED.map(|c| c.to_string()).join(", ")
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PACKAGE}@{}", self.version())
    }
}

/// Adds what every served version lets a plugin import.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v0_1::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(linker, |s| s)?;
    v0_2::Plugin::add_to_linker::<PluginState, HasSelf<PluginState>>(linker, |s| s)?;
    Ok(())
}

/// What a pass concluded, whichever version said it.
pub(crate) enum Verdict {
    Settled,
    Unsettled,
    Failed(String),
}

/// What `reconcile` returned, whichever version said it.
pub(crate) struct PassResult {
    pub(crate) verdict: Verdict,
    pub(crate) requeue_after_ms: Option<u64>,
}

/// An instance's exports, in the version it was built for.
pub(crate) enum Bindings {
    V0_1(v0_1::Plugin),
    V0_2(v0_2::Plugin),
}

impl Bindings {
    /// The exports of `instance`, a component built for `contract`.
    pub(crate) fn new(
        contract: Contract,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<Bindings> {
        Ok(match contract {
            Contract::V0_1 => Bindings::V0_1(v0_1::Plugin::new(store, instance)?),
            Contract::V0_2 => Bindings::V0_2(v0_2::Plugin::new(store, instance)?),
        })
    }

    /// What the plugin reconciles, and how (0.1's registration says less:
    /// its schemas come from the `schema` interface).
    pub(crate) async fn describe(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<v0_2::Registration> {
        match self {
            Bindings::V0_1(plugin) => {
                let registration = plugin
                    .beehive_controller_controller()
                    .call_describe(store)
                    .await?;
                Ok(v0_1::registration(registration))
            }
            Bindings::V0_2(plugin) => {
                plugin
                    .beehive_controller_controller()
                    .call_describe(store)
                    .await
            }
        }
    }

    /// One pass over `object`, lent to the guest.
    pub(crate) async fn reconcile(
        &self,
        store: &mut Store<PluginState>,
        object: &RawObject,
        client: Resource<ControllerClientHandle>,
    ) -> wasmtime::Result<PassResult> {
        match self {
            Bindings::V0_1(plugin) => {
                let lists = v0_1::ObjectLists::of(object);
                let result = plugin
                    .beehive_controller_controller()
                    .call_reconcile(store, lists.param(object), client)
                    .await?;
                Ok(v0_1::pass_result(result))
            }
            Bindings::V0_2(plugin) => {
                let lists = v0_2::ObjectLists::of(object);
                let result = plugin
                    .beehive_controller_controller()
                    .call_reconcile(store, lists.param(object), client)
                    .await?;
                Ok(v0_2::pass_result(result))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use beehive_types::{ContractError, GroupKind, StoreVerb};

    use super::*;

    #[test]
    fn a_denial_is_its_own_case_in_0_2_and_a_sentence_in_0_1() {
        let denied = ContractError::NotGranted {
            kind: GroupKind::new("example.dev", "Secret"),
            verb: StoreVerb::Read,
        };
        let fix = "add `read = ['Secret.example.dev']` under [store]";
        match v0_2::error(denied.clone()) {
            v0_2::beehive::controller::types::Error::NotGranted(message) => {
                assert!(message.contains(fix), "{message}");
            }
            other => panic!("0.2: {other:?}"),
        }
        match v0_1::error(denied.clone()) {
            v0_1::beehive::controller::types::Error::Other(message) => {
                assert_eq!(ContractError::from_other(message), denied);
            }
            other => panic!("0.1: {other:?}"),
        }
    }

    #[test]
    fn versions_are_named_as_their_packages() {
        assert_eq!(Contract::NEWEST.to_string(), "beehive:controller@0.2.0");
        assert_eq!(Contract::of_version("0.1.0"), Some(Contract::V0_1));
        assert_eq!(Contract::of_version("0.3.0"), None);
        assert_eq!(
            Contract::V0_2.interface("controller"),
            "beehive:controller/controller@0.2.0"
        );
        assert_eq!(
            served(),
            "beehive:controller@0.1.0, beehive:controller@0.2.0"
        );
    }
}
