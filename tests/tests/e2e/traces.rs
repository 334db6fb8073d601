//! Traces through the binary: `beehive run --otlp-endpoint` exports each
//! pass, its store writes and a plugin's HTTP requests to a collector on
//! loopback (a [`TestServer`] whose requests are decoded here), joined to
//! the trace of the `apply` that caused them.

use std::time::{Duration, Instant};

use beehive_e2e::otlp::{ReceivedSpan, decode_spans};
use beehive_e2e::{PATIENCE, TestServer, Workspace, assert_mentions, wait_until};

/// The caller's context: a trace the apply's spans join.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A collector: `/v1/traces` takes whatever it is sent.
fn collector() -> TestServer {
    let collector = TestServer::start();
    collector.route("/v1/traces", 200, "");
    collector
}

fn received(collector: &TestServer) -> Vec<ReceivedSpan> {
    decode_spans(&collector.bodies("/v1/traces"))
}

/// Waits until the collector holds a span `matches` accepts, and returns it.
///
/// # Panics
/// When none arrives within [`PATIENCE`], showing what did.
fn span_where(
    collector: &TestServer,
    what: &str,
    matches: impl Fn(&ReceivedSpan) -> bool,
) -> ReceivedSpan {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let spans = received(collector);
        if let Some(found) = spans.iter().find(|s| matches(s)) {
            return found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}; the collector has: {spans:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn connection(name: &str, url: &str) -> String {
    format!(
        "kind: Connection.example.dev\nname: {name}\nspec: {{url: \"{url}\", probe_interval_ms: 600000}}\n"
    )
}

#[test]
fn an_apply_its_pass_and_the_plugins_request_share_one_trace() {
    let workspace = Workspace::with_plugins(&["cascade", "greeting"]);
    let service = TestServer::healthy();
    workspace.install_granted(
        "events",
        &format!("[http]\nallow = [{:?}]\n", service.authority()),
    );
    let collector = collector();
    let host = workspace.start_host_with_env(
        &["--otlp-endpoint", &collector.url("")],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "20"),
            ("OTEL_SERVICE_NAME", "beehive-e2e"),
        ],
    );
    assert_mentions(&host.log(), &["exporting traces to http://127.0.0.1:"]);

    // Propagation in: the caller's TRACEPARENT is the apply's parent.
    workspace.write("db.yaml", &connection("db", &service.url("/health")));
    let traceparent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let applied = workspace.run_with(
        &["apply", "-f", "db.yaml"],
        &[("TRACEPARENT", &traceparent)],
    );
    assert!(applied.status.success(), "{applied:?}");
    workspace.ok(&["wait", "Connection", "db", "--for", "condition=Connected"]);

    let request = span_where(&collector, "the probe's request span arrived", |s| {
        s.trace_id == TRACE && s.kind == 3
    });
    // The request's span ends inside the pass, so it may be exported in a
    // batch before the pass's own span has ended.
    span_where(&collector, "the pass's span arrived", |s| {
        s.trace_id == TRACE && s.name == "reconcile"
    });
    let spans: Vec<ReceivedSpan> = received(&collector)
        .into_iter()
        .filter(|s| s.trace_id == TRACE)
        .collect();
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name} span in {spans:#?}"))
    };
    let apply = named("apply");
    assert_eq!(apply.parent.as_deref(), Some(CALLER_SPAN));
    assert_eq!(apply.service, "beehive-e2e");
    let pass = named("reconcile");
    assert_eq!(
        pass.parent.as_ref(),
        Some(&apply.span_id),
        "the pass is the apply's child"
    );
    for (key, value) in [
        ("beehive.kind", "Connection.example.dev"),
        ("beehive.object", "db"),
        ("beehive.generation", "1"),
        ("beehive.plugin", "events"),
        ("beehive.result", "settled"),
    ] {
        assert_eq!(pass.attribute(key), Some(value), "{key} on {pass:#?}");
    }
    assert!(pass.attribute("beehive.plugin.version").is_some());
    assert!(pass.sampled && pass.start_ns > 0 && pass.end_ns >= pass.start_ns);
    assert!(
        apply.start_ns <= pass.start_ns,
        "the apply began before the pass it caused"
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "store.write" && s.parent.as_ref() == Some(&pass.span_id)),
        "the pass's writes are its children: {spans:#?}"
    );
    // Propagation out: the request is the pass's child, and the service
    // was told so.
    assert_eq!(request.parent.as_ref(), Some(&pass.span_id));
    assert_eq!(request.name, "GET");
    assert_eq!(request.attribute("http.response.status_code"), Some("200"));
    assert_eq!(
        service.last_header("/health", "traceparent"),
        Some(format!("00-{TRACE}-{}-01", request.span_id))
    );

    // `describe` names the latest traced pass's trace, and the events a
    // pass wrote carry its trace.
    let described: serde_json::Value =
        serde_json::from_str(&workspace.ok(&["describe", "Connection", "db", "-o", "json"]))
            .unwrap();
    let last = described["lastPassTrace"]
        .as_str()
        .expect("a last pass trace");
    assert!(
        received(&collector).iter().any(|s| s.trace_id == last
            && s.name == "reconcile"
            && s.attribute("beehive.object") == Some("db")),
        "describe names a pass's trace: {last}"
    );
    let connected = described["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "Connected")
        .expect("a Connected event");
    assert_eq!(connected["traceId"], TRACE, "{connected}");
    assert_mentions(
        &workspace.ok(&["describe", "Connection", "db"]),
        &["Last trace:"],
    );

    // `--trace` starts a trace, prints its id, and the pass joins it.
    workspace.write(
        "team.yaml",
        "kind: GreetingSet.example.dev\nname: team\nspec: {names: [ada]}\n",
    );
    let started = workspace.run(&["apply", "-f", "team.yaml", "--trace"]);
    assert!(started.status.success(), "{started:?}");
    let stderr = String::from_utf8_lossy(&started.stderr);
    let trace = stderr
        .lines()
        .find_map(|line| line.strip_prefix("trace "))
        .unwrap_or_else(|| panic!("no trace id printed: {stderr}"))
        .to_string();
    let root = span_where(&collector, "the traced apply's span arrived", |s| {
        s.trace_id == trace && s.name == "apply"
    });
    assert_eq!(root.parent, None, "--trace starts a new trace");
    let passes_of = |kind: &str| {
        received(&collector)
            .into_iter()
            .filter(|s| {
                s.trace_id == trace
                    && s.name == "reconcile"
                    && s.attribute("beehive.kind") == Some(kind)
            })
            .collect::<Vec<_>>()
    };
    // What a pass writes is reconciled in its trace: the child the set's
    // pass created is passed under that pass.
    wait_until(
        "the child's pass joined the set's trace, under the set's pass",
        || {
            let sets = passes_of("GreetingSet.example.dev");
            passes_of("Greeting.example.dev").iter().any(|child| {
                sets.iter()
                    .any(|set| child.parent.as_ref() == Some(&set.span_id))
            })
        },
    );
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "settled"]);

    // A dependency wake: the child's traced write wakes the set, whose
    // pass, in a trace of its own, links to the write's. A set pass already
    // running when the write lands may rewrite the child under its own
    // trace first (it restores the child's spec), and the link then names
    // that pass's trace: so the write is made again, under a new trace,
    // until one is linked (once, in a quiet store).
    let child = "kind: Greeting.example.dev\nname: team-ada\nowner: GreetingSet.example.dev/team\nspec: {name: Ada Lovelace}\n";
    workspace.write("ada.yaml", child);
    let linked = [
        "0af7651916cd43dd8448eb211c80319c",
        "1af7651916cd43dd8448eb211c80319c",
        "2af7651916cd43dd8448eb211c80319c",
    ]
    .iter()
    .find(|other| {
        let rewritten = workspace.run_with(
            &["apply", "-f", "ada.yaml"],
            &[("TRACEPARENT", &format!("00-{other}-b7ad6b7169203331-01"))],
        );
        assert!(rewritten.status.success(), "{rewritten:?}");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let woken = received(&collector).into_iter().find(|s| {
                s.attribute("beehive.kind") == Some("GreetingSet.example.dev")
                    && s.links.iter().any(|(trace, _)| trace == *other)
            });
            if let Some(woken) = woken {
                assert_ne!(woken.trace_id, **other, "linked, not joined");
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    assert!(
        linked.is_some(),
        "no set pass linked to the child's traced write"
    );
    host.terminate();
}

#[test]
fn a_stalled_collector_delays_no_pass_and_what_it_misses_is_counted() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let collector = TestServer::start();
    collector.route_after("/v1/traces", Duration::from_secs(30), 200, "");
    let host = workspace.start_host_with_env(
        &["--otlp-endpoint", &collector.url("")],
        &[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "200"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "4"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let greetings: String = (0..30)
        .map(|i| format!("kind: Greeting.example.dev\nname: g{i}\nspec: {{name: g{i}}}\n---\n"))
        .collect();
    workspace.apply("greetings.yaml", &greetings);
    for i in [0, 29] {
        workspace.ok(&["wait", "Greeting", &format!("g{i}"), "--for", "settled"]);
    }
    let dropped = |metrics: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("beehive_otlp_spans_dropped_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    wait_until(
        "the stalled collector's spans were counted as dropped",
        || dropped(&workspace.ok(&["metrics"])) > 0.0,
    );
    wait_until("the host said why spans were dropped", || {
        host.log().contains("traces not exported, and dropped")
    });
    host.terminate();
}

#[test]
fn batches_reuse_the_connection_a_collector_keeps_open() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let collector = TestServer::start_keeping_alive();
    collector.route("/v1/traces", 200, "");
    let host = workspace.start_host_with_env(
        &["--otlp-endpoint", &collector.url("")],
        &[("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")],
    );
    let greetings: String = (0..10)
        .map(|i| format!("kind: Greeting.example.dev\nname: g{i}\nspec: {{name: g{i}}}\n---\n"))
        .collect();
    workspace.apply("greetings.yaml", &greetings);
    wait_until("every pass's spans arrived", || {
        received(&collector)
            .iter()
            .filter(|span| span.name == "reconcile")
            .count()
            >= 10
    });
    let batches = collector.hits("/v1/traces");
    assert!(batches >= 5, "batches of two spans: {batches}");
    assert_eq!(
        collector.connections(),
        1,
        "{batches} batches went over one kept connection"
    );
    host.terminate();
}

#[test]
fn with_no_endpoint_nothing_is_exported_and_an_apply_still_names_its_trace() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);
    workspace.write(
        "g.yaml",
        "kind: Greeting.example.dev\nname: g\nspec: {name: g}\n",
    );
    let applied = workspace.run(&["apply", "-f", "g.yaml", "--trace"]);
    assert!(applied.status.success(), "{applied:?}");
    assert!(String::from_utf8_lossy(&applied.stderr).starts_with("trace "));
    workspace.ok(&["wait", "Greeting", "g", "--for", "settled"]);
    let metrics = workspace.ok(&["metrics"]);
    assert_mentions(
        &metrics,
        &[
            "beehive_otlp_spans_exported_total 0",
            "beehive_otlp_spans_dropped_total 0",
        ],
    );
    assert!(!host.log().contains("exporting traces"));
    let bad_endpoint = workspace.run(&["run", "--otlp-endpoint", "127.0.0.1:4318"]);
    assert_eq!(bad_endpoint.status.code(), Some(2), "{bad_endpoint:?}");
    assert_mentions(
        &String::from_utf8_lossy(&bad_endpoint.stderr),
        &["--otlp-endpoint", "http://"],
    );
    let refused = workspace.run_with(&["apply", "-f", "g.yaml"], &[("TRACEPARENT", "nonsense")]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["TRACEPARENT", "00-<32 hex trace id>"],
    );
    host.terminate();
}
