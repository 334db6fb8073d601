//! Outbound HTTP for plugins: `wasi:http` requests, each checked against the
//! hosts the operator granted before any connection is made, and bounded:
//! connect and first-byte timeouts, a response size cap and a number of
//! requests in flight per plugin version.
//!
//! A request to a destination not granted fails in the guest with
//! `HTTP-request-denied` and is remembered, so the pass that made it can
//! record a Warning event naming the destination.
//!
//! Waiting on the network happens in host calls (the guest polls), so it
//! counts toward the pass's wall-clock limit and never toward its CPU
//! deadline, and it parks a task, never a worker thread.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::trace::{Span, SpanKind, SpanStatus};

/// How many denied destinations one pass remembers for its events; more
/// are still denied and logged.
const MAX_DENIALS_PER_PASS: usize = 8;

/// The bounds on a plugin's outbound requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a connection (TLS handshake included) may take (default 5 s).
    pub connect_timeout: Duration,
    /// How long the response's first byte, and each later one, may take
    /// (default 10 s).
    pub first_byte_timeout: Duration,
    /// The most response body bytes a request may read; the body ends with
    /// an error past it (default 4 MiB).
    pub max_response_bytes: u64,
    /// The most requests one plugin version has in flight at once; one more
    /// waits up to the connect timeout for a turn (default 8).
    pub max_concurrent_requests: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(10),
            max_response_bytes: 4 << 20,
            max_concurrent_requests: 8,
        }
    }
}

/// One granted destination: `host`, `host:port`, `host:*`, `*.domain`
/// (any name under it, not the domain itself), each optionally prefixed
/// with `http://` or `https://` to allow only that scheme. Without a port
/// only the scheme's default port (80, 443) is allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    /// `Some(true)` for https only, `Some(false)` for http only.
    https: Option<bool>,
    host: HostMatch,
    port: PortMatch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostMatch {
    Exact(String),
    /// `.domain`: names ending in it.
    Under(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PortMatch {
    SchemeDefault,
    Exact(u16),
    Any,
}

impl std::str::FromStr for HostPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<HostPattern, String> {
        let bad = |why: &str| format!("{text:?} is not a host to allow: {why}");
        let (https, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (Some(true), rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            (Some(false), rest)
        } else if text.contains("://") {
            return Err(bad("only http:// and https:// may be named"));
        } else {
            (None, text)
        };
        if rest.contains(['/', '?', '#', '@']) || rest.chars().any(char::is_whitespace) {
            return Err(bad("name a host, optionally with :port, and nothing else"));
        }
        let (host, port) = split_port(rest).map_err(|why| bad(&why))?;
        let port = match port {
            None => PortMatch::SchemeDefault,
            Some("*") => PortMatch::Any,
            Some(port) => PortMatch::Exact(
                port.parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port must be 1-65535 or *"))?,
            ),
        };
        let host = host.to_ascii_lowercase();
        let host = match host.strip_prefix("*.") {
            Some(domain) if valid_host(domain) && !domain.contains('*') => {
                HostMatch::Under(format!(".{domain}"))
            }
            _ if valid_host(&host) && !host.contains('*') => HostMatch::Exact(host),
            _ => {
                return Err(bad(
                    "a host is a name, an IP address or *.domain (a wildcard only leads)",
                ));
            }
        };
        Ok(HostPattern { https, host, port })
    }
}

/// Splits `host[:port]`, minding bracketed IPv6 addresses.
fn split_port(text: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        return match after {
            "" => Ok((&text[..inside.len() + 2], None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((&text[..inside.len() + 2], Some(port))),
                None => Err("only :port may follow an IPv6 address".into()),
            },
        };
    }
    Ok(match text.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    })
}

fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.[]:*_".contains(c))
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.https {
            Some(true) => write!(f, "https://")?,
            Some(false) => write!(f, "http://")?,
            None => {}
        }
        match &self.host {
            HostMatch::Exact(host) => write!(f, "{host}")?,
            HostMatch::Under(domain) => write!(f, "*{domain}")?,
        }
        match self.port {
            PortMatch::SchemeDefault => Ok(()),
            PortMatch::Exact(port) => write!(f, ":{port}"),
            PortMatch::Any => write!(f, ":*"),
        }
    }
}

impl HostPattern {
    fn allows(&self, destination: &Destination) -> bool {
        let scheme = self.https.is_none_or(|https| https == destination.https);
        let host = match &self.host {
            HostMatch::Exact(host) => *host == destination.host,
            HostMatch::Under(domain) => {
                destination.host.ends_with(domain.as_str()) && destination.host.len() > domain.len()
            }
        };
        let port = match self.port {
            PortMatch::SchemeDefault => destination.port == destination.default_port(),
            PortMatch::Exact(port) => destination.port == port,
            PortMatch::Any => true,
        };
        scheme && host && port
    }
}

/// Where a request goes: scheme, host and port, as a grant is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    https: bool,
    host: String,
    port: u16,
}

/// Why a request names no destination a grant could allow.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Undestined {
    /// Not an http or https URL with a host.
    NotHttp,
    /// The authority carries `user@` (or `user:password@`): the name
    /// checked and the name dialled could differ, so it is refused.
    UserInfo(Destination),
}

impl Destination {
    /// The destination of `uri`, if it names an http or https authority
    /// without user information.
    pub(crate) fn of(uri: &http::Uri) -> Result<Destination, Undestined> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(Undestined::NotHttp),
        };
        let authority = uri.authority().ok_or(Undestined::NotHttp)?;
        let host = authority.host().to_ascii_lowercase();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let destination = Destination { https, host, port };
        if authority.as_str().contains('@') {
            return Err(Undestined::UserInfo(destination));
        }
        Ok(destination)
    }

    /// `uri` addressed to exactly this destination: what the connector
    /// dials is the authority that was checked, spelled by the host.
    fn pin(&self, uri: &http::Uri) -> Result<http::Uri, Error> {
        let scheme = if self.https { "https" } else { "http" };
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        format!("{scheme}://{}:{}{path}", self.host, self.port)
            .parse()
            .map_err(|_| Error::HttpRequestUriInvalid)
    }

    fn default_port(&self) -> u16 {
        if self.https { 443 } else { 80 }
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// What one plugin version may reach, and its requests in flight.
#[derive(Debug)]
pub(crate) struct HttpAccess {
    allow: Vec<HostPattern>,
    limits: HttpLimits,
    in_flight: Arc<Semaphore>,
}

impl HttpAccess {
    pub(crate) fn new(allow: Vec<HostPattern>, limits: HttpLimits) -> Arc<HttpAccess> {
        Arc::new(HttpAccess {
            allow,
            in_flight: Arc::new(Semaphore::new(limits.max_concurrent_requests.max(1))),
            limits,
        })
    }

    fn allows(&self, destination: &Destination) -> bool {
        self.allow.iter().any(|p| p.allows(destination))
    }

    /// The guest's request options, never looser than the operator's.
    fn options(&self, asked: Option<RequestOptions>) -> RequestOptions {
        let asked = asked.unwrap_or_default();
        let tighter = |asked: Option<Duration>, ours: Duration| {
            Some(asked.map_or(ours, |asked| asked.min(ours)))
        };
        RequestOptions {
            connect_timeout: tighter(asked.connect_timeout, self.limits.connect_timeout),
            first_byte_timeout: tighter(asked.first_byte_timeout, self.limits.first_byte_timeout),
            between_bytes_timeout: tighter(
                asked.between_bytes_timeout,
                self.limits.first_byte_timeout,
            ),
        }
    }
}

/// The `wasi:http` hooks of one plugin store: the grant check and the
/// bounds on every request it sends.
pub(crate) struct HttpGate {
    plugin: Arc<str>,
    access: Arc<HttpAccess>,
    /// Destinations denied since the pass began.
    denied: Vec<String>,
    /// The span of the pass in progress, when the host traces: each request
    /// gets a child span, and its context is the `traceparent` sent.
    pub(crate) pass_span: Option<Arc<Span>>,
}

impl HttpGate {
    pub(crate) fn new(plugin: Arc<str>, access: Arc<HttpAccess>) -> HttpGate {
        HttpGate {
            plugin,
            access,
            denied: Vec::new(),
            pass_span: None,
        }
    }

    /// The destinations denied since the last call, each once.
    pub(crate) fn take_denials(&mut self) -> Vec<String> {
        std::mem::take(&mut self.denied)
    }

    fn deny(&mut self, destination: String) {
        tracing::warn!(
            plugin = &*self.plugin,
            destination,
            "outbound request denied: not granted by the plugin's policy"
        );
        if self.denied.len() < MAX_DENIALS_PER_PASS && !self.denied.contains(&destination) {
            self.denied.push(destination);
        }
    }
}

/// What [`WasiHttpHooks::send_request`] returns: the response, and the
/// connection's own future that drives it.
type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_done: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let destination = match Destination::of(request.uri()) {
            Ok(destination) => destination,
            Err(Undestined::NotHttp) => {
                self.deny(request.uri().to_string());
                return Box::new(async { Err(Error::HttpRequestDenied) });
            }
            // The user information may be a password: it is never shown.
            Err(Undestined::UserInfo(destination)) => {
                self.deny(format!(
                    "{destination} (with user information in the URL, which is refused)"
                ));
                return Box::new(async { Err(Error::HttpRequestDenied) });
            }
        };
        if !self.access.allows(&destination) {
            self.deny(destination.to_string());
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        match destination.pin(request.uri()) {
            Ok(uri) => *request.uri_mut() = uri,
            Err(error) => return Box::new(async { Err(error) }),
        }
        let span = self
            .pass_span
            .as_ref()
            .map(|pass| request_span(pass, request.method(), &destination, request.uri()));
        carry_trace(request.headers_mut(), span.as_ref());
        let options = self.access.options(options);
        let in_flight = self.access.in_flight.clone();
        let cap = self.access.limits.max_response_bytes;
        let wait_for_turn = self.access.limits.connect_timeout;
        Box::new(async move {
            let sent = async {
                let turn = tokio::time::timeout(wait_for_turn, in_flight.acquire_owned())
                    .await
                    .map_err(|_| Error::ConnectionLimitReached)?
                    .map_err(|_| Error::ConnectionLimitReached)?;
                let (response, io) =
                    wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
                let response = response.map(BodyExt::boxed_unsync);
                let (response, io) = prebuffer_small(response, io, cap).await?;
                let response = response.map(|body| CappedBody::new(body, cap, turn).boxed_unsync());
                Ok((response, io))
            }
            .await;
            if let Some(span) = span {
                end_request_span(&span, &sent);
            }
            sent
        })
    }
}

/// The span of one outbound request, under the pass's, named and described
/// as OpenTelemetry's HTTP conventions ask. The query is left out of the
/// URL: it may carry a token.
fn request_span(
    pass: &Span,
    method: &http::Method,
    destination: &Destination,
    uri: &http::Uri,
) -> Span {
    let span = pass.child(method.as_str().to_string(), SpanKind::Client);
    span.set("http.request.method", method.as_str().to_string());
    span.set("server.address", destination.host.clone());
    span.set("server.port", i64::from(destination.port));
    span.set("url.full", format!("{destination}{}", uri.path()));
    span
}

/// Sends the host's trace context with a request, in place of any the
/// plugin set: a plugin cannot make its requests join a trace of its
/// choosing. Without tracing, the request goes as the plugin made it.
fn carry_trace(headers: &mut http::HeaderMap, span: Option<&Span>) {
    let Some(span) = span else {
        return;
    };
    headers.remove("tracestate");
    let traceparent = span.context().traceparent();
    // A traceparent is ASCII hex and dashes: always a valid header value.
    if let Ok(value) = http::HeaderValue::from_str(&traceparent) {
        headers.insert("traceparent", value);
    }
}

/// Ends a request's span with its status code, or the error it ended with.
fn end_request_span<T>(span: &Span, sent: &Result<(http::Response<T>, IoFuture), Error>) {
    match sent {
        Ok((response, _)) => {
            let code = response.status().as_u16();
            span.set("http.response.status_code", i64::from(code));
            span.end(if code >= 400 {
                SpanStatus::Error(format!("HTTP {code}"))
            } else {
                SpanStatus::Unset
            });
        }
        Err(error) => span.end(SpanStatus::Error(format!("{error:?}"))),
    }
}

/// Bodies this small (by their content length) are read whole before the
/// response is handed to the guest.
const PREBUFFER_BYTES: u64 = 64 << 10;

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

/// The response, with a small body (a known length up to
/// [`PREBUFFER_BYTES`] and the cap) already read, while `io` drives the
/// connection: the guest's first read then finds it, instead of waiting for
/// the connection's task to be scheduled. Anything else is passed on as it
/// streams.
async fn prebuffer_small(
    response: http::Response<WasiBody>,
    io: impl Future<Output = Result<(), Error>> + Send + 'static,
    cap: u64,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    let small = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|length| length <= PREBUFFER_BYTES.min(cap));
    if !small {
        return Ok((response, Box::new(io)));
    }
    let (parts, body) = response.into_parts();
    let mut io = Box::pin(io);
    let mut collecting = std::pin::pin!(body.collect());
    let mut finished: Option<Result<(), Error>> = None;
    let collected = std::future::poll_fn(|cx| {
        if let Poll::Ready(collected) = collecting.as_mut().poll(cx) {
            return Poll::Ready(collected);
        }
        if finished.is_none()
            && let Poll::Ready(result) = io.as_mut().poll(cx)
        {
            finished = Some(result);
        }
        Poll::Pending
    })
    .await?;
    let body = http_body_util::Full::new(collected.to_bytes())
        .map_err(|never| match never {})
        .boxed_unsync();
    let io: IoFuture = match finished {
        Some(result) => Box::new(std::future::ready(result)),
        None => Box::new(io),
    };
    Ok((http::Response::from_parts(parts, body), io))
}

/// A response body that ends with `HTTP-response-body-size` once more than
/// `cap` bytes have come, after handing over exactly `cap`. It holds the
/// request's turn until it ends or is dropped.
struct CappedBody<B> {
    inner: B,
    left: u64,
    cap: u64,
    over: bool,
    turn: Option<OwnedSemaphorePermit>,
}

impl<B> CappedBody<B> {
    fn new(inner: B, cap: u64, turn: OwnedSemaphorePermit) -> Self {
        CappedBody {
            inner,
            left: cap,
            cap,
            over: false,
            turn: Some(turn),
        }
    }
}

impl<B> Body for CappedBody<B>
where
    B: Body<Data = Bytes, Error = Error> + Unpin,
{
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.over {
            self.turn = None;
            return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(self.cap)))));
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(other) => {
                self.turn = None;
                return Poll::Ready(other);
            }
            Poll::Pending => return Poll::Pending,
        };
        let Some(data) = frame.data_ref() else {
            return Poll::Ready(Some(Ok(frame)));
        };
        let size = data.len() as u64;
        if size <= self.left {
            self.left -= size;
            return Poll::Ready(Some(Ok(frame)));
        }
        // The crossing frame is cut to what is left; the error comes next.
        let kept = data.slice(..self.left as usize);
        self.left = 0;
        self.over = true;
        Poll::Ready(Some(Ok(Frame::data(kept))))
    }

    fn is_end_stream(&self) -> bool {
        !self.over && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destination(url: &str) -> Destination {
        Destination::of(&url.parse().unwrap()).unwrap()
    }

    #[test]
    fn user_information_is_refused_and_the_dialled_authority_is_the_checked_one() {
        for url in ["http://evil@127.0.0.1:8080/", "http://a:b@example.com/x"] {
            let refused = Destination::of(&url.parse().unwrap()).unwrap_err();
            assert!(matches!(refused, Undestined::UserInfo(_)), "{url}");
        }
        let checked = destination("http://Example.COM/a?b=1");
        let pinned = checked.pin(&"http://Example.COM/a?b=1".parse().unwrap());
        assert_eq!(pinned.unwrap().to_string(), "http://example.com:80/a?b=1");
    }

    /// Asserts that `pattern` lets through each URL in `allowed` and none in
    /// `refused`.
    fn assert_allows(pattern: &str, allowed: &[&str], refused: &[&str]) {
        let pattern: HostPattern = pattern.parse().unwrap();
        for url in allowed {
            assert!(
                pattern.allows(&destination(url)),
                "{pattern:?} refused {url}"
            );
        }
        for url in refused {
            assert!(
                !pattern.allows(&destination(url)),
                "{pattern:?} allowed {url}"
            );
        }
    }

    #[test]
    fn exact_hosts_allow_their_default_port_unless_a_port_is_named() {
        assert_allows(
            "api.example.com",
            &["https://api.example.com/x", "http://API.example.com/"],
            &["https://api.example.com:8443/", "https://example.com/"],
        );
        assert_allows(
            "127.0.0.1:8080",
            &["http://127.0.0.1:8080/health"],
            &["http://127.0.0.1:8081/health", "http://127.0.0.1/health"],
        );
        assert_allows("localhost:*", &["http://localhost:9999/"], &[]);
        assert_allows("[::1]:8080", &["http://[::1]:8080/"], &[]);
    }

    #[test]
    fn wildcards_cover_names_under_a_domain_but_not_the_domain() {
        assert_allows(
            "*.example.com",
            &["https://a.example.com/", "https://a.b.example.com/"],
            &[
                "https://example.com/",
                "https://badexample.com/",
                "https://a.example.com.evil.net/",
            ],
        );
    }

    #[test]
    fn a_scheme_prefix_allows_only_that_scheme() {
        assert_allows(
            "https://api.example.com",
            &["https://api.example.com/"],
            &["http://api.example.com:443/"],
        );
        assert_allows(
            "http://api.example.com:*",
            &[],
            &["https://api.example.com/"],
        );
    }

    #[test]
    fn malformed_patterns_are_refused_with_the_reason() {
        for bad in [
            "",
            "*",
            "a.*.com",
            "example.com/path",
            "user@example.com",
            "ftp://example.com",
            "example.com:0",
            "example.com:http",
            "[::1",
            "exa mple.com",
        ] {
            let error = bad.parse::<HostPattern>().unwrap_err();
            assert!(error.contains("not a host to allow"), "{bad}: {error}");
        }
    }

    #[test]
    fn patterns_print_as_written() {
        for text in [
            "https://*.example.com:8443",
            "127.0.0.1:*",
            "api.example.com",
        ] {
            assert_eq!(text.parse::<HostPattern>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn a_traced_request_carries_the_hosts_context_in_place_of_the_plugins() {
        use crate::trace::{Sampler, SpanSink, TraceContext, Tracer};
        struct Nowhere;
        impl SpanSink for Nowhere {
            fn offer(&self, _: crate::trace::FinishedSpan) {}
        }
        let forged = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", forged.parse().unwrap());
        headers.insert("tracestate", "vendor=forged".parse().unwrap());
        carry_trace(&mut headers, None);
        assert_eq!(
            headers["traceparent"], forged,
            "untraced: left as the plugin made it"
        );

        let tracer = Tracer::new(std::sync::Arc::new(Nowhere), Sampler::default());
        let pass = tracer.open("reconcile", SpanKind::Internal, None);
        let request = pass.child("GET", SpanKind::Client);
        carry_trace(&mut headers, Some(&request));
        let sent = TraceContext::parse(headers["traceparent"].to_str().unwrap()).unwrap();
        assert_eq!(sent, request.context());
        assert_eq!(sent.trace_id, pass.context().trace_id);
        assert!(!headers.contains_key("tracestate"));
    }

    #[test]
    fn a_guest_may_tighten_timeouts_but_never_loosen_them() {
        let access = HttpAccess::new(Vec::new(), HttpLimits::default());
        let options = access.options(Some(RequestOptions {
            connect_timeout: Some(Duration::from_secs(60)),
            first_byte_timeout: Some(Duration::from_millis(50)),
            between_bytes_timeout: None,
        }));
        assert_eq!(options.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(options.first_byte_timeout, Some(Duration::from_millis(50)));
        assert_eq!(options.between_bytes_timeout, Some(Duration::from_secs(10)));
    }

    #[tokio::test]
    async fn a_body_past_the_cap_hands_over_the_cap_then_fails() {
        let chunks: Vec<Result<Frame<Bytes>, Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"hello "))),
            Ok(Frame::data(Bytes::from_static(b"world"))),
        ];
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
        let turns = Arc::new(Semaphore::new(1));
        let turn = turns.clone().acquire_owned().await.unwrap();
        let mut body = CappedBody::new(inner, 8, turn);
        let mut read = Vec::new();
        let error = loop {
            match body.frame().await {
                Some(Ok(frame)) => read.extend_from_slice(frame.data_ref().unwrap()),
                Some(Err(error)) => break error,
                None => panic!("the body ended without the cap's error"),
            }
        };
        assert_eq!(read, b"hello wo");
        assert!(matches!(error, Error::HttpResponseBodySize(Some(8))));
        assert_eq!(turns.available_permits(), 1, "the turn is given back");
    }
}
