//! The exporter: a bounded queue the host's passes hand finished spans to
//! without waiting, and one task that posts them in batches.
//!
//! The adversary is the collector: down, slow, answering errors or
//! redirecting. None of it reaches a pass: a full queue drops the span
//! and counts it; an export that fails or outlasts its timeout drops its
//! batch and counts it; a warning says so at most once a minute.

use std::sync::Arc;
use std::time::Duration;

use beehive::metrics::Metrics;
use beehive::trace::{FinishedSpan, SpanSink, Tracer};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::http_client::{self, Request};
use crate::otlp::config::OtlpConfig;
use crate::otlp::protobuf;

/// The most bytes of a collector's answer read (its partial-success body).
const ANSWER_CAP: u64 = 64 << 10;

/// How often a failing collector is warned about.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Hands spans to the exporter's queue, or drops and counts them.
struct QueueSink {
    queue: mpsc::Sender<FinishedSpan>,
    metrics: Arc<Metrics>,
}

impl SpanSink for QueueSink {
    fn offer(&self, span: FinishedSpan) {
        if self.queue.try_send(span).is_err() {
            self.metrics.otlp_spans_dropped(1);
        }
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
    let (queue, spans) = mpsc::channel(config.queue);
    let tracer = Tracer::new(
        Arc::new(QueueSink {
            queue,
            metrics: metrics.clone(),
        }),
        config.sampler,
    );
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(run(config, spans, metrics, stopped));
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

async fn run(
    config: OtlpConfig,
    mut spans: mpsc::Receiver<FinishedSpan>,
    metrics: Arc<Metrics>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut post = Poster {
        config: &config,
        metrics: &metrics,
        last_warned: None,
    };
    loop {
        let first = tokio::select! {
            span = spans.recv() => span,
            _ = &mut stopped => None,
        };
        let Some(first) = first else { break };
        let mut batch = vec![first];
        let deadline = Instant::now() + config.delay;
        while batch.len() < config.batch {
            tokio::select! {
                span = spans.recv() => match span {
                    Some(span) => batch.push(span),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        post.send(&batch).await;
    }
    // Stopping: what is already queued goes out, batch by batch.
    spans.close();
    let mut batch = Vec::new();
    while let Ok(span) = spans.try_recv() {
        batch.push(span);
        if batch.len() == config.batch {
            post.send(&std::mem::take(&mut batch)).await;
        }
    }
    if !batch.is_empty() {
        post.send(&batch).await;
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
