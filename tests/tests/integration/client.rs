//! The untyped and typed clients through the public API, on a real file store.

use beehive::{
    Client, CreateOptions, Error, GroupKind, Json, RawClient, RawObject, Store, client::Loads,
    object::generate_name,
};
use beehive_e2e::{create, create_finalized, spec, update};
use serde::{Deserialize, Serialize};

fn clusters(store: &Store) -> RawClient {
    RawClient::new(store, GroupKind::new("acme.com", "Cluster"))
}

/// Counts write-log entries by reading the table directly.
fn log_entries(store: &Store) -> i64 {
    beehive_e2e::scalar(store, "SELECT COUNT(*) FROM object_writes", &[])
}

/// A store holding one live row (`live`) and one deletion-pending row (`pending`).
async fn store_with_live_and_pending() -> (Store, RawClient, RawObject, RawObject) {
    let store = beehive_e2e::store();
    let client = clusters(&store);
    let live = create(&client, "live", r#"{"v":1}"#).await;
    let pending = create(&client, "pending", r#"{"v":1}"#).await;
    client.delete(pending.meta.id).await.unwrap();
    let pending = client.get(pending.meta.id).unwrap();
    assert!(pending.meta.deletion_requested_at.is_some());
    (store, client, live, pending)
}

#[tokio::test]
async fn create_fills_an_empty_name_and_refuses_a_held_one() {
    let (_store, client, _live, _pending) = store_with_live_and_pending().await;
    let created = create(&client, "fresh", r#"{"v":1}"#).await;
    assert_eq!(created.meta.generation, 1);
    assert_eq!(created.meta.observed_generation, None);
    for held in ["live", "pending"] {
        let err = client
            .create(held, spec(r#"{"v":2}"#), CreateOptions::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NameTaken { .. }), "{held}: {err}");
    }
}

#[tokio::test]
async fn get_or_create_creates_once_and_returns_found_rows_untouched() {
    let (_store, client, live, pending) = store_with_live_and_pending().await;

    let (fresh, created) = client
        .get_or_create("fresh", spec(r#"{"v":1}"#), CreateOptions::new())
        .await
        .unwrap();
    assert!(created);
    assert_eq!(fresh.meta.name, "fresh");

    let (found, created) = client
        .get_or_create(
            "live",
            spec(r#"{"v":9}"#),
            CreateOptions::new().owner(fresh.meta.id),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(found, live, "the found row is returned exactly as stored");
    assert_eq!(
        client.get_owner(live.meta.id).unwrap(),
        None,
        "options ignored"
    );

    let (found, created) = client
        .get_or_create("pending", spec(r#"{"v":9}"#), CreateOptions::new())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(found, pending);
    assert!(found.meta.deletion_requested_at.is_some());
}

#[tokio::test]
async fn update_by_name_writes_live_rows_only() {
    let (_store, client, live, _pending) = store_with_live_and_pending().await;
    let err = client
        .update_by_name("absent", spec(r#"{"v":2}"#))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    let updated = client
        .update_by_name("live", spec(r#"{"v":2}"#))
        .await
        .unwrap();
    assert_eq!(updated.meta.id, live.meta.id);
    assert_eq!(updated.meta.generation, 2);
    assert_eq!(updated.spec, spec(r#"{"v":2}"#));

    let err = client
        .update_by_name("pending", spec(r#"{"v":2}"#))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DeletionPending { .. }), "{err}");
}

#[tokio::test]
async fn create_or_update_upserts_but_refuses_a_deleting_row() {
    let (_store, client, live, pending) = store_with_live_and_pending().await;
    let (fresh, created) = client
        .create_or_update("fresh", spec(r#"{"v":1}"#), CreateOptions::new())
        .await
        .unwrap();
    assert!(created);
    assert_eq!(fresh.meta.generation, 1);

    let (updated, created) = client
        .create_or_update("live", spec(r#"{"v":3}"#), CreateOptions::new())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(updated.meta.id, live.meta.id);
    assert_eq!(updated.meta.generation, 2);

    let err = client
        .create_or_update("pending", spec(r#"{"v":3}"#), CreateOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DeletionPending { .. }), "{err}");
    let still = client.get(pending.meta.id).unwrap();
    assert_eq!(still.spec, pending.spec);
}

#[tokio::test]
async fn delete_by_name_is_idempotent_and_only_marks() {
    let (store, client, live, pending) = store_with_live_and_pending().await;

    let version = store.resource_version();
    client.delete_by_name("absent").await.unwrap();
    client.delete_by_name("pending").await.unwrap();
    assert_eq!(
        store.resource_version(),
        version,
        "no write for either no-op"
    );
    let still = client.get(pending.meta.id).unwrap();
    assert_eq!(still, pending);

    client.delete_by_name("live").await.unwrap();
    let marked = client.get(live.meta.id).unwrap();
    assert!(
        marked.meta.deletion_requested_at.is_some(),
        "still readable, marked"
    );
    assert!(marked.meta.resource_version > live.meta.resource_version);
    assert_eq!(store.resource_version(), version + 1);
}

#[tokio::test]
async fn id_keyed_calls_act_on_one_incarnation_of_one_kind() {
    let (store, client, live, pending) = store_with_live_and_pending().await;
    let other = RawClient::new(&store, GroupKind::core("Other"));

    let err = client.update(9999, spec("{}")).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err = client.delete(9999).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    let err = other.update(live.meta.id, spec("{}")).await.unwrap_err();
    assert!(matches!(err, Error::WrongKind { .. }), "{err}");
    let err = other.delete(live.meta.id).await.unwrap_err();
    assert!(matches!(err, Error::WrongKind { .. }), "{err}");
    let err = other.get(live.meta.id).unwrap_err();
    assert!(
        matches!(err, Error::NotFound { .. }),
        "reads are kind-scoped: {err}"
    );
    let err = other.get_by_name("live").unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    let err = client
        .update(pending.meta.id, spec("{}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DeletionPending { .. }), "{err}");
    client.delete(pending.meta.id).await.unwrap();

    assert_eq!(client.list().unwrap().len(), 2);
    assert!(other.list().unwrap().is_empty());
}

#[tokio::test]
async fn the_empty_name_is_refused_by_every_call() {
    let store = beehive_e2e::store();
    let client = clusters(&store);
    let results = [
        client
            .create("", spec("{}"), CreateOptions::new())
            .await
            .map(drop),
        client
            .get_or_create("", spec("{}"), CreateOptions::new())
            .await
            .map(drop),
        client
            .create_or_update("", spec("{}"), CreateOptions::new())
            .await
            .map(drop),
        client.update_by_name("", spec("{}")).await.map(drop),
        client.get_by_name("").map(drop),
        client.delete_by_name("").await,
    ];
    for (call, result) in results.into_iter().enumerate() {
        assert!(
            matches!(result, Err(Error::InvalidName(_))),
            "call {call}: {result:?}"
        );
    }
    assert_eq!(store.resource_version(), 0);
}

#[tokio::test]
async fn names_kinds_and_documents_outside_the_policy_are_refused_and_nothing_is_written() {
    use beehive::naming::{MAX_DOCUMENT_BYTES, MAX_NAME_BYTES};
    let store = beehive_e2e::store();
    let client = clusters(&store);
    for name in ["a\nb", "tab\there", &"x".repeat(MAX_NAME_BYTES + 1)] {
        let result = client.create(name, spec("{}"), CreateOptions::new()).await;
        assert!(
            matches!(result, Err(Error::InvalidName(_))),
            "{name:?}: {result:?}"
        );
    }
    let forged = RawClient::new(&store, GroupKind::new("acme.com", "Bad\nKind"));
    let result = forged.create("a", spec("{}"), CreateOptions::new()).await;
    assert!(matches!(result, Err(Error::InvalidName(_))), "{result:?}");

    let huge = format!(r#"{{"blob":"{}"}}"#, "x".repeat(MAX_DOCUMENT_BYTES));
    let result = Json::parse(&huge);
    assert!(
        matches!(result, Err(Error::DocumentTooLarge(_))),
        "{result:?}"
    );
    let way_too_huge = " ".repeat(5 * MAX_DOCUMENT_BYTES);
    assert!(matches!(
        Json::parse(&way_too_huge),
        Err(Error::DocumentTooLarge(_))
    ));
    let object = create(&client, "fits", "{}").await;
    let admin = beehive::engine::AdminClient::new(&store, GroupKind::new("acme.com", "Cluster"));
    let status = serde_json::json!({ "blob": "x".repeat(MAX_DOCUMENT_BYTES) });
    let result = admin.update_status(object.meta.id, &status).await;
    assert!(
        matches!(result, Err(Error::DocumentTooLarge(_))),
        "{result:?}"
    );
    let fits = client.get(object.meta.id).unwrap();
    assert!(fits.status.is_none(), "nothing was written");
}

/// One nesting limit for every document the embedding API writes: a spec
/// at create and at update, a status, an event's detail.
#[tokio::test]
async fn documents_nested_deeper_than_the_limit_are_refused_and_nothing_is_written() {
    use beehive::naming::MAX_DEPTH;
    let store = beehive_e2e::store();
    let client = clusters(&store);
    // An object whose `a` holds lists, `levels` deep in all.
    let nested = |levels: usize| {
        let value: serde_json::Value = serde_json::from_str(&format!(
            "{{\"a\":{}1{}}}",
            "[".repeat(levels - 1),
            "]".repeat(levels - 1)
        ))
        .unwrap();
        value
    };
    fn deep<T>(result: &beehive::Result<T>) -> bool {
        let limit = format!("at most {}", beehive::naming::MAX_DEPTH);
        matches!(result, Err(Error::InvalidDocument(m)) if m.contains(&limit))
    }
    let at_limit = Json::from_value(&nested(MAX_DEPTH));
    let created = client
        .create("deepest", at_limit, CreateOptions::new())
        .await;
    assert!(created.is_ok(), "{created:?}");
    let result = client
        .create(
            "deeper",
            Json::from_value(&nested(MAX_DEPTH + 1)),
            CreateOptions::new(),
        )
        .await;
    assert!(deep(&result), "{result:?}");
    let object = create(&client, "fits", "{}").await;
    let result = client
        .update(object.meta.id, Json::from_value(&nested(MAX_DEPTH + 1)))
        .await;
    assert!(deep(&result), "{result:?}");
    let admin = beehive::engine::AdminClient::new(&store, GroupKind::new("acme.com", "Cluster"));
    let result = admin
        .update_status(object.meta.id, &nested(MAX_DEPTH + 1))
        .await;
    assert!(deep(&result), "{result:?}");
    let fits = client.get(object.meta.id).unwrap();
    assert_eq!(fits.meta.generation, 1, "nothing was written");
    assert!(fits.status.is_none(), "nothing was written");
}

#[tokio::test]
async fn a_spec_must_be_a_json_object() {
    let store = beehive_e2e::store();
    let client = clusters(&store);
    let err = client
        .create("a", spec("[1,2]"), CreateOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidDocument(_)), "{err}");
    let created = create(&client, "a", "{}").await;
    let err = client.update(created.meta.id, spec("3")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidDocument(_)), "{err}");
}

#[tokio::test]
async fn a_write_of_the_same_content_moves_nothing() {
    let store = beehive_e2e::store();
    let client = clusters(&store);
    let created = create(&client, "a", r#"{"b":[1,2],"a":{"y":1,"x":2}}"#).await;
    let version = store.resource_version();
    let entries = log_entries(&store);

    // The same content, keys in another order and other whitespace.
    let same = spec(r#"{ "a": {"x": 2, "y": 1}, "b": [1, 2] }"#);
    let by_id = client.update(created.meta.id, same.clone()).await.unwrap();
    let by_name = client.update_by_name("a", same.clone()).await.unwrap();
    let (upserted, _) = client
        .create_or_update("a", same, CreateOptions::new())
        .await
        .unwrap();
    for object in [&by_id, &by_name, &upserted] {
        assert_eq!(object.meta.generation, 1);
        assert_eq!(object.meta.resource_version, created.meta.resource_version);
    }
    assert_eq!(store.resource_version(), version);
    assert_eq!(log_entries(&store), entries);

    let changed = update(&client, created.meta.id, r#"{"a":{"x":3}}"#).await;
    assert_eq!(changed.meta.generation, 2);
    assert_eq!(store.resource_version(), version + 1);
    assert_eq!(log_entries(&store), entries + 1);
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct GoodSpec {
    replicas: u32,
}

/// Serialises a field under one name and reads it under another.
#[derive(Serialize, Deserialize, Debug)]
struct LopsidedSpec {
    #[serde(rename(serialize = "written", deserialize = "read"))]
    value: u32,
}

#[tokio::test]
async fn a_typed_write_that_does_not_round_trip_commits_nothing() {
    let store = beehive_e2e::store();
    let gk = GroupKind::core("Thing");
    let good: Client<GoodSpec, ()> = Client::new(&store, gk.clone());
    let lopsided: Client<LopsidedSpec, ()> = Client::new(&store, gk.clone());

    let err = lopsided
        .create("new", &LopsidedSpec { value: 1 }, CreateOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    assert!(good.raw().get_by_name("new").is_err(), "no row");

    let created = good
        .create("a", &GoodSpec { replicas: 1 }, CreateOptions::new())
        .await
        .unwrap();
    let version = store.resource_version();
    let err = lopsided
        .update(created.id(), &LopsidedSpec { value: 2 })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    let err = lopsided
        .update_by_name("a", &LopsidedSpec { value: 2 })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    let read = good.get(created.id()).unwrap();
    assert_eq!(
        read.spec,
        GoodSpec { replicas: 1 },
        "the old spec is intact"
    );
    assert_eq!(read.meta.generation, 1);
    assert_eq!(store.resource_version(), version, "nothing committed");
}

#[tokio::test]
async fn typed_clients_round_trip_spec_and_status_types() {
    let store = beehive_e2e::store();
    let client: Client<GoodSpec, serde_json::Value> = Client::new(&store, GroupKind::core("Thing"));
    let (created, was_created) = client
        .get_or_create("a", &GoodSpec { replicas: 3 }, CreateOptions::new())
        .await
        .unwrap();
    assert!(was_created);
    assert_eq!(created.spec, GoodSpec { replicas: 3 });
    assert_eq!(created.status, None);
    let listed = client.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name(), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_get_or_create_calls_share_one_row() {
    let store = beehive_e2e::store();
    for round in 0..50 {
        let name = format!("race-{round}");
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let client = clusters(&store);
                let name = name.clone();
                tokio::spawn(async move {
                    client
                        .get_or_create(&name, spec("{}"), CreateOptions::new())
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut ids = Vec::new();
        let mut creations = 0;
        for task in tasks {
            let (object, created) = task.await.unwrap();
            ids.push(object.meta.id);
            creations += usize::from(created);
        }
        assert_eq!(ids[0], ids[1], "both callers get the same row");
        assert_eq!(creations, 1, "exactly one inserted");
    }
    assert_eq!(clusters(&store).list().unwrap().len(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_each_get_their_own_answer() {
    let store = beehive_e2e::store();
    let tasks: Vec<_> = (0..8)
        .map(|worker| {
            let client = clusters(&store);
            tokio::spawn(async move {
                let mut results = Vec::new();
                for i in 0..50 {
                    // Every worker also tries one name that worker 0 takes.
                    let name = if i == 25 {
                        "shared".to_string()
                    } else {
                        format!("w{worker}-{i}")
                    };
                    results.push(client.create(&name, spec("{}"), CreateOptions::new()).await);
                }
                results
            })
        })
        .collect();
    let mut created = 0;
    let mut taken = 0;
    for task in tasks {
        for result in task.await.unwrap() {
            match result {
                Ok(_) => created += 1,
                Err(Error::NameTaken { .. }) => taken += 1,
                Err(other) => panic!("unexpected {other}"),
            }
        }
    }
    assert_eq!(
        taken, 7,
        "one caller wins \"shared\", the other seven are refused"
    );
    assert_eq!(created, 8 * 49 + 1);
    assert_eq!(clusters(&store).list().unwrap().len(), created);
}

#[tokio::test]
async fn owner_edges_are_written_with_the_create_and_read_both_ways() {
    let store = beehive_e2e::store();
    let owners = RawClient::new(&store, GroupKind::core("Project"));
    let children = clusters(&store);
    let project = create(&owners, "p", "{}").await;
    let mut child_ids = Vec::new();
    for name in ["c1", "c2"] {
        let child = children
            .create(
                name,
                spec("{}"),
                CreateOptions::new().owner(project.meta.id),
            )
            .await
            .unwrap();
        child_ids.push(child.meta.id);
    }
    let stray = create(&children, "stray", "{}").await;

    let owner = children.get_owner(child_ids[0]).unwrap().unwrap();
    assert_eq!(owner.id, project.meta.id);
    assert_eq!(owner.group_kind, GroupKind::core("Project"));
    assert_eq!(children.get_owner(stray.meta.id).unwrap(), None);

    let owned: Vec<_> = owners
        .list_owned(project.meta.id)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(owned, child_ids);
    let owned_objects = children.list_owned_objects(project.meta.id).unwrap();
    assert_eq!(owned_objects.len(), 2);
    assert_eq!(owned_objects[0].meta.name, "c1");
    assert!(
        owners
            .list_owned_objects(project.meta.id)
            .unwrap()
            .is_empty()
    );

    let err = children
        .create("orphan", spec("{}"), CreateOptions::new().owner(424242))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOption(_)), "{err}");
    assert!(children.get_by_name("orphan").is_err());
}

#[tokio::test]
async fn relations_are_loaded_only_when_asked_for() {
    let store = beehive_e2e::store();
    let owners = RawClient::new(&store, GroupKind::core("Project"));
    let children = clusters(&store);
    let project = create(&owners, "p", "{}").await;
    children
        .create("c", spec("{}"), CreateOptions::new().owner(project.meta.id))
        .await
        .unwrap();

    let bare = children.get_by_name("c").unwrap();
    assert!(matches!(bare.owner(), Err(Error::NotLoaded("owner"))));
    assert!(matches!(bare.dependencies(), Err(Error::NotLoaded(_))));
    assert!(matches!(bare.dependents(), Err(Error::NotLoaded(_))));
    assert!(matches!(bare.owned(), Err(Error::NotLoaded(_))));

    let loaded = children.get_by_name_with("c", Loads::all()).unwrap();
    assert_eq!(loaded.owner().unwrap().unwrap().id, project.meta.id);
    assert!(
        loaded.dependencies().unwrap().is_empty(),
        "loaded and empty"
    );
    assert!(loaded.owned().unwrap().is_empty());

    let listed = owners.list_with(Loads::none().owned()).unwrap();
    assert_eq!(listed[0].owned().unwrap().len(), 1);
    assert!(matches!(listed[0].owner(), Err(Error::NotLoaded(_))));

    let typed: Client<serde_json::Value, serde_json::Value> =
        Client::new(&store, GroupKind::core("Project"));
    let object = typed
        .get_with(project.meta.id, Loads::none().owned())
        .unwrap();
    assert_eq!(object.owned().unwrap().len(), 1);
    assert!(matches!(object.owner(), Err(Error::NotLoaded(_))));
}

#[tokio::test]
async fn on_create_runs_after_commit_and_only_for_an_insert() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let store = beehive_e2e::store();
    let client = clusters(&store);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = |calls: &Arc<AtomicUsize>| {
        let calls = calls.clone();
        CreateOptions::new().on_create(move || {
            calls.fetch_add(1, Ordering::SeqCst);
        })
    };
    client
        .create("a", spec("{}"), counter(&calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    client
        .get_or_create("a", spec("{}"), counter(&calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "found, not inserted");
    client
        .create("a", spec("{}"), counter(&calls))
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "rolled back, never run");
    client
        .get_or_create("b", spec("{}"), counter(&calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_reopened_store_holds_everything_and_keeps_counting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("beehive.db");
    let (last_id, last_version) = {
        let store = Store::open(&path).unwrap();
        let client = clusters(&store);
        let mut last = None;
        for i in 0..10 {
            last = Some(create(&client, &format!("o{i}"), r#"{"i":1}"#).await);
        }
        let last = last.unwrap();
        client.delete(last.meta.id).await.unwrap();
        (last.meta.id, store.resource_version())
    };

    let store = Store::open(&path).unwrap();
    assert_eq!(store.resource_version(), last_version);
    let client = clusters(&store);
    let all = client.list().unwrap();
    assert_eq!(all.len(), 10);
    assert!(all[9].meta.deletion_requested_at.is_some());
    let next = client
        .create(&generate_name("o-"), spec("{}"), CreateOptions::new())
        .await
        .unwrap();
    assert!(next.meta.id > last_id);
    assert!(next.meta.resource_version > last_version);
}

#[tokio::test]
async fn finalizers_are_stored_and_an_empty_one_is_refused() {
    let store = beehive_e2e::store();
    let client = clusters(&store);
    // Only a kind with a controller may carry finalizers: nothing else clears them.
    let refused = create_finalized(&client, "early", &["x/y"])
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::InvalidOption(_)), "{refused}");
    let host = beehive::Host::new(&store, beehive::HostOptions::new()).unwrap();
    host.register(
        GroupKind::new("acme.com", "Cluster"),
        beehive_e2e::PassCounter::default(),
        beehive::ControllerOptions::new(),
    )
    .await
    .unwrap();
    let created = create_finalized(&client, "a", &["x/y", "x/y", "z"])
        .await
        .unwrap();
    assert_eq!(created.meta.finalizers, ["x/y", "z"]);
    let read = client.get(created.meta.id).unwrap();
    assert_eq!(read.meta.finalizers, ["x/y", "z"]);
    let err = create_finalized(&client, "b", &[""]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidOption(_)), "{err}");
}

#[tokio::test]
async fn a_recorded_registration_allows_finalizers_from_another_process_until_unregistered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let host_store = Store::open(&path).unwrap();
    let host = beehive::Host::new(&host_store, beehive::HostOptions::new()).unwrap();
    let kind = GroupKind::new("acme.com", "Cluster");
    host.register(
        kind.clone(),
        beehive_e2e::PassCounter::default(),
        beehive::ControllerOptions::new(),
    )
    .await
    .unwrap();
    // Another open of the file, as the CLI on a stopped host would be.
    let elsewhere = clusters(&Store::open(&path).unwrap());
    let with_finalizer = || CreateOptions::new().finalizers(["acme.com/cleanup"]);
    elsewhere
        .create("a", spec("{}"), with_finalizer())
        .await
        .unwrap();
    host.unregister(&kind).await.unwrap();
    let refused = elsewhere
        .create("b", spec("{}"), with_finalizer())
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::InvalidOption(_)), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_kept_indexed_and_selected_on_either_backend() {
    use beehive::object::{Labels, Selector};
    let store = beehive_e2e::store();
    let client = clusters(&store);
    let labels = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    for (name, set) in [
        ("a", labels(&[("tier", "web")])),
        ("b", labels(&[("tier", "db"), ("team", "x")])),
        ("c", Labels::new()),
    ] {
        client
            .create(name, spec("{}"), CreateOptions::new().labels(set))
            .await
            .unwrap();
    }
    // A create that finds the name taken writes no labels.
    let taken = client
        .create(
            "a",
            spec("{}"),
            CreateOptions::new().labels(labels(&[("tier", "x")])),
        )
        .await;
    assert!(matches!(taken, Err(Error::NameTaken { .. })));
    let names = |text: &str| -> Vec<String> {
        let selector = Selector::parse(text).unwrap();
        client
            .list_selected(&selector)
            .unwrap()
            .into_iter()
            .map(|o| o.meta.name)
            .collect()
    };
    assert_eq!(names("tier=web"), ["a"]);
    assert_eq!(names("tier=x"), Vec::<String>::new());
    assert_eq!(names("tier in (web,db)"), ["a", "b"]);
    assert_eq!(names("!tier"), ["c"]);
    assert_eq!(names("team,tier=db"), ["b"]);

    let c = client.get_by_name("c").unwrap();
    let relabeled = client
        .relabel(c.meta.id, |_| {
            Ok([("tier".to_string(), "web".to_string())].into())
        })
        .await
        .unwrap();
    assert_eq!(relabeled.meta.generation, c.meta.generation);
    assert!(relabeled.meta.resource_version > c.meta.resource_version);
    assert_eq!(names("tier=web"), ["a", "c"]);
    // A spec update keeps them; a create-or-update with labels replaces them.
    client.update(c.meta.id, spec(r#"{"v":2}"#)).await.unwrap();
    assert_eq!(names("tier=web"), ["a", "c"]);
    client
        .create_or_update(
            "c",
            spec(r#"{"v":2}"#),
            CreateOptions::new().labels(Labels::new()),
        )
        .await
        .unwrap();
    assert_eq!(names("tier=web"), ["a"]);
    let bad = client
        .relabel(
            c.meta.id,
            |_| Ok([("-x".to_string(), String::new())].into()),
        )
        .await;
    assert!(matches!(bad, Err(Error::InvalidOption(_))), "{bad:?}");
    let index_rows = beehive_e2e::scalar(&store, "SELECT COUNT(*) FROM object_labels", &[]);
    assert_eq!(index_rows, 3, "a: tier; b: tier, team; c: none");
    // The typed client selects the same way.
    let typed: Client<serde_json::Value, serde_json::Value> =
        Client::new(&store, GroupKind::new("acme.com", "Cluster"));
    let picked = typed
        .list_selected(&Selector::parse("team=x").unwrap())
        .unwrap();
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].meta.name, "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_pages_are_bounded_and_page_on_to_every_match() {
    use beehive::object::Selector;
    let store = beehive_e2e::store();
    let client = clusters(&store);
    for i in 0..30 {
        let tier = if i % 3 == 0 { "web" } else { "db" };
        let labels = [("tier".to_string(), tier.to_string())].into();
        client
            .create(
                &format!("c{i:02}"),
                spec("{}"),
                CreateOptions::new().labels(labels),
            )
            .await
            .unwrap();
    }
    // Every page of `selector` at `limit`, as a plugin pages: the names of
    // each, and whether a page came back empty with more to read.
    let pages = |selector: &str, limit: usize| {
        let selector = Selector::parse(selector).unwrap();
        let (mut names, mut empty_with_more, mut after) = (Vec::new(), false, None);
        loop {
            let (page, next) = client.list_selected_page(&selector, after, limit).unwrap();
            assert!(page.len() <= limit);
            empty_with_more |= page.is_empty() && next.is_some();
            names.push(page.into_iter().map(|o| o.meta.name).collect::<Vec<_>>());
            match next {
                Some(id) => after = Some(id),
                None => return (names, empty_with_more),
            }
        }
    };
    let web: Vec<String> = (0..30).step_by(3).map(|i| format!("c{i:02}")).collect();
    // Through the label index, and by scanning the kind (`!=` has no index).
    for selector in ["tier=web", "tier!=db"] {
        let (names, _) = pages(selector, 4);
        assert_eq!(names.concat(), web, "{selector}");
        assert_eq!(
            names[0].len(),
            4,
            "{selector}: full pages while there are more"
        );
    }
    // A selector nothing matches reads a bounded number of candidates per
    // call: short (empty) pages that still say where to go on.
    let (names, empty_with_more) = pages("tier=none,!tier", 1);
    assert!(names.concat().is_empty());
    let (names, empty_with_more_scan) = pages("tier notin (web,db)", 1);
    assert!(names.concat().is_empty());
    assert!(
        !empty_with_more,
        "an index that holds nothing answers at once"
    );
    assert!(
        empty_with_more_scan,
        "a scan of 30 stops after 8 batches of 1"
    );
}
