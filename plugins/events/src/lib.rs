//! The `events` plugin: an HTTP health checker. A `Connection.example.dev`
//! names a URL; each pass GETs it and records the outcome in the
//! `connection` timeline. Consecutive equal outcomes merge into one run, so
//! the timeline reads as alternating runs of `Connected` and `ProbeFailed`.
//!
//! The operator grants the hosts it may probe in `events.toml`:
//!
//! ```toml
//! [http]
//! allow = ["127.0.0.1:8080", "*.internal.example"]
//! ```
//!
//! A URL outside the grant is refused by the host: the probe fails with
//! "denied", and the object also gets the host's `HttpRequestDenied` event.
//! An endpoint that wants a token gets one from the policy's config, sent as
//! `Authorization: Bearer TOKEN` and never written anywhere:
//!
//! ```toml
//! [config]
//! token = { file = "/etc/beehive/probe-token" }
//! ```

use std::time::{Duration, Instant};

use beehive_guest::http::{HttpError, Request};
use beehive_guest::{
    Action, Cadence, Client, ClientOf, Condition, ConditionStatus, Controller, EventSpec, ObjectOf,
    Registration, Result,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct Connections;

/// The timeline's category.
pub const CATEGORY: &str = "connection";

/// An endpoint to keep an eye on.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSpec {
    /// What to GET, e.g. `http://127.0.0.1:8080/health`. Any 2xx answer
    /// is healthy.
    pub url: String,
    /// How often to probe (default 5000 ms).
    #[serde(default = "default_probe_interval_ms")]
    pub probe_interval_ms: u64,
    /// How long a probe may wait for an answer (default 2000 ms; the
    /// operator's timeouts are the longest that apply).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_probe_interval_ms() -> u64 {
    5000
}

fn default_timeout_ms() -> u64 {
    2000
}

/// The last probe's verdict.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct ConnectionStatus {
    /// `connected` or `unreachable`.
    pub state: String,
    /// The last answer's status code, if one came.
    #[serde(
        rename = "statusCode",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub status_code: Option<u16>,
    /// How long the last probe took.
    #[serde(rename = "latencyMs", default)]
    pub latency_ms: u64,
}

/// What one probe saw.
#[derive(Debug, Serialize)]
struct Outcome<'a> {
    url: &'a str,
    #[serde(rename = "statusCode", skip_serializing_if = "Option::is_none")]
    status_code: Option<u16>,
    #[serde(rename = "latencyMs")]
    latency_ms: u64,
    #[serde(skip)]
    failure: Option<String>,
}

impl Controller for Connections {
    type Spec = ConnectionSpec;
    type Status = ConnectionStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, conn: &ObjectOf<Self>) -> Result<Action> {
        let outcome = probe(&conn.spec);
        record(client, &outcome)?;
        Ok(Action::settled().requeue_after(Duration::from_millis(conn.spec.probe_interval_ms)))
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Connection")
            .spec_schema::<ConnectionSpec>()
            .status_schema::<ConnectionStatus>()
            .cadence(Cadence::new().startup_full_pass(true))
    }
}

/// GETs the URL once.
fn probe(spec: &ConnectionSpec) -> Outcome<'_> {
    let mut request = Request::get(&spec.url).timeout(Duration::from_millis(spec.timeout_ms));
    if let Some(token) = beehive_guest::config::get("token") {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let started = Instant::now();
    let answer = request.send();
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status_code, failure) = match answer {
        Ok(response) if response.is_success() => (Some(response.status), None),
        Ok(response) => (
            Some(response.status),
            Some(format!("HTTP {}", response.status)),
        ),
        Err(HttpError::Denied) => (None, Some("denied by the plugin's policy".into())),
        Err(error) => (None, Some(error.to_string())),
    };
    Outcome {
        url: &spec.url,
        status_code,
        latency_ms,
        failure,
    }
}

/// Records the outcome: an event in the timeline, the condition, the status.
fn record(client: &Client<'_, ConnectionStatus>, outcome: &Outcome<'_>) -> Result<()> {
    let url = outcome.url;
    let (event, condition, state) = match &outcome.failure {
        None => (
            EventSpec::normal("Connected").message(format!(
                "HTTP {} in {} ms",
                outcome.status_code.unwrap_or_default(),
                outcome.latency_ms
            )),
            Condition::new("Connected", ConditionStatus::True).reason("Connected"),
            "connected",
        ),
        Some(failure) => (
            EventSpec::warning("ProbeFailed").message(failure.clone()),
            Condition::new("Connected", ConditionStatus::False)
                .reason("ProbeFailed")
                .message(format!("{url}: {failure}")),
            "unreachable",
        ),
    };
    client.add_event(
        event
            .detail(serde_json::to_value(outcome)?)
            .category(CATEGORY),
    )?;
    client.set_condition(condition.liveness(true))?;
    client.update_status(&ConnectionStatus {
        state: state.into(),
        status_code: outcome.status_code,
        latency_ms: outcome.latency_ms,
    })
}

beehive_guest::export!(Connections);

#[cfg(test)]
mod tests {
    use beehive_guest::fake::{self, FakeClient};
    use beehive_guest::http::Response;
    use beehive_guest::{EventType, Object};

    use super::*;

    const URL: &str = "http://db.internal:8080/health";

    fn connection() -> Object<ConnectionSpec, ConnectionStatus> {
        let spec = ConnectionSpec {
            url: URL.into(),
            probe_interval_ms: 1000,
            timeout_ms: 100,
        };
        Object::new("db", spec)
    }

    #[test]
    fn a_healthy_endpoint_records_connected_and_probes_again() {
        fake::clear_http();
        fake::stub_http("GET", URL, Ok(Response::new(200, "ok")));
        let fake = FakeClient::new();
        let result = fake.reconcile(&Connections, &connection()).unwrap();
        assert_eq!(
            result,
            Action::settled().requeue_after(Duration::from_secs(1))
        );
        let event = &fake.record().events[0];
        assert_eq!(
            (event.category.as_str(), event.reason.as_str()),
            (CATEGORY, "Connected")
        );
        assert_eq!(event.type_, EventType::Normal);
        assert_eq!(fake.status().unwrap()["statusCode"], 200);
        assert_eq!(fake::sent_requests()[0].method(), "GET");
    }

    #[test]
    fn a_configured_token_is_sent_as_a_bearer_and_recorded_nowhere() {
        fake::clear_http();
        fake::set_config("token", "t0ken");
        fake::stub_http("GET", URL, Ok(Response::new(200, "ok")));
        let fake = FakeClient::new();
        let _ = fake.reconcile(&Connections, &connection()).unwrap();
        fake::clear_config();
        let sent = &fake::sent_requests()[0];
        assert_eq!(
            sent.headers(),
            [("authorization".to_string(), "Bearer t0ken".to_string())]
        );
        let recorded = format!("{:?} {:?}", fake.record(), fake.status());
        assert!(!recorded.contains("t0ken"), "{recorded}");
    }

    #[test]
    fn an_error_answer_or_a_timeout_is_an_outage_observed_not_a_failed_pass() {
        for (answer, message) in [
            (Ok(Response::new(503, "down")), "HTTP 503"),
            (
                Err(HttpError::Timeout("connecting".into())),
                "timed out: connecting",
            ),
        ] {
            fake::clear_http();
            fake::stub_http("GET", URL, answer);
            let fake = FakeClient::new();
            let result = fake.reconcile(&Connections, &connection()).unwrap();
            assert_eq!(result.verdict(), &beehive_guest::Verdict::Settled);
            let record = fake.record();
            let event = &record.events[0];
            assert_eq!(event.type_, EventType::Warning);
            assert_eq!(
                (event.reason.as_str(), event.message.as_str()),
                ("ProbeFailed", message)
            );
            assert_eq!(event.detail.as_ref().unwrap()["url"], URL);
            assert_eq!(
                record.conditions["Connected"].status,
                ConditionStatus::False
            );
            assert!(record.conditions["Connected"].liveness);
        }
    }

    #[test]
    fn a_url_the_policy_does_not_grant_is_reported_as_denied() {
        fake::clear_http();
        let fake = FakeClient::new();
        let _ = fake.reconcile(&Connections, &connection()).unwrap();
        assert_eq!(
            fake.record().events[0].message,
            "denied by the plugin's policy"
        );
        assert_eq!(fake.status().unwrap()["state"], "unreachable");
    }
}
