//! What an operator grants a plugin beyond its sandbox, from the policy file
//! beside it: granted directories work, escapes from them fail, granted
//! hosts answer within the HTTP limits and others are denied with an event,
//! a changed policy applies to new instances, a wrong one is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use beehive::plugin::{Change, Directory, Runtime, RuntimeOptions};
use beehive::{GroupKind, Host, HostOptions, RawClient, Store};
use beehive_e2e::{TestServer, assert_mentions, create, eventually, plugin_dir, stop};

fn hostile_kind() -> GroupKind {
    GroupKind::new("test.dev", "Hostile")
}

/// Writes the `hostile` plugin's policy file in `plugins`.
fn write_policy(plugins: &Path, policy: &str) {
    std::fs::write(plugins.join("hostile.toml"), policy).unwrap();
}

/// A policy granting `out` as `/out` with `access`. The test's directories
/// share `/tmp` with the store, so a read-write grant opts in to that.
fn grant(plugins: &Path, out: &Path, access: &str) {
    let out = out.display().to_string();
    let opt_in = if access == "read-write" {
        "allow_store_filesystem = true\n"
    } else {
        ""
    };
    write_policy(
        plugins,
        &format!("[files.\"/out\"]\npath = {out:?}\naccess = \"{access}\"\n{opt_in}"),
    );
}

/// The status outcome once the object settled, or the failure once one is
/// recorded.
fn outcome(client: &RawClient, name: &str) -> Option<Result<String, String>> {
    let object = client.get_by_name(name).ok()?;
    if let Some(failure) = client
        .get_latest_event(object.meta.id, "reconcile")
        .unwrap()
    {
        return Some(Err(failure.message));
    }
    if !object.meta.is_observed() {
        return None;
    }
    let status = object.status?.to_value();
    Some(Ok(status["outcome"].as_str()?.to_string()))
}

async fn settled_outcome(client: &RawClient, name: &str) -> Result<String, String> {
    eventually(&format!("{name} has an outcome"), || {
        outcome(client, name).is_some()
    })
    .await;
    outcome(client, name).unwrap()
}

/// A host over a fresh store whose plugin directory `plugins` loaded, the
/// one plugin in it serving.
async fn served_directory(plugins: &Path) -> (Arc<Directory>, Host) {
    let store = Store::temporary().unwrap();
    let host = Host::new(&store, HostOptions::new()).unwrap();
    let runtime = Runtime::new(RuntimeOptions::new()).unwrap();
    let directory = Directory::new(runtime, host.clone(), plugins);
    directory.sync().await.unwrap();
    assert_eq!(directory.served().len(), 1, "{:?}", directory.failures());
    (directory, host)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_directory_works_and_nothing_escapes_it() {
    let plugins = plugin_dir(&["hostile"]);
    let world = tempfile::tempdir().unwrap();
    let out = world.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(world.path().join("secret.txt"), "the host's secret").unwrap();
    std::fs::write(out.join("inside.txt"), "fine to read").unwrap();
    std::os::unix::fs::symlink("../secret.txt", out.join("link")).unwrap();
    grant(plugins.path(), &out, "read-write");

    let (directory, host) = served_directory(plugins.path()).await;
    let served = directory.served();
    assert_eq!(served[0].policy.files.len(), 1);
    assert_eq!(
        served[0].policy.files[0].to_string(),
        format!("/out={}:rw", out.canonicalize().unwrap().display())
    );
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());

    create(&hostile, "writer", r#"{"act":"write-file"}"#).await;
    create(
        &hostile,
        "inside",
        r#"{"act":"read","path":"/out/inside.txt"}"#,
    )
    .await;
    let escapes = [
        ("dotdot", "/out/../secret.txt"),
        ("absolute", "/etc/hostname"),
        ("symlink", "/out/link"),
    ];
    for (name, path) in escapes {
        create(
            &hostile,
            name,
            &format!(r#"{{"act":"read","path":"{path}"}}"#),
        )
        .await;
    }
    assert_eq!(
        settled_outcome(&hostile, "writer").await,
        Ok("wrote /out/writer.txt".into())
    );
    assert_eq!(
        std::fs::read_to_string(out.join("writer.txt")).unwrap(),
        "written by a plugin"
    );
    assert_eq!(
        settled_outcome(&hostile, "inside").await,
        Ok("read /out/inside.txt: fine to read".into())
    );
    for (name, path) in escapes {
        let result = settled_outcome(&hostile, name).await;
        let failure = result.expect_err(name);
        assert!(
            failure.contains(&format!("cannot read {path}")),
            "{name}: {failure}"
        );
        assert!(!failure.contains("the host's secret"), "{name}: {failure}");
    }
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_policy_applies_and_a_wrong_one_is_refused() {
    let plugins = plugin_dir(&["hostile"]);
    let world = tempfile::tempdir().unwrap();
    let out = world.path().join("out");
    std::fs::create_dir(&out).unwrap();
    grant(plugins.path(), &out, "read-write");
    let (directory, host) = served_directory(plugins.path()).await;
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    create(&hostile, "first", r#"{"act":"write-file"}"#).await;
    assert!(settled_outcome(&hostile, "first").await.is_ok());

    // Read-only now: the plugin's code is unchanged, its grants are not.
    grant(plugins.path(), &out, "read-only");
    let changes = directory.sync().await.unwrap();
    assert!(
        matches!(changes.as_slice(), [Change::Loaded { .. }]),
        "{changes:?}"
    );
    assert!(directory.served()[0].policy.files[0].read_only);
    create(&hostile, "second", r#"{"act":"write-file"}"#).await;
    let failure = settled_outcome(&hostile, "second").await.unwrap_err();
    assert_mentions(&failure, &["cannot write /out/second.txt"]);

    // A policy that would hand over the plugin directory is refused, and
    // the version loaded before keeps serving.
    grant(plugins.path(), plugins.path(), "read-write");
    let changes = directory.sync().await.unwrap();
    let [
        Change::Failed {
            failure,
            still_serving,
        },
    ] = changes.as_slice()
    else {
        panic!("{changes:?}");
    };
    assert!(
        matches!(*failure.error, beehive::plugin::Error::Policy { .. }),
        "{}",
        failure.error
    );
    assert!(
        failure.error.to_string().contains("no plugin may reach"),
        "{}",
        failure.error
    );
    assert!(still_serving.is_some());
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_values_reach_the_plugin_and_nothing_else() {
    let plugins = plugin_dir(&["hostile"]);
    let world = tempfile::tempdir().unwrap();
    let secret = world.path().join("token");
    std::fs::write(&secret, "s3cr3t-from-a-file\n").unwrap();
    write_policy(
        plugins.path(),
        &format!(
            "[config]\nregion = \"eu-west-1\"\ntoken = {{ file = {:?} }}\n",
            secret.display().to_string()
        ),
    );
    let (directory, host) = served_directory(plugins.path()).await;
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    create(&hostile, "region", r#"{"act":"config","path":"region"}"#).await;
    create(&hostile, "token", r#"{"act":"config","path":"token"}"#).await;
    create(&hostile, "absent", r#"{"act":"config","path":"absent"}"#).await;
    assert_eq!(
        settled_outcome(&hostile, "region").await,
        Ok("config region: eu-west-1".into())
    );
    assert_eq!(
        settled_outcome(&hostile, "token").await,
        Ok("config token: s3cr3t-from-a-file".into())
    );
    assert!(settled_outcome(&hostile, "absent").await.is_err());
    let shown = format!("{:?}", directory.served());
    assert_mentions(&shown, &["token"]);
    assert!(!shown.contains("s3cr3t"), "a secret was shown: {shown}");
    stop(running).await;
}

async fn fetch(client: &RawClient, name: &str, url: &str) -> Result<String, String> {
    create(
        client,
        name,
        &format!(r#"{{"act":"fetch","path":"{url}"}}"#),
    )
    .await;
    settled_outcome(client, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_http_reaches_granted_hosts_only_and_within_the_limits() {
    let server = TestServer::start();
    server.route("/ok", 200, "fine");
    server.route_after("/slow", Duration::from_secs(5), 200, "late");
    server.route("/big", 200, vec![b'x'; 10_000]);
    let plugins = plugin_dir(&["hostile"]);
    write_policy(
        plugins.path(),
        &format!(
            "[http]\nallow = [{:?}]\nfirst_byte_timeout_ms = 300\nmax_response_bytes = 4096\n",
            server.authority()
        ),
    );
    let (directory, host) = served_directory(plugins.path()).await;
    let shown = directory.served()[0].policy.http.allow[0].to_string();
    assert_eq!(shown, server.authority());
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());

    assert_eq!(
        fetch(&hostile, "ok", &server.url("/ok")).await,
        Ok("fetched HTTP 200 4 bytes".into())
    );
    let slow = fetch(&hostile, "slow", &server.url("/slow"))
        .await
        .unwrap_err();
    assert_mentions(&slow, &["timed out"]);
    let big = fetch(&hostile, "big", &server.url("/big"))
        .await
        .unwrap_err();
    assert_mentions(&big, &["larger than the 4096-byte cap"]);

    // The same server under another name is another destination.
    let other = server.localhost_url("/denied");
    let denied = fetch(&hostile, "denied", &other).await.unwrap_err();
    assert_mentions(&denied, &["does not grant"]);
    assert_eq!(server.hits("/denied"), 0, "no connection was made");
    let object = hostile.get_by_name("denied").unwrap();
    let events = hostile
        .list_events(object.meta.id, &beehive::event::EventFilter::all())
        .unwrap();
    let warning = events
        .iter()
        .find(|e| e.reason == "HttpRequestDenied")
        .unwrap_or_else(|| panic!("no denial event in {events:?}"));
    assert!(
        warning.message.contains(&server.localhost_url("")),
        "{}",
        warning.message
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_grants_a_host_to_the_next_instances() {
    let server = TestServer::start();
    server.route("/ok", 200, "fine");
    let plugins = plugin_dir(&["hostile"]);
    let (directory, host) = served_directory(plugins.path()).await;
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    let before = fetch(&hostile, "before", &server.url("/ok"))
        .await
        .unwrap_err();
    assert_mentions(&before, &["does not grant"]);

    write_policy(plugins.path(), "[http]\nallow = [\"127.0.0.1:*\"]\n");
    let changes = directory.sync().await.unwrap();
    assert!(
        matches!(changes.as_slice(), [Change::Loaded { .. }]),
        "{changes:?}"
    );
    assert_eq!(
        fetch(&hostile, "after", &server.url("/ok")).await,
        Ok("fetched HTTP 200 4 bytes".into())
    );
    // At least once: a pass may run more than once (a controller is
    // written to be idempotent), and each run fetches.
    assert!(server.hits("/ok") >= 1);
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_plugins_cap_in_flight_wait_then_fail() {
    let server = TestServer::start();
    // Long enough that the second pass starts while the first waits.
    server.route_after("/wait", Duration::from_millis(2500), 200, "done");
    let plugins = plugin_dir(&["hostile"]);
    write_policy(
        plugins.path(),
        &format!(
            "[http]\nallow = [{:?}]\nmax_concurrent_requests = 1\nconnect_timeout_ms = 300\n",
            server.authority()
        ),
    );
    let (_directory, host) = served_directory(plugins.path()).await;
    let running = host.start().await.unwrap();
    let hostile = host.client(hostile_kind());
    let spec = format!(r#"{{"act":"fetch","path":"{}"}}"#, server.url("/wait"));
    create(&hostile, "first", &spec).await;
    create(&hostile, "second", &spec).await;
    let outcomes = [
        settled_outcome(&hostile, "first").await,
        settled_outcome(&hostile, "second").await,
    ];
    let served = outcomes.iter().filter(|o| o.is_ok()).count();
    let turned_away = outcomes
        .iter()
        .filter(|o| {
            o.as_ref()
                .is_err_and(|e| e.contains("too many requests in flight"))
        })
        .count();
    assert_eq!((served, turned_away), (1, 1), "{outcomes:?}");
    stop(running).await;
}
