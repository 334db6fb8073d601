//! Schema-version migration through the public API: documents upgraded on
//! read, re-stamped on write, newer ones refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, Error, GroupKind, Host,
    HostOptions, Json, RawClient, RawObject, Store, migration::Migrator,
};
use beehive_e2e::{eventually, stop};

fn cluster() -> GroupKind {
    GroupKind::new("acme.com", "Cluster")
}

/// Spec v1 renamed `size` to `replicas`; status v1 renamed `up` to `ready`.
struct ClusterMigrator {
    spec: u32,
    fail: Arc<AtomicBool>,
}

fn rename(document: Json, from: &str, to: &str) -> Json {
    let mut value = document.to_value();
    if let Some(old) = value.as_object_mut().and_then(|o| o.remove(from)) {
        value[to] = old;
    }
    Json::from_value(&value)
}

impl Migrator for ClusterMigrator {
    fn spec_version(&self) -> u32 {
        self.spec
    }
    fn status_version(&self) -> u32 {
        1
    }
    fn convert_spec(&self, _from: u32, spec: Json) -> Result<Json, String> {
        if self.fail.load(Ordering::SeqCst) {
            return Err("the converter gave up".into());
        }
        Ok(rename(spec, "size", "replicas"))
    }
    fn convert_status(&self, _from: u32, status: Json) -> Result<Json, String> {
        Ok(rename(status, "up", "ready"))
    }
}

/// Reports `ready` = `replicas`, which exists only in the new shape.
struct Reporter;

impl Controller for Reporter {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(
        &self,
        client: &ControllerClient,
        object: &RawObject,
    ) -> beehive::Result<Action> {
        let replicas = object.spec.to_value()["replicas"].clone();
        if replicas.is_null() {
            return Err(beehive::Error::msg("spec not upgraded"));
        }
        let status = Json::from_value(&serde_json::json!({ "ready": replicas }));
        client.update_status_json(status).await?;
        Ok(Action::settled())
    }
}

fn stored_versions(store: &Store, name: &str) -> (i64, i64) {
    let id = |what: &str| {
        let sql = format!("SELECT {what} FROM objects WHERE name = '{name}'");
        beehive_e2e::scalar(store, &sql, &[])
    };
    (id("spec_version"), id("status_version"))
}

fn options(spec: u32, fail: &Arc<AtomicBool>) -> ControllerOptions {
    ControllerOptions::new().migrator(ClusterMigrator {
        spec,
        fail: fail.clone(),
    })
}

/// A host whose `Reporter` reads clusters through a migrator at spec
/// version `spec`; the flag makes the converter fail.
async fn migrating_host(store: &Store, spec: u32) -> (Host, Arc<AtomicBool>) {
    let host = Host::new(store, HostOptions::new()).unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let options = options(spec, &fail);
    host.register(cluster(), Reporter, options).await.unwrap();
    (host, fail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_documents_are_upgraded_on_read_and_restamped_when_written() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, cluster());
    // Written before the kind was versioned.
    let old = Json::parse(r#"{"size":3}"#).unwrap();
    clusters
        .create("prod", old, CreateOptions::new())
        .await
        .unwrap();
    assert_eq!(stored_versions(&store, "prod"), (0, 0));

    let (host, _fail) = migrating_host(&store, 1).await;
    let read = clusters.get_by_name("prod").unwrap();
    assert_eq!(read.spec.as_str(), r#"{"replicas":3}"#, "upgraded on read");
    assert_eq!(
        stored_versions(&store, "prod"),
        (0, 0),
        "never by a bulk rewrite"
    );

    let running = host.start().await.unwrap();
    eventually("the pass sees the new shape and settles", || {
        clusters
            .get_by_name("prod")
            .is_ok_and(|o| o.meta.is_observed())
    })
    .await;
    assert_eq!(
        stored_versions(&store, "prod"),
        (0, 1),
        "the status write stamps the status"
    );

    // The stored spec, converted, written back: nothing changes, so
    // nothing is written (no new generation, no pass for nothing).
    let generation = clusters.get_by_name("prod").unwrap().meta.generation;
    let same = Json::parse(r#"{"replicas":3}"#).unwrap();
    let unchanged = clusters.update_by_name("prod", same).await.unwrap();
    assert_eq!(unchanged.meta.generation, generation);
    assert_eq!(stored_versions(&store, "prod"), (0, 1), "nothing written");
    let changed = Json::parse(r#"{"replicas":4}"#).unwrap();
    clusters.update_by_name("prod", changed).await.unwrap();
    assert_eq!(
        stored_versions(&store, "prod"),
        (1, 1),
        "a spec write stamps the spec"
    );
    let registration = &store.registrations().unwrap()[0];
    assert_eq!(
        (registration.spec_version, registration.status_version),
        (1, 1)
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_bytes_written_at_a_newer_version_are_restamped_with_a_new_generation() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, cluster());
    let spec = Json::parse(r#"{"replicas":3}"#).unwrap();
    let created = clusters
        .create("prod", spec.clone(), CreateOptions::new())
        .await
        .unwrap();
    assert_eq!(stored_versions(&store, "prod").0, 0);

    let (_host, _fail) = migrating_host(&store, 1).await;
    // The same bytes, now meaning a version-1 spec.
    let written = clusters
        .update(created.meta.id, spec.clone())
        .await
        .unwrap();
    assert_eq!(written.meta.generation, 2, "a new generation");
    assert_eq!(stored_versions(&store, "prod").0, 1, "re-stamped");
    let again = clusters.update(created.meta.id, spec).await.unwrap();
    assert_eq!(again.meta.generation, 2, "and then nothing to write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_from_a_newer_build_or_a_failing_converter_are_not_misread() {
    let store = beehive_e2e::store();
    let (host, fail) = migrating_host(&store, 2).await;
    let clusters = RawClient::new(&store, cluster());
    let spec = Json::parse(r#"{"replicas":1}"#).unwrap();
    clusters
        .create("new", spec.clone(), CreateOptions::new())
        .await
        .unwrap();
    assert_eq!(stored_versions(&store, "new").0, 2);

    // An older build (spec version 1) must not read what version 2 wrote.
    host.register(cluster(), Reporter, options(1, &fail))
        .await
        .unwrap();
    let error = clusters.get_by_name("new").unwrap_err();
    assert!(matches!(error, Error::Migration { .. }), "{error}");
    assert!(error.to_string().contains("newer build"), "{error}");
    clusters
        .create("old", spec, CreateOptions::new())
        .await
        .unwrap();
    let listed: Vec<String> = clusters
        .list()
        .unwrap()
        .into_iter()
        .map(|o| o.meta.name)
        .collect();
    assert_eq!(listed, ["old"], "a list skips what it cannot read");

    // A converter that fails is a read error too.
    let before = Json::parse(r#"{"size":2}"#).unwrap();
    host.unregister(&cluster()).await.unwrap();
    clusters
        .create("unversioned", before, CreateOptions::new())
        .await
        .unwrap();
    host.register(cluster(), Reporter, options(1, &fail))
        .await
        .unwrap();
    fail.store(true, Ordering::SeqCst);
    let error = clusters.get_by_name("unversioned").unwrap_err();
    assert!(
        error.to_string().contains("the converter gave up"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_without_the_migrator_never_lowers_a_stored_version() {
    let store = beehive_e2e::store();
    let (host, _fail) = migrating_host(&store, 2).await;
    let spec = Json::parse(r#"{"replicas":1}"#).unwrap();
    let created = RawClient::new(&store, cluster())
        .create("prod", spec.clone(), CreateOptions::new())
        .await
        .unwrap();
    beehive::engine::AdminClient::new(&store, cluster())
        .update_status(created.meta.id, &serde_json::json!({"ready": 1}))
        .await
        .unwrap();
    assert_eq!(stored_versions(&store, "prod"), (2, 1));

    // A second opening of the file has no migrator, but the registration
    // records version 2: its writes are stamped so, as the plugin reads them.
    let recorded = store.reopen().unwrap();
    let changed = Json::parse(r#"{"replicas":4}"#).unwrap();
    RawClient::new(&recorded, cluster())
        .update_by_name("prod", changed)
        .await
        .unwrap();
    assert_eq!(stored_versions(&store, "prod"), (2, 1));
    let spec = Json::parse(r#"{"replicas":4}"#).unwrap();

    // Once nothing records a version for the kind, a writer knows none:
    // version 0 for both.
    host.unregister(&cluster()).await.unwrap();
    let other = store.reopen().unwrap();
    let offline = RawClient::new(&other, cluster());
    let rv = other.resource_version();
    let same = offline.update_by_name("prod", spec).await.unwrap();
    assert_eq!(same.meta.generation, 2, "identical bytes write nothing");
    assert_eq!(stored_versions(&store, "prod"), (2, 1));
    let changed = Json::parse(r#"{"replicas":5}"#).unwrap();
    let error = offline.update_by_name("prod", changed).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::SchemaVersionDowngrade {
                stored: 2,
                writer: 0,
                ..
            }
        ),
        "{error}"
    );
    let admin = beehive::engine::AdminClient::new(&other, cluster());
    admin
        .update_status(created.meta.id, &serde_json::json!({"ready": 1}))
        .await
        .unwrap();
    let error = admin
        .update_status(created.meta.id, &serde_json::json!({"ready": 9}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::SchemaVersionDowngrade {
                stored: 1,
                writer: 0,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(other.resource_version(), rv, "nothing was written");
    assert_eq!(stored_versions(&store, "prod"), (2, 1));
}
