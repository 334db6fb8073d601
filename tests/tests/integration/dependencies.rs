//! Dependencies: declared edges, the owed pass an edge records, the waker,
//! the stale-dependents backstop, collection rules and cycles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beehive::engine::Cadence;
use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind, Host,
    HostOptions, Json, RawObject, Result, Store, event::EventFilter,
};
use beehive_e2e::{
    create, eventually, metric, rise_over_three_sweeps, run_after_restart, run_then_crash, serve,
    spec, stop, update,
};

fn app() -> GroupKind {
    GroupKind::new("test.dev", "App")
}

fn config() -> GroupKind {
    GroupKind::core("Config")
}

fn db() -> GroupKind {
    GroupKind::new("test.dev", "Db")
}

/// An app depends on the object its spec names (`{"target": id}`), asserting
/// the edge on every pass, and reports the target's spec as its status.
#[derive(Clone, Default)]
struct Apps {
    passes: Arc<Mutex<HashMap<i64, usize>>>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Apps {
    fn passes_of(&self, id: i64) -> usize {
        self.passes.lock().unwrap().get(&id).copied().unwrap_or(0)
    }

    async fn pass(&self, client: &ControllerClient, object: &RawObject) -> Action {
        *self
            .passes
            .lock()
            .unwrap()
            .entry(object.meta.id)
            .or_default() += 1;
        let target = object.spec.to_value()["target"].as_i64();
        let outcome = async {
            let mut seen = serde_json::Value::Null;
            if let Some(target) = target {
                client.add_dependency(target).await?;
                let kind = match object.spec.to_value()["kind"].as_str() {
                    Some("Db") => db(),
                    Some("App") => app(),
                    _ => config(),
                };
                if let Ok(found) = client.kind_client(kind).get(target) {
                    seen = found.spec.to_value();
                }
            }
            for dependency in client.list_dependencies()? {
                if Some(dependency.id) != target {
                    client.delete_dependency(dependency.id).await?;
                }
            }
            client
                .update_status(&serde_json::json!({ "seen": seen }))
                .await
        };
        match outcome.await {
            Ok(()) => Action::settled(),
            Err(error) => {
                self.errors.lock().unwrap().push(error.to_string());
                Action::backoff(error)
            }
        }
    }
}

impl Controller for Apps {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        Ok(self.pass(client, object).await)
    }
}

/// A database whose status counts its passes, so a requeue changes its status.
#[derive(Clone, Default)]
struct Dbs {
    passes: Arc<Mutex<usize>>,
}

impl Controller for Dbs {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        if object.meta.deletion_requested_at.is_some() {
            return Ok(Action::settled());
        }
        let passes = {
            let mut passes = self.passes.lock().unwrap();
            *passes += 1;
            *passes
        };
        client
            .update_status(&serde_json::json!({ "passes": passes }))
            .await?;
        Ok(Action::settled())
    }
}

fn options() -> HostOptions {
    HostOptions::new()
        .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(60)))
        .gc_interval(Duration::from_millis(100))
        .requeue_floor(Duration::from_millis(20))
}

/// A host over `store` serving the app and db controllers, and the apps'
/// record of their passes.
async fn serving(store: &Store) -> (Host, Apps, beehive::engine::StopHandle) {
    let host = Host::new(store, options()).unwrap();
    let apps = Apps::default();
    host.register(app(), apps.clone(), ControllerOptions::new())
        .await
        .unwrap();
    let running = serve(&host, db(), Dbs::default()).await;
    (host, apps, running)
}

fn settled(host: &Host, gk: GroupKind) -> bool {
    host.client(gk)
        .list()
        .unwrap()
        .iter()
        .all(|o| o.meta.is_observed())
}

fn owed_total(store: &Store) -> i64 {
    beehive_e2e::scalar(
        store,
        "SELECT CAST(COALESCE(SUM(reconcile_owed), 0) AS BIGINT) FROM objects",
        &[],
    )
}

/// Waits until every app is observed and no pass is owed: whatever the
/// last writes woke has run.
async fn apps_settle(what: &str, host: &Host, store: &Store) {
    eventually(what, || settled(host, app()) && owed_total(store) == 0).await;
}

/// An app's spec: depend on object `target` of kind `kind`.
fn pointing_at(target: i64, kind: &str) -> String {
    format!(r#"{{"target":{target},"kind":"{kind}"}}"#)
}

async fn apps_on(host: &Host, target: i64, kind: &str, count: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..count {
        let body = spec(&pointing_at(target, kind));
        let created = host
            .client(app())
            .create(&format!("app{i}"), body, CreateOptions::new())
            .await
            .unwrap();
        ids.push(created.meta.id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_only_target_wakes_each_dependent_once_per_change() {
    let store = beehive_e2e::store();
    let (host, apps, running) = serving(&store).await;
    let target = create(&host.client(config()), "settings", r#"{"color":"red"}"#).await;
    let ids = apps_on(&host, target.meta.id, "Config", 5).await;
    apps_settle("the apps settle with their edges", &host, &store).await;
    // Declaring an edge costs one extra pass, once; re-asserting costs nothing.
    for id in &ids {
        assert_eq!(apps.passes_of(*id), 2);
    }
    eventually("the host is idle", || host.is_idle()).await;
    for id in &ids {
        assert_eq!(apps.passes_of(*id), 2, "re-asserting an edge wakes nothing");
    }

    update(
        &host.client(config()),
        target.meta.id,
        r#"{"color":"blue"}"#,
    )
    .await;
    eventually("every app saw the new spec", || {
        host.client(app()).list().unwrap().iter().all(|o| {
            o.status
                .as_ref()
                .map(|s| s.to_value()["seen"]["color"] == "blue")
                == Some(true)
        })
    })
    .await;
    eventually("the host is idle", || host.is_idle()).await;
    for id in &ids {
        assert_eq!(apps.passes_of(*id), 3, "one pass for one change");
    }
    stop(running).await;
    assert!(apps.errors.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_targets_status_change_wakes_its_dependents() {
    let store = beehive_e2e::store();
    let (host, apps, running) = serving(&store).await;
    let target = create(&host.client(db()), "main", "{}").await;
    let ids = apps_on(&host, target.meta.id, "Db", 3).await;
    eventually("everything settles", || {
        settled(&host, app()) && settled(&host, db()) && owed_total(&store) == 0
    })
    .await;
    eventually("the host is idle", || host.is_idle()).await;
    let before: Vec<usize> = ids.iter().map(|id| apps.passes_of(*id)).collect();
    // A requeue makes the database write a new status, and nothing else.
    host.requeue(&db(), target.meta.id, false).unwrap();
    eventually("every app ran again", || {
        ids.iter()
            .zip(&before)
            .all(|(id, n)| apps.passes_of(*id) > *n)
    })
    .await;
    eventually("the host is idle", || host.is_idle()).await;
    for (id, n) in ids.iter().zip(&before) {
        assert_eq!(apps.passes_of(*id), n + 1);
    }
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleting_target_waits_for_live_dependents() {
    let store = beehive_e2e::store();
    let (host, _apps, running) = serving(&store).await;
    let dbs_client = host.client(db());
    let first = create(&dbs_client, "first", "{}").await;
    let second = create(&dbs_client, "second", "{}").await;
    let apps_client = host.client(app());
    let holder = create(&apps_client, "holder", &pointing_at(first.meta.id, "Db")).await;
    let doomed = create(&apps_client, "doomed", &pointing_at(second.meta.id, "Db")).await;
    apps_settle("everything settles", &host, &store).await;

    dbs_client.delete(first.meta.id).await.unwrap();
    dbs_client.delete(second.meta.id).await.unwrap();
    // Three GC sweeps complete after the deletes; both are held by live
    // dependents.
    let sweeps = metric(&store, "beehive_gc_sweeps_total");
    eventually("three more sweeps", || {
        metric(&store, "beehive_gc_sweeps_total") >= sweeps + 3.0
    })
    .await;
    assert!(dbs_client.get(first.meta.id).is_ok());
    assert!(dbs_client.get(second.meta.id).is_ok());

    // Dropping the edge releases the first; deleting the dependent, the second.
    update(&apps_client, holder.meta.id, r#"{"target":null}"#).await;
    apps_client.delete(doomed.meta.id).await.unwrap();
    eventually("both targets are collected", || {
        dbs_client.get(first.meta.id).is_err() && dbs_client.get(second.meta.id).is_err()
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_that_would_close_a_cycle_is_refused_and_reported() {
    let store = beehive_e2e::store();
    let (host, apps, running) = serving(&store).await;
    let client = host.client(app());
    let a = create(&client, "a", r#"{"target":null}"#).await;
    let b = create(&client, "b", &pointing_at(a.meta.id, "App")).await;
    apps_settle("b depends on a", &host, &store).await;
    // a now asks to depend on b: a → b → a.
    update(&client, a.meta.id, &pointing_at(b.meta.id, "App")).await;
    eventually("the cycle is reported", || {
        !client
            .list_events(a.meta.id, &EventFilter::all().category("dependencies"))
            .unwrap()
            .is_empty()
    })
    .await;
    let events = client
        .list_events(a.meta.id, &EventFilter::all().category("dependencies"))
        .unwrap();
    assert_eq!(events[0].reason, "DependencyCycle");
    assert!(
        events[0]
            .message
            .contains("App.test.dev/a → App.test.dev/b → App.test.dev/a"),
        "{}",
        events[0].message
    );
    assert!(
        client.list_dependencies(a.meta.id).unwrap().is_empty(),
        "the edge was not written"
    );
    let errors = apps.errors.lock().unwrap().clone();
    assert!(
        errors.iter().any(|e| e.contains("dependency cycle")),
        "{errors:?}"
    );
    // b saw a's new spec once (a is its target); after that nothing spins:
    // a retries on its backoff ladder, and its failures move nothing b reads.
    eventually("b saw a's new spec", || {
        let b_now = client.get(b.meta.id).unwrap();
        b_now
            .status
            .map(|s| s.to_value()["seen"]["target"] == b.meta.id)
            == Some(true)
    })
    .await;
    let b_passes = apps.passes_of(b.meta.id);
    let a_passes = apps.passes_of(a.meta.id);
    eventually("a retries on its ladder", || {
        apps.passes_of(a.meta.id) > a_passes
    })
    .await;
    assert_eq!(
        apps.passes_of(a.meta.id),
        a_passes + 1,
        "a backs off: one retry per step"
    );
    assert_eq!(
        apps.passes_of(b.meta.id),
        b_passes,
        "a's failure moved nothing b reads"
    );
    stop(running).await;
}

/// The dependency waker's cursor as saved in the database (0 if never).
fn saved_waker_cursor(conn: &rusqlite::Connection) -> i64 {
    conn.query_row(
        "SELECT COALESCE((SELECT value FROM kv WHERE key = 'waker_cursor'), 0)",
        [],
        |row| row.get(0),
    )
    .unwrap()
}

/// Apps that hang on every pass after their first two, standing for a crash
/// between a dependency wake's commit and its pass.
#[derive(Clone, Default)]
struct HangingApps {
    inner: Apps,
}

impl Controller for HangingApps {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        if self.inner.passes_of(object.meta.id) >= 2 {
            std::future::pending::<()>().await;
        }
        Ok(self.inner.pass(client, object).await)
    }
}

#[test]
fn a_wake_lost_to_a_crash_is_recovered_by_the_stale_dependents_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deps.db");
    let ids: Arc<Mutex<(i64, i64)>> = Arc::default();

    let (crash_path, crash_ids) = (path.clone(), ids.clone());
    run_then_crash(async move {
        let store = Store::open(&crash_path).unwrap();
        let host = Host::new(&store, options()).unwrap();
        let apps = HangingApps::default();
        let running = serve(&host, app(), apps.clone()).await;
        let target = create(&host.client(config()), "settings", r#"{"v":1}"#).await;
        let dependent = apps_on(&host, target.meta.id, "Config", 1).await[0];
        *crash_ids.lock().unwrap() = (target.meta.id, dependent);
        apps_settle("the app settles", &host, &store).await;
        let updated = update(&host.client(config()), target.meta.id, r#"{"v":2}"#).await;
        // The wake is taken (the pass hangs) and the waker's cursor is saved
        // past the update, so only the watermark can bring the app back.
        eventually("the woken pass is hanging", || {
            apps.inner.passes_of(dependent) >= 2
        })
        .await;
        let observer = rusqlite::Connection::open(store.path()).unwrap();
        eventually("the waker saved its cursor past the update", || {
            saved_waker_cursor(&observer) >= updated.meta.resource_version
        })
        .await;
        drop(running);
    });

    run_after_restart(async {
        let (_target, dependent) = *ids.lock().unwrap();
        let store = Store::open(&path).unwrap();
        let stale = beehive::RawClient::new(&store, app())
            .get(dependent)
            .unwrap();
        assert_eq!(
            stale.status.unwrap().to_value()["seen"]["v"],
            1,
            "the crash lost the wake"
        );
        let host = Host::new(&store, options()).unwrap();
        let apps = Apps::default();
        let running = serve(&host, app(), apps.clone()).await;
        eventually(
            "the stale-dependents pass brings the app up to date",
            || {
                let object = host.client(app()).get(dependent).unwrap();
                object.status.map(|s| s.to_value()["seen"]["v"] == 2) == Some(true)
            },
        )
        .await;
        stop(running).await;
    });
}

/// A settled host's stale-dependents pass reads nothing until something is
/// committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stale_dependents_pass_reads_the_edges_only_after_a_commit() {
    let store = beehive_e2e::store();
    let options = options().stale_dependents_interval(Duration::from_millis(20));
    let host = Host::new(&store, options).unwrap();
    let apps = Apps::default();
    let running = serve(&host, app(), apps.clone()).await;
    let target = create(&host.client(config()), "settings", r#"{"v":1}"#).await;
    let dependent = apps_on(&host, target.meta.id, "Config", 1).await[0];
    apps_settle("the app settles", &host, &store).await;
    eventually("the host is idle", || host.is_idle()).await;

    let scans = metric(&store, "beehive_stale_dependents_scans_total");
    // Three sweeps (100 ms apart) span fifteen stale-dependents intervals.
    let quiet_scans = rise_over_three_sweeps(&store, "beehive_stale_dependents_scans_total").await;
    assert!(quiet_scans <= 1.0, "{quiet_scans} scans of a quiet store");

    // A commit: the next pass reads the edges again.
    update(&host.client(config()), target.meta.id, r#"{"v":2}"#).await;
    eventually("the edges are read again", || {
        metric(&store, "beehive_stale_dependents_scans_total") > scans + quiet_scans
    })
    .await;
    eventually("the app sees the write", || {
        let object = host.client(app()).get(dependent).unwrap();
        object.status.map(|s| s.to_value()["seen"]["v"] == 2) == Some(true)
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_dependency_is_accepted_and_costs_no_pass() {
    let store = beehive_e2e::store();
    // Created before the start, so the startup owed pass is its only wake:
    // a push racing that scan could queue a second pass under load.
    let selfish = create(&beehive::RawClient::new(&store, app()), "selfish", "{}").await;
    let (host, apps, running) = serving(&store).await;
    let id = selfish.meta.id;
    eventually("the first pass settles", || settled(&host, app())).await;
    assert_eq!(apps.passes_of(id), 1);
    update(&host.client(app()), id, &pointing_at(id, "App")).await;
    apps_settle("the pass with the self edge settles", &host, &store).await;
    eventually("the host is idle", || host.is_idle()).await;
    assert_eq!(apps.passes_of(id), 2, "the self edge added no pass");
    assert_eq!(host.client(app()).list_dependencies(id).unwrap().len(), 1);
    stop(running).await;
    assert!(apps.errors.lock().unwrap().is_empty());
}

/// Re-asserts its dependency twenty times in one pass, counting the store's
/// commits across the repeats.
#[derive(Clone)]
struct Reasserts {
    store: Store,
    commits_during_repeats: Arc<Mutex<Option<f64>>>,
}

impl Controller for Reasserts {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        let target = object.spec.to_value()["target"].as_i64().unwrap();
        client.add_dependency(target).await?;
        let before = metric(&self.store, "beehive_store_commits_total");
        for _ in 0..20 {
            client.add_dependency(target).await?;
        }
        let during = metric(&self.store, "beehive_store_commits_total") - before;
        self.commits_during_repeats
            .lock()
            .unwrap()
            .get_or_insert(during);
        Ok(Action::settled())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_asserting_an_existing_dependency_writes_nothing() {
    let store = beehive_e2e::store();
    let target = create(&beehive::RawClient::new(&store, config()), "target", "{}").await;
    let host = Host::new(&store, options()).unwrap();
    let reasserts = Reasserts {
        store: store.clone(),
        commits_during_repeats: Arc::default(),
    };
    let running = serve(&host, app(), reasserts.clone()).await;
    let spec = pointing_at(target.meta.id, "Config");
    let dependent = create(&host.client(app()), "dependent", &spec).await;
    eventually("the dependent's pass ran", || {
        reasserts.commits_during_repeats.lock().unwrap().is_some()
    })
    .await;
    let during = reasserts.commits_during_repeats.lock().unwrap().unwrap();
    // At most the waker's saved cursor (once a second) lands in between.
    assert!(during <= 1.0, "{during} commits for 20 re-assertions");
    assert_eq!(
        host.client(app())
            .list_dependencies(dependent.meta.id)
            .unwrap()
            .len(),
        1
    );
    stop(running).await;
}

/// Declares its dependency, and in the first pass that sees `v: 2` drops it
/// and declares it again; reports the spec's `v` as its status, committed
/// after the edges.
#[derive(Clone, Default)]
struct Redeclares;

impl Controller for Redeclares {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        let spec = object.spec.to_value();
        let target = spec["target"].as_i64().unwrap();
        client.add_dependency(target).await?;
        let status = object.status.as_ref().map(|s| s.to_value()["v"].clone());
        if spec["v"] == 2 && status != Some(2.into()) {
            client.delete_dependency(target).await?;
            client.add_dependency(target).await?;
        }
        client
            .update_status(&serde_json::json!({ "v": spec["v"] }))
            .await?;
        Ok(Action::settled())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_dropped_and_declared_again_in_one_pass_is_written_again() {
    let store = beehive_e2e::store();
    let target = create(&beehive::RawClient::new(&store, config()), "target", "{}").await;
    let host = Host::new(&store, options()).unwrap();
    let running = serve(&host, app(), Redeclares).await;
    let spec = format!(r#"{{"target":{},"v":1}}"#, target.meta.id);
    let dependent = create(&host.client(app()), "dependent", &spec).await;
    let passed = |v: i64| {
        let object = host.client(app()).get(dependent.meta.id).unwrap();
        object.status.map(|s| s.to_value()["v"] == v) == Some(true)
    };
    eventually("the first pass commits", || passed(1)).await;
    // The second pass loads the edge with the object: dropping it must
    // forget what was loaded, or declaring it again would write nothing.
    update(
        &host.client(app()),
        dependent.meta.id,
        &format!(r#"{{"target":{},"v":2}}"#, target.meta.id),
    )
    .await;
    eventually("the second pass commits", || passed(2)).await;
    let edges = host
        .client(app())
        .list_dependencies(dependent.meta.id)
        .unwrap();
    assert_eq!(edges.len(), 1, "the edge declared again was not written");
    stop(running).await;
}

/// A kind registered on a running host (as `beehive run` registers each
/// plugin once it has loaded) passes its dependents whose targets changed
/// while it had no controller, whose wakes were dropped, without waiting
/// for the next stale-dependents pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_registered_on_a_running_host_passes_dependents_gone_stale_meanwhile() {
    let store = beehive_e2e::store();
    let hourly = options().stale_dependents_interval(Duration::from_secs(3600));
    let host = Host::new(&store, hourly).unwrap();
    let apps = Apps::default();
    host.register(app(), apps.clone(), ControllerOptions::new())
        .await
        .unwrap();
    let running = serve(&host, db(), Dbs::default()).await;
    let target = create(&host.client(config()), "settings", r#"{"color":"red"}"#).await;
    let ids = apps_on(&host, target.meta.id, "Config", 1).await;
    apps_settle("the app settles with its edge", &host, &store).await;
    eventually("the host is idle", || host.is_idle()).await;
    let before = apps.passes_of(ids[0]);

    host.unregister(&app()).await.unwrap();
    update(
        &host.client(config()),
        target.meta.id,
        r#"{"color":"blue"}"#,
    )
    .await;
    eventually("the waker saw the write", || host.is_idle()).await;
    host.register(app(), apps.clone(), ControllerOptions::new())
        .await
        .unwrap();
    eventually("the app passed over the new target", || {
        apps.passes_of(ids[0]) > before
    })
    .await;
    stop(running).await;
}
