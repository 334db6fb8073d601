//! The `greeting` plugin's next release: it reconciles the same kind,
//! `Greeting.example.dev`, with a formal greeting. Dropping its file in place
//! of `greeting.wasm` shows a hot swap: every greeting is rewritten.

use beehive_guest::{Action, ClientOf, Controller, ObjectOf, Registration, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct FormalGreeter;

/// What a greeting asks for (unchanged from the first release).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetingSpec {
    /// Who to greet.
    pub name: String,
}

/// What the plugin reports: the message, and which release wrote it.
#[derive(Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct GreetingStatus {
    /// The greeting.
    pub message: String,
    /// The release that wrote it. Statuses the first release wrote lack it:
    /// a field added to a status needs a default, or decoding them fails.
    #[serde(default)]
    pub release: u32,
}

impl Controller for FormalGreeter {
    type Spec = GreetingSpec;
    type Status = GreetingStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let status = GreetingStatus {
            message: format!("Good day, {}.", object.spec.name),
            release: 2,
        };
        client.update_status(&status)?;
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Greeting")
            .spec_schema::<GreetingSpec>()
            .status_schema::<GreetingStatus>()
    }
}

beehive_guest::export!(FormalGreeter);

#[cfg(test)]
mod tests {
    use beehive_guest::Object;
    use beehive_guest::fake::FakeClient;

    use super::*;

    #[test]
    fn greets_formally_and_says_which_release() {
        let fake = FakeClient::new();
        let object = Object::new("ada", GreetingSpec { name: "Ada".into() });
        let result = fake.reconcile(&FormalGreeter, &object).unwrap();
        assert_eq!(result, Action::settled());
        let status = fake.status().unwrap();
        assert_eq!(status["message"], "Good day, Ada.");
        assert_eq!(status["release"], 2);
    }
}
