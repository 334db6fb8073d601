//! The `greeting` plugin: reconciles `Greeting.example.dev` objects, whose
//! spec names someone, by writing a greeting for them into the status.

use beehive_guest::{Action, ClientOf, Controller, ObjectOf, Registration, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct Greeter;

/// What a greeting asks for.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetingSpec {
    /// Who to greet.
    pub name: String,
}

/// What the plugin reports.
#[derive(Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct GreetingStatus {
    /// The greeting.
    pub message: String,
}

impl Controller for Greeter {
    type Spec = GreetingSpec;
    type Status = GreetingStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let message = format!("Hello, {}!", object.spec.name);
        client.update_status(&GreetingStatus { message })?;
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Greeting")
            .spec_schema::<GreetingSpec>()
            .status_schema::<GreetingStatus>()
    }
}

beehive_guest::export!(Greeter);

#[cfg(test)]
mod tests {
    use beehive_guest::Object;
    use beehive_guest::fake::FakeClient;

    use super::*;

    #[test]
    fn greets_the_name_in_the_spec() {
        let fake = FakeClient::new();
        let object = Object::new("ada", GreetingSpec { name: "Ada".into() });
        let result = fake.reconcile(&Greeter, &object).unwrap();
        assert_eq!(result, Action::settled());
        assert_eq!(fake.status().unwrap()["message"], "Hello, Ada!");
    }
}
