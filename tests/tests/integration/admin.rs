//! The admin client: pass-only writes from outside a pass.

use beehive::{
    Condition, ConditionStatus, ControllerOptions, CreateOptions, Error, EventSpec, GroupKind,
    Host, HostOptions, Json, RawClient, client::Loads, engine::AdminClient, event::EventFilter,
};
use beehive_e2e::{PassCounter, create_finalized};

fn kind() -> GroupKind {
    GroupKind::new("acme.com", "Cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_writes_land_without_a_pass_or_a_running_host() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let empty = || Json::parse("{}").unwrap();
    let a = clusters
        .create("a", empty(), CreateOptions::new())
        .await
        .unwrap();
    let b = clusters
        .create("b", empty(), CreateOptions::new())
        .await
        .unwrap();
    let admin = AdminClient::new(&store, kind());

    admin
        .update_status(a.meta.id, &serde_json::json!({"ready": 3}))
        .await
        .unwrap();
    admin
        .set_condition(
            a.meta.id,
            Condition::new("Ready", ConditionStatus::True).reason("Fixture"),
        )
        .await
        .unwrap();
    admin
        .add_event(
            a.meta.id,
            EventSpec::normal("Seeded").message("by a fixture"),
        )
        .await
        .unwrap();
    admin.add_dependency(a.meta.id, b.meta.id).await.unwrap();

    let read = clusters.get(a.meta.id).unwrap();
    assert_eq!(read.status.unwrap().as_str(), r#"{"ready":3}"#);
    assert_eq!(read.meta.conditions[0].reason, "Fixture");
    assert!(!read.meta.is_observed(), "the handshake stays the host's");
    let events = clusters
        .list_events(a.meta.id, &EventFilter::all())
        .unwrap();
    assert_eq!(events[0].reason, "Seeded");
    let loaded = clusters
        .get_with(a.meta.id, Loads::none().events())
        .unwrap();
    assert_eq!(
        loaded.events().unwrap()[0].reason,
        "Seeded",
        "loaded eagerly"
    );
    let bare = clusters.get(a.meta.id).unwrap();
    assert!(matches!(bare.events(), Err(Error::NotLoaded("events"))));
    assert_eq!(
        clusters.list_dependencies(a.meta.id).unwrap()[0].id,
        b.meta.id
    );

    admin.delete_dependency(a.meta.id, b.meta.id).await.unwrap();
    admin.delete_condition(a.meta.id, "Ready").await.unwrap();
    assert!(clusters.list_dependencies(a.meta.id).unwrap().is_empty());
    assert!(clusters.get(a.meta.id).unwrap().meta.conditions.is_empty());

    let other = RawClient::new(&store, GroupKind::new("acme.com", "Other"))
        .create("x", empty(), CreateOptions::new())
        .await
        .unwrap();
    let error = admin
        .update_status(other.meta.id, &serde_json::json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::WrongKind { .. }), "{error}");
    let error = admin
        .update_status(424_242, &serde_json::json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_finalizer_can_be_cleared() {
    let store = beehive_e2e::store();
    // Finalizers need a registered controller; the host never starts.
    let host = Host::new(&store, HostOptions::new()).unwrap();
    host.register(
        kind(),
        PassCounter::default(),
        ControllerOptions::new().finalizers(["acme.com/wedge"]),
    )
    .await
    .unwrap();
    let clusters = RawClient::new(&store, kind());
    let wedged = create_finalized(&clusters, "wedged", &["acme.com/wedge"])
        .await
        .unwrap();
    clusters.delete(wedged.meta.id).await.unwrap();
    AdminClient::new(&store, kind())
        .delete_finalizer(wedged.meta.id, "acme.com/wedge")
        .await
        .unwrap();
    let read = clusters.get(wedged.meta.id).unwrap();
    assert!(read.meta.finalizers.is_empty());
    assert!(
        read.meta.deletion_requested_at.is_some(),
        "collected by the next sweep"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_status_writes_nothing() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let a = clusters
        .create("a", Json::parse("{}").unwrap(), CreateOptions::new())
        .await
        .unwrap();
    let admin = AdminClient::new(&store, kind());
    let status = serde_json::json!({"ready": 3});
    admin.update_status(a.meta.id, &status).await.unwrap();
    let written = store.resource_version();
    admin.update_status(a.meta.id, &status).await.unwrap();
    assert_eq!(store.resource_version(), written, "no version moved");
    let read = clusters.get(a.meta.id).unwrap();
    assert_eq!(read.meta.resource_version, written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_for_another_kind_or_a_missing_id_is_refused() {
    let store = beehive_e2e::store();
    let other = GroupKind::new("acme.com", "Database");
    let db = RawClient::new(&store, other.clone())
        .create("db", Json::parse("{}").unwrap(), CreateOptions::new())
        .await
        .unwrap();
    let admin = AdminClient::new(&store, kind());
    let error = admin
        .add_event(db.meta.id, EventSpec::normal("Probed"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::WrongKind { .. }), "{error}");
    let error = admin
        .add_event(db.meta.id + 100, EventSpec::normal("Probed"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    let timeline = RawClient::new(&store, other)
        .list_events(db.meta.id, &EventFilter::all())
        .unwrap();
    assert!(timeline.is_empty(), "nothing landed on the other kind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_warnings_of_every_object_come_first() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let admin = AdminClient::new(&store, kind());
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let created = clusters
            .create(name, Json::parse("{}").unwrap(), CreateOptions::new())
            .await
            .unwrap();
        ids.push(created.meta.id);
    }
    for (id, spec) in [
        (ids[0], EventSpec::warning("Down").message("first")),
        (ids[1], EventSpec::normal("Up")),
        (ids[1], EventSpec::warning("Refused").message("second")),
        (ids[0], EventSpec::normal("Fine")),
    ] {
        admin.add_event(id, spec).await.unwrap();
    }
    let warnings = store.recent_warnings(10).unwrap();
    let seen: Vec<(i64, &str)> = warnings
        .iter()
        .map(|(group_kind, _, w)| {
            assert_eq!(*group_kind, kind());
            (w.object_id, w.reason.as_str())
        })
        .collect();
    assert_eq!(seen, [(ids[1], "Refused"), (ids[0], "Down")]);
    assert_eq!(store.recent_warnings(1).unwrap().len(), 1);
}
