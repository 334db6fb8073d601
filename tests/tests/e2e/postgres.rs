//! The PostgreSQL store: a host and the CLI on a throwaway server, and two
//! stores (as two processes would be) on one database.

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
use beehive_e2e::{TestPostgres, Workspace, wait_until};

const TEAM: &str = r#"
kind: GreetingSet.example.dev
name: team
spec: {names: [ada, grace]}
finalizers: [example.dev/greetings]
"#;

#[test]
fn a_host_on_postgres_converges_and_the_cli_reads_it_after_the_host_stops() {
    let server = TestPostgres::start();
    let workspace = Workspace::with_db(server.url());
    workspace.install_plugin("greeting", "greeting.wasm");
    workspace.install_plugin("cascade", "cascade.wasm");
    let host = workspace.start_host(&[]);
    workspace.write("team.yaml", TEAM);
    workspace.ok(&["apply", "-f", "team.yaml"]);
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
    let error = unreachable.fails(&["get", "Greeting"]);
    assert!(error.contains("cannot connect"), "{error}");
    assert!(
        !error.contains("secret"),
        "the password stays hidden: {error}"
    );
}

/// A commit in one store reaches another on the same database (another
/// process, in life) through the database's notifications.
#[test]
fn a_commit_in_one_store_wakes_another_on_the_same_database() {
    let server = TestPostgres::start();
    let writer = Store::open(server.url()).unwrap();
    let listener = Store::open(server.url()).unwrap();
    let before = listener.resource_version();
    let client = RawClient::new(&writer, GroupKind::new("e2e.dev", "Thing"));
    let created = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.create("one", Json::parse("{}").unwrap(), CreateOptions::new()))
        .unwrap();
    assert!(created.meta.resource_version > before);
    // The listener wrote nothing: only the notification can move it.
    wait_until("the other store heard the commit", || {
        listener.resource_version() >= created.meta.resource_version
    });
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
