//! Engine throughput on a file-backed store, with a trivial native controller
//! (write the status, settle).
//!
//! Prints `figure NAME VALUE UNIT` lines, each the median of three runs:
//! - `engine.converge_10k_c1_per_s`: 10,000 objects created by 8 tasks, one
//!   worker; first create to all observed;
//! - `engine.converge_10k_c4_per_s`: the same with four workers;
//! - `engine.reconverge_10k_s`: four workers, every spec updated by 8 tasks;
//!   first update to all observed;
//! - `engine.cascade_1k_s`: an owner with 1,000 children of a registered kind,
//!   default GC interval; delete to owner row gone.

use std::time::{Duration, Instant};

use beehive::{ControllerOptions, CreateOptions, GroupKind, Host, HostOptions, Json, Store};
use beehive_e2e::bench::{
    OBJECTS, WriteStatus, block_on, create_all, figure, median, object_name, outstanding, wait_for,
    wanted, widget, write_all,
};

/// How often a wait polls the store file: as often as the reference's
/// harness polls its own (a poll costs little next to the workloads, and a
/// coarse one would add up to its period to every figure).
const POLL: Duration = Duration::from_millis(1);

async fn started_host(workers: usize) -> (Store, Host, beehive::engine::StopHandle) {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    host.register(
        widget(),
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
    let start = Instant::now();
    create_all(&host.client(widget()), OBJECTS, |i| {
        format!(r#"{{"replicas":{i}}}"#)
    })
    .await;
    wait_for(POLL, || outstanding(&conn, None) == 0).await;
    (start.elapsed().as_secs_f64(), store, host, running)
}

async fn reconverge() -> f64 {
    let (_elapsed, store, host, running) = converge(4).await;
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let start = Instant::now();
    write_all(&host.client(widget()), OBJECTS, |client, i| async move {
        let spec = Json::parse(&format!(r#"{{"replicas":{i},"round":2}}"#)).expect("spec");
        client
            .update_by_name(&object_name(i), spec)
            .await
            .expect("update");
    })
    .await;
    wait_for(POLL, || outstanding(&conn, None) == 0).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

async fn cascade() -> f64 {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let parent = GroupKind::new("bench.dev", "Parent");
    for gk in [parent.clone(), widget()] {
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
    let children = host.client(widget());
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
    wait_for(POLL, || outstanding(&conn, None) == 0).await;
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
    wait_for(POLL, gone).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

/// How many times each figure is measured; the median is reported, as the
/// reference's harness reports the median of three runs.
const RUNS: usize = 3;

fn main() {
    block_on(async {
        for (name, workers) in [
            ("engine.converge_10k_c1_per_s", 1),
            ("engine.converge_10k_c4_per_s", 4),
        ] {
            if wanted(name) {
                let mut samples = Vec::with_capacity(RUNS);
                for _ in 0..RUNS {
                    let (elapsed, _store, _host, running) = converge(workers).await;
                    running.stop(Duration::from_secs(30)).await.expect("stop");
                    samples.push(OBJECTS as f64 / elapsed);
                }
                figure(name, median(samples), "obj/s");
            }
        }
        if wanted("engine.reconverge_10k_s") {
            let mut samples = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                samples.push(reconverge().await);
            }
            figure("engine.reconverge_10k_s", median(samples), "s");
        }
        if wanted("engine.cascade_1k_s") {
            let mut samples = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                samples.push(cascade().await);
            }
            figure("engine.cascade_1k_s", median(samples), "s");
        }
    });
}
