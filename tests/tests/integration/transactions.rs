//! Transactions a pass opens: `within`, nested frames, the hold limit, and a
//! pass that returns with a frame open.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use beehive::engine::Cadence;
use beehive::{
    Action, Condition, ConditionStatus, Controller, ControllerClient, ControllerOptions,
    CreateOptions, Error, GroupKind, Host, HostOptions, Json, RawObject, Result, Store,
    event::EventFilter,
};
use beehive_e2e::{create, eventually, metric, serve, spec, stop};

fn parent() -> GroupKind {
    GroupKind::new("test.dev", "Parent")
}

fn child() -> GroupKind {
    GroupKind::core("Child")
}

/// Runs the scenario named by the object's spec on its first pass, and keeps
/// what it saw for the test to check.
struct Scenario {
    seen: Arc<Mutex<Vec<String>>>,
}

/// Creates child `name` with an empty spec, inside whatever transaction the
/// pass holds open.
async fn make_child(children: &beehive::RawClient, name: &str) -> beehive::Result<RawObject> {
    children
        .create(name, spec("{}"), CreateOptions::new())
        .await
}

fn note(seen: &Mutex<Vec<String>>, line: impl Into<String>) {
    seen.lock().unwrap().push(line.into());
}

async fn run(client: &ControllerClient, object: &RawObject, seen: &Mutex<Vec<String>>) -> Action {
    let children = client.kind_client(child());
    let scenario = object.spec.to_value()["scenario"]
        .as_str()
        .unwrap_or("")
        .to_string();
    match scenario.as_str() {
        "commit" => {
            let result = client
                .within(|tx| {
                    let children = children.clone();
                    async move {
                        tx.update_status(&serde_json::json!({"phase": "done"}))
                            .await?;
                        tx.set_condition(Condition::new("Ready", ConditionStatus::True))
                            .await?;
                        make_child(&children, "kept").await?;
                        let read = children.get_by_name("kept")?;
                        note(seen, format!("read own write: {}", read.meta.name));
                        Ok(())
                    }
                })
                .await;
            note(seen, format!("commit: {result:?}"));
            Action::settled()
        }
        "rollback" => {
            let hook_ran = Arc::new(Mutex::new(false));
            let flag = hook_ran.clone();
            let result: beehive::Result<()> = client
                .within(|tx| {
                    let children = children.clone();
                    async move {
                        tx.set_condition(Condition::new("Ready", ConditionStatus::True))
                            .await?;
                        children
                            .create(
                                "discarded",
                                spec("{}"),
                                CreateOptions::new()
                                    .on_create(move || *flag.lock().unwrap() = true),
                            )
                            .await?;
                        Err(Error::InvalidOption("changed my mind".into()))
                    }
                })
                .await;
            note(seen, format!("rollback: {}", result.is_err()));
            note(seen, format!("hook ran: {}", hook_ran.lock().unwrap()));
            Action::settled()
        }
        "nested" => {
            let outcome = async {
                client.begin().await?;
                make_child(&children, "outer").await?;
                client.begin().await?;
                make_child(&children, "inner").await?;
                client.rollback().await?;
                client.commit().await
            }
            .await;
            note(seen, format!("nested: {outcome:?}"));
            note(
                seen,
                format!("extra commit: {:?}", client.commit().await.err()),
            );
            Action::settled()
        }
        "hold" => {
            let outcome = async {
                client.begin().await?;
                make_child(&children, "held").await?;
                tokio::time::sleep(Duration::from_millis(600)).await;
                make_child(&children, "late").await?;
                client.commit().await
            }
            .await;
            note(
                seen,
                format!("hold: {:?}", outcome.err().map(|e| e.to_string())),
            );
            Action::settled()
        }
        "status-rolled-back" => {
            let reported = serde_json::json!({"phase": "B"});
            let outcome = async {
                client.begin().await?;
                client.update_status(&reported).await?;
                client.rollback().await?;
                // The same status again, now outside the transaction: the
                // rollback undid the first write, so this one must land.
                client.update_status(&reported).await
            }
            .await;
            note(seen, format!("status: {outcome:?}"));
            Action::settled()
        }
        "status-nested" => {
            let outcome = async {
                client.begin().await?;
                client
                    .update_status(&serde_json::json!({"phase": "outer"}))
                    .await?;
                client.begin().await?;
                client
                    .update_status(&serde_json::json!({"phase": "inner"}))
                    .await?;
                client.rollback().await?;
                client
                    .update_status(&serde_json::json!({"phase": "inner"}))
                    .await?;
                client.commit().await
            }
            .await;
            note(seen, format!("status: {outcome:?}"));
            Action::settled()
        }
        "left-open" => {
            if client.begin().await.is_ok() {
                let _ = children
                    .create("abandoned", spec("{}"), CreateOptions::new())
                    .await;
            }
            Action::settled()
        }
        _ => Action::settled(),
    }
}

impl Controller for Scenario {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        Ok(run(client, object, &self.seen).await)
    }
}

async fn run_scenario(scenario: &str) -> (Store, Host, Vec<String>, RawObject) {
    let store = beehive_e2e::store();
    let options = HostOptions::new()
        .cadence(Cadence::new().owed_pass_interval(Duration::from_secs(60)))
        .transaction_hold_limit(Duration::from_millis(200));
    let host = Host::new(&store, options).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    host.register(
        parent(),
        Scenario { seen: seen.clone() },
        ControllerOptions::new(),
    )
    .await
    .unwrap();
    // Created before the start, so the startup owed pass is its only wake:
    // a push racing that scan could queue a second pass, and every scenario
    // here records what one pass saw.
    let created = host
        .client(parent())
        .create(
            "p",
            spec(&format!(r#"{{"scenario":"{scenario}"}}"#)),
            CreateOptions::new(),
        )
        .await
        .unwrap();
    let running = host.start().await.unwrap();
    let id = created.meta.id;
    let parents = host.client(parent());
    let events = host.client(parent());
    eventually("the pass has run", || {
        let object = parents.get(id).unwrap();
        let failed = !events
            .list_events(id, &EventFilter::all().category("reconcile"))
            .unwrap()
            .is_empty();
        object.meta.is_observed() || failed
    })
    .await;
    stop(running).await;
    let seen = seen.lock().unwrap().clone();
    let object = host.client(parent()).get(id).unwrap();
    (store, host, seen, object)
}

fn names(host: &Host) -> Vec<String> {
    host.client(child())
        .list()
        .unwrap()
        .into_iter()
        .map(|o| o.meta.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn within_commits_every_write_of_the_pass_together() {
    let (_store, host, seen, object) = run_scenario("commit").await;
    assert_eq!(seen, ["read own write: kept", "commit: Ok(())"]);
    assert_eq!(names(&host), ["kept"]);
    assert_eq!(object.status, Some(spec(r#"{"phase":"done"}"#)));
    assert_eq!(object.meta.conditions.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_within_rolls_back_and_skips_on_create_hooks() {
    let (_store, host, seen, object) = run_scenario("rollback").await;
    assert_eq!(seen, ["rollback: true", "hook ran: false"]);
    assert!(names(&host).is_empty(), "the child was rolled back");
    assert!(
        object.meta.conditions.is_empty(),
        "the condition was rolled back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_rollback_undoes_only_its_own_frame() {
    let (_store, host, seen, _object) = run_scenario("nested").await;
    assert_eq!(
        seen,
        ["nested: Ok(())", "extra commit: Some(NoTransaction)"]
    );
    assert_eq!(names(&host), ["outer"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_status_is_written_again_when_reported_again() {
    let (_store, _host, seen, object) = run_scenario("status-rolled-back").await;
    assert_eq!(seen, ["status: Ok(())"]);
    assert_eq!(object.status, Some(spec(r#"{"phase":"B"}"#)));
    assert!(object.meta.is_observed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_rollback_restores_the_status_its_frame_saw() {
    let (_store, _host, seen, object) = run_scenario("status-nested").await;
    assert_eq!(seen, ["status: Ok(())"]);
    assert_eq!(object.status, Some(spec(r#"{"phase":"inner"}"#)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_held_past_its_limit_is_rolled_back() {
    let (_store, host, seen, _object) = run_scenario("hold").await;
    assert_eq!(seen.len(), 1);
    assert!(seen[0].contains("timed out"), "{seen:?}");
    assert!(
        names(&host).is_empty(),
        "nothing from the expired transaction"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_that_returns_with_a_frame_open_is_rolled_back_and_fails() {
    let (_store, host, _seen, object) = run_scenario("left-open").await;
    assert!(names(&host).is_empty());
    assert!(
        !object.meta.is_observed(),
        "the pass failed, so nothing settled"
    );
    let failures = host
        .client(parent())
        .list_events(object.meta.id, &EventFilter::all().category("reconcile"))
        .unwrap();
    assert!(
        failures[0].message.contains("transaction open"),
        "{failures:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_outside_a_transaction_wait_for_it_and_then_proceed() {
    let store = beehive_e2e::store();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = Arc::new(Mutex::new(Some(entered_tx)));
    let release = Arc::new(tokio::sync::Notify::new());
    struct Holder {
        entered: Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>,
        release: Arc<tokio::sync::Notify>,
    }
    impl Controller for Holder {
        type Spec = Json;
        type Status = Json;

        async fn reconcile(
            &self,
            client: &ControllerClient,
            _object: &RawObject,
        ) -> Result<Action> {
            let signal = self.entered.lock().unwrap().take();
            let Some(signal) = signal else {
                return Ok(Action::settled());
            };
            client
                .within(|tx| async move {
                    tx.set_condition(Condition::new("Held", ConditionStatus::True))
                        .await?;
                    let _ = signal.send(());
                    self.release.notified().await;
                    Ok(())
                })
                .await?;
            Ok(Action::settled())
        }
    }
    let running = serve(
        &host,
        parent(),
        Holder {
            entered,
            release: release.clone(),
        },
    )
    .await;
    create(&host.client(parent()), "p", "{}").await;
    entered_rx.await.unwrap();
    let outside = {
        let notes = host.client(child());
        tokio::spawn(async move {
            notes
                .create("outside", spec("{}"), CreateOptions::new())
                .await
        })
    };
    // The outside write queues behind the held transaction, and stays there.
    eventually("the outside write is queued", || {
        metric(&store, "beehive_store_writes_waiting") >= 1.0
    })
    .await;
    assert!(
        !outside.is_finished(),
        "the writer is held by the transaction"
    );
    release.notify_one();
    outside.await.unwrap().unwrap();
    assert_eq!(names(&host), ["outside"]);
    stop(running).await;
}
