//! The `events` plugin: a `Connection.example.dev` keeps a connection-health
//! timeline. Each pass probes the endpoint and records the outcome in the
//! `connection` category; consecutive equal outcomes merge into one run, so
//! the timeline reads as alternating runs of `Connected` and `ProbeFailed`.
//!
//! Plugins have no sockets, so the probe is simulated: the spec says whether
//! the endpoint answers. Flip `reachable` to watch the timeline change.

use std::time::Duration;

use beehive_guest::{
    Client, Condition, ConditionStatus, Controller, EventSpec, Object, ReconcileResult,
    Registration, Result,
};
use serde::{Deserialize, Serialize};

/// The timeline's category.
pub const CATEGORY: &str = "connection";

/// A connection to keep an eye on.
#[derive(Debug, Deserialize)]
pub struct ConnectionSpec {
    /// Where to connect, e.g. `db:5432`.
    pub endpoint: String,
    /// Whether the (simulated) endpoint answers.
    #[serde(default = "reachable_by_default")]
    pub reachable: bool,
    /// How often to probe (default 5000 ms).
    #[serde(default = "default_probe_interval_ms")]
    pub probe_interval_ms: u64,
}

fn reachable_by_default() -> bool {
    true
}

fn default_probe_interval_ms() -> u64 {
    5000
}

/// The last probe's verdict.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConnectionStatus {
    /// `connected` or `unreachable`.
    pub state: String,
}

/// What a failed probe carries.
#[derive(Debug, Serialize)]
struct ProbeFailure<'a> {
    endpoint: &'a str,
    #[serde(rename = "latencyMs")]
    latency_ms: u64,
}

/// The controller.
#[derive(Default)]
pub struct Connections;

impl Controller for Connections {
    type Spec = ConnectionSpec;
    type Status = ConnectionStatus;

    fn registration() -> Registration {
        Registration::new("example.dev", "Connection").startup_full_pass(true)
    }

    fn reconcile(
        &self,
        client: &Client<'_, ConnectionStatus>,
        connection: &Object<ConnectionSpec, ConnectionStatus>,
    ) -> ReconcileResult {
        match probe(client, &connection.spec) {
            Ok(()) => ReconcileResult::settled()
                .requeue_after(Duration::from_millis(connection.spec.probe_interval_ms)),
            Err(error) => ReconcileResult::fail(error),
        }
    }
}

fn probe(client: &Client<'_, ConnectionStatus>, spec: &ConnectionSpec) -> Result<()> {
    let endpoint = &spec.endpoint;
    let (event, condition, state) = if spec.reachable {
        (
            EventSpec::normal("Connected").message(format!("connected to {endpoint}")),
            Condition::new("Connected", ConditionStatus::True).reason("Connected"),
            "connected",
        )
    } else {
        let failure = ProbeFailure {
            endpoint,
            latency_ms: 5000,
        };
        (
            EventSpec::warning("ProbeFailed")
                .message("i/o timeout")
                .detail(&failure),
            Condition::new("Connected", ConditionStatus::False)
                .reason("ProbeFailed")
                .message(format!("{endpoint}: i/o timeout")),
            "unreachable",
        )
    };
    client.add_event(event.category(CATEGORY))?;
    client.set_condition(condition.liveness(true))?;
    client.update_status(&ConnectionStatus {
        state: state.into(),
    })
}

beehive_guest::export!(Connections);

#[cfg(test)]
mod tests {
    use beehive_guest::fake::FakeClient;
    use beehive_guest::{EventType, Meta, Object};

    use super::*;

    fn connection(reachable: bool) -> Object<ConnectionSpec, ConnectionStatus> {
        Object {
            meta: Meta::default(),
            spec: ConnectionSpec {
                endpoint: "db:5432".into(),
                reachable,
                probe_interval_ms: 1000,
            },
            status: None,
        }
    }

    #[test]
    fn a_reachable_endpoint_records_connected_and_probes_again() {
        let fake = FakeClient::new();
        let result = Connections.reconcile(&Client::new(&fake), &connection(true));
        assert_eq!(
            result,
            ReconcileResult::settled().requeue_after(Duration::from_secs(1))
        );
        let event = &fake.record().events[0];
        assert_eq!(
            (event.category.as_str(), event.reason.as_str()),
            (CATEGORY, "Connected")
        );
        assert_eq!(event.event_type, EventType::Normal);
        assert_eq!(fake.status().unwrap()["state"], "connected");
    }

    #[test]
    fn an_unreachable_endpoint_records_a_warning_with_detail() {
        let fake = FakeClient::new();
        let result = Connections.reconcile(&Client::new(&fake), &connection(false));
        assert_eq!(
            result.verdict,
            beehive_guest::Verdict::Settled,
            "an outage is observed, not a failure"
        );
        let record = fake.record();
        let event = &record.events[0];
        assert_eq!(event.event_type, EventType::Warning);
        assert_eq!(event.reason, "ProbeFailed");
        let detail: serde_json::Value =
            serde_json::from_str(event.detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail["endpoint"], "db:5432");
        assert_eq!(
            record.conditions["Connected"].status,
            ConditionStatus::False
        );
        assert!(record.conditions["Connected"].liveness);
    }
}
