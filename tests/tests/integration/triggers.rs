//! Trigger channels: addresses from outside the store requeue objects.

use beehive::{ControllerOptions, CreateOptions, GroupKind, Host, HostOptions, Json, RawClient};
use beehive_e2e::{PassCounter, eventually, stop};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_and_names_from_a_channel_requeue_their_objects() {
    let store = beehive_e2e::store();
    let probe = GroupKind::new("test.dev", "Probe");
    let other = RawClient::new(&store, GroupKind::new("test.dev", "Other"));
    let elsewhere = other
        .create("x", Json::parse("{}").unwrap(), CreateOptions::new())
        .await
        .unwrap();

    let host = Host::new(&store, HostOptions::new()).unwrap();
    let counter = PassCounter::default();
    let (ids, id_feed) = tokio::sync::mpsc::channel(8);
    let (names, name_feed) = tokio::sync::mpsc::channel(8);
    let options = ControllerOptions::new()
        .trigger_by_id(id_feed)
        .trigger_by_name(name_feed);
    host.register(probe.clone(), counter.clone(), options)
        .await
        .unwrap();
    // Created before the start: the startup owed pass is its only wake, so
    // every later pass is one a trigger asked for.
    let object = host
        .client(probe)
        .create("edge", Json::parse("{}").unwrap(), CreateOptions::new())
        .await
        .unwrap();
    let running = host.start().await.unwrap();
    let count = || counter.count();
    eventually("the first pass", || count() == 1).await;

    ids.send(object.meta.id).await.unwrap();
    eventually("a pass for the id", || count() == 2).await;
    names.send("edge".to_string()).await.unwrap();
    eventually("a pass for the name", || count() == 3).await;

    // Addresses naming nothing of the kind are skipped, and the feeds go on.
    ids.send(999_999).await.unwrap();
    ids.send(elsewhere.meta.id).await.unwrap();
    names.send(String::new()).await.unwrap();
    names.send("nobody".to_string()).await.unwrap();
    ids.send(object.meta.id).await.unwrap();
    eventually("a pass after the misses", || count() == 4).await;

    drop((ids, names));
    stop(running).await;
    assert_eq!(count(), 4, "nothing else woke it");
}
