//! Dependency fan-out on a file-backed store.
//!
//! Prints `figure deps.fanout_1k_s`: one target, 1,000 dependents of a
//! registered kind that declare the edge in their pass; once all have settled
//! (and the per-object re-enqueue floor of their last pass has passed), the
//! target is updated, and the figure is the time until every dependent has
//! run again (the median of five such updates): from the update's call to
//! the start of the last dependent's pass, as the reference's harness times
//! it, not to when a poll next noticed. `deps.fanout_first_ms` is the same
//! round's wait for the first dependent's pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, Error, GroupKind, Host,
    HostOptions, Json, RawObject, Result, Store,
};
use beehive_e2e::bench::{block_on, figure, outstanding, wait_for};

const DEPENDENTS: usize = 1_000;

struct Dependent {
    passes: Arc<AtomicUsize>,
    /// When the first pass since the last reset started, and the latest.
    passes_at: Arc<Mutex<(Option<Instant>, Instant)>>,
}

impl Controller for Dependent {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        {
            let now = Instant::now();
            let mut at = self.passes_at.lock().expect("clock");
            at.0.get_or_insert(now);
            at.1 = now;
        }
        self.passes.fetch_add(1, Ordering::SeqCst);
        let Some(target) = object.spec.to_value()["target"].as_i64() else {
            return Err(Error::msg("no target"));
        };
        client.add_dependency(target).await?;
        Ok(Action::settled())
    }
}

/// How many times the target is updated; the figure is the median round, as
/// a single round on a shared machine measures its neighbours as much as us.
const ROUNDS: usize = 5;

/// How often a wait polls.
const POLL: Duration = Duration::from_millis(2);

/// The median round: (seconds to the last dependent's pass, to the first's).
async fn fanout() -> (f64, f64) {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let passes = Arc::new(AtomicUsize::new(0));
    let passes_at = Arc::new(Mutex::new((None, Instant::now())));
    let apps = GroupKind::new("bench.dev", "App");
    host.register(
        apps.clone(),
        Dependent {
            passes: passes.clone(),
            passes_at: passes_at.clone(),
        },
        ControllerOptions::new(),
    )
    .await
    .expect("register");
    let running = host.start().await.expect("start");
    let configs = host.client(GroupKind::core("Config"));
    let settings = Json::parse(r#"{"v":1}"#).expect("spec");
    let target = configs
        .create("settings", settings, CreateOptions::new())
        .await
        .expect("target");
    let client = host.client(apps.clone());
    for i in 0..DEPENDENTS {
        let spec = Json::parse(&format!(r#"{{"target":{}}}"#, target.meta.id)).expect("spec");
        client
            .create(&format!("app{i}"), spec, CreateOptions::new())
            .await
            .expect("dependent");
    }
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    // Counting dependents only: the client-only target never settles.
    wait_for(POLL, || outstanding(&conn, Some(&apps)) == 0).await;
    let mut rounds = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // Let the re-enqueue floor of every dependent's last pass run out, as
        // it has for any target that changes less than once a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let before = passes.load(Ordering::SeqCst);
        passes_at.lock().expect("clock").0 = None;
        let start = Instant::now();
        let spec = Json::parse(&format!(r#"{{"v":{}}}"#, round + 2)).expect("spec");
        configs.update(target.meta.id, spec).await.expect("update");
        wait_for(POLL, || {
            passes.load(Ordering::SeqCst) >= before + DEPENDENTS
        })
        .await;
        let (first, last) = *passes_at.lock().expect("clock");
        let first = first.expect("a pass ran");
        rounds.push((
            last.duration_since(start).as_secs_f64(),
            first.duration_since(start).as_secs_f64(),
        ));
    }
    running.stop(Duration::from_secs(30)).await.expect("stop");
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    rounds[ROUNDS / 2]
}

fn main() {
    let (all, first) = block_on(fanout());
    figure("deps.fanout_1k_s", all, "s");
    figure("deps.fanout_first_ms", first * 1000.0, "ms");
}
