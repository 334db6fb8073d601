//! The `cascade` plugin: a `GreetingSet.example.dev` owns one
//! `Greeting.example.dev` per name in its spec. It creates and prunes its
//! children through a kind client, depends on each child so a child's new
//! status wakes it, reports how many are greeted, and holds a finalizer so a
//! deleted set takes its children down before it goes. Each child carries
//! the label `example.dev/set: SET`, so `beehive get Greeting -l
//! example.dev/set=team` lists a set's children.
//!
//! The children are reconciled by another plugin (`greeting`): the two never
//! call each other, they meet in the store.

use std::collections::BTreeSet;

use beehive_guest::finalizer::{Event, finalizer};
use beehive_guest::{
    Action, Client, ClientOf, Condition, ConditionStatus, Controller, CreateOptions, Kind, Object,
    ObjectOf, Registration, Result,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct Cascade;

/// The finalizer that keeps a set until its children are gone.
pub const FINALIZER: &str = "example.dev/greetings";

/// A set of greetings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetingSetSpec {
    /// One greeting per name.
    pub names: Vec<String>,
}

/// How far the set has come.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct GreetingSetStatus {
    /// Children whose greeting is written for their current spec.
    pub ready: usize,
    /// Children wanted.
    pub total: usize,
}

/// A child's spec, as the `greeting` plugin reads it.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GreetingSpec {
    /// Who to greet.
    pub name: String,
}

/// A child's status, whatever version of `greeting` wrote it.
type GreetingStatus = serde_json::Value;

impl Controller for Cascade {
    type Spec = GreetingSetSpec;
    type Status = GreetingSetStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, set: &ObjectOf<Self>) -> Result<Action> {
        let greetings = client.kind("example.dev", "Greeting");
        finalizer(client, FINALIZER, set, |event| match event {
            Event::Apply(set) => converge(client, &greetings, set),
            Event::Cleanup(set) => tear_down(&greetings, set),
        })
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "GreetingSet")
            .spec_schema::<GreetingSetSpec>()
            .status_schema::<GreetingSetStatus>()
            .finalizers([FINALIZER])
    }
}

/// The label naming the set a child belongs to.
pub const SET_LABEL: &str = "example.dev/set";

/// The child's name: the set's name and the greeted name.
pub fn child_name(set: &str, name: &str) -> String {
    format!("{set}-{name}")
}

fn converge(
    client: &Client<'_, GreetingSetStatus>,
    greetings: &Kind<GreetingSpec, GreetingStatus>,
    set: &Object<GreetingSetSpec, GreetingSetStatus>,
) -> Result<Action> {
    let wanted: BTreeSet<String> = set
        .spec
        .names
        .iter()
        .map(|n| child_name(&set.meta.name, n))
        .collect();
    for stale in greetings.list_owned_objects(set.meta.id)? {
        if !wanted.contains(&stale.meta.name) {
            // Dropped first: a dependency is a claim that would keep the child.
            client.delete_dependency(stale.meta.id)?;
            greetings.delete_by_name(&stale.meta.name)?;
        }
    }
    let mut ready = 0;
    for name in &set.spec.names {
        let spec = GreetingSpec { name: name.clone() };
        let owned = CreateOptions::owner(set.meta.id).labels([(SET_LABEL, set.meta.name.as_str())]);
        let (child, _) =
            greetings.create_or_update(&child_name(&set.meta.name, name), &spec, owned)?;
        client.add_dependency(child.meta.id)?;
        if is_ready(&child) {
            ready += 1;
        }
    }
    let total = set.spec.names.len();
    client.update_status(&GreetingSetStatus { ready, total })?;
    let (status, reason) = if ready == total {
        (ConditionStatus::True, "AllGreeted")
    } else {
        (ConditionStatus::False, "Waiting")
    };
    client.set_condition(
        Condition::new("Ready", status)
            .reason(reason)
            .message(format!("{ready}/{total} greeted")),
    )?;
    // Not settled until every child is: a child's status change wakes the
    // set through its dependency.
    Ok(if ready == total {
        Action::settled()
    } else {
        Action::unsettled()
    })
}

/// A child is ready once its greeting is written for its current spec.
fn is_ready(child: &Object<GreetingSpec, GreetingStatus>) -> bool {
    child.status.is_some() && child.meta.observed_generation == Some(child.meta.generation)
}

/// Deletes the children; settled (which releases the finalizer) once none
/// is left.
fn tear_down(
    greetings: &Kind<GreetingSpec, GreetingStatus>,
    set: &Object<GreetingSetSpec, GreetingSetStatus>,
) -> Result<Action> {
    let children = greetings.list_owned_objects(set.meta.id)?;
    if children.is_empty() {
        return Ok(Action::settled());
    }
    for child in children.iter().filter(|c| !c.meta.is_deleting()) {
        greetings.delete(child.meta.id)?;
    }
    // Each child's removal wakes the set through its owner edge.
    Ok(Action::unsettled())
}

beehive_guest::export!(Cascade);

#[cfg(test)]
mod tests {
    use beehive_guest::fake::FakeClient;
    use beehive_guest::{Error, GroupKind, Meta, Object, StoreGrants, StoreVerb};

    use super::*;

    fn set(names: &[&str]) -> Object<GreetingSetSpec, GreetingSetStatus> {
        Object {
            meta: Meta {
                id: 1000,
                name: "team".into(),
                generation: 1,
                ..Meta::default()
            },
            spec: GreetingSetSpec {
                names: names.iter().map(|n| n.to_string()).collect(),
            },
            status: None,
        }
    }

    fn children(fake: &FakeClient) -> Vec<String> {
        let mut names: Vec<String> = fake
            .objects()
            .into_iter()
            .filter(|o| !o.meta.is_deleting())
            .map(|o| o.meta.name)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creates_a_child_per_name_and_waits_for_them() {
        let fake = FakeClient::new();
        let result = fake.reconcile(&Cascade, &set(&["ada", "grace"])).unwrap();
        assert_eq!(result, Action::unsettled());
        assert_eq!(children(&fake), ["team-ada", "team-grace"]);
        let labeled = fake
            .objects()
            .into_iter()
            .filter(|o| o.meta.labels[SET_LABEL] == "team");
        assert_eq!(labeled.count(), 2, "each child names its set");
        let record = fake.record();
        assert_eq!(record.dependencies.len(), 2, "the set watches its children");
        assert_eq!(fake.status().unwrap()["ready"], 0);
        assert_eq!(record.conditions["Ready"].status, ConditionStatus::False);
    }

    #[test]
    fn is_ready_once_every_child_is_greeted() {
        let fake = FakeClient::new();
        let first = fake.reconcile(&Cascade, &set(&["ada"])).unwrap();
        assert_eq!(first, Action::unsettled());
        let child = fake.objects()[0].meta.id;
        fake.edit_object(child, |o| {
            o.status = Some(r#"{"message":"Hello, ada!"}"#.into());
            o.meta.observed_generation = Some(o.meta.generation);
        });
        let result = fake.reconcile(&Cascade, &set(&["ada"])).unwrap();
        assert_eq!(result, Action::settled());
        assert_eq!(fake.status().unwrap()["ready"], 1);
        assert_eq!(fake.record().conditions["Ready"].reason, "AllGreeted");
    }

    #[test]
    fn needs_its_policy_to_grant_writing_greetings() {
        let greetings = || StoreGrants {
            read: Vec::new(),
            write: vec!["Greeting.example.dev".parse().unwrap()],
        };
        let denied = FakeClient::new().with_store_grants(StoreGrants::default());
        let error = denied.reconcile(&Cascade, &set(&["ada"])).unwrap_err();
        // Its first call lists the children it owns.
        let greeting = GroupKind::new("example.dev", "Greeting");
        assert_eq!(
            error,
            Error::NotGranted {
                kind: greeting.clone(),
                verb: StoreVerb::Read
            }
        );
        assert_eq!(denied.denials(), [(greeting, StoreVerb::Read)]);
        assert!(children(&denied).is_empty(), "nothing written");

        let granted = FakeClient::new().with_store_grants(greetings());
        let _ = granted.reconcile(&Cascade, &set(&["ada"])).unwrap();
        assert_eq!(children(&granted), ["team-ada"]);
        assert!(granted.denials().is_empty());
    }

    #[test]
    fn prunes_children_no_longer_named() {
        let fake = FakeClient::new();
        for names in [&["ada", "grace"][..], &["ada"]] {
            let result = fake.reconcile(&Cascade, &set(names)).unwrap();
            assert_eq!(result, Action::unsettled());
        }
        assert_eq!(children(&fake), ["team-ada"]);
        assert_eq!(fake.record().dependencies.len(), 1);
    }

    #[test]
    fn a_deleted_set_removes_its_children_before_its_finalizer() {
        let fake = FakeClient::new();
        let first = fake.reconcile(&Cascade, &set(&["ada"])).unwrap();
        assert_eq!(first, Action::unsettled());
        let mut deleting = set(&["ada"]);
        deleting.meta.deletion_requested_at = Some(beehive_guest::Timestamp::from_millis(1));
        deleting.meta.finalizers = vec![FINALIZER.into()];

        let result = fake.reconcile(&Cascade, &deleting).unwrap();
        assert_eq!(result, Action::unsettled());
        assert!(children(&fake).is_empty(), "the children are being deleted");
        assert!(fake.record().deleted_finalizers.is_empty(), "not yet");

        fake.collect_garbage();
        let result = fake.reconcile(&Cascade, &deleting).unwrap();
        assert_eq!(result, Action::settled());
        assert_eq!(fake.record().deleted_finalizers, [FINALIZER]);
    }
}
