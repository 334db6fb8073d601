//! Helpers for tests that drive the library in-process: a store per test on
//! either backend, documents from text, a counting controller, and a way to
//! crash a host mid-flight.

use crate::eventually;

/// A throwaway store for one test: SQLite in a temporary directory, or,
/// when `BEEHIVE_TEST_POSTGRES` holds a connection string, a fresh schema
/// on that PostgreSQL server. The integration suite runs against either
/// backend (`scripts/with-postgres` sets the variable).
///
/// # Panics
/// When the store cannot be opened.
pub fn store() -> beehive::Store {
    match std::env::var("BEEHIVE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => beehive::Store::temporary_postgres(&url).unwrap(),
        _ => beehive::Store::temporary().unwrap(),
    }
}

/// A JSON document from text the test knows is valid.
///
/// # Panics
/// When it is not.
pub fn spec(text: &str) -> beehive::Json {
    beehive::Json::parse(text).unwrap()
}

/// Creates `name` with an empty spec, held by `finalizers` once deleted.
///
/// # Errors
/// Whatever the store refuses.
pub async fn create_finalized(
    client: &beehive::RawClient,
    name: &str,
    finalizers: &[&str],
) -> beehive::Result<beehive::RawObject> {
    let options = beehive::CreateOptions::new().finalizers(finalizers.iter().copied());
    client.create(name, spec("{}"), options).await
}

/// Replaces the spec of object `id` through `client` with the JSON `spec_text`.
///
/// # Panics
/// When the store refuses.
pub async fn update(
    client: &beehive::RawClient,
    id: beehive::ObjectId,
    spec_text: &str,
) -> beehive::RawObject {
    client.update(id, spec(spec_text)).await.unwrap()
}

/// Deletes object `id` through `client` and waits until its row is gone:
/// its finalizers cleared and the sweeper done with it.
///
/// # Panics
/// When the delete fails or the row outlives [`PATIENCE`](crate::PATIENCE).
pub async fn delete_and_wait_gone(client: &beehive::RawClient, id: beehive::ObjectId) {
    client.delete(id).await.unwrap();
    eventually("the row is gone", || client.get(id).is_err()).await;
}

/// Registers `controller` for `kind` with default options and starts
/// `host`.
///
/// # Panics
/// When the registration or the start fails.
pub async fn serve(
    host: &beehive::Host,
    kind: beehive::GroupKind,
    controller: impl beehive::Controller,
) -> beehive::engine::StopHandle {
    serve_with(host, kind, controller, beehive::ControllerOptions::new()).await
}

/// Registers `controller` for `kind` with `options` and starts `host`.
///
/// # Panics
/// When the registration or the start fails.
pub async fn serve_with(
    host: &beehive::Host,
    kind: beehive::GroupKind,
    controller: impl beehive::Controller,
    options: beehive::ControllerOptions,
) -> beehive::engine::StopHandle {
    host.register(kind, controller, options).await.unwrap();
    host.start().await.unwrap()
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
    ///
    /// # Panics
    /// When they have not within [`PATIENCE`](crate::PATIENCE).
    pub async fn reaches(&self, passes: usize, what: &str) {
        eventually(what, || self.count() >= passes).await;
    }
}

impl beehive::Controller for PassCounter {
    type Spec = beehive::Json;
    type Status = beehive::Json;

    async fn reconcile(
        &self,
        _: &beehive::ControllerClient,
        _: &beehive::RawObject,
    ) -> beehive::Result<beehive::Action> {
        self.passes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(beehive::Action::settled())
    }
}

/// The value of the unlabelled series `name` in the store's metrics export.
///
/// # Panics
/// When the export has no such series.
pub fn metric(store: &beehive::Store, name: &str) -> f64 {
    let text = store.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {name} in\n{text}"))
}

/// How much the counter `name` rises while three more garbage-collection
/// sweeps complete: what a settled host does between its sweeps, with the
/// sweeps as the clock.
///
/// # Panics
/// When the export lacks either series, or the sweeps never come.
pub async fn rise_over_three_sweeps(store: &beehive::Store, name: &str) -> f64 {
    let before = metric(store, name);
    let sweeps = metric(store, "beehive_gc_sweeps_total");
    crate::eventually("three more sweeps", || {
        metric(store, "beehive_gc_sweeps_total") >= sweeps + 3.0
    })
    .await;
    metric(store, name) - before
}

/// The integer in the first column of `sql`'s first row (0 if none or
/// NULL), read straight from the tables.
///
/// # Panics
/// When the query fails or the value is not an integer.
pub fn scalar(store: &beehive::Store, sql: &str, params: &[i64]) -> i64 {
    store
        .inspect(sql, params)
        .unwrap()
        .and_then(|row| row.into_iter().next().flatten())
        .map_or(0, |text| text.parse().unwrap())
}

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
        // Only fails when the OS refuses threads: no test can go on then.
        .unwrap()
}
