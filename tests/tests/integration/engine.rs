//! The reconcile engine through the public API: real hosts over file stores.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beehive::engine::finalizer::{self, Event};
use beehive::engine::{Cadence, StopHandle};
use beehive::{
    Action, Condition, ConditionStatus, Controller, ControllerClient, ControllerOptions,
    CreateOptions, Error, EventSpec, GroupKind, Host, HostOptions, Json, RawObject, Result, Store,
    event::EventFilter,
};
use beehive_e2e::{
    PATIENCE, create, create_finalized, delete_and_wait_gone, eventually, run_after_restart,
    run_then_crash, serve, serve_with, spec, stop, update,
};

fn widget() -> GroupKind {
    GroupKind::new("test.dev", "Widget")
}

/// A controller defined by a closure over the object and its client.
struct FnController<F>(F);

impl<F, Fut> Controller for FnController<F>
where
    F: Fn(ControllerClient, RawObject) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Action> + Send + 'static,
{
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        Ok((self.0)(client.clone(), object.clone()).await)
    }
}

fn controller<F, Fut>(f: F) -> FnController<F>
where
    F: Fn(ControllerClient, RawObject) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Action> + Send + 'static,
{
    FnController(f)
}

/// A controller like [`controller`]'s whose closure is also handed a clone of
/// `shared` (the test's view of what its passes did) on every pass.
fn sharing<S, F, Fut>(shared: S, f: F) -> impl Controller<Spec = Json, Status = Json>
where
    S: Clone + Send + Sync + 'static,
    F: Fn(S, ControllerClient, RawObject) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Action> + Send + 'static,
{
    controller(move |client, object| f(shared.clone(), client, object))
}

/// A controller whose passes return `script(n)` for the n-th pass (from 0),
/// with the count of passes so far.
fn scripted(script: fn(usize) -> Action) -> (Arc<AtomicUsize>, impl Controller) {
    let passes = Arc::new(AtomicUsize::new(0));
    let count = passes.clone();
    let controller = controller(move |_client, _object| {
        let pass = count.fetch_add(1, Ordering::SeqCst);
        async move { script(pass) }
    });
    (passes, controller)
}

/// Records every (id, generation) a pass was handed, writes the spec back as
/// status and settles.
#[derive(Clone, Default)]
struct Recorder {
    passes: Arc<Mutex<HashMap<(i64, i64), usize>>>,
}

impl Recorder {
    fn controller(&self) -> impl Controller<Spec = Json, Status = Json> {
        sharing(self.passes.clone(), |passes, client, object| async move {
            *passes
                .lock()
                .unwrap()
                .entry((object.meta.id, object.meta.generation))
                .or_default() += 1;
            match client.update_status_json(object.spec.clone()).await {
                Ok(()) => Action::settled(),
                Err(error) => Action::backoff(error),
            }
        })
    }

    fn counts(&self) -> HashMap<(i64, i64), usize> {
        self.passes.lock().unwrap().clone()
    }
}

fn all_observed(host: &Host, gk: &GroupKind) -> bool {
    host.client(gk.clone())
        .list()
        .unwrap()
        .iter()
        .all(|o| o.meta.is_observed())
}

/// Waits until every widget is observed.
async fn widgets_observed(host: &Host, what: &str) {
    eventually(what, || all_observed(host, &widget())).await;
}

/// Starts `host`, creates widget `w` and waits until it is observed.
async fn start_and_observe_one_widget(host: &Host) -> (StopHandle, RawObject) {
    let running = host.start().await.unwrap();
    let created = create(&host.client(widget()), "w", "{}").await;
    eventually("the widget is observed", || all_observed(host, &widget())).await;
    (running, created)
}

/// A fresh store and a host on it with [`fast_options`].
fn fast_host() -> (Store, Host) {
    let store = beehive_e2e::store();
    let host = Host::new(&store, fast_options()).unwrap();
    (store, host)
}

fn fast_options() -> HostOptions {
    HostOptions::new()
        .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(60)))
        .gc_interval(Duration::from_millis(200))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_generation_of_each_object_is_reconciled_exactly_once() {
    let (_store, host) = fast_host();
    let recorder = Recorder::default();
    let running = serve(&host, widget(), recorder.controller()).await;
    let client = host.client(widget());
    let mut ids = Vec::new();
    for i in 0..20 {
        let created = create(&client, &format!("w{i}"), &format!(r#"{{"v":{i}}}"#)).await;
        ids.push(created.meta.id);
    }
    widgets_observed(&host, "every widget is observed").await;
    for id in &ids[..10] {
        update(&client, *id, r#"{"v":"second"}"#).await;
    }
    widgets_observed(&host, "the updates are observed").await;
    // A last round on other objects, so a stray extra pass would have run by now.
    for id in &ids[10..] {
        update(&client, *id, r#"{"v":"third"}"#).await;
    }
    widgets_observed(&host, "the last round is observed").await;
    stop(running).await;

    let counts = recorder.counts();
    assert_eq!(counts.len(), 40, "20 first generations and 20 second ones");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    for object in client.list().unwrap() {
        assert_eq!(object.status.as_ref(), Some(&object.spec));
        assert!(object.meta.observed_at.is_some());
    }
}

/// A worker gathers the ends of quick passes to write them together; the
/// end of a slow one must not wait for the rest of its batch. Each pass
/// waits until the passes before it are recorded, which never happens if
/// their ends wait for the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_slow_pass_is_written_before_the_batch_ends() {
    let (_store, host) = fast_host();
    let client = host.client(widget());
    for i in 0..3 {
        create(&client, &format!("w{i}"), "{}").await;
    }
    // Whether each pass, in order, saw the passes before it recorded.
    let saw_earlier_ends = Arc::new(Mutex::new(Vec::new()));
    let controller = sharing(
        (saw_earlier_ends.clone(), client.clone()),
        |(saw, widgets), _client, _object| async move {
            let earlier = saw.lock().unwrap().len();
            let deadline = Instant::now() + PATIENCE;
            let recorded = loop {
                let observed = widgets
                    .list()
                    .unwrap()
                    .iter()
                    .filter(|o| o.meta.is_observed())
                    .count();
                if observed >= earlier {
                    break true;
                }
                if Instant::now() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            saw.lock().unwrap().push(recorded);
            // Slower than the longest a quick pass's end is held back.
            tokio::time::sleep(Duration::from_millis(30)).await;
            Action::settled()
        },
    );
    let running = serve(&host, widget(), controller).await;
    widgets_observed(&host, "every widget is observed").await;
    stop(running).await;
    let saw = saw_earlier_ends.lock().unwrap().clone();
    assert_eq!(
        saw,
        vec![true, true, true],
        "each pass saw the ends before it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_far_smaller_than_the_work_converges_all_of_it_through_owed_scans() {
    // Sixteen slots for 300 objects owed before the start and 300 created
    // while it runs: the owed scan pages through what the queue drops. The
    // owed pass's own cadence is a minute, so only refills can do it.
    let store = beehive_e2e::store();
    let options = fast_options()
        .queue_capacity(16)
        .requeue_floor(Duration::from_millis(10));
    let host = Host::new(&store, options).unwrap();
    let client = host.client(widget());
    for i in 0..300 {
        create(&client, &format!("before{i}"), &format!(r#"{{"v":{i}}}"#)).await;
    }
    let recorder = Recorder::default();
    let running = serve(&host, widget(), recorder.controller()).await;
    for i in 0..300 {
        create(&client, &format!("during{i}"), &format!(r#"{{"v":{i}}}"#)).await;
    }
    widgets_observed(&host, "all 600 widgets are observed").await;
    stop(running).await;
    let counts = recorder.counts();
    assert_eq!(counts.len(), 600, "every generation had its pass");
    // An owed scan whose snapshot predates a pass's commit queues that
    // object once more (as the periodic owed pass can); never more.
    assert!(counts.values().all(|&n| n <= 2), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_controller_backs_off_and_recovers() {
    let (_store, host) = fast_host();
    let calls = Arc::new(Mutex::new(Vec::<Instant>::new()));
    host.register(
        widget(),
        sharing(calls.clone(), |seen, _client, _object| async move {
            let mut calls = seen.lock().unwrap();
            calls.push(Instant::now());
            if calls.len() <= 4 {
                Action::backoff("not yet")
            } else {
                Action::settled()
            }
        }),
        ControllerOptions::new().cadence(Cadence::new().max_retry_interval(Duration::from_secs(2))),
    )
    .await
    .unwrap();
    let (running, created) = start_and_observe_one_widget(&host).await;
    stop(running).await;

    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 5);
    let gaps: Vec<f64> = calls
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    for (gap, expected) in gaps.iter().zip([1.0, 2.0, 2.0, 2.0]) {
        assert!(*gap >= expected * 0.95, "gaps {gaps:?}");
        assert!(*gap < expected + 3.0, "gaps {gaps:?}");
    }
    let events = host
        .client(widget())
        .list_events(created.meta.id, &EventFilter::all().category("reconcile"))
        .unwrap();
    assert_eq!(events.len(), 1, "one run of failures");
    assert_eq!(events[0].count, 4);
    assert_eq!(events[0].reason, "ReconcileFailed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_kept_past_its_pass_is_refused() {
    let (_store, host) = fast_host();
    let kept: Arc<Mutex<Option<ControllerClient>>> = Arc::default();
    let running = serve(
        &host,
        widget(),
        sharing(kept.clone(), |stash, client, _object| async move {
            *stash.lock().unwrap() = Some(client);
            Action::settled()
        }),
    )
    .await;
    create(&host.client(widget()), "w", "{}").await;
    widgets_observed(&host, "the widget is observed").await;
    let client = kept.lock().unwrap().clone().unwrap();
    let err = client
        .update_status_json(spec(r#"{"late":true}"#))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReconcileReturned), "{err}");
    assert!(matches!(client.list_owned(), Err(Error::ReconcileReturned)));
    assert!(matches!(
        client.add_event(EventSpec::normal("Late")).await,
        Err(Error::ReconcileReturned)
    ));
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_owner_cascades_to_a_hundred_children_and_removes_every_row() {
    let (_store, host) = fast_host();
    let parent = GroupKind::new("test.dev", "Parent");
    for gk in [parent.clone(), widget()] {
        host.register(
            gk,
            Recorder::default().controller(),
            ControllerOptions::new(),
        )
        .await
        .unwrap();
    }
    let running = host.start().await.unwrap();
    let owner = create(&host.client(parent.clone()), "p", "{}").await;
    let children = host.client(widget());
    for i in 0..100 {
        children
            .create(
                &format!("c{i}"),
                spec("{}"),
                CreateOptions::new().owner(owner.meta.id),
            )
            .await
            .unwrap();
    }
    host.client(parent.clone())
        .delete(owner.meta.id)
        .await
        .unwrap();
    eventually("every row is gone", || {
        children.list().unwrap().is_empty()
            && host.client(parent.clone()).list().unwrap().is_empty()
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_holds_the_row_until_its_controller_clears_it() {
    let (store, host) = fast_host();
    let cleaned = Arc::new(AtomicUsize::new(0));
    let unregistered = create_finalized(&host.client(widget()), "early", &["test.dev/cleanup"])
        .await
        .unwrap_err();
    assert!(
        matches!(unregistered, Error::InvalidOption(_)),
        "{unregistered}"
    );

    let running = serve_with(
        &host,
        widget(),
        sharing(cleaned.clone(), |count, client, object| async move {
            if object.meta.deletion_requested_at.is_some() {
                count.fetch_add(1, Ordering::SeqCst);
                if let Err(error) = client.delete_finalizer("test.dev/cleanup").await {
                    return Action::backoff(error);
                }
            }
            Action::settled()
        }),
        ControllerOptions::new().finalizers(["test.dev/cleanup"]),
    )
    .await;
    let client = host.client(widget());
    let created = create_finalized(&client, "w", &["test.dev/cleanup"])
        .await
        .unwrap();
    widgets_observed(&host, "the widget is observed").await;
    delete_and_wait_gone(&client, created.meta.id).await;
    assert_eq!(cleaned.load(Ordering::SeqCst), 1);
    let registrations = store.registrations().unwrap();
    assert_eq!(registrations.len(), 1);
    assert_eq!(registrations[0].finalizers, ["test.dev/cleanup"]);
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_adds_its_finalizer_but_not_once_deletion_was_requested() {
    let (_store, host) = fast_host();
    let refusals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let running = serve_with(
        &host,
        widget(),
        sharing(refusals.clone(), |seen, client, object| async move {
            let added = client.add_finalizer("test.dev/cleanup").await;
            if object.meta.deletion_requested_at.is_some() {
                seen.lock().unwrap().push(added);
                if let Err(error) = client.delete_finalizer("test.dev/cleanup").await {
                    return Action::backoff(error);
                }
            } else if let Err(error) = added {
                return Action::backoff(error);
            }
            Action::settled()
        }),
        ControllerOptions::new().finalizers(["test.dev/cleanup"]),
    )
    .await;
    let client = host.client(widget());
    let created = create(&client, "w", "{}").await;
    eventually("the widget carries the finalizer", || {
        client.get(created.meta.id).unwrap().meta.finalizers == ["test.dev/cleanup"]
    })
    .await;
    delete_and_wait_gone(&client, created.meta.id).await;
    let refusals = std::mem::take(&mut *refusals.lock().unwrap());
    assert!(
        matches!(refusals.as_slice(), [Err(Error::DeletionPending { .. })]),
        "{refusals:?}"
    );
    stop(running).await;
}

/// Runs its objects under the finalizer helper, counting each event.
#[derive(Clone, Default)]
struct Buckets {
    applied: Arc<AtomicUsize>,
    cleaned: Arc<AtomicUsize>,
}

impl Controller for Buckets {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, bucket: &RawObject) -> Result<Action> {
        finalizer::run(client, "test.dev/bucket", bucket, |event| async move {
            let counter = match event {
                Event::Apply(_) => &self.applied,
                Event::Cleanup(_) => &self.cleaned,
            };
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(Action::settled())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_helper_adds_cleans_up_and_lets_the_object_go() {
    let (_store, host) = fast_host();
    let buckets = Buckets::default();
    let running = serve_with(
        &host,
        widget(),
        buckets.clone(),
        ControllerOptions::new().finalizers(["test.dev/bucket"]),
    )
    .await;
    let client = host.client(widget());
    let created = create(&client, "b", "{}").await;
    eventually("the bucket carries the finalizer and settled", || {
        let read = client.get(created.meta.id).unwrap();
        read.meta.finalizers == ["test.dev/bucket"] && read.meta.is_observed()
    })
    .await;
    assert_eq!(buckets.cleaned.load(Ordering::SeqCst), 0);
    delete_and_wait_gone(&client, created.meta.id).await;
    assert_eq!(buckets.cleaned.load(Ordering::SeqCst), 1);
    assert!(buckets.applied.load(Ordering::SeqCst) >= 1);
    stop(running).await;
}

/// Fails every pass with its own error, under the default error policy.
struct Failing;

impl Controller for Failing {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, _: &ControllerClient, _: &RawObject) -> Result<Action> {
        Err(Error::msg("the upstream API is down"))
    }
}

/// Fails as `Failing` does, with a policy that settles instead of backing off.
struct Forgiving;

impl Controller for Forgiving {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        Failing.reconcile(client, object).await
    }

    fn error_policy(&self, _: &RawObject, error: &Error) -> Action {
        assert_eq!(error.to_string(), "the upstream API is down");
        Action::settled()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_goes_to_the_error_policy() {
    let (_store, host) = fast_host();
    let running = serve(&host, widget(), Forgiving).await;
    let client = host.client(widget());
    let created = create(&client, "p", "{}").await;
    eventually("the policy's action settled the object", || {
        client.get(created.meta.id).unwrap().meta.is_observed()
    })
    .await;
    let failures = client
        .list_events(created.meta.id, &EventFilter::all().category("reconcile"))
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_backs_off_with_its_text_in_an_event_by_default() {
    let (_store, host) = fast_host();
    let running = serve(&host, widget(), Failing).await;
    let client = host.client(widget());
    let created = create(&client, "f", "{}").await;
    eventually("the failure is recorded", || {
        client
            .list_events(created.meta.id, &EventFilter::all().category("reconcile"))
            .unwrap()
            .iter()
            .any(|e| e.reason == "ReconcileFailed" && e.message == "the upstream API is down")
    })
    .await;
    assert!(!client.get(created.meta.id).unwrap().meta.is_observed());
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_only_kind_is_collected_by_the_sweeper() {
    let (_store, host) = fast_host();
    let running = host.start().await.unwrap();
    let notes = host.client(GroupKind::core("Note"));
    let owner = create(&notes, "owner", "{}").await;
    notes
        .create(
            "child",
            spec("{}"),
            CreateOptions::new().owner(owner.meta.id),
        )
        .await
        .unwrap();
    notes.delete(owner.meta.id).await.unwrap();
    eventually("both notes are collected", || {
        notes.list().unwrap().is_empty()
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_conditions_and_events_are_written_as_the_pass_reports_them() {
    let (store, host) = fast_host();
    let running = serve(
        &host,
        widget(),
        controller(|client, object| async move {
            let report = async {
                client.update_status_json(spec(r#"{"seen":true}"#)).await?;
                client
                    .update_status_json(spec(r#"{ "seen": true }"#))
                    .await?;
                client
                    .set_conditions(vec![
                        Condition::new("Ready", ConditionStatus::True).reason("Fine"),
                        Condition::new("Live", ConditionStatus::True).liveness(true),
                    ])
                    .await?;
                let duplicate = client
                    .set_conditions(vec![
                        Condition::new("A", ConditionStatus::True),
                        Condition::new("A", ConditionStatus::False),
                    ])
                    .await;
                assert!(matches!(duplicate, Err(Error::DuplicateConditionType(_))));
                for _ in 0..3 {
                    client
                        .add_event(EventSpec::normal("Probed").category("health").message("ok"))
                        .await?;
                }
                client
                    .add_event(EventSpec::warning("ProbeFailed").category("health"))
                    .await?;
                Ok::<(), Error>(())
            };
            match report.await {
                Ok(()) => {
                    let _ = object;
                    Action::settled()
                }
                Err(error) => Action::backoff(error),
            }
        }),
    )
    .await;
    let client = host.client(widget());
    let created = create(&client, "w", "{}").await;
    widgets_observed(&host, "the widget is observed").await;
    stop(running).await;

    let object = client.get(created.meta.id).unwrap();
    assert_eq!(object.status, Some(spec(r#"{"seen":true}"#)));
    // The log holds the create, one status write (the second was a no-op),
    // one write for both conditions, and the stamp; events move no object.
    let writes = beehive_e2e::scalar(
        &store,
        "SELECT COUNT(*) FROM object_writes WHERE object_id = ?1",
        &[created.meta.id],
    );
    assert_eq!(writes, 4);
    let types: Vec<_> = object
        .meta
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["Live", "Ready"]);
    assert!(object.meta.conditions.iter().all(|c| !c.unconfirmed));
    let events = client
        .list_events(created.meta.id, &EventFilter::all().category("health"))
        .unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].reason.as_str(), events[0].count),
        ("ProbeFailed", 1)
    );
    assert_eq!((events[1].reason.as_str(), events[1].count), ("Probed", 3));

    // Another process (a reopened store) cannot vouch for a liveness condition.
    let reopened = store.reopen().unwrap();
    let object = beehive::RawClient::new(&reopened, widget())
        .get(created.meta.id)
        .unwrap();
    let live = object.meta.condition("Live").unwrap();
    assert!(live.unconfirmed);
    assert_eq!(live.status, ConditionStatus::Unknown);
    let ready = object.meta.condition("Ready").unwrap();
    assert_eq!(
        ready.status,
        ConditionStatus::True,
        "durable conditions survive"
    );
}

/// A long pass's status is written once the grace is over, while the pass
/// still runs; a second status it reports is written after the next grace.
/// A quick pass's status goes with its handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_pass_shows_its_status_after_the_grace_while_it_runs() {
    let (_store, host) = fast_host();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let running = serve(
        &host,
        widget(),
        sharing(release.clone(), |release, client, object| async move {
            if object.meta.name == "quick" {
                client
                    .update_status_json(spec(r#"{"step":"quick"}"#))
                    .await
                    .unwrap();
                return Action::settled();
            }
            for step in ["first", "second"] {
                let status = spec(&format!(r#"{{"step":"{step}"}}"#));
                client.update_status_json(status).await.unwrap();
                release.acquire().await.unwrap().forget();
            }
            Action::settled()
        }),
    )
    .await;
    let client = host.client(widget());
    let long = create(&client, "long", "{}").await;
    let step = |id| {
        let object = client.get(id).unwrap();
        object.status.map(|s| s.to_value()["step"].clone())
    };
    eventually("the first status shows mid-pass", || {
        step(long.meta.id) == Some(serde_json::json!("first"))
    })
    .await;
    release.add_permits(1);
    eventually("the second status shows mid-pass", || {
        step(long.meta.id) == Some(serde_json::json!("second"))
    })
    .await;
    assert!(!all_observed(&host, &widget()), "the pass is still running");
    release.add_permits(1);
    let quick = create(&client, "quick", "{}").await;
    eventually("both settle", || all_observed(&host, &widget())).await;
    assert_eq!(step(quick.meta.id), Some(serde_json::json!("quick")));
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_host_over_the_same_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    let first = Host::new(&Store::open(&path).unwrap(), fast_options()).unwrap();
    let running = first.start().await.unwrap();
    let second = Host::new(&Store::open(&path).unwrap(), fast_options()).unwrap();
    assert!(matches!(second.start().await, Err(Error::StoreInUse(_))));
    assert!(matches!(first.start().await, Err(Error::AlreadyStarted)));
    stop(running).await;
    let third = Host::new(&Store::open(&path).unwrap(), fast_options()).unwrap();
    stop(third.start().await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_needs_an_object_of_the_kind_and_a_controller() {
    let (_store, host) = fast_host();
    let running = serve(&host, widget(), Recorder::default().controller()).await;
    let created = create(&host.client(widget()), "w", "{}").await;
    let note = host
        .client(GroupKind::core("Note"))
        .create("n", spec("{}"), CreateOptions::new())
        .await
        .unwrap();
    assert!(matches!(
        host.requeue(&widget(), 999_999, false),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        host.requeue(&widget(), note.meta.id, false),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        host.requeue(&GroupKind::core("Note"), note.meta.id, false),
        Err(Error::NoController(_))
    ));
    host.requeue(&widget(), created.meta.id, true).unwrap();
    assert_eq!(
        host.schedule(&GroupKind::core("Note"), note.meta.id)
            .next_requeue_at,
        None
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsettled_pass_comes_back_and_a_requeue_delay_is_scheduled() {
    let (_store, host) = fast_host();
    let (passes, script) = scripted(|pass| match pass {
        0 => Action::unsettled().requeue_after(Duration::from_millis(1500)),
        _ => Action::settled().requeue_after(Duration::from_secs(3600)),
    });
    host.register(widget(), script, ControllerOptions::new())
        .await
        .unwrap();
    let (running, created) = start_and_observe_one_widget(&host).await;
    assert_eq!(passes.load(Ordering::SeqCst), 2);
    // The queue hears how the pass ended just after its end commits, so the
    // second pass's alarm may take a moment to replace the first's.
    let hour_ahead = || {
        host.schedule(&widget(), created.meta.id)
            .next_requeue_at
            .and_then(|next| next.duration_since(std::time::SystemTime::now()).ok())
            .is_some_and(|ahead| ahead > Duration::from_secs(3000))
    };
    eventually("the next pass is due in an hour", hour_ahead).await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_written_mid_pass_stays_unobserved_and_runs_again() {
    let (_store, host) = fast_host();
    let recorder = Recorder::default();
    let gate = Arc::new(tokio::sync::Notify::new());
    let (first_pass_tx, first_pass_rx) = tokio::sync::oneshot::channel::<()>();
    let first_pass_tx = Arc::new(Mutex::new(Some(first_pass_tx)));
    let shared = (Arc::new(recorder.controller()), gate.clone(), first_pass_tx);
    let running = serve(
        &host,
        widget(),
        sharing(shared, |(inner, wait, signal), client, object| async move {
            let first = signal.lock().unwrap().take();
            if let Some(signal) = first {
                let _ = signal.send(());
                wait.notified().await;
            }
            inner
                .reconcile(&client, &object)
                .await
                .unwrap_or_else(Action::backoff)
        }),
    )
    .await;
    let client = host.client(widget());
    let created = create(&client, "w", r#"{"v":1}"#).await;
    first_pass_rx.await.unwrap();
    update(&client, created.meta.id, r#"{"v":2}"#).await;
    gate.notify_one();
    eventually("generation 2 is observed", || {
        client
            .get(created.meta.id)
            .unwrap()
            .meta
            .observed_generation
            == Some(2)
    })
    .await;
    stop(running).await;
    let counts = recorder.counts();
    assert_eq!(
        counts.get(&(created.meta.id, 1)),
        Some(&1),
        "handed generation 1"
    );
    assert_eq!(
        counts.get(&(created.meta.id, 2)),
        Some(&1),
        "and then generation 2"
    );
}

/// Writes `{"version": N, "spec": ...}` as status and settles.
fn versioned(version: u32) -> impl Controller {
    controller(move |client, object| async move {
        let status = serde_json::json!({ "version": version, "spec": object.spec.to_value() });
        match client.update_status(&status).await {
            Ok(()) => Action::settled(),
            Err(error) => Action::backoff(error),
        }
    })
}

fn status_version(object: &RawObject) -> Option<u64> {
    object.status.as_ref()?.to_value()["version"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_controller_under_load_loses_no_pass() {
    let (_store, host) = fast_host();
    let options = || ControllerOptions::new().concurrency(2);
    let running = serve_with(&host, widget(), versioned(1), options()).await;
    let client = host.client(widget());
    let writer = {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                let name = format!("w{}", i % 150);
                let body = spec(&format!(r#"{{"round":{i}}}"#));
                client
                    .create_or_update(&name, body, CreateOptions::new())
                    .await
                    .unwrap();
            }
        })
    };
    for version in 2..=4 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        host.register(widget(), versioned(version), options())
            .await
            .unwrap();
    }
    writer.await.unwrap();
    eventually("every widget is observed by the last version", || {
        let objects = client.list().unwrap();
        objects.len() == 150
            && objects
                .iter()
                .all(|o| o.meta.is_observed() && status_version(o) == Some(4))
    })
    .await;
    stop(running).await;
    for object in client.list().unwrap() {
        let failures = client
            .list_events(object.meta.id, &EventFilter::all().category("reconcile"))
            .unwrap();
        assert!(failures.is_empty(), "no pass failed: {failures:?}");
        let status = object.status.unwrap().to_value();
        assert_eq!(
            status["spec"],
            object.spec.to_value(),
            "the latest spec was seen"
        );
    }
}

#[test]
fn a_host_dropped_mid_work_converges_every_object_when_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let created = Arc::new(AtomicUsize::new(0));

    let counter = created.clone();
    let crash_path = path.clone();
    run_then_crash(async move {
        let store = Store::open(&crash_path).unwrap();
        let host = Host::new(&store, fast_options()).unwrap();
        // A slow controller, so the crash lands with work outstanding.
        let running = serve(
            &host,
            widget(),
            controller(|client, object| async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                match client.update_status_json(object.spec.clone()).await {
                    Ok(()) => Action::settled(),
                    Err(error) => Action::backoff(error),
                }
            }),
        )
        .await;
        let client = host.client(widget());
        for i in 0..200 {
            create(&client, &format!("w{i}"), &format!(r#"{{"i":{i}}}"#)).await;
            counter.fetch_add(1, Ordering::SeqCst);
        }
        eventually("some widgets are observed", || {
            client.list().unwrap().iter().any(|o| o.meta.is_observed())
        })
        .await;
        // Dropping the handle releases this process's claim on the file, as the
        // end of a crashed process would; the runtime then abandons every task.
        drop(running);
    });

    run_after_restart(async {
        let store = Store::open(&path).unwrap();
        let before = beehive::RawClient::new(&store, widget()).list().unwrap();
        assert_eq!(
            before.len(),
            created.load(Ordering::SeqCst),
            "nothing committed is lost"
        );
        assert!(
            before.iter().any(|o| !o.meta.is_observed()),
            "the crash left work outstanding"
        );
        let host = Host::new(&store, fast_options()).unwrap();
        let running = serve(&host, widget(), Recorder::default().controller()).await;
        widgets_observed(&host, "every widget converges after the restart").await;
        for object in host.client(widget()).list().unwrap() {
            assert_eq!(object.status.as_ref(), Some(&object.spec));
        }
        stop(running).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_watch_follows_backoff_and_requeues_as_a_gauge() {
    use futures_util::StreamExt;

    let (_store, host) = fast_host();
    let (_passes, script) = scripted(|pass| match pass {
        0 => Action::backoff("not yet"),
        _ => Action::settled().requeue_after(Duration::from_secs(3600)),
    });
    host.register(widget(), script, ControllerOptions::new())
        .await
        .unwrap();
    assert!(matches!(
        host.watch_schedule(&GroupKind::core("Note"), 1),
        Err(Error::NoController(_))
    ));
    let created = create(&host.client(widget()), "w", "{}").await;
    let mut schedule = host.watch_schedule(&widget(), created.meta.id).unwrap();
    let running = host.start().await.unwrap();
    let mut seen = Vec::new();
    loop {
        let next = tokio::time::timeout(PATIENCE, schedule.next())
            .await
            .expect("the schedule moves")
            .expect("the stream is open");
        let ahead = next
            .next_requeue_at
            .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok());
        seen.push(ahead);
        if ahead.is_some_and(|a| a > Duration::from_secs(3000)) {
            break;
        }
    }
    // The backoff step after the failure came before the hour-long requeue.
    assert!(
        seen.iter()
            .any(|a| a
                .is_some_and(|a| a > Duration::from_millis(100) && a <= Duration::from_secs(2))),
        "{seen:?}"
    );
    assert_eq!(host.due_now(&widget()), 0);
    stop(running).await;
    let end = tokio::time::timeout(PATIENCE, schedule.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the gauge ends with the host");
}

/// Serves widgets with `controller`, registered as plugin version `hash`.
async fn version_host(
    path: &std::path::Path,
    hash: &str,
    controller: impl Controller<Spec = Json, Status = Json>,
) -> (Store, Host, StopHandle) {
    let store = Store::open(path).unwrap();
    let host = Host::new(&store, fast_options()).unwrap();
    let options = ControllerOptions::new()
        .concurrency(2)
        .source(format!("widget-{hash}.wasm"), Some(hash.to_string()));
    host.register(widget(), controller, options).await.unwrap();
    let running = host.start().await.unwrap();
    (store, host, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_reaches_every_object_and_a_stopped_rollout_resumes_where_it_was() {
    use beehive::store::RolloutState;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout.db");
    // More objects than a rollout queues at once.
    const OBJECTS: i64 = 2_500;

    let (_, host, running) =
        version_host(&path, "aa", controller(|_, _| async { Action::settled() })).await;
    let client = host.client(widget());
    for i in 0..OBJECTS {
        create(&client, &format!("w{i}"), "{}").await;
    }
    eventually("version aa observed every widget", || {
        client.list().unwrap().iter().all(|o| o.meta.is_observed())
    })
    .await;
    let first = host.rollout(&widget()).unwrap().unwrap();
    assert_eq!((first.revision, first.state), (1, RolloutState::Complete));
    stop(running).await;

    // Version bb is slow enough to be stopped halfway through its rollout.
    let slow = controller(|_, _| async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        Action::settled()
    });
    let (store, host, running) = version_host(&path, "bb", slow).await;
    eventually("some of the rollout is recorded", || {
        let recorded = store.rollouts(&widget()).unwrap().pop().unwrap();
        recorded.revision == 2 && recorded.through_id > 0
    })
    .await;
    stop(running).await;
    drop(host);
    let halfway = store.rollouts(&widget()).unwrap().pop().unwrap();
    drop(store);
    assert_eq!(halfway.state, RolloutState::Rolling, "{halfway:?}");
    assert!(halfway.passed < OBJECTS, "{halfway:?}");
    assert_eq!(halfway.objects, OBJECTS);

    // The same version, started again, passes only what the first run
    // had not reached.
    let passed: Arc<Mutex<Vec<i64>>> = Arc::default();
    let recording = sharing(passed.clone(), |passed, _, object| async move {
        passed.lock().unwrap().push(object.meta.id);
        Action::settled()
    });
    let (store, host, running) = version_host(&path, "bb", recording).await;
    eventually("the rollout completes", || {
        host.rollout(&widget())
            .unwrap()
            .is_some_and(|r| r.state == RolloutState::Complete)
    })
    .await;
    let done = host.rollout(&widget()).unwrap().unwrap();
    assert_eq!((done.revision, done.passed, done.failed), (2, OBJECTS, 0));
    let repassed = passed.lock().unwrap().clone();
    assert!(
        repassed.iter().all(|id| *id > halfway.through_id),
        "nothing at or below the checkpoint ran again"
    );
    stop(running).await;
    let history = store.rollouts(&widget()).unwrap();
    let states: Vec<_> = history.iter().map(|r| (r.revision, r.state)).collect();
    assert_eq!(
        states,
        [(1, RolloutState::Complete), (2, RolloutState::Complete)]
    );
}
