//! Watch latency on a file-backed store.
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `watch.latency_p50_ms` and `watch.latency_p99_ms`: one list watch, 1,000
//!   spec updates 1 ms apart from another task; for each update, the time
//!   from just before the update call to its change arriving on the stream.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store, client::WatchOptions};
use beehive_e2e::bench::{block_on, figure};
use futures_util::StreamExt;

const UPDATES: i64 = 1_000;

async fn latencies() -> Vec<Duration> {
    let store = Store::temporary().expect("store");
    let client = RawClient::new(&store, GroupKind::new("bench.dev", "Watched"));
    let first = Json::parse(r#"{"n":-1}"#).expect("json");
    let object = client
        .create("w", first, CreateOptions::new())
        .await
        .expect("create");
    let mut stream = client.watch_list(WatchOptions::new()).expect("watch");
    let receiver = tokio::spawn(async move {
        let mut arrived = HashMap::new();
        while let Some(Ok(change)) = stream.next().await {
            let n = change
                .object
                .and_then(|o| o.spec.to_value()["n"].as_i64())
                .unwrap_or(-1);
            arrived.insert(n, Instant::now());
            if n == UPDATES - 1 {
                break;
            }
        }
        arrived
    });
    let mut sent = HashMap::new();
    for n in 0..UPDATES {
        sent.insert(n, Instant::now());
        let spec = Json::parse(&format!(r#"{{"n":{n}}}"#)).expect("json");
        client.update(object.meta.id, spec).await.expect("update");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let arrived = receiver.await.expect("receiver");
    // An update folded into a later change arrived with that one.
    let mut waits: Vec<Duration> = Vec::new();
    let mut next_arrival = None;
    for n in (0..UPDATES).rev() {
        if let Some(at) = arrived.get(&n) {
            next_arrival = Some(*at);
        }
        if let Some(at) = next_arrival {
            waits.push(at.duration_since(sent[&n]));
        }
    }
    waits.sort();
    waits
}

fn main() {
    if std::env::args().skip(1).any(|a| !a.starts_with('-')) {
        return;
    }
    let waits = block_on(latencies());
    let at = |q: usize| waits[(waits.len() * q / 100).min(waits.len() - 1)].as_secs_f64() * 1000.0;
    figure("watch.latency_p50_ms", at(50), "ms");
    figure("watch.latency_p99_ms", at(99), "ms");
}
