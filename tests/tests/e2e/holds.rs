//! Grants that hold against the plugin given them, through the real binary
//! and the `hostile` plugin: what a policy checked is what the plugin gets
//! for as long as the grant lives, and no operator file the host reads can
//! hang it or exhaust it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use beehive_e2e::{HostProcess, TestServer, Workspace, assert_mentions, wait_until};
use sha2::{Digest, Sha256};

/// What an object's pass came to: its latest `reconcile` failure if it has
/// one, else its status's `outcome` once written.
pub(crate) fn outcome(
    workspace: &Workspace,
    kind: &str,
    name: &str,
) -> Option<Result<String, String>> {
    let events = workspace.run(&[
        "events",
        kind,
        name,
        "--category",
        "reconcile",
        "-o",
        "json",
    ]);
    if events.status.success() {
        let runs: serde_json::Value = serde_json::from_slice(&events.stdout).ok()?;
        if let Some(latest) = runs.as_array().and_then(|runs| runs.first()) {
            return Some(Err(latest["message"].as_str()?.to_string()));
        }
    }
    let got = workspace.run(&["get", kind, name, "-o", "json"]);
    let object: serde_json::Value = serde_json::from_slice(&got.stdout).ok()?;
    Some(Ok(object["status"]["outcome"].as_str()?.to_string()))
}

/// Applies a `kind` object `name` whose pass does `act` on `path`, and
/// waits for what it came to.
pub(crate) fn act(
    workspace: &Workspace,
    kind: &str,
    name: &str,
    act: &str,
    path: &str,
) -> Result<String, String> {
    let object = serde_json::json!({
        "kind": format!("{kind}.test.dev"),
        "name": name,
        "spec": {"act": act, "path": path},
    });
    workspace.apply(&format!("{name}.json"), &object.to_string());
    wait_until(&format!("{name}'s pass ends"), || {
        outcome(workspace, kind, name).is_some()
    });
    outcome(workspace, kind, name).unwrap()
}

/// A `[files."GUEST"]` section granting `dir`.
fn files(guest: &str, dir: &Path, access: &str) -> String {
    format!(
        "[files.{guest:?}]\npath = {:?}\naccess = {access:?}\n",
        dir.display().to_string()
    )
}

/// A read-write grant the operator has opted in to on the store's
/// filesystem (every test directory shares `/tmp` with the store).
fn writable(guest: &str, dir: &Path) -> String {
    files(guest, dir, "read-write") + "allow_store_filesystem = true\n"
}

/// The host's `beehive plugins` table, once it mentions `what`.
pub(crate) fn plugins_mentioning(workspace: &Workspace, what: &str) -> String {
    wait_until(&format!("`beehive plugins` mentions {what}"), || {
        workspace.ok(&["plugins"]).contains(what)
    });
    workspace.ok(&["plugins"])
}

/// A directory `name` under `world`, made.
fn made(world: &Path, name: &str) -> PathBuf {
    let dir = world.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Sends SIGTERM and requires an exit within a few seconds of the 1 s stop
/// timeout every test host runs with.
pub(crate) fn stops_promptly(mut host: HostProcess) {
    let asked = Instant::now();
    host.signal("TERM");
    let status = host.exits_within(Duration::from_secs(30));
    assert!(status.success(), "the host failed to stop: {}", host.log());
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "SIGTERM took {:?}",
        asked.elapsed()
    );
}

#[test]
fn nested_grants_are_refused() {
    let workspace = Workspace::new();
    let world = tempfile::tempdir().unwrap();
    let data = made(world.path(), "data");
    let inner = made(&data, "inner");
    workspace.install_granted(
        "hostile",
        &(writable("/data", &data) + &writable("/inner", &inner)),
    );
    let host = workspace.start_host(&[]);
    let table = plugins_mentioning(&workspace, "FAILED");
    assert_mentions(
        &table,
        &["hostile.toml", "lies inside", "grants may not overlap"],
    );
    stops_promptly(host);
}

#[test]
fn a_grant_moved_after_its_check_is_refused_to_new_instances() {
    let workspace = Workspace::new();
    let world = tempfile::tempdir().unwrap();
    let data = made(world.path(), "data");
    let inner = made(&data, "inner");
    std::fs::write(inner.join("marker.txt"), "granted").unwrap();
    // Two copies of the plugin: `hostile` holds the parent, `victim` (its
    // kind renamed by config) only the directory inside it.
    workspace.install_granted("hostile", &writable("/data", &data));
    workspace.write(
        "plugins/victim.toml",
        &(files("/data", &inner, "read-only") + "[config]\nkind = \"Victim\"\n"),
    );
    workspace.install_plugin("hostile", "victim.wasm");
    let host = workspace.start_host(&["--plugin-concurrency", "1", "--stop-timeout", "1s"]);
    plugins_mentioning(&workspace, "Victim.test.dev");

    assert_eq!(
        act(&workspace, "Victim", "before", "list", "/data"),
        Ok("listed /data: marker.txt".into())
    );
    assert_eq!(
        act(&workspace, "Hostile", "swap", "swap-dir", ""),
        Ok("swapped /data/inner".into())
    );
    // A panic drops the victim's one instance; the next needs a new one.
    let crashed = act(&workspace, "Victim", "crash", "panic", "").unwrap_err();
    assert_mentions(&crashed, &["panicking on purpose"]);
    let refused = act(&workspace, "Victim", "after", "list", "/data").unwrap_err();
    assert_mentions(
        &refused,
        &[
            "files.\"/data\"",
            "no longer the directory the policy granted",
        ],
    );
    assert_mentions(&host.log(), &["refusing a new instance"]);
    stops_promptly(host);
}

#[test]
fn a_plugin_cannot_make_links() {
    let workspace = Workspace::new();
    let world = tempfile::tempdir().unwrap();
    let data = made(world.path(), "data");
    std::fs::write(data.join("file.txt"), "mine").unwrap();
    workspace.install_granted("hostile", &writable("/data", &data));
    let host = workspace.start_host(&["--stop-timeout", "1s"]);

    let symlink = act(&workspace, "Hostile", "up", "symlink", "../../..").unwrap_err();
    assert_mentions(&symlink, &["cannot symlink", "not-permitted"]);
    let inside = act(&workspace, "Hostile", "same", "symlink", "file.txt").unwrap_err();
    assert_mentions(&inside, &["cannot symlink"]);
    let hard = act(&workspace, "Hostile", "hard", "hard-link", "/data/file.txt").unwrap_err();
    assert_mentions(&hard, &["cannot hard link"]);
    assert!(
        std::fs::symlink_metadata(data.join("link")).is_err(),
        "a link was made"
    );
    stops_promptly(host);
}

/// The artifact `beehive run` cached for the plugin file `wasm`, found by
/// the SHA-256 of its content that names it.
fn cached_artifact(cache: &Path, wasm: &Path) -> (String, PathBuf) {
    let hash: String = Sha256::digest(std::fs::read(wasm).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&hash))
        .unwrap_or_else(|| panic!("no artifact for {} in {}", wasm.display(), cache.display()));
    (hash, file)
}

#[test]
fn a_forged_compiled_artifact_is_not_run() {
    let workspace = Workspace::with_plugins(&["conditions", "greeting"]);
    workspace.start_host(&[]).terminate();
    let plugins = workspace.path().join("plugins");
    let cache = workspace.path().join("beehive.db.plugin-cache");
    let (conditions_hash, conditions_file) =
        cached_artifact(&cache, &plugins.join("conditions.wasm"));
    let (_, greeting_file) = cached_artifact(&cache, &plugins.join("greeting.wasm"));
    std::fs::remove_file(plugins.join("greeting.wasm")).unwrap();
    let greeting = std::fs::read(&greeting_file).unwrap();

    // Whoever can write the cache swaps in another plugin's native code:
    // first resealed as an unkeyed digest would be, then with the other
    // plugin's own (keyed) seal.
    let artifact = &greeting[..greeting.len() - 32];
    let resealed: Vec<u8> = Sha256::new()
        .chain_update(conditions_hash.as_bytes())
        .chain_update(artifact)
        .finalize()
        .to_vec();
    let forgeries = [[artifact, &resealed].concat(), greeting.clone()];
    for forged in forgeries {
        std::fs::write(&conditions_file, &forged).unwrap();
        let host = workspace.start_host(&[]);
        let table = plugins_mentioning(&workspace, "Service.example.dev");
        assert!(
            !table.contains("Greeting"),
            "the forged code serves: {table}"
        );
        assert_mentions(&host.log(), &["ignoring a compiled artifact"]);
        host.terminate();
    }
}

#[test]
fn the_cache_and_key_cannot_be_granted_wherever_they_live() {
    let workspace = Workspace::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let cache = elsewhere.path().join("cache");
    workspace.install_granted("hostile", &files("/c", elsewhere.path(), "read-only"));
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    let table = plugins_mentioning(&workspace, "FAILED");
    assert_mentions(&table, &["which no plugin may reach"]);
    stops_promptly(host);
}

#[test]
fn system_places_cannot_be_granted() {
    let workspace = Workspace::new();
    let places = ["/proc", "/sys", "/dev", "/proc/self"];
    for (i, place) in places.iter().enumerate() {
        workspace.write(
            &format!("plugins/p{i}.toml"),
            &(files("/p", Path::new(place), "read-only") + &format!("[config]\nkind = \"P{i}\"\n")),
        );
        workspace.install_plugin("hostile", &format!("p{i}.wasm"));
    }
    let host = workspace.start_host(&["--stop-timeout", "1s"]);
    let table = plugins_mentioning(&workspace, "p3.toml");
    let refusals = table
        .lines()
        .filter(|line| line.contains("which no plugin may be granted"))
        .count();
    assert_eq!(refusals, places.len(), "{table}");
    stops_promptly(host);
}

#[test]
fn operator_files_that_never_end_are_refused_and_syncs_go_on() {
    let workspace = Workspace::new();
    let plugins = workspace.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    // A policy that is an endless device, one that is a FIFO nobody writes,
    // and a config value read from an endless device.
    std::os::unix::fs::symlink("/dev/zero", plugins.join("hostile.toml")).unwrap();
    workspace.install_plugin("hostile", "hostile.wasm");
    let fifo = plugins.join("victim.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    workspace.install_plugin("hostile", "victim.wasm");
    workspace.write(
        "plugins/third.toml",
        "[config]\nkind = \"Third\"\nsecret = { file = \"/dev/zero\" }\n",
    );
    workspace.install_plugin("hostile", "third.wasm");

    let host = workspace.start_host(&["--rescan-interval", "1s", "--stop-timeout", "1s"]);
    let table = plugins_mentioning(&workspace, "third.toml");
    assert_mentions(
        &table,
        &["hostile.toml", "victim.toml", "not a regular file"],
    );
    // Later files still load: the watcher and the rescan kept running.
    workspace.install_plugin("greeting", "greeting.wasm");
    plugins_mentioning(&workspace, "Greeting.example.dev");
    stops_promptly(host);
}

#[test]
fn waiting_on_a_slow_body_is_not_cpu_time() {
    let server = TestServer::start();
    server.route_trickled("/slow", Duration::from_millis(250), "trickled");
    let workspace = Workspace::new();
    workspace.install_granted(
        "hostile",
        &format!("[http]\nallow = [{:?}]\n", server.authority()),
    );
    // Eight bytes a quarter second apart: over two seconds of waiting, four
    // times the CPU deadline.
    let host = workspace.start_host(&["--plugin-deadline", "500ms", "--plugin-wall-limit", "60s"]);
    assert_eq!(
        act(&workspace, "Hostile", "slow", "fetch", &server.url("/slow")),
        Ok("fetched HTTP 200 8 bytes".into())
    );
    stops_promptly(host);
}

#[test]
fn a_body_trickling_slower_than_the_deadline_is_not_cpu_time() {
    let server = TestServer::start();
    server.route_trickled("/trickle", Duration::from_millis(800), "abc");
    let workspace = Workspace::new();
    workspace.install_granted(
        "hostile",
        &format!("[http]\nallow = [{:?}]\n", server.authority()),
    );
    // Three bytes 0.8 s apart under a 1.2 s deadline: each gap is most of
    // the deadline, the whole wait twice it.
    let host = workspace.start_host(&["--plugin-deadline", "1200ms", "--plugin-wall-limit", "60s"]);
    assert_eq!(
        act(
            &workspace,
            "Hostile",
            "trickle",
            "fetch",
            &server.url("/trickle")
        ),
        Ok("fetched HTTP 200 3 bytes".into())
    );
    // Unsized, the body is streamed to the guest as it comes.
    server.route_trickled_unsized("/streamed", Duration::from_millis(800), "abc");
    let streamed = act(
        &workspace,
        "Hostile",
        "streamed",
        "fetch",
        &server.url("/streamed"),
    );
    assert_eq!(streamed, Ok("fetched HTTP 200 3 bytes".into()));
    stops_promptly(host);
}

#[test]
fn a_writable_grant_on_the_stores_filesystem_needs_the_operators_word() {
    let workspace = Workspace::new();
    let world = tempfile::tempdir().unwrap();
    let data = made(world.path(), "data");
    workspace.install_granted("hostile", &files("/data", &data, "read-write"));
    let host = workspace.start_host(&["--stop-timeout", "1s"]);
    let table = plugins_mentioning(&workspace, "FAILED");
    assert_mentions(
        &table,
        &["on the store's filesystem", "allow_store_filesystem = true"],
    );

    workspace.write("plugins/hostile.toml", &writable("/data", &data));
    plugins_mentioning(&workspace, "Hostile.test.dev");
    assert_eq!(
        act(&workspace, "Hostile", "w", "write-bytes", "4096"),
        Ok("wrote 4096 bytes to /data/w.bin".into())
    );
    stops_promptly(host);
}

#[test]
fn user_info_in_a_raw_request_is_refused_before_dialling() {
    let server = TestServer::healthy();
    let workspace = Workspace::new();
    workspace.install_granted(
        "hostile",
        &format!("[http]\nallow = [{:?}]\n", server.authority()),
    );
    let host = workspace.start_host(&["--stop-timeout", "1s"]);
    assert_eq!(
        act(
            &workspace,
            "Hostile",
            "plain",
            "raw-fetch",
            &server.authority()
        ),
        Ok("raw fetch HTTP 200".into())
    );
    let sneaky = format!("evil@{}", server.authority());
    let refused = act(&workspace, "Hostile", "sneaky", "raw-fetch", &sneaky).unwrap_err();
    assert_mentions(&refused, &["HttpRequestDenied"]);
    let events = workspace.ok(&["events", "Hostile", "sneaky"]);
    assert_mentions(&events, &["HttpRequestDenied", "user info"]);
    assert!(
        !events.contains("evil@"),
        "the event shows the user info: {events}"
    );
    assert_eq!(server.hits("/health"), 1, "only the plain request arrived");
    stops_promptly(host);
}

#[test]
fn a_cut_pass_leads_with_the_limit() {
    let workspace = Workspace::with_plugins(&["hostile"]);
    let host = workspace.start_host(&["--plugin-host-calls", "1000", "--stop-timeout", "1s"]);
    let message = act(&workspace, "Hostile", "loop", "host-loop", "").unwrap_err();
    assert!(
        message.starts_with("plugin hostile made more than 1000 host calls in one pass"),
        "{message}"
    );
    assert!(!message.contains("backtrace"), "{message}");
    stops_promptly(host);
}

#[test]
fn names_with_bidi_overrides_are_refused() {
    let workspace = Workspace::new();
    let error = workspace.apply_fails(
        "bidi.json",
        "{\"kind\":\"Greeting.example.dev\",\"name\":\"invoice\u{202e}fdp.exe\",\"spec\":{}}",
    );
    assert_mentions(&error, &["bidirectional overrides"]);
}
