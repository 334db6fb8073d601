//! The exporter: a bounded queue the host's passes hand finished spans to
//! without waiting, and one task that posts them in batches.
//!
//! The adversary is the collector: down, slow, answering errors or
//! redirecting. None of it reaches a pass: a full queue drops the span
//! and counts it; an export that fails or outlasts its timeout drops its
//! batch and counts it; a warning says so at most once a minute.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beehive::metrics::Metrics;
use beehive::trace::{FinishedSpan, SpanSink, Tracer};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::http_client::{self, Request};
use crate::otlp::config::OtlpConfig;
use crate::otlp::protobuf;

/// The most bytes of a collector's answer read (its partial-success body).
const ANSWER_CAP: u64 = 64 << 10;

/// How often a failing collector is warned about.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The finished spans waiting to be sent, bounded. A span joins it under a
/// lock and wakes nobody unless it completes a batch: the exporter drains
/// it on its schedule, so a busy host pays no task wake per span.
struct SpanQueue {
    spans: Mutex<VecDeque<FinishedSpan>>,
    capacity: usize,
    batch: usize,
    batch_ready: Notify,
    metrics: Arc<Metrics>,
}

impl SpanSink for SpanQueue {
    fn offer(&self, span: FinishedSpan) {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if spans.len() >= self.capacity {
            drop(spans);
            self.metrics.otlp_spans_dropped(1);
            return;
        }
        spans.push_back(span);
        if spans.len() == self.batch {
            self.batch_ready.notify_one();
        }
    }
}

impl SpanQueue {
    /// Up to a batch of the oldest spans.
    fn take_batch(&self) -> Vec<FinishedSpan> {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        let count = spans.len().min(self.batch);
        spans.drain(..count).collect()
    }
}

/// The running exporter: stop it to flush what is queued.
pub struct Exporter {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts the exporter `config` describes, on the current runtime, and
/// returns the tracer to give the host.
pub fn start(config: OtlpConfig, metrics: Arc<Metrics>) -> (Tracer, Exporter) {
    let queue = Arc::new(SpanQueue {
        spans: Mutex::new(VecDeque::new()),
        capacity: config.queue,
        batch: config.batch,
        batch_ready: Notify::new(),
        metrics: metrics.clone(),
    });
    let tracer = Tracer::new(queue.clone(), config.sampler);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(run(config, queue, metrics, stopped));
    (tracer, Exporter { stop, task })
}

impl Exporter {
    /// Sends what is queued, for at most `within`, and ends the task.
    pub async fn stop(self, within: Duration) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(within, &mut task).await.is_err() {
            task.abort();
            tracing::warn!(
                "the OTLP exporter did not flush its queue within {within:?}; the rest was dropped"
            );
        }
    }
}

/// Sends a batch whenever one is full, and what is waiting every schedule
/// delay; on stop, everything queued.
async fn run(
    config: OtlpConfig,
    queue: Arc<SpanQueue>,
    metrics: Arc<Metrics>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut post = Poster {
        config: &config,
        metrics: &metrics,
        last_warned: None,
    };
    loop {
        let stopping = tokio::select! {
            _ = queue.batch_ready.notified() => false,
            _ = tokio::time::sleep(config.delay) => false,
            _ = &mut stopped => true,
        };
        loop {
            let batch = queue.take_batch();
            if batch.is_empty() {
                break;
            }
            post.send(&batch).await;
            if batch.len() < config.batch && !stopping {
                break;
            }
        }
        if stopping {
            return;
        }
    }
}

/// Posts batches, counting what is delivered and what is dropped.
struct Poster<'a> {
    config: &'a OtlpConfig,
    metrics: &'a Metrics,
    last_warned: Option<Instant>,
}

impl Poster<'_> {
    async fn send(&mut self, batch: &[FinishedSpan]) {
        let body = protobuf::export_request(&self.config.resource, batch);
        let endpoint = &self.config.endpoint;
        let answer = http_client::send(Request {
            method: hyper::Method::POST,
            target: endpoint.path.clone(),
            headers: vec![("content-type", "application/x-protobuf".to_string())],
            body,
            cap: ANSWER_CAP,
            authority: &endpoint.authority,
            plain: endpoint.plain,
            timeout: self.config.timeout,
        })
        .await;
        let count = batch.len() as u64;
        match answer {
            Ok(answer) if (200..300).contains(&answer.status) => {
                self.metrics.otlp_spans_exported(count);
            }
            Ok(answer) => self.dropped(count, &format!("{endpoint} answered {}", answer.status)),
            Err(why) => self.dropped(count, &why),
        }
    }

    fn dropped(&mut self, count: u64, why: &str) {
        self.metrics.otlp_spans_dropped(count);
        let due = self.last_warned.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if due {
            self.last_warned = Some(Instant::now());
            tracing::warn!(
                spans = count,
                "traces not exported, and dropped: {why} (counted in beehive_otlp_spans_dropped_total; said at most once a minute)"
            );
        }
    }
}
