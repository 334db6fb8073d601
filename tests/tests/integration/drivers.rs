//! The drivers and the lifecycle: full, individual and startup passes,
//! registering after start, unregistering, stopping, retention, idleness.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use beehive::engine::{Cadence, StopHandle};
use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, Error, EventSpec,
    GroupKind, Host, HostOptions, Json, Object, RawObject, Result, Store,
};
use beehive_e2e::{
    PassCounter, create, delete_and_wait_gone, eventually, metric, rise_over_three_sweeps, serve,
    serve_with, spec, stop,
};
use serde::{Deserialize, Serialize};

fn widget() -> GroupKind {
    GroupKind::new("test.dev", "Widget")
}

fn quiet() -> HostOptions {
    HostOptions::new()
        .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(60)))
        .gc_interval(Duration::from_secs(60))
}

async fn seed(store: &Store, count: usize) {
    let client = beehive::RawClient::new(store, widget());
    for i in 0..count {
        create(&client, &format!("w{i}"), "{}").await;
    }
}

/// A quiet host over `store` whose widgets are counted under `cadence`,
/// started.
async fn counting_host(store: &Store, cadence: Cadence) -> (Host, PassCounter, StopHandle) {
    let host = Host::new(store, quiet()).unwrap();
    let counter = PassCounter::default();
    let running = serve_with(
        &host,
        widget(),
        counter.clone(),
        ControllerOptions::new().cadence(cadence),
    )
    .await;
    (host, counter, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pass_revisits_settled_objects_on_its_interval() {
    let store = beehive_e2e::store();
    seed(&store, 3).await;
    let full = Cadence::new().full_pass_interval(Duration::from_millis(300));
    let (_host, counter, running) = counting_host(&store, full).await;
    counter.reaches(9, "two full passes beyond the first").await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_full_pass_reconciles_settled_objects_once_per_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open(&path).unwrap();
    seed(&store, 4).await;
    for round in 0..2 {
        let startup = Cadence::new().startup_full_pass(true);
        let (_host, counter, running) = counting_host(&store, startup).await;
        counter
            .reaches(4, "every object had its startup pass")
            .await;
        stop(running).await;
        // Round 0 settles unobserved objects; round 1 finds them all settled
        // and still passes over each, exactly once.
        assert_eq!(counter.count(), 4, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_individual_pass_interval_rearms_each_object_after_its_own_pass() {
    let store = beehive_e2e::store();
    seed(&store, 2).await;
    let individual = Cadence::new().individual_pass_interval(Duration::from_millis(250));
    let (host, counter, running) = counting_host(&store, individual).await;
    counter
        .reaches(8, "each object came back on its own cadence")
        .await;
    let id = host.client(widget()).get_by_name("w0").unwrap().meta.id;
    assert!(
        host.schedule(&widget(), id).next_requeue_at.is_some(),
        "armed"
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_registered_after_start_converges_its_kind_and_unregistering_drains_it() {
    let store = beehive_e2e::store();
    seed(&store, 5).await;
    let host = Host::new(&store, quiet()).unwrap();
    let running = host.start().await.unwrap();
    let counter = PassCounter::default();
    host.register(widget(), counter.clone(), ControllerOptions::new())
        .await
        .unwrap();
    let client = host.client(widget());
    eventually("the kind converged", || {
        client.list().unwrap().iter().all(|o| o.meta.is_observed())
    })
    .await;
    host.unregister(&widget()).await.unwrap();
    assert!(store.registrations().unwrap().is_empty());
    assert!(matches!(
        host.unregister(&widget()).await,
        Err(Error::NoController(_))
    ));
    let passes = counter.count();
    create(&client, "after", "{}").await;
    let later = client.get_by_name("after").unwrap();
    assert!(
        !later.meta.is_observed(),
        "nothing reconciles an unregistered kind"
    );
    assert_eq!(client.list().unwrap().len(), 6, "its objects stay");
    assert_eq!(counter.count(), passes);
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_reports_a_pass_that_outlives_its_deadline() {
    let store = beehive_e2e::store();
    seed(&store, 1).await;
    let host = Host::new(&store, quiet()).unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    struct Stuck(Arc<tokio::sync::Notify>);
    impl Controller for Stuck {
        type Spec = Json;
        type Status = Json;

        async fn reconcile(&self, _: &ControllerClient, _: &RawObject) -> Result<Action> {
            self.0.notify_one();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Action::settled())
        }
    }
    let running = serve(&host, widget(), Stuck(started.clone())).await;
    started.notified().await;
    let stopped = running.stop(Duration::from_millis(100)).await;
    assert!(
        matches!(stopped, Err(Error::StopTimedOut(_))),
        "{stopped:?}"
    );
    // The claim was released all the same: another host may start.
    let next = Host::new(&store, quiet()).unwrap();
    stop(next.start().await.unwrap()).await;
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Greeting {
    name: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Greeted {
    message: String,
}

struct Greeter;

impl Controller for Greeter {
    type Spec = Greeting;
    type Status = Greeted;

    async fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Greeting, Greeted>,
    ) -> Result<Action> {
        let status = Greeted {
            message: format!("Hello, {}!", object.spec.name),
        };
        client.update_status(&status).await?;
        Ok(Action::settled())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_reconciler_sees_decoded_objects_and_quarantines_bad_ones() {
    let store = beehive_e2e::store();
    let host = Host::new(&store, quiet()).unwrap();
    let running = serve(&host, widget(), Greeter).await;
    let client = host.typed_client::<Greeting, Greeted>(widget());
    let created = client
        .create(
            "ada",
            &Greeting { name: "Ada".into() },
            CreateOptions::new(),
        )
        .await
        .unwrap();
    let bad = create(&host.client(widget()), "bad", r#"{"nom":"x"}"#).await;
    eventually("the greeting is written", || {
        client.get(created.id()).unwrap().meta.is_observed()
    })
    .await;
    let greeted = client.get(created.id()).unwrap();
    assert_eq!(greeted.status.unwrap().message, "Hello, Ada!");
    let quarantined = host.client(widget()).get(bad.meta.id).unwrap();
    assert!(
        !quarantined.meta.is_observed(),
        "an undecodable object never settles"
    );
    let events = || {
        host.client(widget())
            .list_events(bad.meta.id, &beehive::event::EventFilter::all())
            .unwrap()
    };
    eventually("the quarantine is recorded", || !events().is_empty()).await;
    let reasons: Vec<String> = events().into_iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        ["DecodeFailed"],
        "a DecodeFailed warning says why, and the object is not retried as a failure"
    );
    stop(running).await;
}

/// A host whose owed passes run every `owed` and sweeps every 100 ms,
/// serving three seeded widgets, started once all are observed.
async fn settled_host(owed: Duration) -> (Store, Host, PassCounter, StopHandle) {
    let store = beehive_e2e::store();
    seed(&store, 3).await;
    let options = HostOptions::new()
        .cadence(Cadence::new().owed_pass_interval(owed))
        .gc_interval(Duration::from_millis(100));
    let host = Host::new(&store, options).unwrap();
    let counter = PassCounter::default();
    let running = serve(&host, widget(), counter.clone()).await;
    let client = host.client(widget());
    eventually("the kind converged", || {
        client.list().unwrap().iter().all(|o| o.meta.is_observed())
    })
    .await;
    (store, host, counter, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_host_writes_nothing() {
    let (store, _host, counter, running) = settled_host(Duration::from_millis(100)).await;
    let before = metric(&store, "beehive_store_commits_total");
    let passes = counter.count();
    // Three GC sweeps complete, and owed scans run beside them.
    rise_over_three_sweeps(&store, "beehive_gc_sweeps_total").await;
    assert_eq!(
        metric(&store, "beehive_store_commits_total"),
        before,
        "no commit while idle"
    );
    assert_eq!(counter.count(), passes, "and no pass");
    stop(running).await;
}

/// A settled host's owed passes read nothing until something is committed,
/// and a commit brings them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_hosts_owed_passes_read_nothing_until_a_commit() {
    let (store, host, counter, running) = settled_host(Duration::from_millis(20)).await;
    eventually("the host is idle", || host.is_idle()).await;

    let scans = metric(&store, "beehive_owed_scans_total");
    // Three sweeps (100 ms apart) span fifteen owed intervals; the first
    // may still read once, for a commit that landed just before it.
    let quiet_scans = rise_over_three_sweeps(&store, "beehive_owed_scans_total").await;
    assert!(
        quiet_scans <= 1.0,
        "{quiet_scans} owed scans of a quiet store"
    );

    create(&host.client(widget()), "late", "{}").await;
    eventually("the owed pass reads again", || {
        metric(&store, "beehive_owed_scans_total") > scans + quiet_scans
    })
    .await;
    counter.reaches(4, "the new widget's pass").await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_applies_event_and_write_log_retention() {
    let store = beehive_e2e::store();
    let host = Host::new(
        &store,
        HostOptions::new()
            .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(60)))
            .gc_interval(Duration::from_millis(100))
            .event_retention(2, Duration::ZERO)
            .write_log_retention(3, Duration::ZERO),
    )
    .unwrap();
    let reasons = Arc::new(Mutex::new(0usize));
    let counter = reasons.clone();
    struct Chatty(Arc<Mutex<usize>>);
    impl Controller for Chatty {
        type Spec = Json;
        type Status = Json;

        async fn reconcile(&self, client: &ControllerClient, _o: &RawObject) -> Result<Action> {
            for i in 0..5 {
                // Alternating reasons make five runs in one timeline.
                let reason = if i % 2 == 0 { "Up" } else { "Down" };
                client.add_event(EventSpec::normal(reason)).await?;
                *self.0.lock().unwrap() += 1;
            }
            Ok(Action::settled())
        }
    }
    let running = serve(&host, widget(), Chatty(counter)).await;
    let client = host.client(widget());
    let created = create(&client, "w", "{}").await;
    for round in 0..5 {
        client
            .update(created.meta.id, spec(&format!(r#"{{"round":{round}}}"#)))
            .await
            .unwrap();
    }
    eventually("retention trimmed both logs", || {
        let runs = client
            .list_events(created.meta.id, &beehive::event::EventFilter::all())
            .unwrap();
        let log = beehive_e2e::scalar(&store, "SELECT COUNT(*) FROM object_writes", &[]);
        runs.len() == 2 && log <= 3
    })
    .await;
    stop(running).await;
    assert!(*reasons.lock().unwrap() >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collected_object_leaves_its_final_state_in_the_write_log() {
    let store = beehive_e2e::store();
    let host = Host::new(&store, quiet()).unwrap();
    let running = serve(&host, widget(), PassCounter::default()).await;
    let client = host.client(widget());
    let created = create(&client, "w", r#"{"keep":"me"}"#).await;
    delete_and_wait_gone(&client, created.meta.id).await;
    stop(running).await;
    let image = store
        .inspect(
            "SELECT row_image FROM object_writes WHERE object_id = ?1 AND op = 'delete'",
            &[created.meta.id],
        )
        .unwrap()
        .and_then(|row| row.into_iter().next().flatten())
        .unwrap();
    let image: serde_json::Value = serde_json::from_str(&image).unwrap();
    assert_eq!(image["spec"]["keep"], "me");
    assert_eq!(image["name"], "w");
}

/// Asks to be called back (`{"act":"later"}`) or fails (`{"act":"fail"}`)
/// on its first pass of each object, settles after, and counts passes.
#[derive(Clone, Default)]
struct Appointments {
    passes: Arc<Mutex<std::collections::HashMap<String, usize>>>,
}

impl Appointments {
    fn passes_of(&self, name: &str) -> usize {
        self.passes.lock().unwrap().get(name).copied().unwrap_or(0)
    }
}

impl Controller for Appointments {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, _: &ControllerClient, object: &RawObject) -> Result<Action> {
        let pass = {
            let mut passes = self.passes.lock().unwrap();
            let count = passes.entry(object.meta.name.clone()).or_default();
            *count += 1;
            *count
        };
        let act = object.spec.to_value()["act"]
            .as_str()
            .unwrap_or("")
            .to_string();
        Ok(match (act.as_str(), pass) {
            ("later", 1) => Action::settled().requeue_after(Duration::from_millis(1500)),
            ("fail", 1) => Action::backoff("not yet"),
            _ => Action::settled(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeue_and_a_backoff_alarm_survive_a_restart() {
    let store = beehive_e2e::store();
    let controller = Appointments::default();
    let client = beehive::RawClient::new(&store, widget());
    for (name, act) in [("later", "later"), ("fail", "fail"), ("plain", "none")] {
        create(&client, name, &format!(r#"{{"act":"{act}"}}"#)).await;
    }
    let start = || async {
        let host = Host::new(&store, quiet()).unwrap();
        host.register(widget(), controller.clone(), ControllerOptions::new())
            .await
            .unwrap();
        host.start().await.unwrap()
    };
    let running = start().await;
    eventually("every first pass ran", || {
        ["later", "fail", "plain"]
            .iter()
            .all(|name| controller.passes_of(name) == 1)
    })
    .await;
    // Stopped before either appointment is due: they live only in the store.
    stop(running).await;

    let running = start().await;
    eventually("both appointments are kept after the restart", || {
        controller.passes_of("later") == 2 && controller.passes_of("fail") == 2
    })
    .await;
    assert_eq!(controller.passes_of("plain"), 1, "nothing was owed to it");
    let kept = client.get_by_name("later").unwrap();
    assert!(kept.meta.is_observed());
    stop(running).await;
}

/// Fails every pass, so its objects stay unsettled.
struct AlwaysFails;

impl Controller for AlwaysFails {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, _: &ControllerClient, _: &RawObject) -> Result<Action> {
        Err(Error::msg("not today"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_gauges_count_each_kind_and_its_unsettled_objects() {
    let store = beehive_e2e::store();
    seed(&store, 3).await;
    let broken = GroupKind::new("test.dev", "Broken");
    create(&beehive::RawClient::new(&store, broken.clone()), "b0", "{}").await;
    let host = Host::new(&store, quiet()).unwrap();
    let counter = PassCounter::default();
    let widgets = serve(&host, widget(), counter.clone()).await;
    host.register(broken, AlwaysFails, ControllerOptions::new())
        .await
        .unwrap();
    let client = host.client(widget());
    eventually("the widgets converged", || {
        client.list().unwrap().iter().all(|o| o.meta.is_observed())
    })
    .await;
    eventually("the broken one failed", || {
        metric(&store, r#"beehive_objects_failing{kind="Broken.test.dev"}"#) == 1.0
    })
    .await;
    let gauge = |name: &str, kind: &str| metric(&store, &format!("{name}{{kind=\"{kind}\"}}"));
    assert_eq!(gauge("beehive_objects", "Widget.test.dev"), 3.0);
    assert_eq!(gauge("beehive_objects_unsettled", "Widget.test.dev"), 0.0);
    assert_eq!(gauge("beehive_objects", "Broken.test.dev"), 1.0);
    assert_eq!(gauge("beehive_objects_unsettled", "Broken.test.dev"), 1.0);
    stop(widgets).await;
}
