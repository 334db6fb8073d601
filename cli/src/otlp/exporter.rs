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

use crate::http_client::{KeptConnection, Request};
use crate::otlp::config::OtlpConfig;
use crate::otlp::protobuf;

/// The most bytes of a collector's answer read (its partial-success body).
const ANSWER_CAP: u64 = 64 << 10;

/// How often a failing collector is warned about.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The finished spans waiting to be sent, bounded, already encoded. A
/// span is encoded onto the open batch under a lock and wakes nobody
/// unless it completes the batch: the exporter drains the queue on its
/// schedule, so a busy host pays no task wake and no allocation per span,
/// and the span's own allocations are freed by the thread that made them.
struct SpanQueue {
    pending: Mutex<Pending>,
    capacity: usize,
    batch: usize,
    batch_ready: Notify,
    metrics: Arc<Metrics>,
}

/// Encoded spans: full batches, oldest first, and the one being filled.
#[derive(Default)]
struct Pending {
    full: VecDeque<Batch>,
    open: Batch,
    /// Spans in `full` and `open` together.
    spans: usize,
}

/// A run of encoded spans ([`protobuf::append_span`]) and how many.
#[derive(Default)]
struct Batch {
    encoded: Vec<u8>,
    spans: usize,
}

impl SpanSink for SpanQueue {
    fn offer(&self, span: FinishedSpan) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.spans >= self.capacity {
            drop(pending);
            self.metrics.otlp_spans_dropped(1);
            return;
        }
        protobuf::append_span(&mut pending.open.encoded, &span);
        pending.open.spans += 1;
        pending.spans += 1;
        if pending.open.spans == self.batch {
            let full = std::mem::take(&mut pending.open);
            pending.full.push_back(full);
            self.batch_ready.notify_one();
        }
    }
}

impl SpanQueue {
    /// The oldest full batch, else what the open one holds.
    fn take_batch(&self) -> Batch {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let batch = match pending.full.pop_front() {
            Some(full) => full,
            None => std::mem::take(&mut pending.open),
        };
        pending.spans -= batch.spans;
        batch
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
        pending: Mutex::new(Pending::default()),
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
        connection: KeptConnection::default(),
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
            if batch.spans == 0 {
                break;
            }
            let partial = batch.spans < config.batch;
            post.send(batch).await;
            if partial && !stopping {
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
    /// One connection for every batch, as long as the collector keeps it.
    connection: KeptConnection,
    last_warned: Option<Instant>,
}

impl Poster<'_> {
    async fn send(&mut self, batch: Batch) {
        let body = protobuf::export_request(&self.config.resource, &batch.encoded);
        let endpoint = &self.config.endpoint;
        let answer = self
            .connection
            .send(Request {
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
        let count = batch.spans as u64;
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
