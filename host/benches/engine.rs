//! Engine throughput on a file-backed store, with a trivial native controller
//! (write the status, settle).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `engine.converge_10k_c1_per_s`: 10,000 objects created by 8 tasks, one
//!   worker; first create to all observed;
//! - `engine.converge_10k_c4_per_s`: the same with four workers;
//! - `engine.reconverge_10k_s`: four workers, every spec updated by 8 tasks;
//!   first update to all observed;
//! - `engine.cascade_1k_s`: an owner with 1,000 children of a registered kind,
//!   default GC interval; delete to owner row gone.

use std::time::{Duration, Instant};

use beehive::{
    Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind, Host, HostOptions,
    Json, RawClient, RawObject, ReconcileResult, Store,
};

const OBJECTS: usize = 10_000;
const WRITERS: usize = 8;

struct WriteStatus;

impl Controller for WriteStatus {
    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> ReconcileResult {
        match client.update_status_json(object.spec.clone()).await {
            Ok(()) => ReconcileResult::settled(),
            Err(error) => ReconcileResult::fail(error),
        }
    }
}

fn kind() -> GroupKind {
    GroupKind::new("bench.dev", "Widget")
}

fn figure(name: &str, value: f64, unit: &str) {
    println!("figure {name} {value:.3} {unit}");
}

/// Counts settled objects straight from the file, as an outside observer
/// would: the total minus what the partial index of outstanding work holds,
/// so a poll costs what is left to do rather than a scan of every row.
fn observed(conn: &rusqlite::Connection) -> usize {
    let count = |sql: &str| {
        conn.query_row(sql, [], |row| row.get::<_, i64>(0))
            .expect("count") as usize
    };
    let total = count("SELECT COUNT(*) FROM objects");
    let outstanding = count(
        "SELECT COUNT(*) FROM objects INDEXED BY objects_owed \
         WHERE (observed_generation IS NULL OR observed_generation < generation \
                OR reconcile_owed > 0 OR deletion_requested_at IS NOT NULL)",
    );
    total - outstanding
}

async fn wait_for(mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `write(client, i)` for every i in 0..OBJECTS, spread over 8 tasks.
async fn write_all<F, Fut>(client: &RawClient, write: F)
where
    F: Fn(RawClient, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (client, write) = (client.clone(), write.clone());
            tokio::spawn(async move {
                for i in (writer..OBJECTS).step_by(WRITERS) {
                    write(client.clone(), i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
}

async fn started_host(workers: usize) -> (Store, Host, beehive::engine::StopHandle) {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    host.register(
        kind(),
        WriteStatus,
        ControllerOptions::new().concurrency(workers),
    )
    .await
    .expect("register");
    let running = host.start().await.expect("start");
    (store, host, running)
}

/// Creates OBJECTS objects and returns (seconds to converge, the store and host).
async fn converge(workers: usize) -> (f64, Store, Host, beehive::engine::StopHandle) {
    let (store, host, running) = started_host(workers).await;
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let client = host.client(kind());
    let start = Instant::now();
    write_all(&client, |client, i| async move {
        let spec = Json::parse(&format!(r#"{{"replicas":{i}}}"#)).expect("spec");
        client
            .create(&format!("w{i}"), spec, CreateOptions::new())
            .await
            .expect("create");
    })
    .await;
    wait_for(|| observed(&conn) == OBJECTS).await;
    (start.elapsed().as_secs_f64(), store, host, running)
}

async fn reconverge() -> f64 {
    let (_elapsed, store, host, running) = converge(4).await;
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let client = host.client(kind());
    let start = Instant::now();
    write_all(&client, |client, i| async move {
        let spec = Json::parse(&format!(r#"{{"replicas":{i},"round":2}}"#)).expect("spec");
        client
            .update_by_name(&format!("w{i}"), spec)
            .await
            .expect("update");
    })
    .await;
    wait_for(|| observed(&conn) == OBJECTS).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

async fn cascade() -> f64 {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let parent = GroupKind::new("bench.dev", "Parent");
    for gk in [parent.clone(), kind()] {
        host.register(gk, WriteStatus, ControllerOptions::new())
            .await
            .expect("register");
    }
    let running = host.start().await.expect("start");
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let owner = host
        .client(parent.clone())
        .create(
            "owner",
            Json::parse("{}").expect("spec"),
            CreateOptions::new(),
        )
        .await
        .expect("owner");
    let children = host.client(kind());
    for i in 0..1_000 {
        children
            .create(
                &format!("c{i}"),
                Json::parse("{}").expect("spec"),
                CreateOptions::new().owner(owner.meta.id),
            )
            .await
            .expect("child");
    }
    wait_for(|| observed(&conn) == 1_001).await;
    let start = Instant::now();
    host.client(parent)
        .delete(owner.meta.id)
        .await
        .expect("delete");
    let gone = || {
        conn.query_row(
            "SELECT COUNT(*) FROM objects WHERE id = ?1",
            [owner.meta.id],
            |r| r.get::<_, i64>(0),
        )
        .expect("probe")
            == 0
    };
    wait_for(gone).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for (name, workers) in [
            ("engine.converge_10k_c1_per_s", 1),
            ("engine.converge_10k_c4_per_s", 4),
        ] {
            if wanted(name) {
                let (elapsed, _store, _host, running) = converge(workers).await;
                running.stop(Duration::from_secs(30)).await.expect("stop");
                figure(name, OBJECTS as f64 / elapsed, "obj/s");
            }
        }
        if wanted("engine.reconverge_10k_s") {
            figure("engine.reconverge_10k_s", reconverge().await, "s");
        }
        if wanted("engine.cascade_1k_s") {
            figure("engine.cascade_1k_s", cascade().await, "s");
        }
    });
}
