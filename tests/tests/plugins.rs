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
