//! A release of `greeting` that reshapes its spec: `{"name": …}` becomes
//! `{"who": …}`. It declares spec schema version 1, and converts specs the
//! earlier releases stored (version 0) when the host reads them, so its
//! passes only ever see the new shape; a spec written afterwards is stored
//! at version 1.

use beehive_guest::{Action, ClientOf, Controller, ObjectOf, Registration, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The controller.
#[derive(Default)]
pub struct Greeter;

/// What a greeting asks for, from spec version 1 on.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetingSpec {
    /// Who to greet (called `name` before version 1).
    pub who: String,
}

/// What the plugin reports, and which release wrote it.
#[derive(Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct GreetingStatus {
    /// The greeting.
    pub message: String,
    /// The release that wrote it; absent from the first release's statuses.
    #[serde(default)]
    pub release: u32,
}

impl Controller for Greeter {
    type Spec = GreetingSpec;
    type Status = GreetingStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let status = GreetingStatus {
            message: format!("Hello, {}!", object.spec.who),
            release: 3,
        };
        client.update_status(&status)?;
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Greeting")
            .spec_schema::<GreetingSpec>()
            .status_schema::<GreetingStatus>()
            .schema_versions(1, 0)
    }

    fn convert_spec(from: u32, mut spec: Json) -> std::result::Result<Json, String> {
        match from {
            0 => {
                let fields = spec.as_object_mut().ok_or("a spec must be a JSON object")?;
                if let Some(name) = fields.remove("name") {
                    fields.insert("who".into(), name);
                }
                Ok(spec)
            }
            other => Err(format!("unknown spec version {other}")),
        }
    }
}

beehive_guest::export!(Greeter);

#[cfg(test)]
mod tests {
    use beehive_guest::Object;
    use beehive_guest::fake::FakeClient;

    use super::*;

    #[test]
    fn an_old_spec_is_reshaped() {
        let old = serde_json::json!({"name": "Ada"});
        let new = Greeter::convert_spec(0, old).unwrap();
        assert_eq!(new, serde_json::json!({"who": "Ada"}));
        assert!(Greeter::convert_spec(7, new).is_err());
    }

    #[test]
    fn greets_who_the_new_spec_names() {
        let fake = FakeClient::new();
        let object = Object::new("ada", GreetingSpec { who: "Ada".into() });
        let result = fake.reconcile(&Greeter, &object).unwrap();
        assert_eq!(result, Action::settled());
        assert_eq!(fake.status().unwrap()["release"], 3);
    }
}
