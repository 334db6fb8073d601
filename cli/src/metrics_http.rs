//! `beehive run --metrics-addr`: the metrics over HTTP for a Prometheus
//! scraper, and the host's health for a supervisor. GET /metrics answers
//! the text format; /healthz answers 200 while the process answers at all;
//! /readyz answers 200 while the host serves and can write, 503 with the
//! reason otherwise; anything else is 404.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use beehive::metrics::Metrics;

use crate::readiness::Readiness;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type Body = String;

/// Binds `addr` (port 0 picks one). Done before the store is opened, so a
/// taken port fails `run` before it creates anything.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))
}

/// Serves the metrics on `listener` until the process ends; returns the
/// address it is bound to.
pub fn listen(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Readiness,
) -> Result<SocketAddr, String> {
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--metrics-addr: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors or the like: pause rather than spin.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let (metrics, readiness) = (metrics.clone(), readiness.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let (metrics, readiness) = (metrics.clone(), readiness.clone());
                    async move { Ok::<_, Infallible>(answer(&request, &metrics, &readiness)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer(request: &Request<Incoming>, metrics: &Metrics, readiness: &Readiness) -> Response<Body> {
    let response = Response::builder().header(
        hyper::header::CONTENT_TYPE,
        "text/plain; version=0.0.4; charset=utf-8",
    );
    let (status, body) = match (request.method(), request.uri().path()) {
        (&hyper::Method::GET, "/metrics") => (StatusCode::OK, metrics.encode()),
        (&hyper::Method::GET, "/healthz") => (StatusCode::OK, "ok\n".to_string()),
        (&hyper::Method::GET, "/readyz") => match readiness.not_ready() {
            None => (StatusCode::OK, "ready\n".to_string()),
            Some(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        _ => (
            StatusCode::NOT_FOUND,
            "metrics are at /metrics; health at /healthz and /readyz\n".to_string(),
        ),
    };
    // A response from a status, a valid header and a body always builds.
    response
        .status(status)
        .body(body)
        .unwrap_or_else(|_| Response::new(String::new()))
}
