//! The `greeting` plugin: reconciles `Greeting.example.dev` objects, whose
//! spec names someone, by writing a greeting for them into the status.

use beehive_guest::{Action, Client, Controller, Object, Registration, Result};
use serde::{Deserialize, Serialize};

/// What a greeting asks for.
#[derive(Debug, Deserialize)]
pub struct GreetingSpec {
    /// Who to greet.
    pub name: String,
}

/// What the plugin reports.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct GreetingStatus {
    /// The greeting.
    pub message: String,
}

/// The controller.
#[derive(Default)]
pub struct Greeter;

impl Controller for Greeter {
    type Spec = GreetingSpec;
    type Status = GreetingStatus;

    fn registration() -> Registration {
        Registration::new("example.dev", "Greeting")
    }

    fn reconcile(
        &self,
        client: &Client<'_, GreetingStatus>,
        object: &Object<GreetingSpec, GreetingStatus>,
    ) -> Result<Action> {
        let message = format!("Hello, {}!", object.spec.name);
        client.update_status(&GreetingStatus { message })?;
        Ok(Action::settled())
    }
}

beehive_guest::export!(Greeter);

#[cfg(test)]
mod tests {
    use beehive_guest::fake::FakeClient;
    use beehive_guest::{Meta, Object};

    use super::*;

    #[test]
    fn greets_the_name_in_the_spec() {
        let fake = FakeClient::new();
        let object = Object {
            meta: Meta::default(),
            spec: GreetingSpec { name: "Ada".into() },
            status: None,
        };
        let result = Greeter.reconcile(&Client::new(&fake), &object).unwrap();
        assert_eq!(result, Action::settled());
        assert_eq!(fake.status().unwrap()["message"], "Hello, Ada!");
    }
}
