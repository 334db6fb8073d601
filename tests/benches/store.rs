//! Store and client throughput on a file-backed store.
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `store.creates_seq_per_s`: one caller creating objects one after another;
//! - `store.creates_per_s`: eight concurrent callers sharing group commits;
//! - `store.get_by_id_us`: a point read by id, decoded into a typed object;
//! - `store.validate_us`: one spec checked against the greeting plugin's
//!   schema (as its registration declares it), as every write of a kind
//!   with a schema is;
//! - `store.validate_worst_ms`: the longest one spec's check may take: the
//!   hostile plugin's schema, whose work doubles with each level of the
//!   spec, against a spec as deep as a document may be, until the check's
//!   budget cuts it off (the median of five);
//! - `backup.writer_stall_p99_ms`: the 99th percentile of a create's
//!   latency, one after another, while a backup of a 100,000-object store
//!   is taken (`backup.writer_p99_idle_ms`: the same with no backup);
//! - `backup.mib_per_s`: that backup's size over its time;
//! - `restore.to_serving_ms`: restoring it, opening the restored store and
//!   reading an object from it.

use std::time::Instant;

use beehive::{Client, CreateOptions, GroupKind, Store};
use beehive_e2e::bench::{block_on, figure, median, wanted};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Spec {
    image: String,
    replicas: u32,
    labels: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Status {
    ready: u32,
}

type Clusters = Client<Spec, Status>;

fn spec(i: u32) -> Spec {
    Spec {
        image: format!("registry.example/app:{i}"),
        replicas: i % 7,
        labels: vec!["tier=web".into(), "env=bench".into()],
    }
}

fn clusters(store: &Store) -> Clusters {
    Client::new(store, GroupKind::new("bench.dev", "Cluster"))
}

/// How many times each measurement runs; the median is reported.
const RUNS: usize = 5;

async fn creates_sequential(count: u32) -> f64 {
    let store = Store::temporary().expect("temporary store");
    let client = clusters(&store);
    let start = Instant::now();
    for i in 0..count {
        client
            .create(&format!("seq-{i}"), &spec(i), CreateOptions::new())
            .await
            .expect("create");
    }
    f64::from(count) / start.elapsed().as_secs_f64()
}

async fn creates_concurrent(callers: u32, per_caller: u32) -> f64 {
    let store = Store::temporary().expect("temporary store");
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let client = clusters(&store);
            tokio::spawn(async move {
                for i in 0..per_caller {
                    client
                        .create(&format!("c{caller}-{i}"), &spec(i), CreateOptions::new())
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    f64::from(callers * per_caller) / start.elapsed().as_secs_f64()
}

async fn get_by_id(objects: u32, reads: u32) -> f64 {
    let store = Store::temporary().expect("temporary store");
    let client = clusters(&store);
    let mut ids = Vec::new();
    for i in 0..objects {
        let created = client
            .create(&format!("o-{i}"), &spec(i), CreateOptions::new())
            .await
            .expect("create");
        ids.push(created.id());
    }
    // Warm the reader pool and statement cache.
    client.get(ids[0]).expect("get");
    let start = Instant::now();
    for i in 0..reads {
        let id = ids[(i as usize * 7919) % ids.len()];
        let object = client.get(id).expect("get");
        std::hint::black_box(object);
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(reads)
}

/// Microseconds to check one greeting spec against the greeting schema.
fn validate_us(checks: u32) -> f64 {
    use beehive_guest::Controller;
    let text = greeting::Greeter::registration()
        .spec_schema
        .expect("the greeting plugin declares a spec schema");
    let schema = beehive::validation::SpecSchema::compile(&text).expect("the schema compiles");
    let spec = beehive::Json::parse(r#"{"name": "ada"}"#).expect("JSON");
    let start = Instant::now();
    for _ in 0..checks {
        let violations = schema.check(std::hint::black_box(&spec));
        assert!(violations.is_empty());
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(checks)
}

/// Milliseconds to refuse the deepest spec against the doubling schema.
fn validate_worst_ms() -> f64 {
    let schema = beehive::validation::SpecSchema::compile(&hostile::exponential_schema(51))
        .expect("the schema compiles");
    let depth = beehive::naming::MAX_DEPTH - 2;
    let text = (0..depth).fold("1".to_string(), |inner, _| format!(r#"{{"a": {inner}}}"#));
    let spec = beehive::Json::parse(&text).expect("JSON");
    let samples = (0..5)
        .map(|_| {
            let start = Instant::now();
            let violations = schema.check(std::hint::black_box(&spec));
            assert!(
                violations[0].message.contains("schema steps"),
                "{violations:?}"
            );
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(samples)
}

/// Creates `count` objects in the store at `path`, eight callers at a time.
async fn fill(store: &Store, count: u32) {
    let callers = 8;
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let client = clusters(store);
            tokio::spawn(async move {
                for i in (caller..count).step_by(callers as usize) {
                    client
                        .create(&format!("f-{i}"), &spec(i), CreateOptions::new())
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
}

/// The 99th percentile, in milliseconds, of creates made one after another
/// until `done` holds (and at least `at_least` of them).
async fn create_latency_p99(
    client: &Clusters,
    prefix: &str,
    at_least: usize,
    done: impl Fn() -> bool,
) -> f64 {
    let mut latencies = Vec::new();
    while latencies.len() < at_least || !done() {
        let i = latencies.len() as u32;
        let start = Instant::now();
        client
            .create(&format!("{prefix}-{i}"), &spec(i), CreateOptions::new())
            .await
            .expect("create");
        latencies.push(start.elapsed().as_secs_f64() * 1e3);
    }
    latencies.sort_by(f64::total_cmp);
    latencies[latencies.len() * 99 / 100]
}

/// The backup and restore figures, on a store of `objects` objects.
async fn backup_and_restore(objects: u32) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(dir.path().join("live.db")).expect("store");
    fill(&store, objects).await;
    let client = clusters(&store);
    let idle = create_latency_p99(&client, "idle", 2_000, || true).await;
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backup = {
        let (store, finished) = (store.clone(), finished.clone());
        let file = dir.path().join("backup.db");
        std::thread::spawn(move || {
            let taken = store.backup_to(&file).expect("backup");
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            taken
        })
    };
    let during = create_latency_p99(&client, "during", 100, || {
        finished.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    let taken = backup.join().expect("the backup thread");
    figure("backup.writer_p99_idle_ms", idle, "ms");
    figure("backup.writer_stall_p99_ms", during, "ms");
    let mib = taken.bytes as f64 / f64::from(1 << 20);
    figure("backup.mib_per_s", mib / taken.took.as_secs_f64(), "MiB/s");
    let start = Instant::now();
    let restored = dir.path().join("restored.db");
    beehive::store::backup::restore(&taken.path, &restored).expect("restore");
    let serving = Store::open(&restored).expect("the restored store opens");
    clusters(&serving)
        .get_by_name("f-7")
        .expect("a restored object");
    figure(
        "restore.to_serving_ms",
        start.elapsed().as_secs_f64() * 1e3,
        "ms",
    );
}

fn main() {
    block_on(async {
        if wanted("store.creates_seq_per_s") {
            let mut samples = Vec::new();
            for _ in 0..RUNS {
                samples.push(creates_sequential(10_000).await);
            }
            figure("store.creates_seq_per_s", median(samples), "obj/s");
        }
        if wanted("store.creates_per_s") {
            let mut samples = Vec::new();
            for _ in 0..RUNS {
                samples.push(creates_concurrent(8, 2_500).await);
            }
            figure("store.creates_per_s", median(samples), "obj/s");
        }
        if wanted("store.get_by_id_us") {
            figure("store.get_by_id_us", get_by_id(10_000, 50_000).await, "us");
        }
        if wanted("store.validate_us") {
            figure("store.validate_us", validate_us(200_000), "us");
        }
        if wanted("store.validate_worst_ms") {
            figure("store.validate_worst_ms", validate_worst_ms(), "ms");
        }
        if wanted("backup.writer_stall_p99_ms") || wanted("restore.to_serving_ms") {
            backup_and_restore(100_000).await;
        }
    });
}
