//! Helpers shared by the integration tests.

use std::time::{Duration, Instant};

/// Polls `condition` every few milliseconds until it holds, failing the test
/// with `what` if it has not within `limit`. Generous limits keep the tests
/// reliable on two loaded cores; a passing run returns as soon as it holds.
pub async fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A JSON document from text the test knows is valid.
pub fn spec(text: &str) -> beehive::Json {
    beehive::Json::parse(text).unwrap()
}

/// The usual limit for a condition that needs a few passes.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Runs `body` on a runtime of its own and then drops that runtime without
/// waiting, which abandons every task at its next await: the nearest thing
/// to a crash that a test can do in-process.
pub fn run_then_crash(body: impl std::future::Future<Output = ()>) {
    let runtime = fresh_runtime();
    runtime.block_on(body);
    runtime.shutdown_background();
}

/// Runs `body` to its end on a runtime of its own: the process that comes
/// up after [`run_then_crash`].
pub fn run_after_restart(body: impl std::future::Future<Output = ()>) {
    fresh_runtime().block_on(body);
}

fn fresh_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A controller that counts its passes and settles each one; clones share
/// the count.
#[derive(Clone, Default)]
pub struct PassCounter {
    passes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl PassCounter {
    /// How many passes have started so far.
    pub fn count(&self) -> usize {
        self.passes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until at least `passes` passes have started.
    pub async fn reaches(&self, passes: usize, what: &str) {
        wait_until(what, PATIENCE, || self.count() >= passes).await;
    }
}

impl beehive::Controller for PassCounter {
    async fn reconcile(
        &self,
        _: &beehive::ControllerClient,
        _: &beehive::RawObject,
    ) -> beehive::ReconcileResult {
        self.passes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        beehive::ReconcileResult::settled()
    }
}

/// The value of the unlabelled series `name` in the store's metrics export.
pub fn metric(store: &beehive::Store, name: &str) -> f64 {
    let text = store.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {name} in\n{text}"))
}

/// Creates `name` with the spec `spec_text` through `client`, with no
/// options, failing the test if the store refuses.
pub async fn create(
    client: &beehive::RawClient,
    name: &str,
    spec_text: &str,
) -> beehive::RawObject {
    client
        .create(name, spec(spec_text), beehive::CreateOptions::new())
        .await
        .unwrap()
}

/// Creates `name` with an empty spec, held by `finalizers` once deleted.
pub async fn create_finalized(
    client: &beehive::RawClient,
    name: &str,
    finalizers: &[&str],
) -> beehive::Result<beehive::RawObject> {
    let options = beehive::CreateOptions::new().finalizers(finalizers.iter().copied());
    client.create(name, spec("{}"), options).await
}

/// Replaces the spec of object `id` through `client` with the JSON `spec_text`.
pub async fn update(
    client: &beehive::RawClient,
    id: beehive::ObjectId,
    spec_text: &str,
) -> beehive::RawObject {
    client.update(id, spec(spec_text)).await.unwrap()
}

/// Registers `controller` for `kind` with default options and starts
/// `host`.
pub async fn serve(
    host: &beehive::Host,
    kind: beehive::GroupKind,
    controller: impl beehive::Controller,
) -> beehive::engine::StopHandle {
    serve_with(host, kind, controller, beehive::ControllerOptions::new()).await
}

/// Registers `controller` for `kind` with `options` and starts `host`.
pub async fn serve_with(
    host: &beehive::Host,
    kind: beehive::GroupKind,
    controller: impl beehive::Controller,
    options: beehive::ControllerOptions,
) -> beehive::engine::StopHandle {
    host.register(kind, controller, options).await.unwrap();
    host.start().await.unwrap()
}

/// Deletes object `id` through `client` and waits until its row is gone:
/// its finalizers cleared and the sweeper done with it.
pub async fn delete_and_wait_gone(client: &beehive::RawClient, id: beehive::ObjectId) {
    client.delete(id).await.unwrap();
    wait_until("the row is gone", PATIENCE, || client.get(id).is_err()).await;
}

/// The integer in the first column of `sql`'s first row (0 if none or
/// NULL), read straight from the tables.
pub fn scalar(store: &beehive::Store, sql: &str, params: &[i64]) -> i64 {
    store
        .inspect(sql, params)
        .unwrap()
        .and_then(|row| row.into_iter().next().flatten())
        .map_or(0, |text| text.parse().unwrap())
}

/// A throwaway store for one test: SQLite in a temporary directory, or,
/// when `BEEHIVE_TEST_POSTGRES` holds a connection string, a fresh schema
/// on that PostgreSQL server. The whole suite runs against either backend.
pub fn store() -> beehive::Store {
    match std::env::var("BEEHIVE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => beehive::Store::temporary_postgres(&url).unwrap(),
        _ => beehive::Store::temporary().unwrap(),
    }
}
