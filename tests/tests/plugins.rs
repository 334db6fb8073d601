//! Real example plugins loaded into a host.

use std::time::{Duration, Instant};

use beehive::plugin::{Limits, PluginRuntime, load_directory};
use beehive::{CreateOptions, GroupKind, Host, HostOptions, Json, Loads, Store};
use beehive_e2e::plugin_wasm;

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_greeting_plugin_converges_its_objects() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_wasm("greeting"),
        plugins.path().join("greeting.wasm"),
    )
    .unwrap();
    std::fs::write(plugins.path().join("broken.wasm"), b"not a component").unwrap();

    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let runtime = PluginRuntime::new(Limits::default()).unwrap();
    let loaded = load_directory(&runtime, &host, plugins.path())
        .await
        .unwrap();
    assert_eq!(loaded.len(), 2);
    let broken = loaded
        .iter()
        .find(|l| l.path.ends_with("broken.wasm"))
        .unwrap();
    let message = broken.outcome.as_ref().unwrap_err().to_string();
    assert!(
        message.contains("broken.wasm") && message.contains("not a WebAssembly component"),
        "{message}"
    );
    let greeting = GroupKind::new("example.dev", "Greeting");
    assert_eq!(
        host.kinds(),
        vec![greeting.clone()],
        "the good plugin loaded anyway"
    );
    let registration = &store.registrations().unwrap()[0];
    assert!(registration.source.ends_with("greeting.wasm"));
    assert_eq!(
        registration.content_hash.as_ref().map(String::len),
        Some(64)
    );

    let running = host.start().await.unwrap();
    let client = host.client(greeting);
    for name in ["ada", "grace"] {
        let spec = Json::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap();
        client
            .create(name, spec, CreateOptions::new())
            .await
            .unwrap();
    }
    wait_until("both greetings are observed", || {
        client
            .list(Loads::none())
            .unwrap()
            .iter()
            .all(|o| o.meta.is_observed())
    })
    .await;
    let ada = client.get_by_name("ada", Loads::none()).unwrap();
    assert_eq!(ada.status.unwrap().to_value()["message"], "Hello, ada!");
    running.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_plugin_fails_only_its_own_passes() {
    let plugins = tempfile::tempdir().unwrap();
    for name in ["greeting", "misbehave"] {
        std::fs::copy(
            plugin_wasm(name),
            plugins.path().join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let runtime = PluginRuntime::new(Limits::default()).unwrap();
    for loaded in load_directory(&runtime, &host, plugins.path())
        .await
        .unwrap()
    {
        loaded.outcome.unwrap();
    }
    let running = host.start().await.unwrap();

    let misbehave = host.client(GroupKind::new("test.dev", "Misbehave"));
    let acts = [
        ("loop", "exceeded its CPU deadline"),
        ("allocate", "plugin misbehave.wasm"),
        ("panic", "misbehave was asked to panic"),
        ("bad-result", "malformed result"),
        ("open-transaction", "transaction open"),
        ("read-file", "no file access"),
    ];
    for (act, _) in acts {
        let spec = Json::parse(&format!(r#"{{"act":"{act}"}}"#)).unwrap();
        misbehave
            .create(act, spec, CreateOptions::new())
            .await
            .unwrap();
    }
    misbehave
        .create(
            "calm",
            Json::parse(r#"{"act":"behave"}"#).unwrap(),
            CreateOptions::new(),
        )
        .await
        .unwrap();
    let greetings = host.client(GroupKind::new("example.dev", "Greeting"));
    greetings
        .create(
            "ada",
            Json::parse(r#"{"name":"Ada"}"#).unwrap(),
            CreateOptions::new(),
        )
        .await
        .unwrap();

    let failure = |name: &str| {
        let object = misbehave.get_by_name(name, Loads::none()).unwrap();
        misbehave
            .get_latest_event(object.meta.id, "reconcile")
            .unwrap()
            .map(|e| e.message)
    };
    wait_until("every misbehaviour is reported", || {
        acts.iter().all(|(act, _)| failure(act).is_some())
    })
    .await;
    for (act, expected) in acts {
        let message = failure(act).unwrap();
        assert!(message.contains(expected), "{act}: {message}");
        let object = misbehave.get_by_name(act, Loads::none()).unwrap();
        assert!(!object.meta.is_observed(), "{act} settled nothing");
    }
    wait_until("the well-behaved objects converge", || {
        greetings
            .get_by_name("ada", Loads::none())
            .unwrap()
            .meta
            .is_observed()
            && misbehave
                .get_by_name("calm", Loads::none())
                .unwrap()
                .meta
                .is_observed()
    })
    .await;
    running.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_unchanged_plugins_compiles_nothing() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_wasm("greeting"),
        plugins.path().join("greeting.wasm"),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let load = || async {
        let store = Store::temporary().unwrap();
        let host = Host::new(&store, HostOptions::new()).unwrap();
        let runtime = PluginRuntime::with_cache(Limits::default(), cache.path()).unwrap();
        for loaded in load_directory(&runtime, &host, plugins.path())
            .await
            .unwrap()
        {
            loaded.outcome.unwrap();
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
