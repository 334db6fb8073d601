//! Plugin throughput against the same logic written natively, on
//! file-backed stores. Needs the example plugins built (`scripts/build-plugins`).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `plugin.converge_10k_wasm_per_s`: 10,000 greetings created by 8 tasks,
//!   one worker running the `greeting` plugin; first create to all observed;
//! - `plugin.converge_10k_native_per_s`: the same with the logic in Rust;
//! - `plugin.cold_start_ms`: with every example plugin already in the
//!   compiled-artifact cache, loading the plugin directory, starting the
//!   host, and one greeting observed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use beehive::plugin::{Limits, PluginRuntime, load_directory};
use beehive::{
    Client, Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind, Host,
    HostOptions, Json, Object, RawClient, ReconcileResult, Reconciler, Store, Typed,
};
use beehive_e2e::plugin_wasm;
use serde::{Deserialize, Serialize};

const OBJECTS: usize = 10_000;
const WRITERS: usize = 8;

#[derive(Serialize, Deserialize)]
struct Spec {
    name: String,
}

#[derive(Serialize, Deserialize)]
struct Status {
    message: String,
}

/// The greeting plugin's logic, natively.
struct NativeGreeter;

impl Reconciler<Spec, Status> for NativeGreeter {
    async fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Spec, Status>,
    ) -> ReconcileResult {
        let message = format!("Hello, {}!", object.spec.name);
        match client.update_status(&Status { message }).await {
            Ok(()) => ReconcileResult::settled(),
            Err(error) => ReconcileResult::fail(error),
        }
    }
}

fn greeting() -> GroupKind {
    GroupKind::new("example.dev", "Greeting")
}

fn outstanding(conn: &rusqlite::Connection) -> i64 {
    conn.query_row(
        "SELECT COUNT(*) FROM objects INDEXED BY objects_owed \
         WHERE (observed_generation IS NULL OR observed_generation < generation \
                OR reconcile_owed > 0 OR deletion_requested_at IS NOT NULL)",
        [],
        |row| row.get(0),
    )
    .expect("count")
}

async fn wait_for(mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn converge(store: Store, host: Host) -> f64 {
    let running = host.start().await.expect("start");
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let client: RawClient = host.client(greeting());
    let start = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (writer..OBJECTS).step_by(WRITERS) {
                    let spec = Json::parse(&format!(r#"{{"name":"n{i}"}}"#)).expect("spec");
                    client
                        .create(&format!("g{i}"), spec, CreateOptions::new())
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    wait_for(|| outstanding(&conn) == 0).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    OBJECTS as f64 / elapsed
}

async fn wasm() -> f64 {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::copy(plugin_wasm("greeting"), dir.path().join("greeting.wasm")).expect("copy");
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let runtime = PluginRuntime::new(Limits::default()).expect("runtime");
    for loaded in load_directory(&runtime, &host, dir.path())
        .await
        .expect("load")
    {
        loaded.outcome.expect("plugin");
    }
    converge(store, host).await
}

async fn native() -> f64 {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let controller: Arc<dyn Controller> = Arc::new(Typed::new(NativeGreeter));
    host.register_shared(greeting(), controller, ControllerOptions::new())
        .await
        .expect("register");
    converge(store, host).await
}

async fn cold_start() -> f64 {
    let dir = tempfile::tempdir().expect("dir");
    for name in ["greeting", "misbehave"] {
        std::fs::copy(plugin_wasm(name), dir.path().join(format!("{name}.wasm"))).expect("copy");
    }
    let cache = tempfile::tempdir().expect("cache");
    {
        // Fill the cache, as an earlier run of the host would have.
        let warm_store = Store::temporary().expect("store");
        let warm_host = Host::new(&warm_store, HostOptions::new()).expect("host");
        let runtime = PluginRuntime::with_cache(Limits::default(), cache.path()).expect("runtime");
        load_directory(&runtime, &warm_host, dir.path())
            .await
            .expect("load");
    }
    let store = Store::temporary().expect("store");
    let typed: Client<Spec, Status> = Client::new(&store, greeting());
    let created = typed
        .create(
            "first",
            &Spec {
                name: "first".into(),
            },
            CreateOptions::new(),
        )
        .await
        .expect("create");
    let start = Instant::now();
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let runtime = PluginRuntime::with_cache(Limits::default(), cache.path()).expect("runtime");
    for loaded in load_directory(&runtime, &host, dir.path())
        .await
        .expect("load")
    {
        loaded.outcome.expect("plugin");
    }
    assert_eq!(
        runtime.compiled_count(),
        0,
        "everything came from the cache"
    );
    let running = host.start().await.expect("start");
    wait_for(|| {
        typed
            .get(created.id(), beehive::Loads::none())
            .map(|o| o.meta.is_observed())
            .unwrap_or(false)
    })
    .await;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "figure plugin.converge_10k_wasm_per_s {:.1} obj/s",
            wasm().await
        );
        println!(
            "figure plugin.converge_10k_native_per_s {:.1} obj/s",
            native().await
        );
        println!("figure plugin.cold_start_ms {:.1} ms", cold_start().await);
    });
}
