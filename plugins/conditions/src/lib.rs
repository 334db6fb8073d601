//! The `conditions` plugin: a `Service.example.dev` reports two conditions
//! of different lifetimes.
//!
//! - `Configured` is durable: it follows from the spec alone, so it holds
//!   across restarts.
//! - `Serving` is a liveness condition: it describes something alive in
//!   this process (here, the service it pretends to start). After a restart
//!   the store reads it as Unknown, unconfirmed, until this plugin confirms
//!   it; the plugin asks for a pass of every object at each start to do so.

use beehive_guest::{
    Action, Cadence, ClientOf, Condition, ConditionStatus, Controller, ObjectOf, Registration,
    Result, Violation,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct Services;

/// A service to run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    /// The port to listen on (1–65535).
    pub port: u32,
    /// Whether it should serve at all.
    #[serde(default = "serving_by_default")]
    pub enabled: bool,
}

fn serving_by_default() -> bool {
    true
}

/// Where the service can be reached, once it serves.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct ServiceStatus {
    /// `http://NAME:PORT` while serving.
    pub endpoint: Option<String>,
}

impl Controller for Services {
    type Spec = ServiceSpec;
    type Status = ServiceStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, service: &ObjectOf<Self>) -> Result<Action> {
        let port = service.spec.port;
        let valid = (1..=65535).contains(&port);
        let configured = if valid {
            Condition::new("Configured", ConditionStatus::True).reason("ValidPort")
        } else {
            Condition::new("Configured", ConditionStatus::False)
                .reason("InvalidPort")
                .message(format!("port {port} is outside 1-65535"))
        };
        let serving = match (valid, service.spec.enabled) {
            (true, true) => Condition::new("Serving", ConditionStatus::True)
                .reason("Listening")
                .message(format!("listening on :{port}")),
            (true, false) => Condition::new("Serving", ConditionStatus::False).reason("Disabled"),
            (false, _) => Condition::new("Serving", ConditionStatus::False).reason("NotConfigured"),
        };
        let endpoint =
            (valid && service.spec.enabled).then(|| format!("http://{}:{port}", service.meta.name));
        // One write for both, so a reader never sees one without the other.
        client.set_conditions(vec![configured, serving.liveness(true)])?;
        client.update_status(&ServiceStatus { endpoint })?;
        Ok(Action::settled())
    }

    /// A port outside 1–65535 is refused where it is written, before any
    /// pass; the `InvalidPort` condition remains for specs stored before.
    fn validate(&self, spec: &ServiceSpec) -> Vec<Violation> {
        if (1..=65535).contains(&spec.port) {
            return Vec::new();
        }
        vec![Violation::new(
            "spec.port",
            format!("{} is outside 1-65535", spec.port),
        )]
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Service")
            .spec_schema::<ServiceSpec>()
            .status_schema::<ServiceStatus>()
            .validates()
            .cadence(Cadence::new().startup_full_pass(true))
    }
}

beehive_guest::export!(Services);

#[cfg(test)]
mod tests {
    use beehive_guest::Object;
    use beehive_guest::fake::FakeClient;

    use super::*;

    /// One pass over the service `web`, which must settle; the fake holds
    /// what the pass wrote.
    fn pass(port: u32, enabled: bool) -> FakeClient {
        let fake = FakeClient::new();
        let service = Object::new("web", ServiceSpec { port, enabled });
        let action = fake.reconcile(&Services, &service).unwrap();
        assert_eq!(action, Action::settled());
        fake
    }

    #[test]
    fn a_valid_enabled_service_is_configured_and_serving() {
        let fake = pass(8080, true);
        let conditions = fake.record().conditions;
        assert_eq!(conditions["Configured"].status, ConditionStatus::True);
        assert!(!conditions["Configured"].liveness, "durable");
        assert_eq!(conditions["Serving"].status, ConditionStatus::True);
        assert!(conditions["Serving"].liveness, "alive in this process only");
        assert_eq!(fake.status().unwrap()["endpoint"], "http://web:8080");
    }

    #[test]
    fn an_invalid_port_is_reported_not_failed() {
        let fake = pass(0, true);
        let conditions = fake.record().conditions;
        assert_eq!(conditions["Configured"].reason, "InvalidPort");
        assert_eq!(conditions["Serving"].reason, "NotConfigured");
        assert!(fake.status().unwrap()["endpoint"].is_null());
    }

    #[test]
    fn a_disabled_service_does_not_serve() {
        let fake = pass(8080, false);
        let conditions = fake.record().conditions;
        assert_eq!(conditions["Configured"].status, ConditionStatus::True);
        assert_eq!(conditions["Serving"].reason, "Disabled");
    }
}
