//! Hostile plugins against the host around the sandbox: each attack ends
//! with the plugin's pass failing (or the plugin refused), a clear event or
//! error, the host responsive and its memory bounded.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use beehive::plugin::{Change, Directory, Limits, Runtime, RuntimeOptions};
use beehive::{CreateOptions, GroupKind, Host, HostOptions, Json, RawClient, Store};
use beehive_e2e::{
    assert_mentions, create, eventually, load_failures, plugin_dir, plugin_wasm, stop,
};

fn hostile_kind() -> GroupKind {
    GroupKind::new("test.dev", "Hostile")
}

/// Tight limits, so every attack is cut within a test's patience.
fn tight() -> Limits {
    Limits {
        pass_deadline: Duration::from_millis(500),
        pass_wall_limit: Duration::from_secs(2),
        concurrency: 2,
        host_calls_per_pass: 5_000,
        kind_clients: 64,
        ..Limits::default()
    }
}

async fn load(host: &Host, dir: &Path, options: RuntimeOptions) -> Arc<Directory> {
    let runtime = Runtime::new(options).unwrap();
    let plugins = Directory::new(runtime, host.clone(), dir);
    plugins.sync().await.unwrap();
    plugins
}

async fn act(client: &RawClient, name: &str, act: &str) {
    let spec = Json::parse(&format!(r#"{{"act":"{act}"}}"#)).unwrap();
    client
        .create(name, spec, CreateOptions::new())
        .await
        .unwrap();
}

/// The message of the object's latest `reconcile` event, once there is one.
fn failure(client: &RawClient, name: &str) -> Option<String> {
    let object = client.get_by_name(name).ok()?;
    client
        .get_latest_event(object.meta.id, "reconcile")
        .unwrap()
        .map(|e| e.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_plugin_asks_for_is_cut_to_the_operators_ceiling() {
    let plugins = plugin_dir(&["hostile", "greeting"]);
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let directory = load(&host, plugins.path(), RuntimeOptions::new().limits(tight())).await;
    let served = directory.served();
    assert_eq!(served.len(), 2, "{:?}", directory.failures());
    let limits_of = |name: &str| {
        served
            .iter()
            .find(|s| s.path.ends_with(format!("{name}.wasm")))
            .unwrap()
            .limits
    };
    let limits = limits_of("hostile");
    assert_eq!(
        limits.pass_deadline,
        Duration::from_millis(500),
        "not 31 years"
    );
    assert_eq!(limits.concurrency, 2, "not u32::MAX workers");
    assert_eq!(
        limits_of("greeting").concurrency,
        1,
        "a plugin that asks for nothing gets the host's default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_passes_on_every_worker_leave_the_host_responsive() {
    let plugins = plugin_dir(&["hostile"]);
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let limits = Limits {
        pass_deadline: Duration::from_secs(3),
        pass_wall_limit: Duration::from_secs(10),
        ..tight()
    };
    let _directory = load(&host, plugins.path(), RuntimeOptions::new().limits(limits)).await;
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    for i in 0..4 {
        act(&hostile, &format!("spin-{i}"), "spin").await;
    }
    // Both workers spin for 3 s of guest time each; a task that asks for
    // the runtime every few milliseconds must still get it promptly.
    let mut worst = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let asked = Instant::now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let read = hostile.list().unwrap();
        assert_eq!(read.len(), 4);
        worst = worst.max(asked.elapsed());
    }
    assert!(
        worst < Duration::from_millis(500),
        "the host stalled for {worst:?}"
    );
    eventually("every spinning pass is cut", || {
        (0..4).all(|i| failure(&hostile, &format!("spin-{i}")).is_some())
    })
    .await;
    let message = failure(&hostile, "spin-0").unwrap();
    assert_mentions(&message, &["exceeded its CPU deadline of 3s"]);
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_fails_its_own_pass_with_a_clear_event() {
    let plugins = plugin_dir(&["hostile", "greeting"]);
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let runtime = Runtime::new(RuntimeOptions::new().limits(tight())).unwrap();
    let directory = Directory::new(runtime.clone(), host.clone(), plugins.path());
    directory.sync().await.unwrap();
    assert_eq!(directory.served().len(), 2, "{:?}", directory.failures());
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    let attacks = [
        ("sleep", "wall-clock limit of 2s"),
        ("host-loop", "more than 5000 host calls"),
        ("leak-clients", "more than 64 kind clients"),
        ("long-kind", "invalid kind"),
        ("huge-status", "document too large"),
    ];
    for (attack, _) in attacks {
        act(&hostile, attack, attack).await;
    }
    act(&hostile, "touch-memory", "touch-memory").await;
    act(&hostile, "forge-log", "forge-log").await;
    let greetings = host.client(GroupKind::new("example.dev", "Greeting"));
    create(&greetings, "ada", r#"{"name":"Ada"}"#).await;

    eventually("every attack is reported", || {
        attacks
            .iter()
            .all(|(attack, _)| failure(&hostile, attack).is_some())
    })
    .await;
    for (attack, expected) in attacks {
        let message = failure(&hostile, attack).unwrap();
        assert!(message.contains(expected), "{attack}: {message}");
        let object = hostile.get_by_name(attack).unwrap();
        assert!(!object.meta.is_observed(), "{attack} settled nothing");
        assert!(object.status.is_none(), "{attack} wrote no status");
    }
    eventually("the honest passes settle", || {
        ["touch-memory", "forge-log"]
            .iter()
            .all(|name| hostile.get_by_name(name).unwrap().meta.is_observed())
            && greetings.get_by_name("ada").unwrap().meta.is_observed()
    })
    .await;
    // The instance that touched 48 MiB was dropped after its pass, giving
    // the memory back; only small idle instances remain, once no retry of a
    // failing attack is in flight (a loaded machine stretches each one).
    eventually("the memory a pass touched is given back", || {
        runtime.memory_in_use() < 32 << 20
    })
    .await;
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_that_never_returns_or_names_a_forged_kind_is_refused() {
    let plugins = plugin_dir(&["greeting"]);
    // The hostile plugin twice, told by its config which attack its
    // registration makes.
    for (name, attack) in [("stuck", "stuck"), ("forged", "forged-kind")] {
        std::fs::copy(
            plugin_wasm("hostile"),
            plugins.path().join(format!("{name}.wasm")),
        )
        .unwrap();
        let policy = format!("[config]\nregistration = {attack:?}\n");
        std::fs::write(plugins.path().join(format!("{name}.toml")), policy).unwrap();
    }
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let started = Instant::now();
    let directory = load(&host, plugins.path(), RuntimeOptions::new().limits(tight())).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "loading took {:?}",
        started.elapsed()
    );
    let failures = load_failures(&directory);
    assert_eq!(failures.len(), 2, "{failures:?}");
    let stuck = failures.iter().find(|f| f.contains("stuck.wasm")).unwrap();
    assert_mentions(stuck, &["describe failed", "CPU deadline of 500ms"]);
    let forged = failures.iter().find(|f| f.contains("forged.wasm")).unwrap();
    assert_mentions(forged, &["invalid kind"]);
    assert!(!forged.contains('\n'), "{forged}");
    assert!(forged.len() < 1000, "{} bytes", forged.len());
    assert_eq!(
        host.kinds(),
        vec![GroupKind::new("example.dev", "Greeting")],
        "the honest plugin loaded anyway"
    );
    let changes = directory.sync().await.unwrap();
    assert!(
        changes.iter().all(|c| !matches!(c, Change::Failed { .. })),
        "a failure that is not transient is not retried until the file changes: {changes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converter_that_never_returns_fails_the_read_not_the_host() {
    let plugins = plugin_dir(&["hostile"]);
    let store = Store::temporary().unwrap();
    // Stored before the plugin declared its schema version: version 0.
    let before = RawClient::new(&store, hostile_kind());
    act(&before, "old-spin", "spin").await;
    act(&before, "old-calm", "calm").await;
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let _directory = load(&host, plugins.path(), RuntimeOptions::new().limits(tight())).await;
    let hostile = host.client(hostile_kind());
    let started = Instant::now();
    let error = hostile.get_by_name("old-spin").unwrap_err();
    assert!(matches!(error, beehive::Error::Migration { .. }), "{error}");
    assert!(
        error.to_string().contains("CPU deadline of 500ms"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let calm = hostile.get_by_name("old-calm").unwrap();
    assert_eq!(calm.spec.as_str(), r#"{"act":"calm"}"#, "converted");
}
