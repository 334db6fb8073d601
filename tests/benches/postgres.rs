//! The engine on a PostgreSQL store, on a throwaway local server (Unix
//! socket, default durability settings).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `pg.converge_10k_c1_per_s`: the workload of `engine.converge_10k_c1_per_s`
//!   (10,000 objects created by 8 tasks, one worker writing each status;
//!   first create to all observed) with the store in PostgreSQL.

use std::time::{Duration, Instant};

use beehive::{
    Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind, Host, HostOptions,
    Json, RawObject, ReconcileResult, Store,
};
use beehive_e2e::TestPostgres;

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

/// Objects not yet observed at their generation, read as an outside
/// observer would.
fn outstanding(store: &Store) -> i64 {
    let row = store
        .inspect(
            "SELECT COUNT(*) FROM objects \
             WHERE grp = 'bench.dev' AND kind = 'Widget' \
               AND (observed_generation IS NULL OR observed_generation < generation)",
            &[],
        )
        .expect("count")
        .expect("a row");
    row[0]
        .as_deref()
        .expect("a count")
        .parse()
        .expect("a number")
}

async fn converge(url: &str) -> f64 {
    let store = Store::open(url).expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    host.register(kind(), WriteStatus, ControllerOptions::new().concurrency(1))
        .await
        .expect("register");
    let running = host.start().await.expect("start");
    let client = host.client(kind());
    let start = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (writer..OBJECTS).step_by(WRITERS) {
                    let spec = Json::parse(&format!(r#"{{"replicas":{i}}}"#)).expect("spec");
                    client
                        .create(&format!("w{i}"), spec, CreateOptions::new())
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    while outstanding(&store) > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

/// One caller creating objects one at a time, then reading them back by id.
async fn sequential(url: &str) -> (f64, f64) {
    let store = Store::open(url).expect("store");
    let client = beehive::RawClient::new(&store, GroupKind::new("bench.dev", "Seq"));
    let count = 2_000;
    let start = Instant::now();
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let spec = Json::parse(&format!(r#"{{"replicas":{i}}}"#)).expect("spec");
        let created = client
            .create(&format!("s{i}"), spec, CreateOptions::new())
            .await
            .expect("create");
        ids.push(created.meta.id);
    }
    let creates = count as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for id in &ids {
        client.get(*id).expect("get");
    }
    let get_us = start.elapsed().as_secs_f64() * 1e6 / count as f64;
    (creates, get_us)
}

fn figure(name: &str, value: f64, unit: &str) {
    println!("figure {name} {value:.3} {unit}");
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if wanted("pg.creates_seq_per_s") || wanted("pg.get_by_id_us") {
        let server = TestPostgres::start();
        let (creates, get_us) = runtime.block_on(sequential(server.url()));
        figure("pg.creates_seq_per_s", creates, "obj/s");
        figure("pg.get_by_id_us", get_us, "us");
    }
    if wanted("pg.converge_10k_c1_per_s") {
        let server = TestPostgres::start();
        let elapsed = runtime.block_on(converge(server.url()));
        figure(
            "pg.converge_10k_c1_per_s",
            OBJECTS as f64 / elapsed,
            "obj/s",
        );
    }
}
