//! What the host measures about itself, in the Prometheus text format: the
//! names controller-runtime users already graph for reconciles and work
//! queues, and Beehive's own for plugins, the store and watches.
//!
//! One [`Metrics`] belongs to each [`crate::Store`] and everything built on
//! it (hosts, plugin runtimes given it) records there. Recording is an
//! atomic add on a handle looked up once (per kind, per plugin), never a
//! lookup per pass. Nothing is exported unless someone asks: `beehive
//! metrics`, `beehive run --metrics-addr`, or [`Metrics::encode`].

mod process;

use crate::sync::lock;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};

/// Why a plugin file failed to load, as `beehive_plugin_load_failures_total`
/// tells them apart: refused by the directory's trust, or anything else.
pub(crate) const LOAD_FAILURE_REASONS: [&str; 2] = ["signature", "load"];

/// Registers `metric` as `name` and returns it: the registry holds one
/// handle and the caller the other, both on the same series.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Label sets are plain (name, value) pairs.
type Labels = Vec<(String, String)>;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Durations from 10 µs to about 84 s: passes here take tens of
/// microseconds, and a stuck one a minute.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-5, 2.0, 24))
}

fn batch_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The host's metrics registry and every metric in it.
pub struct Metrics {
    registry: Registry,
    reconcile_total: Family<Labels, Counter>,
    reconcile_errors: Family<Labels, Counter>,
    reconcile_time: HistogramFamily,
    queue_depth: Family<Labels, Gauge>,
    queue_adds: Family<Labels, Counter>,
    queue_retries: Family<Labels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    pub(crate) store: StoreMetrics,
    watches_open: Gauge,
    gc_sweeps: Counter,
    stale_scans: Counter,
    owed_scans: Counter,
    plugin_info: Family<Labels, Gauge>,
    plugin_load_failures: Family<Labels, Counter>,
    plugin_traps: Family<Labels, Counter>,
    plugin_deadline_hits: Family<Labels, Counter>,
    plugin_denials: DenialCounter,
    plugin_instances: Family<Labels, Gauge>,
    plugin_memory: Family<Labels, Gauge>,
    objects: Family<Labels, Gauge>,
    objects_unsettled: Family<Labels, Gauge>,
    objects_failing: Family<Labels, Gauge>,
    backup_last_success: Gauge,
    backup_age: Gauge,
    backup_failures: Counter,
    otlp_spans_exported: Counter,
    otlp_spans_dropped: Counter,
    /// Brings the object gauges up to date just before an export: they are
    /// counted on demand, so an idle host spends nothing on them.
    refresher: std::sync::Mutex<Option<Refresher>>,
}

/// What [`Metrics::encode`] calls first.
type Refresher = Box<dyn Fn(&Metrics) + Send + Sync>;

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The store's writer: commits, their batch sizes and how long each took.
#[derive(Clone, Debug)]
pub(crate) struct StoreMetrics {
    pub(crate) commits: Counter,
    pub(crate) batch_size: Histogram,
    pub(crate) write_seconds: Histogram,
    pub(crate) writes_waiting: Gauge,
}

/// One kind's handles: its reconciles and its work queue.
#[derive(Clone, Debug)]
pub(crate) struct KindMetrics {
    pub(crate) success: Counter,
    pub(crate) error: Counter,
    pub(crate) requeue: Counter,
    pub(crate) requeue_after: Counter,
    pub(crate) errors: Counter,
    pub(crate) reconcile_time: Histogram,
    pub(crate) queue: QueueMetrics,
}

/// A work queue's handles.
#[derive(Clone, Debug)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) retries: Counter,
    pub(crate) queue_seconds: Histogram,
    pub(crate) work_seconds: Histogram,
}

/// One plugin's handles.
#[derive(Clone, Debug, Default)]
pub(crate) struct PluginMetrics {
    pub(crate) denials: DenialCounter,
    pub(crate) traps: Counter,
    pub(crate) deadline_hits: Counter,
    pub(crate) instances: Gauge,
    pub(crate) memory: Gauge,
}

/// Counts store calls refused to plugins, by plugin, kind and verb. Denials
/// are rare, so each looks its series up.
#[derive(Clone, Debug, Default)]
pub(crate) struct DenialCounter {
    family: Family<Labels, Counter>,
    /// The label sets counted, so a removed plugin's can be dropped (a
    /// family cannot list its own); bounded by plugins × kinds × verbs.
    counted: Arc<std::sync::Mutex<std::collections::BTreeSet<Labels>>>,
}

impl DenialCounter {
    fn new(family: Family<Labels, Counter>) -> Self {
        DenialCounter {
            family,
            counted: Arc::default(),
        }
    }

    /// Drops every series of `plugin`.
    fn forget(&self, plugin: &str) {
        lock(&self.counted).retain(|set| {
            let of_plugin = set.iter().any(|(k, v)| k == "plugin" && v == plugin);
            if of_plugin {
                self.family.remove(set);
            }
            !of_plugin
        });
    }

    /// Counts one denial of `verb` on `kind` to `plugin`.
    pub(crate) fn count(
        &self,
        plugin: &str,
        kind: &beehive_types::GroupKind,
        verb: beehive_types::StoreVerb,
    ) {
        let kind = kind.to_string();
        let set = labels(&[("plugin", plugin), ("kind", &kind), ("verb", verb.as_str())]);
        self.family.get_or_create(&set).inc();
        lock(&self.counted).insert(set);
    }
}

/// The size of the database files, read at each scrape.
#[derive(Debug)]
struct DatabaseSize(PathBuf);

impl Collector for DatabaseSize {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let size: u64 = ["", "-wal"]
            .iter()
            .filter_map(|suffix| {
                let mut path = self.0.clone().into_os_string();
                path.push(suffix);
                std::fs::metadata(path).ok().map(|m| m.len())
            })
            .sum();
        let gauge = Gauge::<i64>::default();
        gauge.set(i64::try_from(size).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "beehive_store_database_size",
            "The database file and its write-ahead log",
            Some(&Unit::Bytes),
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}

impl Metrics {
    /// Metrics for the store whose database is `database`.
    pub(crate) fn new(database: PathBuf) -> Arc<Metrics> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(DatabaseSize(database)));
        registry.register_collector(Box::new(process::ProcessCollector));
        let build_info = Family::<Labels, Gauge>::default();
        build_info
            .get_or_create(&labels(&[("version", env!("CARGO_PKG_VERSION"))]))
            .set(1);
        registry.register(
            "beehive_build_info",
            "The Beehive release this host runs (always 1)",
            build_info,
        );
        let r = &mut registry;
        let seconds = || HistogramFamily::new_with_constructor(seconds_histogram);
        Arc::new(Metrics {
            reconcile_total: registered(
                r,
                "controller_runtime_reconcile",
                "Reconciles per controller and result (success, error, requeue, requeue_after)",
                Family::default(),
            ),
            reconcile_errors: registered(
                r,
                "controller_runtime_reconcile_errors",
                "Reconciles that failed, per controller",
                Family::default(),
            ),
            reconcile_time: registered(
                r,
                "controller_runtime_reconcile_time_seconds",
                "How long each reconcile took, per controller",
                seconds(),
            ),
            queue_depth: registered(
                r,
                "workqueue_depth",
                "Objects waiting in each kind's queue",
                Family::default(),
            ),
            queue_adds: registered(
                r,
                "workqueue_adds",
                "Objects added to each kind's queue",
                Family::default(),
            ),
            queue_retries: registered(
                r,
                "workqueue_retries",
                "Failed passes put back on the backoff ladder, per kind",
                Family::default(),
            ),
            queue_duration: registered(
                r,
                "workqueue_queue_duration_seconds",
                "How long an object waited in the queue before its pass",
                seconds(),
            ),
            work_duration: registered(
                r,
                "workqueue_work_duration_seconds",
                "How long a pass took from dispatch to done, its handshake included",
                seconds(),
            ),
            store: StoreMetrics {
                commits: registered(
                    r,
                    "beehive_store_commits",
                    "Write transactions committed",
                    Counter::default(),
                ),
                batch_size: registered(
                    r,
                    "beehive_store_commit_batch_size",
                    "Writes committed together in one transaction (group commit)",
                    batch_histogram(),
                ),
                write_seconds: registered(
                    r,
                    "beehive_store_write_seconds",
                    "How long each write transaction took, commit included",
                    seconds_histogram(),
                ),
                writes_waiting: registered(
                    r,
                    "beehive_store_writes_waiting",
                    "Writes and held transactions queued for the store's single writer",
                    Gauge::default(),
                ),
            },
            watches_open: registered(
                r,
                "beehive_watches_open",
                "Watches of objects and events open now",
                Gauge::default(),
            ),
            gc_sweeps: registered(
                r,
                "beehive_gc_sweeps",
                "Garbage-collection sweeps completed (one with nothing committed since a sweep that found nothing reads nothing)",
                Counter::default(),
            ),
            stale_scans: registered(
                r,
                "beehive_stale_dependents_scans",
                "Stale-dependents passes that read the dependency edges (one with nothing committed since a pass that found nothing reads only the write log's head)",
                Counter::default(),
            ),
            owed_scans: registered(
                r,
                "beehive_owed_scans",
                "Owed passes that read the store (a periodic one with nothing committed since one that found nothing owed reads nothing)",
                Counter::default(),
            ),
            plugin_info: registered(
                r,
                "beehive_plugin_info",
                "The plugin version serving each kind (1 while it serves)",
                Family::default(),
            ),
            plugin_load_failures: registered(
                r,
                "beehive_plugin_load_failures",
                "Plugin files that failed to load, per plugin and reason (signature: refused \
                 by the directory's trust; load: anything else)",
                Family::default(),
            ),
            plugin_traps: registered(
                r,
                "beehive_plugin_traps",
                "Plugin calls that trapped or failed in the guest, per plugin",
                Family::default(),
            ),
            plugin_deadline_hits: registered(
                r,
                "beehive_plugin_deadline_hits",
                "Plugin calls cut by their CPU deadline or wall-clock limit, per plugin",
                Family::default(),
            ),
            plugin_denials: DenialCounter::new(registered(
                r,
                "beehive_plugin_denials",
                "Store calls refused because the plugin's policy does not grant them, per plugin, kind and verb",
                Family::default(),
            )),
            plugin_instances: registered(
                r,
                "beehive_plugin_instances",
                "Live instances of each plugin",
                Family::default(),
            ),
            plugin_memory: {
                let memory = Family::default();
                r.register_with_unit(
                    "beehive_plugin_memory",
                    "Linear memory held by each plugin's instances",
                    Unit::Bytes,
                    memory.clone(),
                );
                memory
            },
            objects: registered(
                r,
                "beehive_objects",
                "Objects of each kind with a controller, counted at each export",
                Family::default(),
            ),
            objects_unsettled: registered(
                r,
                "beehive_objects_unsettled",
                "Objects of each kind whose current generation is not yet observed",
                Family::default(),
            ),
            objects_failing: registered(
                r,
                "beehive_objects_failing",
                "Objects of each kind whose last pass failed (on the backoff ladder)",
                Family::default(),
            ),
            backup_last_success: registered(
                r,
                "beehive_backup_last_success_timestamp_seconds",
                "When the last scheduled backup succeeded (Unix time; 0: none yet)",
                Gauge::default(),
            ),
            backup_age: registered(
                r,
                "beehive_backup_age_seconds",
                "How old the last successful scheduled backup is, at each export (-1: none yet)",
                Gauge::default(),
            ),
            backup_failures: registered(
                r,
                "beehive_backup_failures",
                "Scheduled backups that failed",
                Counter::default(),
            ),
            otlp_spans_exported: registered(
                r,
                "beehive_otlp_spans_exported",
                "Spans the OTLP exporter delivered to its endpoint",
                Counter::default(),
            ),
            otlp_spans_dropped: registered(
                r,
                "beehive_otlp_spans_dropped",
                "Spans the OTLP exporter dropped: its queue was full, or its endpoint failed",
                Counter::default(),
            ),
            refresher: std::sync::Mutex::new(None),
            // Last: every field above registered through `r` first.
            registry,
        })
    }

    /// Sets what brings the object gauges up to date before each export.
    pub(crate) fn set_refresher(&self, refresher: Option<Refresher>) {
        *lock(&self.refresher) = refresher;
    }

    /// Records kind `kind`'s object counts.
    pub(crate) fn set_objects(&self, kind: &str, total: i64, unsettled: i64, failing: i64) {
        let set = labels(&[("kind", kind)]);
        self.objects.get_or_create(&set).set(total);
        self.objects_unsettled.get_or_create(&set).set(unsettled);
        self.objects_failing.get_or_create(&set).set(failing);
    }

    /// Records a scheduled backup that succeeded at `at`.
    pub fn backup_succeeded(&self, at: crate::object::Timestamp) {
        self.backup_last_success.set(at.as_millis() / 1000);
    }

    /// Records a scheduled backup that failed.
    pub fn backup_failed(&self) {
        self.backup_failures.inc();
    }

    /// Counts `spans` delivered by an OTLP exporter.
    pub fn otlp_spans_exported(&self, spans: u64) {
        self.otlp_spans_exported.inc_by(spans);
    }

    /// Counts `spans` an OTLP exporter dropped (a full queue, a failed
    /// export).
    pub fn otlp_spans_dropped(&self, spans: u64) {
        self.otlp_spans_dropped.inc_by(spans);
    }

    /// Every metric, in the Prometheus text format (version 0.0.4).
    pub fn encode(&self) -> String {
        if let Some(refresh) = lock(&self.refresher).as_ref() {
            refresh(self);
        }
        let last = self.backup_last_success.get();
        let now = crate::object::Timestamp::now().as_millis() / 1000;
        self.backup_age.set(if last > 0 { now - last } else { -1 });
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// The handles of kind `kind` (its label value, `Kind.group`).
    pub(crate) fn kind(&self, kind: &str) -> KindMetrics {
        let controller = labels(&[("controller", kind)]);
        let result = |r: &str| {
            self.reconcile_total
                .get_or_create_owned(&labels(&[("controller", kind), ("result", r)]))
        };
        let name = labels(&[("name", kind)]);
        KindMetrics {
            success: result("success"),
            error: result("error"),
            requeue: result("requeue"),
            requeue_after: result("requeue_after"),
            errors: self.reconcile_errors.get_or_create_owned(&controller),
            reconcile_time: self.reconcile_time.get_or_create_owned(&controller),
            queue: QueueMetrics {
                depth: self.queue_depth.get_or_create_owned(&name),
                adds: self.queue_adds.get_or_create_owned(&name),
                retries: self.queue_retries.get_or_create_owned(&name),
                queue_seconds: self.queue_duration.get_or_create_owned(&name),
                work_seconds: self.work_duration.get_or_create_owned(&name),
            },
        }
    }

    /// The handles of plugin `plugin`.
    pub(crate) fn plugin(&self, plugin: &str) -> PluginMetrics {
        let name = labels(&[("plugin", plugin)]);
        PluginMetrics {
            denials: self.denials(),
            traps: self.plugin_traps.get_or_create_owned(&name),
            deadline_hits: self.plugin_deadline_hits.get_or_create_owned(&name),
            instances: self.plugin_instances.get_or_create_owned(&name),
            memory: self.plugin_memory.get_or_create_owned(&name),
        }
    }

    /// Records that `plugin` at `version` serves `kind`, or no longer does.
    pub(crate) fn plugin_serving(&self, plugin: &str, kind: &str, version: &str, serving: bool) {
        let set = labels(&[("plugin", plugin), ("kind", kind), ("version", version)]);
        if serving {
            self.plugin_info.get_or_create(&set).set(1);
        } else {
            self.plugin_info.remove(&set);
        }
    }

    /// Starts `plugin`'s counters at zero, so that an alert on their
    /// increase sees a series before the first failure.
    pub(crate) fn plugin_seen(&self, plugin: &str) {
        let name = labels(&[("plugin", plugin)]);
        for reason in LOAD_FAILURE_REASONS {
            let _ = self
                .plugin_load_failures
                .get_or_create(&labels(&[("plugin", plugin), ("reason", reason)]));
        }
        let _ = self.plugin_traps.get_or_create(&name);
        let _ = self.plugin_deadline_hits.get_or_create(&name);
    }

    /// Drops the series of a plugin whose file was removed: neither the
    /// export nor `top` should show it any more.
    pub(crate) fn plugin_gone(&self, plugin: &str) {
        let name = labels(&[("plugin", plugin)]);
        for reason in LOAD_FAILURE_REASONS {
            self.plugin_load_failures
                .remove(&labels(&[("plugin", plugin), ("reason", reason)]));
        }
        self.plugin_traps.remove(&name);
        self.plugin_deadline_hits.remove(&name);
        self.plugin_instances.remove(&name);
        self.plugin_memory.remove(&name);
        self.plugin_denials.forget(plugin);
    }

    /// Counts a failed load of `plugin`, for `reason` (one of
    /// [`LOAD_FAILURE_REASONS`]).
    pub(crate) fn plugin_load_failed(&self, plugin: &str, reason: &str) {
        self.plugin_load_failures
            .get_or_create(&labels(&[("plugin", plugin), ("reason", reason)]))
            .inc();
    }

    /// The counter of store calls refused to plugins.
    pub(crate) fn denials(&self) -> DenialCounter {
        self.plugin_denials.clone()
    }

    /// Counts a completed garbage-collection sweep.
    pub(crate) fn gc_swept(&self) {
        self.gc_sweeps.inc();
    }

    /// Counts a stale-dependents pass that read the edges.
    pub(crate) fn stale_scanned(&self) {
        self.stale_scans.inc();
    }

    /// Counts an owed pass that read the store.
    pub(crate) fn owed_scanned(&self) {
        self.owed_scans.inc();
    }

    /// The gauge of open watches.
    pub(crate) fn watches_open(&self) -> &Gauge {
        &self.watches_open
    }
}

/// A gauge held up by one while this lives.
pub(crate) struct Held(Gauge);

impl Held {
    pub(crate) fn new(gauge: &Gauge) -> Held {
        gauge.inc();
        Held(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Seconds, as histograms take them.
pub(crate) fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_carries_controller_runtime_names_and_ours() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Metrics::new(dir.path().join("x.db"));
        let kind = metrics.kind("Widget.test.dev");
        kind.success.inc();
        kind.reconcile_time.observe(0.002);
        kind.queue.depth.set(3);
        metrics.plugin_serving("widgets", "Widget.test.dev", "abc123", true);
        let text = metrics.encode();
        for line in [
            r#"controller_runtime_reconcile_total{controller="Widget.test.dev",result="success"} 1"#,
            r#"workqueue_depth{name="Widget.test.dev"} 3"#,
            r#"beehive_plugin_info{plugin="widgets",kind="Widget.test.dev",version="abc123"} 1"#,
            "controller_runtime_reconcile_time_seconds_count{controller=\"Widget.test.dev\"} 1",
            "beehive_store_database_size_bytes 0",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        metrics.plugin_serving("widgets", "Widget.test.dev", "abc123", false);
        assert!(!metrics.encode().contains("abc123"));
    }
}
