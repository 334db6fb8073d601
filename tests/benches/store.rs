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
//!   budget cuts it off (the median of five).

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
    });
}
