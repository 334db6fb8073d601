//! Spec validation through the embedding API: a registered kind's schema
//! and validator refuse bad specs from every client of the store, and the
//! recorded schema holds for a store opened later without a host.

use std::sync::Arc;

use beehive::validation::{KindSchemas, SpecValidator, Violation};
use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, Error, GroupKind, Host,
    HostOptions, Json, RawClient, RawObject, Store,
};

fn service() -> GroupKind {
    GroupKind::new("acme.com", "Service")
}

const SCHEMA: &str = r#"{
    "type": "object",
    "properties": {"port": {"type": "integer", "description": "Where it listens."}},
    "required": ["port"],
    "additionalProperties": false
}"#;

/// Ports below 1024 are someone else's.
struct UnprivilegedPorts;

impl SpecValidator for UnprivilegedPorts {
    fn validate(&self, spec: &Json) -> Result<Vec<Violation>, String> {
        let port = spec.to_value()["port"].as_i64().unwrap_or(0);
        Ok(if port < 1024 {
            vec![Violation {
                path: "spec.port".into(),
                message: format!("{port} is a privileged port"),
            }]
        } else {
            Vec::new()
        })
    }
}

struct Idle;

impl Controller for Idle {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, _: &ControllerClient, _: &RawObject) -> beehive::Result<Action> {
        Ok(Action::settled())
    }
}

async fn host_with_rules(store: &Store) -> Host {
    let host = Host::new(store, HostOptions::new()).unwrap();
    let schemas = KindSchemas {
        spec: Some(SCHEMA.into()),
        status: None,
    };
    let options = ControllerOptions::new()
        .schemas(schemas)
        .validator(Arc::new(UnprivilegedPorts));
    host.register(service(), Idle, options).await.unwrap();
    host
}

fn json(text: &str) -> Json {
    Json::parse(text).unwrap()
}

fn violations(result: beehive::Result<impl std::fmt::Debug>) -> Vec<String> {
    match result {
        Err(Error::Invalid { violations, .. }) => {
            violations.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_of_the_store_is_checked_and_nothing_is_written() {
    let store = beehive_e2e::store();
    let _host = host_with_rules(&store).await;
    let services = RawClient::new(&store, service());

    let typed = services
        .create("web", json(r#"{"port":"80"}"#), CreateOptions::new())
        .await;
    assert_eq!(
        violations(typed),
        [r#"spec.port: "80" is not of type "integer""#]
    );
    let privileged = services
        .create("web", json(r#"{"port":80}"#), CreateOptions::new())
        .await;
    assert_eq!(
        violations(privileged),
        ["spec.port: 80 is a privileged port"]
    );
    assert!(services.list().unwrap().is_empty(), "nothing was written");

    let web = services
        .create("web", json(r#"{"port":8080}"#), CreateOptions::new())
        .await
        .unwrap();
    let update = services
        .update(web.meta.id, json(r#"{"port":8080,"x":1}"#))
        .await;
    assert_eq!(violations(update).len(), 1);
    let by_name = services.update_by_name("web", json("{}")).await;
    assert_eq!(violations(by_name).len(), 1);

    // A transaction's writes are checked the same way, and roll back whole.
    let tx = store
        .transaction(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let in_tx = tx.client(service());
    in_tx
        .create("api", json(r#"{"port":9000}"#), CreateOptions::new())
        .await
        .unwrap();
    let refused = in_tx
        .create_or_update("db", json(r#"{"port":22}"#), CreateOptions::new())
        .await;
    assert_eq!(violations(refused).len(), 1);
    drop(tx);
    assert_eq!(services.list().unwrap().len(), 1, "only web");
    assert_eq!(
        services.get(web.meta.id).unwrap().spec.as_str(),
        r#"{"port":8080}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_that_does_not_compile_refuses_the_registration() {
    let store = beehive_e2e::store();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let schemas = KindSchemas {
        spec: Some(r#"{"type": "nothing"}"#.into()),
        status: None,
    };
    let refused = host
        .register(service(), Idle, ControllerOptions::new().schemas(schemas))
        .await;
    assert!(
        matches!(&refused, Err(Error::InvalidOption(m)) if m.contains("spec schema")),
        "{refused:?}"
    );
    assert!(
        store.registrations().unwrap().is_empty(),
        "nothing recorded"
    );
}
