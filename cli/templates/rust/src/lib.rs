//! The `{{name}}` plugin: reconciles `{{kind}}.{{group}}` objects. A spec
//! asks for some replicas; each pass reports how many are ready in the
//! status and a `Ready` condition.

use beehive_guest::{
    Action, ClientOf, Condition, ConditionStatus, Controller, ObjectOf, Registration, Result,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct {{kind}}Controller;

/// What a user asks for.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct {{kind}}Spec {
    /// How many replicas to run.
    pub replicas: u32,
}

/// What the controller saw on its last pass.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct {{kind}}Status {
    /// Replicas ready.
    pub ready: u32,
}

impl Controller for {{kind}}Controller {
    type Spec = {{kind}}Spec;
    type Status = {{kind}}Status;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let wanted = object.spec.replicas;
        // The real work goes here: bring about what the spec describes
        // (through files, HTTP or other kinds the operator grants), then
        // report what you saw.
        let ready = match wanted {
            0 => Condition::new("Ready", ConditionStatus::False).reason("ScaledToZero"),
            n => Condition::new("Ready", ConditionStatus::True)
                .reason("AllReplicasReady")
                .message(format!("{n} of {n} ready")),
        };
        client.set_conditions(vec![ready])?;
        client.update_status(&{{kind}}Status { ready: wanted })?;
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        Registration::new("{{group}}", "{{kind}}")
            .spec_schema::<{{kind}}Spec>()
            .status_schema::<{{kind}}Status>()
    }
}

beehive_guest::export!({{kind}}Controller);

#[cfg(test)]
mod tests {
    use beehive_guest::Object;
    use beehive_guest::fake::FakeClient;

    use super::*;

    #[test]
    fn replicas_are_reported_ready() {
        let fake = FakeClient::new();
        let object = Object::new("web", {{kind}}Spec { replicas: 3 });
        let action = fake.reconcile(&{{kind}}Controller, &object).unwrap();
        assert_eq!(action, Action::settled());
        let ready = &fake.record().conditions["Ready"];
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.message, "3 of 3 ready");
        assert_eq!(fake.status().unwrap()["ready"], 3);
    }

    #[test]
    fn no_replicas_is_not_ready() {
        let fake = FakeClient::new();
        let object = Object::new("idle", {{kind}}Spec { replicas: 0 });
        fake.reconcile(&{{kind}}Controller, &object).unwrap();
        assert_eq!(fake.record().conditions["Ready"].reason, "ScaledToZero");
    }
}
