//! The `beehive` binary against a database written through the library.

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
use beehive_e2e::Workspace;

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn get_prints_the_objects_a_library_client_wrote() {
    let workspace = Workspace::new();
    {
        let store = Store::open(workspace.path().join("beehive.db")).unwrap();
        let clusters = RawClient::new(&store, GroupKind::new("acme.com", "Cluster"));
        for name in ["a", "b"] {
            let spec = Json::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap();
            clusters
                .create(name, spec, CreateOptions::new())
                .await
                .unwrap();
        }
    }

    let output = workspace.run(&["get", "Cluster.acme.com"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["name"], "a");
    assert_eq!(lines[1]["spec"]["name"], "b");

    let output = workspace.run(&["get", "Cluster.acme.com", "b"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).lines().count(), 1);
}

#[test]
fn get_reports_bad_input_in_one_line_with_a_failing_exit() {
    let workspace = Workspace::new();
    let output = workspace.run(&["get", "Cluster"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("no database at"),
        "{}",
        stderr(&output)
    );
    assert!(
        !workspace.path().join("beehive.db").exists(),
        "nothing created"
    );

    Store::open(workspace.path().join("beehive.db")).unwrap();
    for (args, expected) in [
        (vec!["get", "Cluster", "missing"], "not found"),
        (vec!["get", ".acme.com"], "invalid kind"),
        (vec!["get", "Cluster", ""], "invalid name"),
    ] {
        let output = workspace.run(&args);
        assert!(!output.status.success(), "{args:?}");
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
