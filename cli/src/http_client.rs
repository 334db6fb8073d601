//! One outbound HTTP request (to a plugin registry, to an OTLP collector),
//! bounded: a timeout on the whole exchange, a cap on the body read, no
//! redirect followed. Plain HTTP when asked (to this machine, as Docker
//! speaks to `localhost`, or to an `http://` collector), else TLS with the
//! web's roots.
//!
//! The adversary is the server: it may trickle a body, send one without
//! end, redirect elsewhere or answer nonsense. Each ends the request with
//! an error that says so, and nothing it sent is kept.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// An answer: status, the headers kept, and the body.
pub struct Answer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of header `name`, if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}

/// A request to make.
pub struct Request<'a> {
    pub method: hyper::Method,
    /// The path and query (`/v2/plugins/greeting/manifests/v1`).
    pub target: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// The most body bytes the answer may have.
    pub cap: u64,
    /// `host:port` or `host`.
    pub authority: &'a str,
    /// Plain HTTP rather than TLS.
    pub plain: bool,
    /// How long the request may take, from connecting to the body's end.
    pub timeout: Duration,
}

/// Sends `request`, within its timeout.
///
/// # Errors
/// A sentence: cannot connect, timed out, the body over its cap, a
/// protocol error.
pub async fn send(request: Request<'_>) -> Result<Answer, String> {
    let authority = request.authority.to_string();
    let timeout = request.timeout;
    match tokio::time::timeout(timeout, exchange(request)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!(
            "{authority} did not answer within {}",
            humantime::format_duration(timeout)
        )),
    }
}

async fn exchange(request: Request<'_>) -> Result<Answer, String> {
    let (host, port) = match request.authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, port.parse::<u16>().map_err(|e| e.to_string())?)
        }
        _ => (request.authority, if request.plain { 80 } else { 443 }),
    };
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", request.authority))?;
    let scheme = if request.plain { "http" } else { "https" };
    let uri = format!("{scheme}://{}{}", request.authority, request.target);
    let mut builder = hyper::Request::builder()
        .method(request.method.clone())
        // Origin-form, as a client speaking to the server itself sends it.
        .uri(request.target.as_str())
        .header(hyper::header::HOST, request.authority)
        .header(hyper::header::USER_AGENT, "beehive");
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    let outgoing = builder
        .body(Full::new(Bytes::from(request.body)))
        .map_err(|e| format!("a request to {uri}: {e}"))?;
    let response = if request.plain {
        over(TokioIo::new(tcp), outgoing).await?
    } else {
        let tls = tls_connector()
            .connect(server_name(host)?, tcp)
            .await
            .map_err(|e| format!("TLS with {}: {e}", request.authority))?;
        over(TokioIo::new(tls), outgoing).await?
    };
    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        let to = response
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        return Err(format!(
            "{uri} redirected to {to}: redirects are not followed (a server must answer for what it names)"
        ));
    }
    let headers = response.headers().clone();
    let body = capped(response.into_body(), request.cap, &uri).await?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

async fn over<I>(
    io: I,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    // Ends with the request: its task goes when the connection does.
    tokio::spawn(connection);
    sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP: {e}"))
}

/// The body, refused once it passes `cap` bytes: never read whole first.
async fn capped(mut body: hyper::body::Incoming, cap: u64, uri: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("{uri}: the body broke off: {e}"))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() as u64 + data.len() as u64 > cap {
                return Err(format!("{uri}: the answer is over its {cap}-byte cap"));
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
    // The ring provider offers the default versions; building cannot fail.
    tokio_rustls::TlsConnector::from(Arc::new(config.expect("ring supports TLS 1.2 and 1.3")))
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a server name: {e}"))
}
