//! Plugin throughput against the same logic written natively, on
//! file-backed stores. Needs the example plugins built (`scripts/build-plugins`).
//!
//! Prints `figure NAME VALUE UNIT` lines:
//! - `plugin.converge_10k_wasm_per_s`: 10,000 greetings created by 8 tasks,
//!   one worker running the `greeting` plugin; first create to all observed;
//! - `plugin.converge_10k_native_per_s`: the same with the logic in Rust,
//!   registered with the schemas the plugin declares (so both sides check
//!   each created spec against the same schema, and the ratio is the cost
//!   of running in the sandbox, not of checking specs);
//!   each the median of five runs taken in turns with the other (the plugin
//!   compiled once, from the shared cache), and `plugin.wasm_to_native` the
//!   median of the five ratios of a wasm run to the native run after it;
//! - `plugin.converge_10k_wasm_0_1_per_s` and `plugin.wasm_0_1_to_native`:
//!   the same, with the `greeting` plugin's contract-0.1 build (checked in
//!   under `tests/fixtures/contract-0.1/`), served beside 0.2 in the same
//!   host build: what the leaner 0.2 pass saves;
//! - `plugin.cold_start_ms`: with every example plugin already in the
//!   compiled-artifact cache, loading the plugin directory, starting the
//!   host, and one greeting observed;
//! - `plugin.hot_swap_ms`: a watched directory, a new version renamed over
//!   `greeting.wasm` (compiled, not cached), until a greeting shows the new
//!   version's status; the median of five swaps;
//! - `plugin.instance_rss_kib`: resident memory per idle `greeting` instance,
//!   over 100 instances;
//! - `plugin.converge_10k_conditions_per_s` / `plugin.converge_10k_python_per_s`
//!   / `plugin.converge_10k_js_per_s`: 10,000 services converged by the
//!   `conditions` example in Rust, and by the same logic in Python
//!   (`conditions-py`) and JavaScript (`conditions-js`);
//! - `plugin.python_cached_load_ms` / `plugin.js_cached_load_ms`: loading
//!   `conditions-py` (18 MB) or `conditions-js` (16 MB) from a warm
//!   compiled-plugin cache, as a restart does; the median of five;
//! - `plugin.js_component_mb` / `plugin.js_first_compile_ms`: the size of
//!   `conditions-js`, and its first load with an empty cache, compiled by
//!   Cranelift;
//! - `plugin.http_get_us`: one GET of a small body from a local server through
//!   `wasi:http`, timed by the plugin inside its passes (ten GETs a pass);
//!   the median of 200;
//! - `plugin.http_get_native_us`: the same GET from native Rust (hyper, a new
//!   connection each time, as `wasi:http` makes); the median of 200;
//! - `plugin.verify_ms`: checking a 2 MB plugin's minisign signature
//!   against a directory's trust file, as a host does before compiling it
//!   (reading the signature file included); the median of 21;
//! - `plugin.store_check_ns`: one store-grant check of a call on another
//!   kind, against a policy of four patterns that grants none of them (the
//!   longest scan: every pattern tried); the mean of ten million.

use std::sync::Arc;
use std::time::{Duration, Instant};

use beehive::plugin::{Change, Compiler, Directory, Limits, Policy, Runtime, RuntimeOptions};
use beehive::validation::KindSchemas;
use beehive::{
    Action, Client, Controller, ControllerClient, ControllerOptions, CreateOptions, GroupKind,
    Host, HostOptions, Json, Object, RawClient, Store,
};
use beehive_e2e::bench::{
    OBJECTS, block_on, create_all, figure, median, outstanding, wait_for, wanted,
};
use beehive_e2e::{TestServer, plugin_dir, plugin_wasm, shared_plugin_cache};
use serde::{Deserialize, Serialize};

/// How often a wait polls.
const POLL: Duration = Duration::from_millis(1);

#[derive(Serialize, Deserialize)]
struct Spec {
    name: String,
}

#[derive(Serialize, Deserialize)]
struct Status {
    message: String,
}

/// The greeting plugin's logic, natively. Registered with the plugin's own
/// schemas ([`greeting_schemas`]).
struct NativeGreeter;

impl Controller for NativeGreeter {
    type Spec = Spec;
    type Status = Status;

    async fn reconcile(
        &self,
        client: &ControllerClient,
        object: &Object<Spec, Status>,
    ) -> beehive::Result<Action> {
        let message = format!("Hello, {}!", object.spec.name);
        client.update_status(&Status { message }).await?;
        Ok(Action::settled())
    }
}

fn greeting() -> GroupKind {
    GroupKind::new("example.dev", "Greeting")
}

async fn converge(store: Store, host: Host) -> f64 {
    converge_kind(store, host, greeting(), |i| format!(r#"{{"name":"n{i}"}}"#)).await
}

/// Creates [`OBJECTS`] objects of `kind` (`spec(i)` each) and waits until all
/// are observed; objects per second.
async fn converge_kind(
    store: Store,
    host: Host,
    kind: GroupKind,
    spec: impl Fn(usize) -> String + Clone + Send + Sync + 'static,
) -> f64 {
    let running = host.start().await.expect("start");
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let start = Instant::now();
    create_all(&host.client(kind.clone()), OBJECTS, spec).await;
    wait_for(POLL, || outstanding(&conn, Some(&kind)) == 0).await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    OBJECTS as f64 / elapsed
}

/// Loads every plugin in `dir` into `host`; each must load.
async fn load(
    options: RuntimeOptions,
    host: &Host,
    dir: &std::path::Path,
) -> (Arc<Runtime>, Arc<Directory>) {
    let runtime = Runtime::new(options).expect("runtime");
    let plugins = Directory::new(runtime.clone(), host.clone(), dir);
    for change in plugins.sync().await.expect("load") {
        assert!(matches!(change, Change::Loaded { .. }), "{change}");
    }
    (runtime, plugins)
}

/// The `greeting` plugin's build for `contract`: today's, or the
/// contract-0.1 build checked into the tests.
#[derive(Clone, Copy)]
enum Build {
    Contract0_2,
    Contract0_1,
}

async fn wasm(build: Build) -> f64 {
    let dir = plugin_dir(&["greeting"]);
    if let Build::Contract0_1 = build {
        let first = beehive_e2e::contract_0_1_wasm("greeting");
        std::fs::copy(first, dir.path().join("greeting.wasm")).expect("copy the 0.1 build");
    }
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let options = RuntimeOptions::new().cache_dir(shared_plugin_cache());
    load(options, &host, dir.path()).await;
    converge(store, host).await
}

/// The schemas the `greeting` plugin declares, as its load records them.
async fn greeting_schemas() -> KindSchemas {
    let dir = plugin_dir(&["greeting"]);
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let options = RuntimeOptions::new().cache_dir(shared_plugin_cache());
    load(options, &host, dir.path()).await;
    let registered = store.registrations().expect("registrations");
    let greeting = registered
        .into_iter()
        .find(|r| r.group_kind == greeting())
        .expect("the greeting plugin registers its kind");
    KindSchemas {
        spec: greeting.spec_schema,
        status: greeting.status_schema,
    }
}

async fn native(schemas: &KindSchemas) -> f64 {
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let options = ControllerOptions::new().schemas(schemas.clone());
    host.register(greeting(), NativeGreeter, options)
        .await
        .expect("register");
    converge(store, host).await
}

/// How many times the wasm and native converges run, in turns.
const CONVERGE_RUNS: usize = 5;

/// The wasm and native converges, run in turns: the median of each, and the
/// median of the ratios of each wasm run to the native run right after it.
/// The machine's speed drifts by a third within a minute, so a ratio of two
/// runs apart in time measured the drift (one read 0.75); runs side by side
/// share most of it.
async fn wasm_and_native(build: Build) -> (f64, f64, f64) {
    let (mut wasm_runs, mut native_runs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let schemas = greeting_schemas().await;
    for _ in 0..CONVERGE_RUNS {
        let wasm = if std::env::var_os("ONLY_NATIVE").is_none() {
            wasm(build).await
        } else {
            1.0
        };
        let native = if std::env::var_os("ONLY_WASM").is_none() {
            native(&schemas).await
        } else {
            1.0
        };
        wasm_runs.push(wasm);
        native_runs.push(native);
        ratios.push(wasm / native);
    }
    (median(wasm_runs), median(native_runs), median(ratios))
}

async fn cold_start() -> f64 {
    let dir = plugin_dir(&["greeting", "cascade", "conditions", "events"]);
    let cache = tempfile::tempdir().expect("cache");
    {
        // Fill the cache, as an earlier run of the host would have.
        let warm_store = Store::temporary().expect("store");
        let warm_host = Host::new(&warm_store, HostOptions::new()).expect("host");
        load(
            RuntimeOptions::new().cache_dir(cache.path()),
            &warm_host,
            dir.path(),
        )
        .await;
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
    let (runtime, _plugins) = load(
        RuntimeOptions::new().cache_dir(cache.path()),
        &host,
        dir.path(),
    )
    .await;
    assert_eq!(
        runtime.compiled_count(),
        0,
        "everything came from the cache"
    );
    let running = host.start().await.expect("start");
    wait_for(POLL, || {
        typed
            .get(created.id())
            .map(|o| o.meta.is_observed())
            .unwrap_or(false)
    })
    .await;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    running.stop(Duration::from_secs(30)).await.expect("stop");
    elapsed
}

async fn hot_swap() -> f64 {
    let dir = tempfile::tempdir().expect("dir");
    let target = dir.path().join("greeting.wasm");
    std::fs::copy(plugin_wasm("greeting"), &target).expect("copy");
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    let (_runtime, plugins) = load(RuntimeOptions::new(), &host, dir.path()).await;
    let running = host.start().await.expect("start");
    let watching = plugins.watch(Duration::from_secs(60)).expect("watch");
    let client: RawClient = host.client(greeting());
    let spec = Json::parse(r#"{"name":"swap"}"#).expect("spec");
    let object = client
        .create("swap", spec, CreateOptions::new())
        .await
        .expect("create");
    let message = || {
        client
            .get(object.meta.id)
            .ok()
            .and_then(|o| o.status)
            .map(|s| s.to_value()["message"].to_string())
            .unwrap_or_default()
    };
    wait_for(POLL, || message().contains("Hello")).await;
    let mut samples = Vec::new();
    for (version, greets) in [("greeting_v2", "Good day"), ("greeting", "Hello")]
        .repeat(3)
        .into_iter()
        .take(5)
    {
        // Past the object's re-enqueue floor, so the swap's wake runs at once.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let staging = dir.path().join(".staging");
        std::fs::copy(plugin_wasm(version), &staging).expect("stage");
        let start = Instant::now();
        std::fs::rename(&staging, &target).expect("rename");
        wait_for(POLL, || message().contains(greets)).await;
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    watching.stop().await;
    running.stop(Duration::from_secs(30)).await.expect("stop");
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Resident set size of this process, in KiB.
fn rss_kib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("rss");
    pages * 4.0
}

async fn instance_rss() -> f64 {
    const INSTANCES: usize = 100;
    let room = Limits {
        concurrency: INSTANCES + 1,
        ..Limits::default()
    };
    let runtime = Runtime::new(RuntimeOptions::new().limits(room)).expect("runtime");
    let plugin = runtime
        .load(&plugin_wasm("greeting"), Policy::default())
        .await
        .expect("load");
    plugin.prewarm(1).await.expect("first instance");
    let before = rss_kib();
    plugin.prewarm(INSTANCES).await.expect("instances");
    (rss_kib() - before) / INSTANCES as f64
}

/// The `conditions` example, in Rust or in Python, converging 10,000
/// services with one worker; the Python one compiles once into the shared
/// test cache.
async fn conditions(plugin: &str, group: &str) -> f64 {
    let dir = plugin_dir(&[plugin]);
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    // Optimised code only: the shared cache may hold a plugin's baseline
    // code (a test host stopped before optimising it), which a tiered
    // runtime would serve while the optimising compile ran beside the
    // measurement.
    let options = RuntimeOptions::new()
        .cache_dir(shared_plugin_cache())
        .compiler(Compiler::Optimizing);
    let _plugins = load(options, &host, dir.path()).await;
    converge_kind(store, host, GroupKind::new(group, "Service"), |i| {
        format!(r#"{{"port":{}}}"#, 1 + i % 65535)
    })
    .await
}

/// Loading example `plugin` from a warm compiled-plugin cache, as a
/// restart does: read, hash, deserialize, instantiate and describe; the
/// median of five fresh runtimes.
async fn cached_load(plugin: &str) -> f64 {
    let path = plugin_wasm(plugin);
    let options = || {
        RuntimeOptions::new()
            .cache_dir(shared_plugin_cache())
            .compiler(Compiler::Optimizing)
    };
    let warm = Runtime::new(options()).expect("runtime");
    warm.load(&path, Policy::default()).await.expect("load");
    let mut samples = Vec::new();
    for _ in 0..5 {
        let runtime = Runtime::new(options()).expect("runtime");
        let started = Instant::now();
        runtime.load(&path, Policy::default()).await.expect("load");
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(runtime.compiled_count(), 0, "loaded from the cache");
    }
    median(samples)
}

/// Loading example `plugin` with an empty cache: compiled from its bytes by
/// Cranelift (tiering's baseline code is `author`'s first-serve figure).
async fn first_compile(plugin: &str) -> f64 {
    let cache = tempfile::tempdir().expect("cache directory");
    let options = RuntimeOptions::new()
        .cache_dir(cache.path())
        .compiler(Compiler::Optimizing);
    let runtime = Runtime::new(options).expect("runtime");
    let started = Instant::now();
    runtime
        .load(&plugin_wasm(plugin), Policy::default())
        .await
        .expect("load");
    assert_eq!(runtime.compiled_count(), 1, "compiled, not cached");
    started.elapsed().as_secs_f64() * 1e3
}

/// GETs per side, in rounds that alternate plugin and native, so drift in
/// the machine's load falls on both alike.
const GETS: usize = 200;
const GET_ROUNDS: usize = 10;
/// GETs one `fetch-timed` pass makes.
const GETS_PER_PASS: usize = 10;

/// The plugin's and native GET times, microseconds each: the `hostile`
/// plugin's `fetch-timed` passes each time ten GETs inside the guest; the
/// native side makes the same GETs with hyper on a new connection each, as
/// wasi:http does.
async fn http_gets(server: &TestServer) -> (Vec<f64>, Vec<f64>) {
    let dir = plugin_dir(&["hostile"]);
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!("[http]\nallow = [{:?}]\n", server.authority()),
    )
    .expect("policy");
    let store = Store::temporary().expect("store");
    let host = Host::new(&store, HostOptions::new()).expect("host");
    // One pass at a time, as the native side makes one request at a time.
    let options = RuntimeOptions::new().limits(Limits {
        concurrency: 1,
        ..Limits::default()
    });
    let _plugins = load(options, &host, dir.path()).await;
    let running = host.start().await.expect("start");
    let conn = rusqlite::Connection::open(store.path()).expect("observer");
    let hostile: RawClient = host.client(GroupKind::new("test.dev", "Hostile"));
    let spec = format!(r#"{{"act":"fetch-timed","path":"{}"}}"#, server.url("/ok"));
    let per_round = GETS / GET_ROUNDS;
    let mut native = Vec::with_capacity(GETS);
    for round in 0..GET_ROUNDS {
        for i in 0..per_round / GETS_PER_PASS {
            hostile
                .create(
                    &format!("get-{round}-{i}"),
                    Json::parse(&spec).expect("spec"),
                    CreateOptions::new(),
                )
                .await
                .expect("create");
        }
        // A cheap check while passes run, so polling takes little from them.
        wait_for(POLL, || outstanding(&conn, None) == 0).await;
        for _ in 0..per_round {
            native.push(native_get(server).await);
        }
    }
    let plugin = hostile
        .list()
        .expect("list")
        .into_iter()
        .flat_map(|o| {
            let outcome = o.status.expect("status").to_value()["outcome"].clone();
            let times = outcome.as_str().expect("times").to_string();
            times
                .split(' ')
                .map(|t| t.parse::<f64>().expect("micros"))
                .collect::<Vec<_>>()
        })
        .collect();
    running.stop(Duration::from_secs(30)).await.expect("stop");
    (plugin, native)
}

async fn native_get(server: &TestServer) -> f64 {
    use http_body_util::{BodyExt, Empty};

    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(server.authority())
        .await
        .expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get("/ok")
        .header("host", server.authority())
        .body(Empty::<hyper::body::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let body = response.into_body().collect().await.expect("body");
    assert_eq!(body.to_bytes().len(), 2);
    started.elapsed().as_secs_f64() * 1e6
}

/// Nanoseconds per store-grant check of a denied kind.
fn store_check() -> f64 {
    use beehive::plugin::StoreGrants;
    const CHECKS: u32 = 10_000_000;
    let pattern = |p: &str| p.parse().expect("a pattern");
    let grants = StoreGrants {
        read: vec![
            pattern("Config.example.dev"),
            pattern("*.infra.example.dev"),
        ],
        write: vec![pattern("Greeting.example.dev"), pattern("*.*.render.dev")],
    };
    let own = GroupKind::new("example.dev", "GreetingSet");
    let other = GroupKind::new("example.dev", "Secret");
    let start = Instant::now();
    for _ in 0..CHECKS {
        let allowed = grants.allows(
            std::hint::black_box(&own),
            std::hint::black_box(&other),
            beehive::plugin::StoreVerb::Write,
        );
        assert!(!std::hint::black_box(allowed));
    }
    start.elapsed().as_nanos() as f64 / f64::from(CHECKS)
}

fn verify_ms() -> f64 {
    let dir = tempfile::tempdir().expect("a directory");
    let plugin = beehive_e2e::bench::signed_two_megabytes(dir.path());
    let bytes = std::fs::read(&plugin).expect("the plugin");
    let trust = beehive::plugin::Trust::of_directory(dir.path())
        .expect("the trust file")
        .expect("one");
    let samples = (0..21)
        .map(|_| {
            let start = Instant::now();
            trust
                .verify(&plugin, &bytes, &Default::default())
                .expect("verifies");
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(samples)
}

fn main() {
    if wanted("plugin.verify_ms") {
        figure("plugin.verify_ms", verify_ms(), "ms");
    }
    if wanted("plugin.store_check_ns") {
        figure("plugin.store_check_ns", store_check(), "ns");
    }
    block_on(async {
        if wanted("plugin.converge_10k_wasm_per_s") || wanted("plugin.wasm_to_native") {
            let (wasm, native, ratio) = wasm_and_native(Build::Contract0_2).await;
            figure("plugin.converge_10k_wasm_per_s", wasm, "obj/s");
            figure("plugin.converge_10k_native_per_s", native, "obj/s");
            figure("plugin.wasm_to_native", ratio, "ratio");
        }
        if wanted("plugin.converge_10k_wasm_0_1_per_s") || wanted("plugin.wasm_0_1_to_native") {
            let (wasm, _, ratio) = wasm_and_native(Build::Contract0_1).await;
            figure("plugin.converge_10k_wasm_0_1_per_s", wasm, "obj/s");
            figure("plugin.wasm_0_1_to_native", ratio, "ratio");
        }
        if wanted("plugin.cold_start_ms") {
            figure("plugin.cold_start_ms", cold_start().await, "ms");
        }
        if wanted("plugin.hot_swap_ms") {
            figure("plugin.hot_swap_ms", hot_swap().await, "ms");
        }
        if wanted("plugin.instance_rss_kib") {
            figure("plugin.instance_rss_kib", instance_rss().await, "KiB");
        }
        if wanted("plugin.converge_10k_conditions_per_s") {
            let rust = conditions("conditions", "example.dev").await;
            figure("plugin.converge_10k_conditions_per_s", rust, "obj/s");
        }
        if wanted("plugin.converge_10k_python_per_s") || wanted("plugin.python_cached_load_ms") {
            let python = conditions("conditions-py", "py.example.dev").await;
            figure("plugin.converge_10k_python_per_s", python, "obj/s");
            figure(
                "plugin.python_cached_load_ms",
                cached_load("conditions-py").await,
                "ms",
            );
        }
        if wanted("plugin.converge_10k_js_per_s") || wanted("plugin.js_") {
            js_figures().await;
        }
        if wanted("plugin.http_get_us") || wanted("plugin.http_get_native_us") {
            let server = TestServer::start();
            server.route("/ok", 200, "ok");
            let (plugin, native) = http_gets(&server).await;
            figure("plugin.http_get_us", median(plugin), "us");
            figure("plugin.http_get_native_us", median(native), "us");
        }
    });
}

/// The JavaScript plugin's figures: its converge, cached load, size and
/// first compile.
async fn js_figures() {
    let js = conditions("conditions-js", "js.example.dev").await;
    figure("plugin.converge_10k_js_per_s", js, "obj/s");
    figure(
        "plugin.js_cached_load_ms",
        cached_load("conditions-js").await,
        "ms",
    );
    let size = std::fs::metadata(plugin_wasm("conditions-js"))
        .expect("plugin")
        .len();
    figure("plugin.js_component_mb", size as f64 / 1e6, "MB");
    figure(
        "plugin.js_first_compile_ms",
        first_compile("conditions-js").await,
        "ms",
    );
}
