//! Operating a host: its metrics, scraped over HTTP and printed by `beehive
//! metrics`, move as objects are reconciled, passes fail and watches open.

use beehive_e2e::{HostProcess, Workspace, assert_mentions, http_get, wait_until};

/// `beehive run --metrics-addr 127.0.0.1:0` logs where it serves them.
pub(crate) fn metrics_address(host: &HostProcess) -> String {
    let mut address = None;
    wait_until("the host says where its metrics are", || {
        address = host.log().lines().find_map(|line| {
            let (_, rest) = line.split_once("serving metrics on http://")?;
            Some(rest.split("/metrics").next()?.trim().to_string())
        });
        address.is_some()
    });
    address.unwrap()
}

/// One GET of /metrics, as a scraper does it.
pub(crate) fn scrape(address: &str) -> String {
    let (head, body) = http_get(address, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_mentions(&head, &["text/plain; version=0.0.4"]);
    body
}

/// The value of the sample `series` (name and labels, as printed), or 0.
pub(crate) fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[test]
fn metrics_move_with_passes_failures_and_watches() {
    let workspace = Workspace::with_plugins(&["greeting", "misbehave"]);
    let host = workspace.start_host(&["--metrics-addr", "127.0.0.1:0"]);
    let address = metrics_address(&host);
    let before = scrape(&address);
    assert_eq!(
        value(&before, r#"workqueue_depth{name="Greeting.example.dev"}"#),
        0.0
    );
    let info = before
        .lines()
        .find(|l| {
            l.starts_with(r#"beehive_plugin_info{plugin="greeting",kind="Greeting.example.dev""#)
        })
        .unwrap_or_else(|| panic!("no plugin info in:\n{before}"));
    assert!(info.ends_with(" 1"), "{info}");

    workspace.apply(
        "objects.yaml",
        "kind: Greeting.example.dev\nname: a\nspec: {name: A}\n---\n\
         kind: Greeting.example.dev\nname: b\nspec: {name: B}\n---\n\
         kind: Misbehave.test.dev\nname: boom\nspec: {act: panic}\n",
    );
    for name in ["a", "b"] {
        workspace.ok(&["wait", "Greeting", name, "--for", "settled"]);
    }
    let success =
        r#"controller_runtime_reconcile_total{controller="Greeting.example.dev",result="success"}"#;
    let errors = r#"controller_runtime_reconcile_errors_total{controller="Misbehave.test.dev"}"#;
    let traps = r#"beehive_plugin_traps_total{plugin="misbehave"}"#;
    let mut after = String::new();
    wait_until("the panic is counted", || {
        after = scrape(&address);
        value(&after, errors) >= 1.0 && value(&after, traps) >= 1.0
    });
    assert!(value(&after, success) >= 2.0, "{after}");
    assert!(
        value(
            &after,
            r#"workqueue_adds_total{name="Greeting.example.dev"}"#
        ) >= 2.0,
        "{after}"
    );
    assert!(
        value(&after, "beehive_store_commits_total")
            > value(&before, "beehive_store_commits_total"),
        "{after}"
    );
    assert!(value(&after, "beehive_store_database_size_bytes") > 0.0);
    assert!(
        value(&after, r#"beehive_plugin_instances{plugin="greeting"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        value(&after, r#"beehive_plugin_memory_bytes{plugin="greeting"}"#) > 0.0,
        "{after}"
    );

    let watch = workspace.follow(&["get", "Greeting", "-w"]);
    wait_until("the watch is counted", || {
        value(&scrape(&address), "beehive_watches_open") == 1.0
    });
    drop(watch);
    wait_until("the closed watch is no longer counted", || {
        value(&scrape(&address), "beehive_watches_open") == 0.0
    });

    let printed = workspace.ok(&["metrics"]);
    assert!(value(&printed, success) >= 2.0, "{printed}");
    host.terminate();
    let offline = workspace.fails(&["metrics"]);
    assert_mentions(&offline, &["running host"]);
}

#[test]
fn a_plugins_log_lines_carry_the_pass_they_came_from() {
    let workspace = Workspace::with_plugins(&["hostile"]);
    let host = workspace.start_host(&["--log-format", "json"]);
    workspace.apply(
        "logs.yaml",
        "kind: Hostile.test.dev\nname: chatty\nspec: {act: forge-log}\n",
    );
    workspace.ok(&["wait", "Hostile", "chatty", "--for", "settled"]);
    let mut line = None;
    wait_until("the plugin's line is logged", || {
        line = host
            .log()
            .lines()
            .find(|l| l.contains("forged by a plugin"))
            .map(str::to_string);
        line.is_some()
    });
    let entry: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
    let span = &entry["span"];
    assert_eq!(span["name"], "pass", "{entry}");
    assert_eq!(span["kind"], "Hostile.test.dev", "{entry}");
    assert_eq!(span["object"], "chatty", "{entry}");
    assert_eq!(span["generation"], 1, "{entry}");
    assert!(span["id"].as_i64().is_some(), "{entry}");
    let version = span["version"].as_str().unwrap_or_default();
    assert_eq!(version.len(), 12, "the plugin version: {entry}");
    assert_eq!(entry["fields"]["plugin"], "hostile", "{entry}");
    host.terminate();
}

#[test]
fn beehive_logs_prints_and_follows_a_kinds_plugin_lines() {
    let workspace = Workspace::with_plugins(&["hostile", "greeting"]);
    let host = workspace.start_host(&[]);
    workspace.apply(
        "chatty.yaml",
        "kind: Hostile.test.dev\nname: chatty\nspec: {act: forge-log}\n",
    );
    workspace.ok(&["wait", "Hostile", "chatty", "--for", "settled"]);
    let kept = workspace.ok(&["logs", "Hostile"]);
    // One line, tagged with the pass's object, its control characters
    // escaped so it cannot pass for two.
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert_mentions(
        &kept,
        &["INFO  Hostile.test.dev/chatty: ok\\n2026-12-01T00:00:00Z ERROR forged by a plugin"],
    );
    assert_eq!(workspace.ok(&["logs", "Hostile/chatty"]), kept);
    workspace.apply(
        "quiet.yaml",
        "kind: Hostile.test.dev\nname: quiet\nspec: {act: rest}\n",
    );
    workspace.ok(&["wait", "Hostile", "quiet", "--for", "settled"]);
    assert_eq!(workspace.ok(&["logs", "Hostile", "quiet"]), "");
    let missing = workspace.run(&["logs", "Hostile", "missing"]);
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    assert_eq!(
        workspace.ok(&["logs", "Greeting"]),
        "",
        "another kind's lines"
    );

    let mut following = workspace.follow(&["logs", "hostile", "-f"]);
    assert_mentions(&following.next_line(), &["Hostile.test.dev/chatty"]);
    workspace.apply(
        "second.yaml",
        "kind: Hostile.test.dev\nname: second\nspec: {act: forge-log}\n",
    );
    assert_mentions(&following.next_line(), &["Hostile.test.dev/second: ok"]);
    drop(following);
    host.terminate();

    let offline = workspace.run(&["logs", "Hostile"]);
    assert_eq!(offline.status.code(), Some(6), "{offline:?}");
    assert_mentions(
        &String::from_utf8_lossy(&offline.stderr),
        &["plugin logs are a running host's"],
    );
}

#[test]
fn the_export_has_process_and_build_series_counters_from_zero_and_no_removed_plugin() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    // A second file for the same kind loads, and is refused.
    workspace.install_plugin("greeting", "twin.wasm");
    let host = workspace.start_host(&["--metrics-addr", "127.0.0.1:0"]);
    let address = metrics_address(&host);
    let text = scrape(&address);
    for series in [
        r#"beehive_build_info{version="0.1.0"} 1"#,
        r#"beehive_plugin_load_failures_total{plugin="greeting",reason="load"} 0"#,
        r#"beehive_plugin_traps_total{plugin="greeting"} 0"#,
        r#"beehive_plugin_load_failures_total{plugin="twin",reason="load"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == series),
            "{series} missing:\n{text}"
        );
    }
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_threads",
        "process_start_time_seconds",
    ] {
        assert!(value(&text, name) > 0.0, "{name} missing:\n{text}");
    }
    let (head, _) = http_get(&address, "/readyz");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // A refused plugin, removed: its series and its row in top go with it.
    assert_mentions(
        &workspace.ok(&["top", "--once", "--interval", "100ms"]),
        &["twin"],
    );
    std::fs::remove_file(workspace.path().join("plugins/twin.wasm")).unwrap();
    wait_until("the removed plugin's series are dropped", || {
        !scrape(&address).contains(r#"plugin="twin""#)
    });
    let frame = workspace.ok(&["top", "--once", "--interval", "100ms"]);
    assert!(!frame.contains("twin"), "{frame}");
    host.terminate();

    // With no host, top says so rather than blaming the metrics.
    let out = workspace.run(&["top", "--once"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert_mentions(
        &String::from_utf8_lossy(&out.stderr),
        &["top shows a running host's activity, and none serves"],
    );
}

#[test]
fn top_shows_kinds_and_plugins_and_wants_a_terminal_for_the_live_view() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);
    workspace.apply(
        "greetings.yaml",
        "kind: Greeting.example.dev\nname: a\nspec: {name: A}\n---\n\
         kind: Greeting.example.dev\nname: b\nspec: {name: B}\n",
    );
    workspace.ok(&["wait", "Greeting", "b", "--for", "settled"]);
    let frame = workspace.ok(&["top", "--once", "--interval", "200ms"]);
    let row = frame
        .lines()
        .find(|l| l.contains("Greeting.example.dev"))
        .unwrap_or_else(|| panic!("no kind row in:\n{frame}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(cells.contains(&"2"), "two objects: {row}");
    assert_mentions(&frame, &["PASSES/S", "P99"]);
    assert!(
        frame
            .lines()
            .any(|l| l.contains("greeting") && l.contains("MiB")),
        "{frame}"
    );
    // Not a terminal here: the live view says how to get a frame instead.
    let refused = workspace.fails(&["top"]);
    assert_mentions(&refused, &["--once"]);
    host.terminate();
}

#[test]
fn health_and_readiness_answer_beside_the_metrics() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&["--metrics-addr", "127.0.0.1:0"]);
    let address = metrics_address(&host);
    let (head, body) = http_get(&address, "/healthz");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok\n");
    let (head, body) = http_get(&address, "/readyz");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ready\n");
    let (head, _) = http_get(&address, "/nothing");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    host.terminate();
}

/// A host that stops answering (SIGSTOP) costs a command its request
/// timeout, not for ever, and the error says which host; a watch's quiet
/// stretches are not held against it.
#[test]
fn a_command_gives_up_on_a_stopped_host_and_names_it() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);
    workspace.apply(
        "a.yaml",
        "kind: Greeting.example.dev\nname: a\nspec: {name: A}\n",
    );
    let mut watch = workspace.follow(&[
        "--request-timeout",
        "1s",
        "get",
        "Greeting",
        "-w",
        "-o",
        "json",
    ]);
    assert_mentions(&watch.next_line(), &["\"name\":\"a\""]);
    host.signal("STOP");
    let output = workspace.run(&["--request-timeout", "1s", "get", "Greeting"]);
    host.signal("CONT");
    assert_eq!(output.status.code(), Some(5), "the timeout's exit code");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_mentions(
        &stderr,
        &[
            "did not answer within 1s",
            &format!("(pid {})", host.pid()),
            "--request-timeout",
        ],
    );
    // The watch waited out more than its timeout in silence, and goes on.
    workspace.apply(
        "b.yaml",
        "kind: Greeting.example.dev\nname: b\nspec: {name: B}\n",
    );
    while !watch.next_line().contains("\"name\":\"b\"") {}
    workspace.ok(&["--request-timeout", "0", "get", "Greeting", "b"]);
    drop(watch);
    host.terminate();
}

#[test]
fn get_says_when_the_latest_pass_failed() {
    let workspace = Workspace::with_plugins(&["misbehave"]);
    let host = workspace.start_host(&[]);
    let good = "kind: Misbehave.test.dev\nname: m\nspec: {act: behave}\n";
    workspace.apply("good.yaml", good);
    workspace.ok(&["wait", "Misbehave", "m", "--for", "settled"]);
    let table = workspace.ok(&["get", "Misbehave", "m"]);
    assert!(!table.contains("failed"), "{table}");

    // From here every pass fails, and the conditions say nothing of it.
    workspace.apply(
        "bad.yaml",
        "kind: Misbehave.test.dev\nname: m\nspec: {act: panic}\n",
    );
    wait_until("get shows the failed pass", || {
        workspace
            .ok(&["get", "Misbehave", "m"])
            .contains("(last pass failed ")
    });
    let printed = workspace.ok(&["get", "Misbehave", "m", "-o", "yaml"]);
    assert_mentions(&printed, &["lastPassFailedAt: "]);
    assert_eq!(
        workspace.apply("printed.yaml", &printed),
        "Misbehave.test.dev/m unchanged\n",
        "the field is read-only, as get's others"
    );

    workspace.apply("good.yaml", good);
    wait_until("a pass succeeds again", || {
        !workspace.ok(&["get", "Misbehave", "m"]).contains("failed")
    });
    host.terminate();
}

#[test]
fn events_l_shows_the_runs_of_every_object_a_selector_picks() {
    let workspace = Workspace::with_plugins(&["misbehave"]);
    let host = workspace.start_host(&[]);
    let failing = |name: &str, team: &str| {
        format!(
            "kind: Misbehave.test.dev\nname: {name}\nlabels: {{team: {team}}}\n\
             spec: {{act: read-file}}\n"
        )
    };
    workspace.apply(
        "failing.yaml",
        &[failing("r1", "a"), failing("r2", "a"), failing("r3", "b")].join("---\n"),
    );
    let objects_with_events = |selector: &str| {
        let runs = workspace.ok(&["events", "Misbehave", "-l", selector, "-o", "json"]);
        let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
        let mut names: Vec<String> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["object"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    wait_until("every failing object has its event", || {
        objects_with_events("team").len() == 3
    });
    assert_eq!(objects_with_events("team=a"), ["r1", "r2"]);
    assert_eq!(objects_with_events("team notin (a)"), ["r3"]);
    let table = workspace.ok(&["events", "Misbehave", "-l", "team=a"]);
    assert!(table.starts_with("OBJECT"), "{table}");
    assert_mentions(&table, &["r1", "r2", "ReconcileFailed"]);
    assert!(!table.contains("r3"), "{table}");
    assert_eq!(
        workspace.ok(&["events", "Misbehave", "-l", "team=none"]),
        "No events.\n"
    );

    // A name beside -l, or -w with it, is a usage error.
    for wrong in [
        &["events", "Misbehave", "r1", "-l", "team=a"][..],
        &["events", "Misbehave", "-l", "team=a", "-w"][..],
        &["events", "Misbehave", "-l", "team in a"][..],
    ] {
        let output = workspace.run(wrong);
        assert_eq!(output.status.code(), Some(2), "{wrong:?}: {output:?}");
    }
    host.terminate();
}
