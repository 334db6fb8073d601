//! The `process_*` metrics every Prometheus client exports about its own
//! process, read from `/proc` at each scrape: what a dashboard of any
//! service shows first.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Reads `/proc/self` when the metrics are exported; a field that cannot be
/// read is left out of that export.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            counter(
                &mut encoder,
                "process_cpu",
                "User and system CPU time spent",
                Some(Unit::Seconds),
                cpu,
            )?;
            let resident = stat.rss * procfs::page_size();
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size",
                resident as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size",
                stat.vsize as f64,
            )?;
            gauge(
                &mut encoder,
                "process_threads",
                "OS threads in the process",
                stat.num_threads as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let started = boot as f64 + stat.starttime as f64 / ticks;
                gauge(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since the Unix epoch, in seconds",
                    started,
                )?;
            }
        }
        if let Ok(open) = me.fd_count() {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                open as f64,
            )?;
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            gauge(
                &mut encoder,
                "process_max_fds",
                "The most file descriptors the process may open",
                max as f64,
            )?;
        }
        Ok(())
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    let described = encoder.encode_descriptor(name, help, unit.as_ref(), metric.metric_type())?;
    metric.encode(described)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    let described = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(described)
}
