//! The PostgreSQL store: a host and the CLI on a throwaway server, and two
//! stores (as two processes would be) on one database.

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
use beehive_e2e::{HostProcess, TestPostgres, Workspace, assert_mentions, wait_until};

/// Pushes example plugin `plugin` into the workspace's store as `name`,
/// with the policy it ships with, if any.
fn push(workspace: &Workspace, plugin: &str, name: &str) -> String {
    let file = beehive_e2e::plugin_wasm(plugin);
    let mut args = vec![
        "plugins".to_string(),
        "push".into(),
        file.display().to_string(),
        "--name".into(),
        name.into(),
    ];
    if let Some(policy) = beehive_e2e::example_policy(plugin) {
        args.extend(["--policy".into(), policy.display().to_string()]);
    }
    workspace.ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_host_on_postgres_converges_and_the_cli_reads_it_after_the_host_stops() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    push(&workspace, "greeting", "greeting");
    push(&workspace, "cascade", "cascade");
    let host = workspace.start_host(&[]);
    workspace.apply("team.yaml", crate::TEAM);
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    workspace.ok(&["wait", "Greeting", "team-ada", "--for", "settled"]);
    let log = host.log();
    assert!(!log.contains("secret"), "{log}");
    host.terminate();

    // No host: the command opens the store itself.
    let ada = workspace.ok(&["get", "Greeting", "team-ada", "-o", "json"]);
    let ada: serde_json::Value = serde_json::from_str(&ada).unwrap();
    assert_eq!(ada["status"]["message"], "Hello, ada!");
    let unreachable =
        Workspace::with_db("postgres://beehive:secret@localhost/nowhere?host=/nonexistent");
    // Tried again until the request timeout, and said once, not once an
    // attempt.
    let tried = unreachable.run(&["--request-timeout", "2s", "get", "Greeting"]);
    assert!(!tried.status.success());
    let error = String::from_utf8_lossy(&tried.stderr).into_owned();
    assert_mentions(&error, &["cannot connect"]);
    assert_eq!(error.matches("trying again").count(), 1, "{error}");
    assert!(
        !error.contains("secret"),
        "the password stays hidden: {error}"
    );
}

/// A dump restored over the database a host used, then readied by
/// `restore --prepare`: the host from before the restore, paused across
/// it, finds its lease gone and steps down instead of committing; a new
/// host serves the restored store.
#[test]
fn a_store_restored_from_a_dump_fences_out_the_host_from_before() {
    let server = TestPostgres::start();
    server.psql("CREATE DATABASE live");
    let workspace = Workspace::with_db(&server.url_of("live"));
    push(&workspace, "greeting", "greeting");
    let before = workspace.start_host(&["--lease", "8s"]);
    workspace.apply(
        "a.yaml",
        "kind: Greeting.example.dev\nname: a\nspec: {name: a}\n",
    );
    workspace.ok(&["wait", "Greeting", "a", "--for", "settled"]);
    let refused = workspace.run(&["restore", "--prepare"]);
    assert!(!refused.status.success(), "a served store is not prepared");
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["holds this store's lease", "stop its", "--take-lease"],
    );

    // The host pauses well inside its lease; the dump is restored over its
    // database and readied meanwhile.
    before.signal("STOP");
    server.dump_and_restore_over("live");
    // The dump's lease is the paused host's, live: taken from it.
    assert_mentions(
        &workspace.ok(&["restore", "--prepare", "--take-lease"]),
        &[
            "every object owes one pass",
            "no host from before the restore can commit",
        ],
    );
    before.signal("CONT");
    wait_until("the host from before the restore stepped down", || {
        before.log().contains("stepping down")
    });
    before.kill();

    let after = workspace.start_host(&[]);
    workspace.apply(
        "b.yaml",
        "kind: Greeting.example.dev\nname: b\nspec: {name: b}\n",
    );
    workspace.ok(&["wait", "Greeting", "b", "--for", "settled"]);
    workspace.ok(&["wait", "Greeting", "a", "--for", "settled"]);
    after.terminate();
}

/// A commit in one store reaches another on the same database (another
/// process, in life) through the database's notifications.
#[test]
fn a_commit_in_one_store_wakes_another_on_the_same_database() {
    let server = TestPostgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let writer = Store::open(server.url()).unwrap();
    let listener = Store::open(server.url()).unwrap();
    let client = RawClient::new(&writer, GroupKind::new("e2e.dev", "Thing"));
    heard_by(&listener, &runtime, &client, "one");
}

/// The listening store keeps hearing after `fault`: its listener finds its
/// connection closed and listens again on a new one. A listener deaf after
/// a restart left hosts blind to other processes' writes until their next
/// scan, minutes later.
fn still_heard_after(fault: impl Fn(&TestPostgres)) {
    let server = TestPostgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let writer = Store::open(server.url()).unwrap();
    let listener = Store::open(server.url()).unwrap();
    let client = RawClient::new(&writer, GroupKind::new("e2e.dev", "Thing"));
    heard_by(&listener, &runtime, &client, "before");
    fault(&server);
    create_eventually(&runtime, &client, "after");
    let after = client.get_by_name("after").unwrap();
    wait_until("the other store heard a commit after the fault", || {
        listener.resource_version() >= after.meta.resource_version
    });
}

/// Creates `name` through `client` and waits until `listener`, which wrote
/// nothing, has heard the commit: only a notification can move it.
fn heard_by(listener: &Store, runtime: &tokio::runtime::Runtime, client: &RawClient, name: &str) {
    let before = listener.resource_version();
    let created = runtime
        .block_on(client.create(name, Json::parse("{}").unwrap(), CreateOptions::new()))
        .unwrap();
    assert!(created.meta.resource_version > before);
    wait_until("the other store heard the commit", || {
        listener.resource_version() >= created.meta.resource_version
    });
}

#[test]
fn a_store_hears_other_processes_again_after_the_server_restarts() {
    still_heard_after(TestPostgres::restart);
}

#[test]
fn a_store_hears_other_processes_again_after_its_connections_are_terminated() {
    still_heard_after(TestPostgres::terminate_connections);
}

/// Two stores writing at once never hand out the same id or version: each
/// write transaction takes the counters under a row lock.
#[test]
fn writers_in_two_stores_never_collide() {
    let server = TestPostgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kind = GroupKind::new("e2e.dev", "Thing");
    let stores = [
        Store::open(server.url()).unwrap(),
        Store::open(server.url()).unwrap(),
    ];
    let writes: Vec<_> = stores
        .iter()
        .enumerate()
        .flat_map(|(which, store)| {
            let client = RawClient::new(store, kind.clone());
            (0..4).map(move |task| {
                let client = client.clone();
                async move {
                    let mut made = Vec::new();
                    for i in 0..25 {
                        let name = format!("s{which}-t{task}-{i}");
                        let object = client
                            .create(&name, Json::parse("{}").unwrap(), CreateOptions::new())
                            .await
                            .unwrap();
                        made.push((object.meta.id, object.meta.resource_version));
                    }
                    made
                }
            })
        })
        .map(|write| runtime.spawn(write))
        .collect();
    let mut made: Vec<(i64, i64)> = Vec::new();
    for write in writes {
        made.extend(runtime.block_on(write).unwrap());
    }
    let ids: std::collections::BTreeSet<i64> = made.iter().map(|(id, _)| *id).collect();
    let versions: std::collections::BTreeSet<i64> = made.iter().map(|(_, v)| *v).collect();
    assert_eq!(ids.len(), 200, "every id distinct");
    assert_eq!(versions.len(), 200, "every version distinct");
    let listed = RawClient::new(&stores[0], kind).list().unwrap();
    assert_eq!(listed.len(), 200);
}

/// The fencing token at work: a holder whose lease lapsed cannot commit,
/// even though nothing told it so, and the new holder can.
#[test]
fn a_store_whose_lease_lapsed_cannot_write() {
    let server = TestPostgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kind = GroupKind::new("e2e.dev", "Thing");
    let old = Store::open(server.url()).unwrap();
    let new = Store::open(server.url()).unwrap();
    let period = std::time::Duration::from_millis(300);
    let tenure = old
        .try_take_lease("old", period)
        .unwrap()
        .expect("the lease is free");
    assert_eq!(
        new.try_take_lease("new", period).unwrap(),
        None,
        "it is held"
    );
    let create = |store: &Store, name: &str| {
        let client = RawClient::new(store, kind.clone());
        runtime.block_on(client.create(name, Json::parse("{}").unwrap(), CreateOptions::new()))
    };
    create(&old, "before").unwrap();

    // The old holder stops renewing (paused, partitioned): the lease lapses.
    let mut taken = None;
    wait_until("the new store takes the lapsed lease", || {
        taken = new.try_take_lease("new", period).unwrap();
        taken.is_some()
    });
    assert!(taken.unwrap() > tenure, "a takeover increments the token");

    let refused = create(&old, "after").unwrap_err();
    assert!(
        matches!(refused, beehive::Error::LeaseLost(_)),
        "a fenced-out commit is told apart: {refused:?}"
    );
    assert_mentions(&refused.to_string(), &["lease lost"]);
    assert!(
        !old.renew_lease("old", tenure, period).unwrap(),
        "it must step down"
    );
    create(&new, "after").unwrap();
    let holder = new.lease_holder().unwrap().unwrap();
    assert_eq!((holder.holder.as_str(), holder.live), ("new", true));
    let names: Vec<String> = RawClient::new(&new, kind)
        .list()
        .unwrap()
        .into_iter()
        .map(|o| o.meta.name)
        .collect();
    assert_eq!(
        names,
        ["before", "after"],
        "nothing of the old holder's after the lapse"
    );
}

fn greetings(workspace: &Workspace, from: usize, to: usize) -> String {
    let manifest: String = (from..to)
        .map(|i| format!("{{\"kind\":\"Greeting.example.dev\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}\n"))
        .collect();
    let file = format!("greetings-{from}.json");
    workspace.write(&file, &manifest);
    file
}

fn settled_greetings(workspace: &Workspace) -> usize {
    let all = workspace.ok(&["get", "Greeting", "-o", "json"]);
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .filter(|g| {
            g["status"]["message"].is_string() && g["observedGeneration"] == g["generation"]
        })
        .count()
}

/// Two hosts on the workspace's store with `lease`: the first active and
/// serving, the second standing by.
fn active_and_standby(workspace: &Workspace, lease: &str) -> (HostProcess, HostProcess) {
    let args = ["--lease", lease];
    let first = workspace.start_host_until(&args, "first.log", beehive_e2e::PLUGINS_LOADED);
    let second = workspace.start_host_until(&args, "second.log", "standing by");
    (first, second)
}

/// Two hosts on one database, writes going on: SIGKILL the active one, and
/// the standby is active within the lease period, nothing committed is lost,
/// and everything converges.
#[test]
fn a_standby_takes_over_from_a_killed_host_and_nothing_is_lost() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    push(&workspace, "greeting", "greeting");
    let (first, second) = active_and_standby(&workspace, "2s");
    let file = greetings(&workspace, 0, 40);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("the first host converged the first 40", || {
        settled_greetings(&workspace) == 40
    });

    // Writes keep coming while the active host dies.
    let writer = {
        let workspace_db = server.url().to_string();
        let dir = workspace.path().to_path_buf();
        std::thread::spawn(move || {
            let mut applied = Vec::new();
            for batch in 0..10 {
                let (from, to) = (100 + batch * 10, 110 + batch * 10);
                let manifest: String = (from..to)
                    .map(|i| format!("{{\"kind\":\"Greeting.example.dev\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}\n"))
                    .collect();
                let file = dir.join(format!("load-{batch}.json"));
                std::fs::write(&file, manifest).unwrap();
                let done = beehive_e2e::command_on(&dir, &workspace_db)
                    .args(["apply", "-f"])
                    .arg(&file)
                    .output()
                    .unwrap();
                if done.status.success() {
                    applied.extend(from..to);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            applied
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed_at = std::time::Instant::now();
    first.kill();
    wait_until("the standby is active", || {
        second.log().contains("active: this host holds the lease")
    });
    let failover = killed_at.elapsed();
    assert!(
        failover < std::time::Duration::from_secs(5),
        "took {failover:?} with a 2 s lease"
    );

    let applied = writer.join().unwrap();
    assert!(!applied.is_empty());
    let names = workspace.ok(&["get", "Greeting", "-o", "name"]);
    for i in applied.iter().copied().chain(0..40) {
        assert!(
            names.contains(&format!("Greeting.example.dev/g{i}\n")),
            "g{i} was applied and is kept"
        );
    }
    let expected = 40 + applied.len();
    wait_until("the standby converged everything", || {
        settled_greetings(&workspace) == expected
    });
    let plugins = workspace.ok(&["plugins"]);
    let pid = second.pid();
    assert!(plugins.contains(&format!(":{pid} (tenure 2)")), "{plugins}");
    second.terminate();
}

/// A paused active host (SIGSTOP) loses its lease to the standby; resumed,
/// it finds its lease gone and steps down rather than serve beside the new
/// active host, then stands by again, and takes over when that one goes.
#[test]
fn a_paused_host_resumes_to_find_itself_replaced_and_stands_by_again() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    push(&workspace, "greeting", "greeting");
    let (first, second) = active_and_standby(&workspace, "1s");
    let file = greetings(&workspace, 0, 10);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("converged", || settled_greetings(&workspace) == 10);

    first.signal("STOP");
    wait_until("the standby took over", || {
        second.log().contains("active: this host holds the lease")
    });
    first.signal("CONT");
    wait_until("the resumed host stepped down and stands by", || {
        let log = first.log();
        log.contains("lost the host lease") && log.contains("back to standing by")
    });

    // The new active host serves on.
    let file = greetings(&workspace, 10, 20);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("the new host converged the rest", || {
        settled_greetings(&workspace) == 20
    });

    // And when it goes, the first host, still running, takes over again.
    second.kill();
    wait_until("the first host is active again", || {
        first
            .log()
            .matches("active: this host holds the lease")
            .count()
            == 2
    });
    let file = greetings(&workspace, 20, 30);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("the first host converged what came after", || {
        settled_greetings(&workspace) == 30
    });
    first.terminate();
}

/// Plugins travel with the store: a push hot-swaps every host, pushing the
/// old file again rolls back, and the hash says which version serves.
#[test]
fn a_push_hot_swaps_the_plugin_and_pushing_the_old_file_rolls_back() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    let first = push(&workspace, "greeting", "greeting");
    let host = workspace.start_host(&[]);
    let file = greetings(&workspace, 0, 5);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("converged", || settled_greetings(&workspace) == 5);

    let releases = |workspace: &Workspace| -> Vec<serde_json::Value> {
        let all = workspace.ok(&["get", "Greeting", "-o", "json"]);
        let all: serde_json::Value = serde_json::from_str(&all).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .map(|g| g["status"]["release"].clone())
            .collect()
    };
    push(&workspace, "greeting_v2", "greeting");
    wait_until("every greeting is written by release 2", || {
        releases(&workspace).iter().all(|r| r == 2)
    });
    let again = push(&workspace, "greeting", "greeting");
    assert_eq!(again, first, "the same file is the same content");
    wait_until("rolled back: no greeting is written by release 2", || {
        releases(&workspace).iter().all(|r| r != 2)
    });
    let listed = workspace.ok(&["plugins", "list"]);
    let hash = first.split("sha256:").nth(1).unwrap();
    assert!(listed.contains(&hash[..12]), "{listed}");
    assert!(
        workspace.ok(&["plugins"]).contains(&hash[..12]),
        "the host serves it"
    );
    host.terminate();

    let sqlite = Workspace::new();
    let file = beehive_e2e::plugin_wasm("greeting");
    let refused = sqlite.fails(&["plugins", "push", file.to_str().unwrap()]);
    assert_mentions(&refused, &["PostgreSQL"]);
}

/// Server settings travel in the connection string (`options=-c …`), for
/// instance the commit durability a deployment wants.
#[test]
fn settings_in_the_connection_string_reach_the_server() {
    let server = TestPostgres::start();
    let url = format!("{}&options=-c%20synchronous_commit%3Doff", server.url());
    let store = Store::open(&url).unwrap();
    let setting = store
        .inspect("SELECT current_setting('synchronous_commit')", &[])
        .unwrap()
        .unwrap();
    assert_eq!(setting[0].as_deref(), Some("off"));
}

/// An object another process writes (here, a store of the test's own) is
/// passed at once: the commit's notification makes the active host look
/// for what is owed, rather than wait for its owed pass (an hour here).
#[test]
fn an_object_written_by_another_process_is_reconciled_at_once() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    push(&workspace, "greeting", "greeting");
    let host = workspace.start_host(&["--owed-pass-interval", "1h"]);
    let elsewhere = Store::open(server.url()).unwrap();
    let greetings = RawClient::new(&elsewhere, GroupKind::new("example.dev", "Greeting"));
    let created = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(greetings.create(
            "remote",
            Json::parse(r#"{"name":"far"}"#).unwrap(),
            CreateOptions::new(),
        ))
        .unwrap();
    wait_until("the host reconciled it", || {
        greetings
            .get(created.meta.id)
            .unwrap()
            .status
            .is_some_and(|s| s.as_str().contains("Hello, far!"))
    });
    host.terminate();
}

/// Whether the store's connection to the server is encrypted, as the
/// server sees it.
fn encrypted(store: &Store) -> bool {
    let row = store
        .inspect(
            "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .expect("pg_stat_ssl")
        .expect("a row");
    row[0].as_deref() == Some("true")
}

#[test]
fn tls_encrypts_and_verifies_the_server_as_sslmode_asks() {
    let server = TestPostgres::start_with_tls();
    let ca = format!("sslrootcert={}", server.ca_file().display());

    let full = Store::open(server.tcp_url("localhost", &format!("sslmode=verify-full&{ca}")))
        .expect("verify-full against the certificate's own name");
    assert!(encrypted(&full));
    let client = RawClient::new(&full, GroupKind::new("tls.dev", "W"));
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.create("w", Json::parse("{}").unwrap(), CreateOptions::new()))
        .expect("a write over TLS");

    // The certificate names `localhost`, not the address.
    let wrong_name = Store::open(server.tcp_url("127.0.0.1", &format!("sslmode=verify-full&{ca}")))
        .expect_err("verify-full refuses a certificate for another name");
    assert!(
        wrong_name.to_string().contains("not valid for name"),
        "{wrong_name}"
    );
    let chain_only = Store::open(server.tcp_url("127.0.0.1", &format!("sslmode=verify-ca&{ca}")))
        .expect("verify-ca checks the issuer only");
    assert!(encrypted(&chain_only));

    // Without the throwaway authority among the trusted roots.
    let unknown = Store::open(server.tcp_url("localhost", "sslmode=verify-full"))
        .expect_err("an unknown issuer is refused");
    assert!(unknown.to_string().contains("UnknownIssuer"), "{unknown}");

    let require = Store::open(server.tcp_url("127.0.0.1", "sslmode=require")).expect("require");
    assert!(encrypted(&require), "require encrypts without verifying");
    let default = Store::open(server.tcp_url("127.0.0.1", "")).expect("the default, prefer");
    assert!(
        encrypted(&default),
        "prefer takes TLS when the server offers it"
    );
    let plain = Store::open(server.tcp_url("127.0.0.1", "sslmode=disable")).expect("disable");
    assert!(!encrypted(&plain));
}

/// A host may take longer to start (compiling its plugins, a first pass)
/// than its lease lasts: the lease is renewed from the moment it is taken,
/// not from when the host starts waiting on it.
#[test]
fn a_tenure_is_renewed_from_the_moment_it_is_taken() {
    let server = TestPostgres::start();
    let store = Store::open(server.url()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let period = std::time::Duration::from_secs(1);
    let tenure = runtime
        .block_on(beehive::engine::Tenure::take(&store, period))
        .unwrap();
    // A slow start: more than two lease periods before anyone holds on.
    std::thread::sleep(period * 5 / 2);
    let holder = store.lease_holder().unwrap().expect("a holder");
    assert!(holder.live, "the lease lapsed while nobody held on");
    assert_eq!(holder.token, tenure.token());
    let client = RawClient::new(&store, GroupKind::new("lease.dev", "W"));
    runtime
        .block_on(client.create("w", Json::parse("{}").unwrap(), CreateOptions::new()))
        .expect("a commit still passes the fence");
    tenure.release();
    assert!(!store.lease_holder().unwrap().expect("a holder").live);
}

/// Creates `name` through `client`, retrying while the store heals: the
/// first writes after a fault may fail (their connection was lost), and
/// one must succeed within the patience. A create whose outcome was
/// unknown may have committed, so a name already taken counts.
fn create_eventually(runtime: &tokio::runtime::Runtime, client: &RawClient, name: &str) {
    let spec = Json::parse("{}").unwrap();
    let deadline = std::time::Instant::now() + beehive_e2e::PATIENCE;
    loop {
        let created = runtime.block_on(client.create(name, spec.clone(), CreateOptions::new()));
        match created {
            Ok(_) | Err(beehive::Error::NameTaken { .. }) => return,
            Err(error) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the store never healed: {error}"
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// A store rides out `fault`: writes and reads work again after it, through
/// the same store, with nothing restarted but the database.
fn a_store_heals_after(fault: impl Fn(&TestPostgres)) {
    let server = TestPostgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = Store::open(server.url()).unwrap();
    let client = RawClient::new(&store, GroupKind::new("test.dev", "Widget"));
    create_eventually(&runtime, &client, "before");
    // Pool a few readers, so the fault finds idle connections too.
    for _ in 0..3 {
        client.get_by_name("before").unwrap();
    }
    fault(&server);
    create_eventually(&runtime, &client, "after");
    // Every pooled reader the fault closed is replaced, not handed out.
    for _ in 0..5 {
        assert_eq!(client.get_by_name("before").unwrap().meta.name, "before");
    }
    assert_eq!(client.get_by_name("after").unwrap().meta.name, "after");
    // And the writer keeps working after its first write.
    runtime
        .block_on(client.create("later", Json::parse("{}").unwrap(), CreateOptions::new()))
        .unwrap();
}

#[test]
fn a_store_heals_after_the_server_restarts() {
    a_store_heals_after(TestPostgres::restart);
}

#[test]
fn a_store_heals_after_its_connections_are_terminated() {
    a_store_heals_after(TestPostgres::terminate_connections);
}

/// Something done to the database server under the hosts.
type Fault = fn(&TestPostgres);

/// Two hosts on one database ride out a routine restart of it (`pg_ctl
/// restart -m fast`, every connection closed) and the termination of every
/// backend: nobody is restarted, every acknowledged object is kept, and
/// what is applied afterwards converges.
#[test]
fn hosts_ride_out_a_database_restart_and_terminated_backends() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    push(&workspace, "greeting", "greeting");
    let (first, second) = active_and_standby(&workspace, "5s");
    let file = greetings(&workspace, 0, 20);
    workspace.ok(&["apply", "-f", &file]);
    wait_until("converged before the faults", || {
        settled_greetings(&workspace) == 20
    });
    let faults: [(&str, Fault); 2] = [
        ("a server restart", TestPostgres::restart),
        ("terminated backends", TestPostgres::terminate_connections),
    ];
    let mut applied = 20;
    for (fault, inflict) in faults {
        inflict(&server);
        // The first command after the fault may meet a host that has not
        // healed yet; one must succeed soon.
        let file = greetings(&workspace, applied, applied + 20);
        wait_until(&format!("an apply succeeds after {fault}"), || {
            workspace.run(&["apply", "-f", &file]).status.success()
        });
        applied += 20;
        wait_until(&format!("everything converges after {fault}"), || {
            settled_greetings(&workspace) == applied
        });
    }
    // Both hosts are still running: neither exited for the database's faults.
    for host in [&first, &second] {
        let log = host.log();
        assert!(!log.contains("stopped"), "{log}");
    }
    // Stopped as an operator would. The standby takes the lease the first
    // releases and is signalled the moment it says so, before it serves:
    // the signal is kept for when it does, and it stops cleanly.
    first.terminate();
    let mut second = second;
    wait_until("the standby takes over", || {
        second.log().contains("active: this host holds the lease")
    });
    second.signal("TERM");
    let stopped = second.exits_within(beehive_e2e::PATIENCE);
    assert!(stopped.success(), "{stopped}: {}", second.log());
}
