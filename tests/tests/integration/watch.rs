//! Watches: a snapshot, then every change above it.

use std::time::Duration;

use beehive::{
    CreateOptions, Error, EventSpec, GroupKind, Host, HostOptions, RawClient, Store,
    client::{ChangeType, EventStream, ObjectChange, WatchOptions},
    engine::AdminClient,
};
use beehive_e2e::{PATIENCE, create, eventually, spec, stop, update};
use futures_util::{Stream, StreamExt};

fn kind() -> GroupKind {
    GroupKind::new("acme.com", "Cluster")
}

/// A host with no controllers whose sweeper collects deleted objects at once.
async fn start_collecting(store: &Store) -> beehive::engine::StopHandle {
    let options = HostOptions::new().gc_interval(Duration::from_millis(20));
    Host::new(store, options).unwrap().start().await.unwrap()
}

/// A cluster, `prod`, whose event timeline a test writes and watches.
struct Timeline {
    store: Store,
    clusters: RawClient,
    prod: beehive::RawObject,
    admin: AdminClient,
}

impl Timeline {
    async fn new() -> Timeline {
        let store = beehive_e2e::store();
        let clusters = RawClient::new(&store, kind());
        let prod = create(&clusters, "prod", "{}").await;
        let admin = AdminClient::new(&store, kind());
        Timeline {
            store,
            clusters,
            prod,
            admin,
        }
    }

    /// Records `event` on `prod`, as its controller would.
    async fn record(&self, event: EventSpec) {
        self.admin
            .add_event(self.prod.meta.id, event)
            .await
            .unwrap();
    }

    fn watch(&self, category: Option<&str>, options: WatchOptions) -> beehive::Result<EventStream> {
        self.clusters
            .watch_events(self.prod.meta.id, category, options)
    }
}

/// The next item of a stream, which must arrive within the patience.
async fn item<T>(
    stream: &mut (impl Stream<Item = beehive::Result<T>> + Unpin),
) -> beehive::Result<T> {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("an item within the patience")
        .expect("the stream is open")
}

/// The error a stream ends with; nothing comes after it.
async fn ending<T: std::fmt::Debug>(
    stream: &mut (impl Stream<Item = beehive::Result<T>> + Unpin),
) -> Error {
    let error = item(stream)
        .await
        .expect_err("the stream ended with an error");
    assert!(stream.next().await.is_none(), "nothing after the error");
    error
}

async fn next(
    changes: &mut (impl Stream<Item = beehive::Result<ObjectChange>> + Unpin),
) -> ObjectChange {
    tokio::time::timeout(PATIENCE, changes.next())
        .await
        .expect("a change within the patience")
        .expect("the stream is open")
        .expect("a change, not an error")
}

/// The next change, which must be `expected` to object `id`.
async fn next_is(
    changes: &mut (impl Stream<Item = beehive::Result<ObjectChange>> + Unpin),
    expected: ChangeType,
    id: beehive::ObjectId,
) -> ObjectChange {
    let change = next(changes).await;
    assert_eq!((change.change, change.id), (expected, id), "{change:?}");
    change
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_watch_sees_creates_updates_deletion_marks_and_collection() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let old = create(&clusters, "old", "{}").await;
    let mut stream = clusters.watch_list(WatchOptions::new()).unwrap();
    assert_eq!(stream.snapshot.len(), 1);
    assert!(stream.resource_version >= old.meta.resource_version);

    // Another kind's writes never show up.
    RawClient::new(&store, GroupKind::new("acme.com", "Other"))
        .create("noise", spec("{}"), CreateOptions::new())
        .await
        .unwrap();
    let new = create(&clusters, "new", r#"{"n":1}"#).await;
    next_is(&mut stream, ChangeType::Added, new.meta.id).await;

    update(&clusters, old.meta.id, r#"{"n":2}"#).await;
    let change = next_is(&mut stream, ChangeType::Modified, old.meta.id).await;
    assert_eq!(change.object.unwrap().spec.as_str(), r#"{"n":2}"#);

    clusters.delete(new.meta.id).await.unwrap();
    let change = next(&mut stream).await;
    assert_eq!(
        change.change,
        ChangeType::Modified,
        "a deletion request is a change"
    );
    assert!(change.object.unwrap().meta.deletion_requested_at.is_some());

    // The collector removes it: that is the Deleted.
    let running = start_collecting(&store).await;
    let change = next_is(&mut stream, ChangeType::Deleted, new.meta.id).await;
    let last = change
        .object
        .expect("the final state comes with the deletion");
    assert_eq!(last.meta.name, "new");
    assert_eq!(last.spec.as_str(), r#"{"n":1}"#);
    assert!(last.meta.deletion_requested_at.is_some());
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_watch_sees_only_its_object_and_a_resume_picks_up_the_gap() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let a = create(&clusters, "a", "{}").await;
    let b = create(&clusters, "b", "{}").await;
    let mut one = clusters.watch(a.meta.id, WatchOptions::new()).unwrap();
    assert_eq!(one.snapshot.as_ref().map(|o| o.meta.id), Some(a.meta.id));
    let position = one.resource_version;

    update(&clusters, b.meta.id, r#"{"b":1}"#).await;
    update(&clusters, a.meta.id, r#"{"a":1}"#).await;
    next_is(&mut one, ChangeType::Modified, a.meta.id).await;
    drop(one);

    // A reader that saw up to `position` resumes and gets both, as Added.
    let mut resumed = clusters
        .watch_list(WatchOptions::new().resume_from(position))
        .unwrap();
    assert!(resumed.snapshot.is_empty(), "no snapshot when resuming");
    let mut seen = [next(&mut resumed).await, next(&mut resumed).await];
    seen.sort_by_key(|c| c.id);
    assert_eq!(seen[0].id, a.meta.id);
    assert_eq!(seen[1].id, b.meta.id);
    assert!(seen.iter().all(|c| c.change == ChangeType::Added));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_from_elsewhere_or_below_retention_ends_the_stream_with_why() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    for name in ["a", "b", "c"] {
        create(&clusters, name, "{}").await;
    }
    let too_new = clusters.watch_list(WatchOptions::new().resume_from(1_000_000));
    assert!(matches!(too_new, Err(Error::WatchTooNew { .. })));

    // Retention keeps one log entry per kind: resuming from 0 cannot be truthful.
    let options = HostOptions::new()
        .gc_interval(Duration::from_millis(20))
        .write_log_retention(1, Duration::from_secs(3600));
    let host = Host::new(&store, options).unwrap();
    let running = host.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut stream = clusters
            .watch_list(WatchOptions::new().resume_from(0))
            .unwrap();
        let first = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
        if let Ok(Some(Err(error))) = first {
            assert!(matches!(error, Error::WatchTooOld { .. }), "{error:?}");
            assert!(stream.next().await.is_none());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention never trimmed"
        );
    }
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_watch_streams_new_and_extended_runs_until_the_object_goes() {
    let timeline = Timeline::new().await;
    let probe = |reason: &str| EventSpec::warning(reason).category("connection");
    timeline.record(probe("ProbeFailed")).await;

    let mut stream = timeline
        .watch(Some("connection"), WatchOptions::new())
        .unwrap();
    assert_eq!(stream.snapshot.len(), 1);
    let first = stream.snapshot[0].clone();

    timeline.record(probe("ProbeFailed")).await;
    let extended = item(&mut stream).await.unwrap();
    assert_eq!(
        (extended.id, extended.count),
        (first.id, 2),
        "an extend is the same run, grown"
    );

    timeline
        .record(EventSpec::normal("Elsewhere").category("config"))
        .await;
    timeline
        .record(EventSpec::normal("Connected").category("connection"))
        .await;
    let next = item(&mut stream).await.unwrap();
    assert_eq!(next.reason, "Connected", "other timelines are filtered out");

    let Timeline {
        store,
        clusters,
        prod,
        ..
    } = timeline;
    clusters.delete(prod.meta.id).await.unwrap();
    let running = start_collecting(&store).await;
    let end = ending(&mut stream).await;
    assert!(matches!(end, Error::NotFound { .. }), "{end:?}");
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_watch_sees_only_its_children_including_later_ones() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let nodes = RawClient::new(&store, GroupKind::new("acme.com", "Node"));
    let owner = create(&clusters, "prod", "{}").await;
    let owned = || CreateOptions::new().owner(owner.meta.id);
    let first = nodes.create("n1", spec("{}"), owned()).await.unwrap();
    create(&nodes, "stray", "{}").await;

    let mut stream = nodes
        .watch_owned_objects(owner.meta.id, WatchOptions::new())
        .unwrap();
    assert_eq!(stream.snapshot.len(), 1);
    assert_eq!(stream.snapshot[0].meta.id, first.meta.id);

    create(&nodes, "stray-2", "{}").await;
    let second = nodes.create("n2", spec("{}"), owned()).await.unwrap();
    // The strays around it never show up.
    next_is(&mut stream, ChangeType::Added, second.meta.id).await;

    nodes.delete(first.meta.id).await.unwrap();
    next_is(&mut stream, ChangeType::Modified, first.meta.id).await;
    let running = start_collecting(&store).await;
    next_is(&mut stream, ChangeType::Deleted, first.meta.id).await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_watch_resumed_from_a_position_reports_children_collected_since() {
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let nodes = RawClient::new(&store, GroupKind::new("acme.com", "Node"));
    let owner = create(&clusters, "prod", "{}").await;
    let other = create(&clusters, "staging", "{}").await;
    let owned_by = |owner: &beehive::RawObject| CreateOptions::new().owner(owner.meta.id);
    let old_child = nodes
        .create("n1", spec("{}"), owned_by(&owner))
        .await
        .unwrap();
    let position = nodes
        .watch_owned_objects(owner.meta.id, WatchOptions::new())
        .unwrap()
        .resource_version;

    // After the position: a child that comes and goes, another owner's
    // child, and the old child's collection.
    let brief_child = nodes
        .create("n2", spec("{}"), owned_by(&owner))
        .await
        .unwrap();
    let strangers_child = nodes
        .create("s1", spec("{}"), owned_by(&other))
        .await
        .unwrap();
    let mut everything = nodes.watch_list(WatchOptions::new()).unwrap();
    for child in [&old_child, &brief_child, &strangers_child] {
        nodes.delete(child.meta.id).await.unwrap();
    }
    let running = start_collecting(&store).await;
    let mut collected = 0;
    while collected < 3 {
        if next(&mut everything).await.change == ChangeType::Deleted {
            collected += 1;
        }
    }
    stop(running).await;

    let mut resumed = nodes
        .watch_owned_objects(owner.meta.id, WatchOptions::new().resume_from(position))
        .unwrap();
    // In the order the collector took them.
    let mut deleted = Vec::new();
    for _ in 0..2 {
        let change = next(&mut resumed).await;
        assert_eq!(change.change, ChangeType::Deleted, "{change:?}");
        deleted.push(change.id);
    }
    deleted.sort();
    let mut expected = vec![old_child.meta.id, brief_child.meta.id];
    expected.sort();
    assert_eq!(deleted, expected);
    // The other owner's child never shows up: the next change is a new
    // child of this owner.
    let later = nodes
        .create("n3", spec("{}"), owned_by(&owner))
        .await
        .unwrap();
    next_is(&mut resumed, ChangeType::Added, later.meta.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_watch_decodes_and_skips_what_does_not_fit() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Spec {
        replicas: u32,
    }
    #[derive(serde::Serialize, serde::Deserialize, Debug)]
    struct Status {}

    let store = beehive_e2e::store();
    let typed: beehive::Client<Spec, Status> = beehive::Client::new(&store, kind());
    typed
        .create("a", &Spec { replicas: 1 }, CreateOptions::new())
        .await
        .unwrap();
    let mut stream = typed.watch_list(WatchOptions::new()).unwrap();
    assert_eq!(stream.snapshot[0].spec, Spec { replicas: 1 });

    // A spec another writer made that these types cannot read is skipped.
    create(
        &RawClient::new(&store, kind()),
        "odd",
        r#"{"replicas":"many"}"#,
    )
    .await;
    let b = typed
        .create("b", &Spec { replicas: 2 }, CreateOptions::new())
        .await
        .unwrap();
    let change = item(&mut stream).await.unwrap();
    assert_eq!((change.change, change.id), (ChangeType::Added, b.id()));
    assert_eq!(change.object.unwrap().spec, Spec { replicas: 2 });
}

/// A small deterministic generator, so a failing case can be replayed.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// Reads changes until the marker object arrives, and returns them.
async fn until_marker(
    changes: &mut (impl Stream<Item = beehive::Result<ObjectChange>> + Unpin),
) -> Vec<ObjectChange> {
    let mut seen = Vec::new();
    loop {
        let change = next(changes).await;
        let done = change
            .object
            .as_ref()
            .is_some_and(|o| o.meta.name == "zz-marker");
        seen.push(change);
        if done {
            return seen;
        }
    }
}

/// The state a reader rebuilds from changes: id to (spec, deleting).
fn rebuild(into: &mut std::collections::BTreeMap<i64, (String, bool)>, changes: &[ObjectChange]) {
    for change in changes {
        match (&change.change, &change.object) {
            (ChangeType::Deleted, _) => {
                into.remove(&change.id);
            }
            (_, Some(object)) => {
                let deleting = object.meta.deletion_requested_at.is_some();
                into.insert(change.id, (object.spec.as_str().to_string(), deleting));
            }
            (_, None) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_from_any_delivered_position_loses_nothing() {
    for seed in 1..=12u64 {
        let mut random = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let store = beehive_e2e::store();
        let clusters = RawClient::new(&store, kind());
        // More writes than a page, in random order, over names that come
        // and go: some objects are written only late in the log, others
        // early and late.
        for step in 0..400 {
            let name = format!("c{}", step / 20 + random.below(12));
            let body = spec(&format!(r#"{{"step":{step}}}"#));
            match random.below(10) {
                0 => {
                    let _ = clusters.delete_by_name(&name).await;
                }
                _ => {
                    let _ = clusters
                        .create_or_update(&name, body, CreateOptions::new())
                        .await;
                }
            }
        }
        create(&clusters, "zz-marker", "{}").await;
        let mut expected = std::collections::BTreeMap::new();
        for object in clusters.list().unwrap() {
            let deleting = object.meta.deletion_requested_at.is_some();
            expected.insert(object.meta.id, (object.spec.as_str().to_string(), deleting));
        }

        let mut full = clusters
            .watch_list(WatchOptions::new().resume_from(0))
            .unwrap();
        let delivered = until_marker(&mut full).await;
        let positions: Vec<i64> = delivered.iter().map(|c| c.resource_version).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: positions rise along the stream"
        );
        let mut whole = std::collections::BTreeMap::new();
        rebuild(&mut whole, &delivered);
        assert_eq!(whole, expected, "seed {seed}: the whole stream");

        for _ in 0..5 {
            // Resume after handling the first `handled` changes.
            let handled = 1 + random.below(delivered.len() as u64 - 1) as usize;
            let position = delivered[handled - 1].resource_version;
            let mut state = std::collections::BTreeMap::new();
            rebuild(&mut state, &delivered[..handled]);
            let mut resumed = clusters
                .watch_list(WatchOptions::new().resume_from(position))
                .unwrap();
            rebuild(&mut state, &until_marker(&mut resumed).await);
            assert_eq!(
                state, expected,
                "seed {seed}: resumed from {position} after {handled} changes"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_watch_resumed_below_trimmed_runs_or_above_the_head_says_so() {
    let timeline = Timeline::new().await;
    let too_new = timeline.watch(None, WatchOptions::new().resume_from(1_000_000));
    assert!(
        matches!(too_new, Err(Error::WatchTooNew { .. })),
        "{too_new:?}"
    );

    let before = timeline.store.resource_version();
    // Alternating reasons make a new run each time.
    for i in 0..6 {
        let reason = if i % 2 == 0 { "Up" } else { "Down" };
        timeline
            .record(EventSpec::normal(reason).category("probe"))
            .await;
    }
    // Retention keeps two runs per timeline: a resume from before them
    // cannot be truthful.
    let options = HostOptions::new()
        .gc_interval(Duration::from_millis(20))
        .event_retention(2, Duration::ZERO);
    let running = Host::new(&timeline.store, options)
        .unwrap()
        .start()
        .await
        .unwrap();
    let all = beehive::event::EventFilter::all();
    eventually("retention trims the timeline to two runs", || {
        let runs = timeline.clusters.list_events(timeline.prod.meta.id, &all);
        runs.unwrap().len() <= 2
    })
    .await;
    let mut stream = timeline
        .watch(None, WatchOptions::new().resume_from(before))
        .unwrap();
    let end = ending(&mut stream).await;
    assert!(matches!(end, Error::WatchTooOld { .. }), "{end:?}");
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimming_one_timeline_ends_no_watch_of_another() {
    let timeline = Timeline::new().await;
    let before = timeline.store.resource_version();
    let mut live = timeline.watch(Some("a"), WatchOptions::new()).unwrap();
    timeline.record(EventSpec::normal("Up").category("a")).await;
    // Alternating reasons make a new run each time.
    for i in 0..6 {
        let reason = if i % 2 == 0 { "Up" } else { "Down" };
        timeline
            .record(EventSpec::normal(reason).category("b"))
            .await;
    }
    let options = HostOptions::new()
        .gc_interval(Duration::from_millis(20))
        .event_retention(2, Duration::ZERO);
    let running = Host::new(&timeline.store, options)
        .unwrap()
        .start()
        .await
        .unwrap();
    let b = beehive::event::EventFilter::all().category("b");
    eventually("retention trims timeline b to two runs", || {
        let runs = timeline.clusters.list_events(timeline.prod.meta.id, &b);
        runs.unwrap().len() <= 2
    })
    .await;

    // Timeline a lost nothing: a resume from before everything and the live
    // stream both carry on with its runs.
    let mut resumed = timeline
        .watch(Some("a"), WatchOptions::new().resume_from(before))
        .unwrap();
    assert_eq!(item(&mut resumed).await.unwrap().reason, "Up");
    assert_eq!(item(&mut live).await.unwrap().reason, "Up");
    timeline
        .record(EventSpec::normal("Down").category("a"))
        .await;
    assert_eq!(item(&mut live).await.unwrap().reason, "Down");
    assert_eq!(item(&mut resumed).await.unwrap().reason, "Down");

    // A watch of every timeline did miss b's runs, and says so.
    let mut everything = timeline
        .watch(None, WatchOptions::new().resume_from(before))
        .unwrap();
    let end = ending(&mut everything).await;
    assert!(matches!(end, Error::WatchTooOld { .. }), "{end:?}");
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_opened_through_a_host_end_when_it_stops() {
    let store = beehive_e2e::store();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let running = host.start().await.unwrap();
    let clusters = host.client(kind());
    let prod = create(&clusters, "prod", "{}").await;
    let mut list = clusters.watch_list(WatchOptions::new()).unwrap();
    let mut events = clusters
        .watch_events(prod.meta.id, None, WatchOptions::new())
        .unwrap();
    // One opened on the store is not the host's to end.
    let mut on_store = RawClient::new(&store, kind())
        .watch_list(WatchOptions::new())
        .unwrap();

    stop(running).await;
    assert!(matches!(ending(&mut list).await, Error::Stopped));
    assert!(matches!(ending(&mut events).await, Error::Stopped));
    assert!(matches!(
        clusters.watch_list(WatchOptions::new()),
        Err(Error::Stopped)
    ));

    create(&RawClient::new(&store, kind()), "later", "{}").await;
    let change = next(&mut on_store).await;
    assert_eq!(change.object.unwrap().meta.name, "later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_watch_follows_objects_into_and_out_of_its_selection() {
    use beehive::object::{Labels, Selector};
    let store = beehive_e2e::store();
    let clusters = RawClient::new(&store, kind());
    let labelled = |tier: &str| -> Labels { [("tier".to_string(), tier.to_string())].into() };
    let web = clusters
        .create(
            "web",
            spec("{}"),
            CreateOptions::new().labels(labelled("web")),
        )
        .await
        .unwrap();
    let db = clusters
        .create(
            "db",
            spec("{}"),
            CreateOptions::new().labels(labelled("db")),
        )
        .await
        .unwrap();
    let selector = Selector::parse("tier=web").unwrap();
    let mut stream = clusters
        .watch_list(WatchOptions::new().selector(selector))
        .unwrap();
    let names: Vec<_> = stream
        .snapshot
        .iter()
        .map(|o| o.meta.name.clone())
        .collect();
    assert_eq!(names, ["web"]);

    // db comes into the selection, web leaves it; a change to neither shows.
    clusters
        .relabel(db.meta.id, move |_| Ok(labelled("web")))
        .await
        .unwrap();
    clusters
        .relabel(web.meta.id, move |_| Ok(labelled("cache")))
        .await
        .unwrap();
    clusters
        .update(web.meta.id, spec(r#"{"v":2}"#))
        .await
        .unwrap();
    clusters
        .relabel(db.meta.id, move |_| Ok(labelled("web")))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let change = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("a change comes")
            .expect("the stream goes on")
            .unwrap();
        seen.push((change.change, change.object.map(|o| o.meta.name)));
    }
    assert_eq!(
        seen,
        [
            (ChangeType::Added, Some("db".to_string())),
            (ChangeType::Deleted, Some("web".to_string())),
        ]
    );
    let quiet = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(quiet.is_err(), "nothing more: {quiet:?}");
}
