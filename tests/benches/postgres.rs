//! The engine on a PostgreSQL store, on a throwaway local server (Unix
//! socket, default durability settings).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `pg.converge_10k_c1_per_s`: the workload of `engine.converge_10k_c1_per_s`
//!   (10,000 objects created by 8 tasks, one worker writing each status;
//!   first create to all observed) with the store in PostgreSQL;
//! - `pg.converge_10k_c1_async_commit_per_s`: the same with
//!   `synchronous_commit=off` in the connection string: a commit does not
//!   wait for its WAL flush, the durability SQLite's default (`synchronous =
//!   NORMAL`) gives;
//! - `pg.converge_10k_c1_leased_per_s`: the same as the host `beehive run`
//!   makes, holding the lease, so every commit checks its fencing token;
//! - `pg.creates_seq_per_s`, `pg.get_by_id_us`: one caller creating 2,000
//!   objects one at a time, then reading each back by id;
//! - `pg.failover_s`: two hosts on one database with the default lease
//!   (`beehive::engine::DEFAULT_LEASE`), each with its own store and
//!   runtime as two processes would have, and a third store creating an
//!   object every 10 ms; the active host is killed (its runtime dropped
//!   mid-flight, its lease never released); kill to the standby's first
//!   pass; the median of the rounds;
//! - `pg.failover_max_s`: the worst of those rounds (five of them, each
//!   killing the host at another point of its renewal interval; the bound
//!   is 5 s);
//! - `pg.lost_writes`: of the creates acknowledged across those failovers,
//!   how many are missing afterwards (must be 0);
//! - `pg.restart_recovery_s`: two hosts as above serving, the server
//!   restarted (`pg_ctl restart -m fast`); from the server accepting again
//!   to the first pass of an object created after it (the bound is 5 s).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beehive::{
    Action, Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind, Host,
    HostOptions, Json, RawObject, Result, Store,
};
use beehive_e2e::TestPostgres;
use beehive_e2e::bench::{
    OBJECTS, WriteStatus, block_on, create_all, figure, median, wait_for, wanted, widget,
};

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

/// The converge workload; `leased`: as `beehive run` serves, holding the
/// lease, so every commit checks its fencing token.
async fn converge(url: &str, leased: bool) -> f64 {
    let store = Store::open(url).expect("store");
    let tenure = match leased {
        true => Some(
            beehive::engine::Tenure::take(&store, Duration::from_secs(30))
                .await
                .expect("lease"),
        ),
        false => None,
    };
    let host = Host::new(&store, HostOptions::new()).expect("host");
    host.register(
        widget(),
        WriteStatus,
        ControllerOptions::new().concurrency(1),
    )
    .await
    .expect("register");
    let running = host.start().await.expect("start");
    let start = Instant::now();
    create_all(&host.client(widget()), OBJECTS, |i| {
        format!(r#"{{"replicas":{i}}}"#)
    })
    .await;
    wait_for(Duration::from_millis(10), || outstanding(&store) == 0).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    if let Some(tenure) = tenure {
        tenure.release();
    }
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

/// Records when it first ran, then settles as `WriteStatus` does.
struct FirstPass(Arc<Mutex<Option<Instant>>>);

impl Controller for FirstPass {
    type Spec = Json;
    type Status = Json;

    async fn reconcile(&self, client: &ControllerClient, object: &RawObject) -> Result<Action> {
        self.0.lock().unwrap().get_or_insert_with(Instant::now);
        WriteStatus.reconcile(client, object).await
    }
}

/// A host in a runtime of its own, as a process of its own would be: it
/// waits for the lease, then serves until its runtime is dropped.
fn spawn_host(
    url: String,
    first_pass: Arc<Mutex<Option<Instant>>>,
) -> (
    std::thread::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (kill, killed) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        block_on(async move {
            let mut killed = killed;
            let store = Store::open(&url).expect("store");
            // A standby is killed while it waits for the lease, too: one
            // that waited on would wait for ever once the active host is
            // stopped after it.
            let taking = beehive::engine::Tenure::take(&store, beehive::engine::DEFAULT_LEASE);
            let tenure = tokio::select! {
                tenure = taking => tenure.expect("lease"),
                _ = &mut killed => return,
            };
            let options =
                HostOptions::new().cadence(beehive::engine::Cadence::new().startup_full_pass(true));
            let host = Host::new(&store, options).expect("host");
            host.register(widget(), FirstPass(first_pass), ControllerOptions::new())
                .await
                .expect("register");
            let _running = host.start().await.expect("start");
            tokio::select! {
                _ = tenure.hold() => {}
                _ = killed => {}
            }
        });
        // Dropped without stopping anything or releasing the lease.
        runtime.shutdown_background();
    });
    (thread, kill)
}

/// One failover round; the active host is killed `phase` into a renewal
/// interval after it took the lease, so rounds with phases spread over the
/// interval find the worst case (a kill just after a renewal).
async fn failover(url: &str, phase: Duration) -> (f64, usize) {
    let seen_by_first = Arc::new(Mutex::new(None));
    let mut first = Some(spawn_host(url.to_string(), seen_by_first.clone()));
    let writer = Store::open(url).expect("store");
    let client = beehive::RawClient::new(&writer, widget());
    let create = |i: usize| {
        let client = client.clone();
        async move {
            let spec = Json::parse(&format!(r#"{{"replicas":{i}}}"#)).expect("spec");
            client
                .create(&format!("f{i}"), spec, CreateOptions::new())
                .await
                .is_ok()
        }
    };
    create(0).await;
    while seen_by_first.lock().unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen_by_second = Arc::new(Mutex::new(None));
    let (second, stop_second) = spawn_host(url.to_string(), seen_by_second.clone());
    let mut acknowledged = vec![0];
    let mut next = 1;
    let mut killed_at = None;
    loop {
        if create(next).await {
            acknowledged.push(next);
        }
        next += 1;
        if next == 50
            && let Some((thread, kill)) = first.take()
        {
            tokio::time::sleep(phase).await;
            let _ = kill.send(());
            killed_at = Some(Instant::now());
            thread.join().expect("the first host's thread");
        }
        if seen_by_second.lock().unwrap().is_some() || next > 5_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let killed_at = killed_at.expect("killed");
    let took_over = seen_by_second
        .lock()
        .unwrap()
        .expect("the standby ran a pass");
    let names: std::collections::HashSet<String> = client
        .list()
        .expect("list")
        .into_iter()
        .map(|o| o.meta.name)
        .collect();
    let lost = acknowledged
        .iter()
        .filter(|i| !names.contains(&format!("f{i}")))
        .count();
    let _ = stop_second.send(());
    second.join().expect("the second host's thread");
    ((took_over - killed_at).as_secs_f64(), lost)
}

/// Rounds of [`failover`] for `pg.failover_max_s`.
const FAILOVER_ROUNDS: usize = 5;

/// Two hosts serve; the server restarts under them; from its accepting
/// again to the first pass of an object created then.
async fn restart_recovery(server: &TestPostgres) -> f64 {
    let url = server.url().to_string();
    let hosts = [
        spawn_host(url.clone(), Arc::new(Mutex::new(None))),
        spawn_host(url.clone(), Arc::new(Mutex::new(None))),
    ];
    let writer = Store::open(&url).expect("store");
    let client = beehive::RawClient::new(&writer, widget());
    let passed = |name: &'static str| {
        let client = client.clone();
        async move {
            loop {
                let spec = Json::parse("{}").expect("spec");
                match client.create(name, spec, CreateOptions::new()).await {
                    Ok(_) | Err(beehive::Error::NameTaken { .. }) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
            wait_for(Duration::from_millis(5), || {
                client.get_by_name(name).is_ok_and(|o| o.meta.is_observed())
            })
            .await;
        }
    };
    passed("before-restart").await;
    server.restart();
    let accepting = Instant::now();
    passed("after-restart").await;
    let recovered = accepting.elapsed().as_secs_f64();
    let mut threads = Vec::new();
    for (thread, kill) in hosts {
        let _ = kill.send(());
        threads.push(thread);
    }
    for thread in threads {
        thread.join().expect("a host's thread");
    }
    recovered
}

fn main() {
    if wanted("pg.creates_seq_per_s") || wanted("pg.get_by_id_us") {
        let server = TestPostgres::start();
        let (creates, get_us) = block_on(sequential(server.url()));
        figure("pg.creates_seq_per_s", creates, "obj/s");
        figure("pg.get_by_id_us", get_us, "us");
    }
    if wanted("pg.failover_s") || wanted("pg.failover_max_s") || wanted("pg.lost_writes") {
        let mut rounds = Vec::new();
        let mut lost = 0;
        let renewal = beehive::engine::DEFAULT_LEASE / 3;
        for round in 0..FAILOVER_ROUNDS {
            let server = TestPostgres::start();
            let phase = renewal * round as u32 / FAILOVER_ROUNDS as u32;
            let (seconds, lost_now) = block_on(failover(server.url(), phase));
            rounds.push(seconds);
            lost += lost_now;
        }
        let worst = rounds.iter().copied().fold(0.0, f64::max);
        figure("pg.failover_s", median(rounds), "s");
        figure("pg.failover_max_s", worst, "s");
        figure("pg.lost_writes", lost as f64, "writes");
    }
    if wanted("pg.restart_recovery_s") {
        let server = TestPostgres::start();
        let seconds = block_on(restart_recovery(&server));
        figure("pg.restart_recovery_s", seconds, "s");
    }
    // (figure, settings appended to the connection string, holding the lease)
    let variants = [
        ("pg.converge_10k_c1_per_s", "", false),
        (
            "pg.converge_10k_c1_async_commit_per_s",
            "&options=-c%20synchronous_commit%3Doff",
            false,
        ),
        ("pg.converge_10k_c1_leased_per_s", "", true),
    ];
    for (name, settings, leased) in variants {
        if wanted(name) {
            let server = TestPostgres::start();
            let url = format!("{}{settings}", server.url());
            let elapsed = block_on(converge(&url, leased));
            figure(name, OBJECTS as f64 / elapsed, "obj/s");
        }
    }
}
