//! `beehive run --metrics-addr`: the metrics over HTTP for a Prometheus
//! scraper. GET /metrics answers the text format; anything else is 404.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use beehive::metrics::Metrics;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type Body = String;

/// Binds `addr` and serves the metrics there until the process ends;
/// returns the address bound (port 0 picks one).
pub async fn listen(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors or the like: pause rather than spin.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, Infallible>(answer(&request, &metrics)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer(request: &Request<Incoming>, metrics: &Metrics) -> Response<Body> {
    let response = Response::builder();
    let built = if request.method() == hyper::Method::GET && request.uri().path() == "/metrics" {
        response
            .header(
                hyper::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )
            .body(metrics.encode())
    } else {
        response
            .status(StatusCode::NOT_FOUND)
            .body("metrics are at /metrics\n".to_string())
    };
    // A response from a status, a valid header and a body always builds.
    built.unwrap_or_else(|_| Response::new(String::new()))
}
