//! Containment through the real binary: a hostile plugin spinning on every
//! worker leaves the socket responsive and cannot hold the host past its
//! stop timeout; the files beside the database are the owner's alone.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use beehive_e2e::{Workspace, assert_mentions, wait_until};

const SPINNERS: &str = r#"
- {kind: Hostile.test.dev, name: spin-a, spec: {act: spin}}
- {kind: Hostile.test.dev, name: spin-b, spec: {act: spin}}
- {kind: Hostile.test.dev, name: spin-c, spec: {act: spin}}
"#;

/// Live instances of the `hostile` plugin, from the host's metrics.
fn hostile_instances(workspace: &Workspace) -> u64 {
    let metrics = workspace.ok(&["metrics"]);
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("beehive_plugin_instances{plugin=\"hostile\"} "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

fn spinning_host(workspace: &Workspace) -> beehive_e2e::HostProcess {
    workspace.install_plugin("hostile", "hostile.wasm");
    workspace.install_plugin("greeting", "greeting.wasm");
    // Passes spin for up to a minute of guest time on both workers.
    let host = workspace.start_host(&[
        "--plugin-deadline",
        "60s",
        "--plugin-concurrency",
        "2",
        "--stop-timeout",
        "1s",
    ]);
    workspace.apply("spin.yaml", SPINNERS);
    host
}

#[test]
fn a_spinning_plugin_leaves_commands_responsive_and_cannot_hold_the_stop() {
    let workspace = Workspace::new();
    let mut host = spinning_host(&workspace);
    wait_until("spinning passes occupy both workers", || {
        hostile_instances(&workspace) >= 2
    });
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let asked = Instant::now();
        let table = workspace.ok(&["get", "Hostile"]);
        assert_mentions(&table, &["spin-a"]);
        slowest = slowest.max(asked.elapsed());
    }
    assert!(slowest < Duration::from_secs(5), "get took {slowest:?}");

    let plugins = workspace.ok(&["plugins"]);
    let hostile = plugins
        .lines()
        .find(|l| l.starts_with("Hostile.test.dev"))
        .unwrap_or_else(|| panic!("{plugins}"));
    let cells: Vec<&str> = hostile.split_whitespace().collect();
    assert_eq!(
        &cells[2..7],
        ["0.2.0", "2", "60s", "60s", "64Mi"],
        "{plugins}"
    );
    assert!(
        host.log()
            .contains("the plugin asked for concurrency 4294967295; 2 applies"),
        "{}",
        host.log()
    );

    let asked = Instant::now();
    host.signal("TERM");
    host.exits_within(Duration::from_secs(15));
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the host outlived its 1 s stop timeout"
    );
}

#[test]
fn a_second_signal_exits_at_once() {
    let workspace = Workspace::with_plugins(&["hostile"]);
    let mut host = workspace.start_host(&["--plugin-deadline", "60s", "--stop-timeout", "60s"]);
    workspace.apply("spin.yaml", SPINNERS);
    wait_until("a pass spins", || hostile_instances(&workspace) >= 1);
    host.signal("TERM");
    wait_until("the host begins to stop", || {
        host.log().contains("stopping")
    });
    host.signal("TERM");
    let status = host.exits_within(Duration::from_secs(10));
    assert!(!status.success(), "a second signal exits with a failure");
}

#[test]
fn the_database_lock_and_cache_are_the_owners_alone() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);
    host.terminate();
    let mode = |name: &str| {
        std::fs::metadata(workspace.path().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("beehive.db"), 0o600);
    assert_eq!(mode("beehive.db.lock"), 0o600);
    assert_eq!(mode("beehive.db.plugin-cache"), 0o700);

    // A lock file that is a symbolic link is refused, not followed.
    std::fs::remove_file(workspace.path().join("beehive.db.lock")).unwrap();
    std::os::unix::fs::symlink("/tmp/elsewhere", workspace.path().join("beehive.db.lock")).unwrap();
    let error = workspace.fails(&["get", "Greeting"]);
    assert_mentions(&error, &["symbolic link"]);
}

#[test]
fn plugin_text_cannot_forge_host_log_lines() {
    let workspace = Workspace::with_plugins(&["hostile"]);
    let host = workspace.start_host(&[]);
    workspace.apply(
        "forge.yaml",
        "{kind: Hostile.test.dev, name: forge, spec: {act: forge-log}}",
    );
    workspace.ok(&["wait", "Hostile", "forge", "--for", "settled"]);
    let log = host.log();
    assert_mentions(&log, &["forged by a plugin"]);
    for line in log.lines() {
        assert!(
            !line.starts_with("2026-12-01T00:00:00Z"),
            "a plugin started a log line of its own: {line}"
        );
        assert!(
            !line.contains('\x1b'),
            "a raw escape reached the log: {line}"
        );
    }
    host.terminate();
}
