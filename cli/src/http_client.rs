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
    let mut sender = connect(request.authority, request.plain).await?;
    exchange_on(&mut sender, request).await
}

/// An open HTTP/1.1 connection, to send requests on.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Opens a connection to `authority`: plain, or TLS with the web's roots.
async fn connect(authority: &str, plain: bool) -> Result<Sender, String> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, port.parse::<u16>().map_err(|e| e.to_string())?)
        }
        _ => (authority, if plain { 80 } else { 443 }),
    };
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    if plain {
        return handshake(TokioIo::new(tcp)).await;
    }
    let tls = tls_connector()
        .connect(server_name(host)?, tcp)
        .await
        .map_err(|e| format!("TLS with {authority}: {e}"))?;
    handshake(TokioIo::new(tls)).await
}

/// Sends `request` on `sender`, an open connection to its server.
async fn exchange_on(sender: &mut Sender, request: Request<'_>) -> Result<Answer, String> {
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
    let response = sender
        .send_request(outgoing)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
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

/// A connection kept open between requests to one server (an OTLP
/// collector takes a batch every second): opened on the first request,
/// reused while the server keeps it, opened again when it has closed.
/// A request that fails or times out closes it, since whatever the server
/// was sending is still in the stream.
#[derive(Default)]
pub struct KeptConnection {
    sender: Option<Sender>,
}

impl KeptConnection {
    /// Sends `request`, within its timeout (which includes reconnecting).
    ///
    /// # Errors
    /// As [`send`].
    pub async fn send(&mut self, request: Request<'_>) -> Result<Answer, String> {
        let authority = request.authority.to_string();
        let timeout = request.timeout;
        let sent = tokio::time::timeout(timeout, self.exchange(request)).await;
        match sent {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(why)) => {
                self.sender = None;
                Err(why)
            }
            Err(_) => {
                self.sender = None;
                Err(format!(
                    "{authority} did not answer within {}",
                    humantime::format_duration(timeout)
                ))
            }
        }
    }

    async fn exchange(&mut self, request: Request<'_>) -> Result<Answer, String> {
        let reusable = match self.sender.as_mut() {
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        let sender = match self.sender.take() {
            Some(sender) if reusable => self.sender.insert(sender),
            _ => self
                .sender
                .insert(connect(request.authority, request.plain).await?),
        };
        exchange_on(sender, request).await
    }
}

/// Speaks HTTP/1.1 over `io`; the connection's task ends when it closes.
async fn handshake<I>(io: I) -> Result<Sender, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    tokio::spawn(connection);
    Ok(sender)
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
