//! Real example plugins loaded into a host.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use beehive::plugin::{
    Change, Directory, LimitOverrides, Limits, Policy, Runtime, RuntimeOptions, Tier,
};
use beehive::{CreateOptions, GroupKind, Host, HostOptions, Json, RawClient, Store};
use beehive_e2e::{
    TestServer, assert_mentions, create, eventually, load_failures, plugin_dir, plugin_wasm, spec,
    stop,
};

/// Replaces `to` with `from`'s bytes the way an operator should: written
/// under a hidden name, then renamed into place.
fn swap_in(from: &Path, to: &Path) {
    let staging = to.with_file_name(".staging.wasm");
    std::fs::copy(from, &staging).unwrap();
    std::fs::rename(&staging, to).unwrap();
}

/// Loads a directory whose plugins must all load.
async fn load_all(host: &Host, dir: &Path) -> Arc<Directory> {
    let runtime = Runtime::new(RuntimeOptions::new()).unwrap();
    let plugins = Directory::new(runtime, host.clone(), dir);
    for change in plugins.sync().await.unwrap() {
        assert!(matches!(change, Change::Loaded { .. }), "{change}");
    }
    plugins
}

/// A started host over a throwaway store, serving the named example
/// plugins from a directory of their own.
async fn serving(
    names: &[&str],
) -> (
    tempfile::TempDir,
    Store,
    Host,
    Arc<Directory>,
    beehive::engine::StopHandle,
) {
    let plugins = plugin_dir(names);
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let directory = load_all(&host, plugins.path()).await;
    let running = host.start().await.unwrap();
    (plugins, store, host, directory, running)
}

fn greet(name: &str) -> Json {
    Json::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap()
}

/// Creates the greeting `ada` through `host` and waits until it is observed.
async fn greet_ada(host: &Host) -> RawClient {
    let client = host.client(greeting_kind());
    create(&client, "ada", r#"{"name":"Ada"}"#).await;
    eventually("ada is observed", || all_observed(&client)).await;
    client
}

/// Whether `object`'s status was written by greeting release `release`.
fn written_by_release(object: &beehive::RawObject, release: u64) -> bool {
    object
        .status
        .as_ref()
        .is_some_and(|s| s.to_value()["release"] == release)
}

fn greeting_kind() -> GroupKind {
    GroupKind::new("example.dev", "Greeting")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_greeting_plugin_converges_its_objects() {
    let plugins = plugin_dir(&["greeting", "greeting_v2"]);
    std::fs::write(plugins.path().join("broken.wasm"), b"not a component").unwrap();

    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let runtime = Runtime::new(RuntimeOptions::new()).unwrap();
    let directory = Directory::new(runtime, host.clone(), plugins.path());
    let changes = directory.sync().await.unwrap();
    assert_eq!(changes.len(), 3);
    let failures = load_failures(&directory);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert_mentions(
        &failures[0],
        &["broken.wasm", "not a WebAssembly component", "magic bytes"],
    );
    assert!(
        failures[1].contains("greeting_v2.wasm")
            && failures[1].contains("already reconciled by")
            && failures[1].contains("greeting.wasm"),
        "{}",
        failures[1]
    );
    assert_eq!(
        host.kinds(),
        vec![greeting_kind()],
        "the good plugin loaded anyway"
    );
    let served = directory.served();
    assert_eq!(served.len(), 1);
    let registration = &store.registrations().unwrap()[0];
    assert!(registration.source.ends_with("greeting.wasm"));
    assert_eq!(
        registration.content_hash.as_ref(),
        Some(&served[0].content_hash)
    );
    assert_eq!(served[0].content_hash.len(), 64);

    let running = host.start().await.unwrap();
    let client = host.client(greeting_kind());
    for name in ["ada", "grace"] {
        client
            .create(name, greet(name), CreateOptions::new())
            .await
            .unwrap();
    }
    eventually("both greetings are observed", || all_observed(&client)).await;
    let ada = client.get_by_name("ada").unwrap();
    assert_eq!(ada.status.unwrap().to_value()["message"], "Hello, ada!");
    stop(running).await;
}

fn all_observed(client: &RawClient) -> bool {
    client.list().unwrap().iter().all(|o| o.meta.is_observed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_plugin_fails_only_its_own_passes() {
    let plugins = plugin_dir(&["greeting", "misbehave"]);
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let _directory = load_all(&host, plugins.path()).await;
    let running = host.start().await.unwrap();

    let misbehave = host.client(GroupKind::new("test.dev", "Misbehave"));
    let acts = [
        ("loop", "exceeded its CPU deadline"),
        ("allocate", "plugin misbehave"),
        ("panic", "misbehave was asked to panic"),
        ("bad-result", "malformed result"),
        ("open-transaction", "transaction open"),
        ("read-file", "no file access"),
    ];
    for (act, _) in acts {
        create(&misbehave, act, &format!(r#"{{"act":"{act}"}}"#)).await;
    }
    // Neither behaving nor waiting in a host call past the 300 ms deadline
    // (which counts guest time only) fails a pass.
    for (name, act) in [("calm", "behave"), ("sleepy", "sleep")] {
        create(&misbehave, name, &format!(r#"{{"act":"{act}"}}"#)).await;
    }
    let greetings = host.client(GroupKind::new("example.dev", "Greeting"));
    create(&greetings, "ada", r#"{"name":"Ada"}"#).await;

    let failure = |name: &str| {
        let object = misbehave.get_by_name(name).unwrap();
        misbehave
            .get_latest_event(object.meta.id, "reconcile")
            .unwrap()
            .map(|e| e.message)
    };
    eventually("every misbehaviour is reported", || {
        acts.iter().all(|(act, _)| failure(act).is_some())
    })
    .await;
    for (act, expected) in acts {
        let message = failure(act).unwrap();
        assert!(message.contains(expected), "{act}: {message}");
        let object = misbehave.get_by_name(act).unwrap();
        assert!(!object.meta.is_observed(), "{act} settled nothing");
    }
    eventually("the well-behaved objects converge", || {
        greetings.get_by_name("ada").unwrap().meta.is_observed()
            && ["calm", "sleepy"]
                .iter()
                .all(|name| misbehave.get_by_name(name).unwrap().meta.is_observed())
    })
    .await;
    let sleepy = misbehave.get_by_name("sleepy").unwrap();
    assert_eq!(
        sleepy.status.unwrap().to_value()["outcome"],
        "slept in a host call"
    );
    assert_eq!(failure("sleepy"), None);
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_unchanged_plugins_compiles_nothing() {
    let plugins = plugin_dir(&["greeting"]);
    let cache = tempfile::tempdir().unwrap();
    let load = || async {
        let store = Store::temporary().unwrap();
        let host = Host::new(&store, HostOptions::new()).unwrap();
        let runtime = Runtime::new(RuntimeOptions::new().cache_dir(cache.path())).unwrap();
        let directory = Directory::new(runtime.clone(), host, plugins.path());
        for change in directory.sync().await.unwrap() {
            assert!(matches!(change, Change::Loaded { .. }), "{change}");
        }
        runtime.compiled_count()
    };
    assert_eq!(load().await, 1, "the first start compiles");
    assert_eq!(load().await, 0, "the next one loads the cached artifact");

    // A damaged artifact is never loaded: it is rebuilt.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }
    assert_eq!(load().await, 1, "a damaged artifact is compiled again");
    assert_eq!(load().await, 0);
}

/// Creates objects and rewrites their specs until told to stop.
/// Writes greetings until `stop`, counting them in `writes`.
fn keep_writing(
    client: RawClient,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            let written = writes.load(Ordering::SeqCst);
            let name = format!("load-{}", written % 50);
            let spec = greet(&format!("{name}-{written}"));
            client
                .create_or_update(&name, spec, CreateOptions::new())
                .await
                .unwrap();
            writes.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_under_load_fails_no_pass() {
    let (plugins, store, host, directory, running) = serving(&["greeting"]).await;
    let watching = directory.watch(Duration::from_secs(60)).unwrap();
    let client = host.client(greeting_kind());
    for i in 0..100 {
        let name = format!("steady-{i}");
        client
            .create(&name, greet(&name), CreateOptions::new())
            .await
            .unwrap();
    }
    let old_hash = directory.served()[0].content_hash.clone();

    let load_done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = keep_writing(client.clone(), load_done.clone(), writes.clone());
    eventually("the load is under way", || {
        writes.load(Ordering::SeqCst) >= 10
    })
    .await;
    swap_in(
        &plugin_wasm("greeting_v2"),
        &plugins.path().join("greeting.wasm"),
    );
    eventually("the new version serves", || {
        directory
            .served()
            .first()
            .is_some_and(|s| s.content_hash != old_hash)
    })
    .await;
    let at_swap = writes.load(Ordering::SeqCst);
    eventually("the load goes on under the new version", || {
        writes.load(Ordering::SeqCst) >= at_swap + 10
    })
    .await;
    load_done.store(true, Ordering::SeqCst);
    writer.await.unwrap();

    eventually("every object shows the new version's status", || {
        client
            .list()
            .unwrap()
            .iter()
            .all(|o| o.meta.is_observed() && written_by_release(o, 2))
    })
    .await;
    for object in client.list().unwrap() {
        let failed = client
            .get_latest_event(object.meta.id, "reconcile")
            .unwrap();
        assert!(failed.is_none(), "{}: {failed:?}", object.meta.name);
    }
    let registration = &store.registrations().unwrap()[0];
    assert_eq!(
        registration.content_hash.as_ref(),
        Some(&directory.served()[0].content_hash)
    );
    watching.stop().await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replacement_leaves_the_old_version_serving() {
    let (plugins, _store, host, directory, running) = serving(&["greeting"]).await;
    let watching = directory.watch(Duration::from_secs(60)).unwrap();
    let served = directory.served();

    let broken = plugins.path().join(".broken");
    std::fs::write(&broken, b"\0asm but not really").unwrap();
    swap_in(&broken, &plugins.path().join("greeting.wasm"));
    eventually("the failure is reported", || {
        !directory.failures().is_empty()
    })
    .await;
    let failure = directory.failures()[0].error.to_string();
    assert_mentions(&failure, &["greeting.wasm"]);
    assert_eq!(directory.served(), served, "the old version still serves");

    let client = host.client(greeting_kind());
    client
        .create("ada", greet("Ada"), CreateOptions::new())
        .await
        .unwrap();
    eventually("the old version converges a new object", || {
        all_observed(&client)
    })
    .await;
    let ada = client.get_by_name("ada").unwrap();
    assert_eq!(ada.status.unwrap().to_value()["message"], "Hello, Ada!");

    // A good file afterwards clears the failure.
    swap_in(
        &plugin_wasm("greeting_v2"),
        &plugins.path().join("greeting.wasm"),
    );
    eventually("the mended file serves", || {
        directory.failures().is_empty() && directory.served() != served
    })
    .await;
    watching.stop().await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_file_unregisters_its_kind_and_a_new_kind_swaps_registrations() {
    let (plugins, store, host, directory, running) = serving(&["greeting", "misbehave"]).await;
    let client = greet_ada(&host).await;

    std::fs::remove_file(plugins.path().join("greeting.wasm")).unwrap();
    let changes = directory.sync().await.unwrap();
    assert!(
        matches!(changes.as_slice(), [Change::Unregistered(_)]),
        "{changes:?}"
    );
    assert_eq!(host.kinds(), vec![GroupKind::new("test.dev", "Misbehave")]);
    assert!(client.get_by_name("ada").is_ok(), "objects stay");

    // misbehave.wasm now holds the greeting plugin: Misbehave goes, Greeting comes.
    swap_in(
        &plugin_wasm("greeting"),
        &plugins.path().join("misbehave.wasm"),
    );
    let changes = directory.sync().await.unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0]
            .to_string()
            .contains("no longer Misbehave.test.dev"),
        "{}",
        changes[0]
    );
    assert_eq!(host.kinds(), vec![greeting_kind()]);
    let registrations = store.registrations().unwrap();
    assert_eq!(registrations.len(), 1);
    assert_eq!(registrations[0].group_kind, greeting_kind());
    stop(running).await;
}

fn condition(client: &RawClient, name: &str, type_: &str) -> Option<(String, String)> {
    let object = client.get_by_name(name).ok()?;
    let found = object.meta.condition(type_)?;
    Some((format!("{:?}", found.status), found.reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_plugins_converge_together() {
    let plugins = plugin_dir(&["greeting", "cascade", "conditions", "events"]);
    let endpoint = TestServer::healthy();
    std::fs::write(
        plugins.path().join("events.toml"),
        format!("[http]\nallow = [{:?}]\n", endpoint.authority()),
    )
    .unwrap();
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let _directory = load_all(&host, plugins.path()).await;
    assert_eq!(host.kinds().len(), 4);
    let running = host.start().await.unwrap();
    let kind = |k: &str| host.client(GroupKind::new("example.dev", k));
    let (sets, greetings, services, connections) = (
        kind("GreetingSet"),
        kind("Greeting"),
        kind("Service"),
        kind("Connection"),
    );

    // cascade: children made by one plugin, greeted by another.
    sets.create(
        "team",
        spec(r#"{"names":["ada","grace"]}"#),
        CreateOptions::new(),
    )
    .await
    .unwrap();
    // conditions and events.
    services
        .create("web", spec(r#"{"port":8080}"#), CreateOptions::new())
        .await
        .unwrap();
    let db = connections
        .create(
            "db",
            spec(&format!(
                r#"{{"url":"{}","probe_interval_ms":50}}"#,
                endpoint.url("/health")
            )),
            CreateOptions::new(),
        )
        .await
        .unwrap();

    eventually("the set reports both children greeted", || {
        condition(&sets, "team", "Ready") == Some(("True".into(), "AllGreeted".into()))
    })
    .await;
    let ada = greetings.get_by_name("team-ada").unwrap();
    assert_eq!(ada.status.unwrap().to_value()["message"], "Hello, ada!");
    let team = sets.get_by_name("team").unwrap();
    assert_eq!(team.status.unwrap().to_value()["ready"], 2);
    assert_eq!(sets.list_dependencies(team.meta.id).unwrap().len(), 2);

    eventually("the service is configured and serving", || {
        condition(&services, "web", "Configured") == Some(("True".into(), "ValidPort".into()))
            && condition(&services, "web", "Serving") == Some(("True".into(), "Listening".into()))
    })
    .await;

    eventually("the connection has probed a few times", || {
        connections
            .get_latest_event(db.meta.id, "connection")
            .unwrap()
            .is_some_and(|e| e.count >= 3)
    })
    .await;
    // The endpoint goes down: the next probes see it, with no change to the
    // object at all.
    endpoint.route("/health", 503, "down");
    eventually("the timeline shows the outage as a new run", || {
        let runs = connections
            .list_events(
                db.meta.id,
                &beehive::event::EventFilter::all().category("connection"),
            )
            .unwrap();
        runs.len() == 2 && runs[0].reason == "ProbeFailed" && runs[1].reason == "Connected"
    })
    .await;

    // Deleting the set takes its children down before the set goes.
    sets.delete_by_name("team").await.unwrap();
    eventually("the set and its children are gone", || {
        sets.list().unwrap().is_empty() && greetings.list().unwrap().is_empty()
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_limits_are_ceilings_over_the_plugins_own() {
    let misbehave = plugin_wasm("misbehave");
    let default = Runtime::new(RuntimeOptions::new()).unwrap();
    let plugin = default.load(&misbehave, Policy::default()).await.unwrap();
    assert_eq!(
        plugin.limits(),
        Limits {
            pass_deadline: Duration::from_millis(300),
            ..Limits::default()
        },
        "the plugin asked for less than the host allows"
    );

    let operator = LimitOverrides {
        pass_deadline: Some(Duration::from_millis(100)),
        memory: Some(16 << 20),
        ..LimitOverrides::default()
    };
    let configured =
        Runtime::new(RuntimeOptions::new().plugin_limits("misbehave", operator)).unwrap();
    let plugin = configured
        .load(&misbehave, Policy::default())
        .await
        .unwrap();
    assert_eq!(
        plugin.limits(),
        Limits {
            pass_deadline: Duration::from_millis(100),
            memory: 16 << 20,
            ..Limits::default()
        },
        "the operator allows less than the plugin asks for"
    );
    let greeting = configured
        .load(&plugin_wasm("greeting"), Policy::default())
        .await
        .unwrap();
    assert_eq!(
        greeting.limits(),
        Limits::default(),
        "others keep the host's limits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_while_the_host_was_stopped_reconciles_every_object_at_start() {
    let plugins = plugin_dir(&["greeting"]);
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("beehive.db");
    {
        let store = Store::open(&db).unwrap();
        let host = Host::new(&store, HostOptions::new()).unwrap();
        let _directory = load_all(&host, plugins.path()).await;
        let running = host.start().await.unwrap();
        greet_ada(&host).await;
        stop(running).await;
    }
    swap_in(
        &plugin_wasm("greeting_v2"),
        &plugins.path().join("greeting.wasm"),
    );
    let store = Store::open(&db).unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let _directory = load_all(&host, plugins.path()).await;
    let running = host.start().await.unwrap();
    let client = host.client(greeting_kind());
    eventually("the new version has seen ada", || {
        written_by_release(&client.get_by_name("ada").unwrap(), 2)
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_reshapes_its_spec_migrates_what_earlier_releases_stored() {
    let (plugins, store, host, directory, running) = serving(&["greeting"]).await;
    let client = host.client(greeting_kind());
    client
        .create("ada", greet("ada"), CreateOptions::new())
        .await
        .unwrap();
    eventually("the first release greets ada", || all_observed(&client)).await;

    swap_in(
        &plugin_wasm("greeting_v3"),
        &plugins.path().join("greeting.wasm"),
    );
    let changes = directory.sync().await.unwrap();
    assert!(
        matches!(changes.as_slice(), [Change::Loaded { .. }]),
        "{changes:?}"
    );
    let registration = &store.registrations().unwrap()[0];
    assert_eq!(
        (registration.spec_version, registration.status_version),
        (1, 0)
    );
    // The stored spec is still the old shape; reads see it converted.
    let ada = client.get_by_name("ada").unwrap();
    assert_eq!(ada.spec.as_str(), r#"{"who":"ada"}"#);
    eventually("the new release greets ada from the converted spec", || {
        written_by_release(&client.get_by_name("ada").unwrap(), 3)
    })
    .await;
    let ada = client.get_by_name("ada").unwrap();
    assert_eq!(ada.status.unwrap().to_value()["message"], "Hello, ada!");
    let failures = client.get_latest_event(ada.meta.id, "reconcile").unwrap();
    assert!(failures.is_none(), "{failures:?}");
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_written_by_a_migrating_release_needs_no_conversion() {
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let plugins = plugin_dir(&["greeting_v3"]);
    let _directory = load_all(&host, plugins.path()).await;
    let client = host.client(greeting_kind());
    let fresh = Json::parse(r#"{"who":"grace"}"#).unwrap();
    let grace = client
        .create("grace", fresh, CreateOptions::new())
        .await
        .unwrap();
    assert_eq!(
        grace.spec.as_str(),
        r#"{"who":"grace"}"#,
        "written at version 1"
    );
    let read = client.get_by_name("grace").unwrap();
    assert_eq!(
        read.spec.as_str(),
        r#"{"who":"grace"}"#,
        "no conversion needed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_code_serves_first_and_optimized_code_takes_over_under_load() {
    let plugins = plugin_dir(&["greeting"]);
    let cache = tempfile::tempdir().unwrap();
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    // Tiered from any size, so the small greeting plugin takes the path a
    // Python or JavaScript one does.
    let options = RuntimeOptions::new().cache_dir(cache.path()).tiered_from(0);
    let runtime = Runtime::new(options).unwrap();
    let held = runtime.hold_optimizing();
    let directory = Directory::new(runtime.clone(), host.clone(), plugins.path());
    for change in directory.sync().await.unwrap() {
        assert!(matches!(change, Change::Loaded { .. }), "{change}");
    }
    assert_eq!(directory.served()[0].tier(), Tier::Baseline);
    let running = host.start().await.unwrap();
    let client = greet_ada(&host).await;

    let load_done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = keep_writing(client.clone(), load_done.clone(), writes.clone());
    eventually("the load is under way on baseline code", || {
        writes.load(Ordering::SeqCst) >= 10
    })
    .await;
    drop(held);
    eventually("the optimized code takes over", || {
        directory.served()[0].tier() == Tier::Optimized
    })
    .await;
    let at_swap = writes.load(Ordering::SeqCst);
    eventually("the load goes on on optimized code", || {
        writes.load(Ordering::SeqCst) >= at_swap + 10
    })
    .await;
    load_done.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    eventually("every object is observed", || all_observed(&client)).await;
    for object in client.list().unwrap() {
        let failed = client
            .get_latest_event(object.meta.id, "reconcile")
            .unwrap();
        assert!(failed.is_none(), "{}: {failed:?}", object.meta.name);
    }
    stop(running).await;

    // The optimized code was cached: the next start serves it at once.
    let again = Runtime::new(RuntimeOptions::new().cache_dir(cache.path()).tiered_from(0)).unwrap();
    let plugin = again
        .load(&plugins.path().join("greeting.wasm"), Policy::default())
        .await
        .unwrap();
    assert_eq!(plugin.tier(), Tier::Optimized);
    assert_eq!(again.compiled_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_stopped_before_optimizing_takes_the_cached_baseline_code_next_time() {
    let plugins = plugin_dir(&["greeting"]);
    let file = plugins.path().join("greeting.wasm");
    let cache = tempfile::tempdir().unwrap();
    let options = || RuntimeOptions::new().cache_dir(cache.path()).tiered_from(0);
    let artifacts = || {
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("cwasm".as_ref()))
            .count()
    };
    let first = Runtime::new(options()).unwrap();
    let held = first.hold_optimizing();
    let plugin = first.load(&file, Policy::default()).await.unwrap();
    assert_eq!(plugin.tier(), Tier::Baseline);
    // Gone before its optimised code was made: the compile behind is skipped.
    drop(plugin);
    drop(held);
    assert_eq!(artifacts(), 1, "the baseline code is cached");

    let second = Runtime::new(options()).unwrap();
    let held = second.hold_optimizing();
    let plugin = second.load(&file, Policy::default()).await.unwrap();
    assert_eq!(second.compiled_count(), 0, "taken from the cache");
    assert_eq!(plugin.tier(), Tier::Baseline);
    drop(held);
    eventually("the optimized code takes over", || {
        plugin.tier() == Tier::Optimized
    })
    .await;
    // Cached (and the baseline code removed) before it took over.
    assert_eq!(
        artifacts(),
        1,
        "the optimized code replaced the baseline code"
    );
    let third = Runtime::new(options()).unwrap();
    let plugin = third.load(&file, Policy::default()).await.unwrap();
    assert_eq!(plugin.tier(), Tier::Optimized);
}
