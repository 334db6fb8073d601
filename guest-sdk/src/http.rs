//! Outbound HTTP from a plugin: a small blocking client over `wasi:http`.
//!
//! ```no_run
//! # fn probe() -> Result<(), beehive_guest::http::HttpError> {
//! use std::time::Duration;
//! use beehive_guest::http::{self, Request};
//!
//! let health = http::get("http://127.0.0.1:8080/health")?;
//! if health.is_success() { /* … */ }
//!
//! let created = Request::post("https://api.example.com/v1/things")
//!     .header("authorization", format!("Bearer {}", beehive_guest::config::get("token").unwrap_or_default()))
//!     .json(&serde_json::json!({ "name": "web" }))
//!     .timeout(Duration::from_secs(2))
//!     .send()?;
//! # Ok(()) }
//! ```
//!
//! The host sends a request only to a destination the operator's policy
//! grants (`[http] allow = [...]` in the plugin's `NAME.toml`); anything
//! else fails with [`HttpError::Denied`] and the pass's object gets a
//! Warning event naming the destination. The operator's timeouts and
//! response size cap always apply; [`Request::timeout`] can only shorten
//! them.
//!
//! On the host target (unit tests) requests go to the stubs set with
//! [`crate::fake::stub_http`]; a request nothing stubs is denied, as one
//! the policy does not grant.

use std::time::Duration;

/// Why a request got no response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// The operator's policy does not grant the destination.
    Denied,
    /// Connecting, or waiting for the response, took longer than allowed.
    Timeout(String),
    /// The response body was larger than the operator's cap (in bytes).
    TooLarge(Option<u64>),
    /// The URL is not an absolute `http://` or `https://` URL.
    InvalidUrl(String),
    /// The request could not be made or its response read: refused
    /// connection, DNS, TLS, a malformed request.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Denied => write!(f, "the plugin's policy does not grant this destination"),
            HttpError::Timeout(what) => write!(f, "timed out: {what}"),
            HttpError::TooLarge(Some(cap)) => {
                write!(f, "the response is larger than the {cap}-byte cap")
            }
            HttpError::TooLarge(None) => write!(f, "the response is larger than the cap"),
            HttpError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            HttpError::Failed(why) => write!(f, "request failed: {why}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// A request to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
}

impl Request {
    /// A request with `method` (e.g. `"GET"`) to `url`.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Request {
        Request {
            method: method.into().to_ascii_uppercase(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
        }
    }

    /// A GET of `url`.
    pub fn get(url: impl Into<String>) -> Request {
        Request::new("GET", url)
    }

    /// A POST to `url`.
    pub fn post(url: impl Into<String>) -> Request {
        Request::new("POST", url)
    }

    /// A PUT to `url`.
    pub fn put(url: impl Into<String>) -> Request {
        Request::new("PUT", url)
    }

    /// A DELETE of `url`.
    pub fn delete(url: impl Into<String>) -> Request {
        Request::new("DELETE", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, with its content type.
    pub fn json<T: serde::Serialize>(self, value: &T) -> Request {
        // Serializing a `Serialize` value to a Vec fails only for maps with
        // non-string keys; such a body goes out empty, and the server says so.
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json").body(body)
    }

    /// Shortens the connect and first-byte timeouts to `timeout` (the
    /// operator's are the longest that apply).
    pub fn timeout(mut self, timeout: Duration) -> Request {
        self.timeout = Some(timeout);
        self
    }

    /// The method, upper case.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The body.
    pub fn body_bytes(&self) -> &[u8] {
        &self.body
    }

    /// Sends the request and reads the whole response.
    ///
    /// # Errors
    /// An [`HttpError`] saying why no response came.
    pub fn send(self) -> Result<Response, HttpError> {
        #[cfg(target_arch = "wasm32")]
        return wasi::send(self);
        #[cfg(not(target_arch = "wasm32"))]
        return crate::fake::send_http(self);
    }
}

/// GETs `url`.
///
/// # Errors
/// An [`HttpError`] saying why no response came.
pub fn get(url: impl Into<String>) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// A response, read whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with `status` and `body`, for stubs.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body decoded from JSON.
    ///
    /// # Errors
    /// The decoder's error when the body is not a `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }
}

/// The parts of an absolute URL `wasi:http` wants: https or not, the
/// authority, and the path with its query.
pub(crate) fn split_url(url: &str) -> Result<(bool, &str, &str), HttpError> {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(HttpError::InvalidUrl(format!(
            "{url:?} does not start with http:// or https://"
        )));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return Err(HttpError::InvalidUrl(format!(
            "{url:?} needs a host (and no user info)"
        )));
    }
    let path = path.split('#').next().unwrap_or_default();
    Ok((https, authority, if path.is_empty() { "/" } else { path }))
}

#[cfg(target_arch = "wasm32")]
mod wasi {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions,
        Scheme,
    };
    use wasip2::io::streams::StreamError;

    use super::{HttpError, Request, Response, split_url};

    /// How much of the body one read asks for.
    const READ_CHUNK: u64 = 64 * 1024;
    /// The most one blocking write may carry.
    const WRITE_CHUNK: usize = 4096;

    pub(super) fn send(request: Request) -> Result<Response, HttpError> {
        let (https, authority, path) = split_url(&request.url)?;
        let entries: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect();
        let headers = Fields::from_list(&entries)
            .map_err(|e| HttpError::Failed(format!("a header is not allowed: {e:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let invalid = |what: &str| HttpError::InvalidUrl(format!("{:?}: {what}", request.url));
        outgoing
            .set_method(&method(&request.method))
            .map_err(|()| HttpError::Failed(format!("invalid method {}", request.method)))?;
        outgoing
            .set_scheme(Some(&if https { Scheme::Https } else { Scheme::Http }))
            .map_err(|()| invalid("bad scheme"))?;
        outgoing
            .set_authority(Some(authority))
            .map_err(|()| invalid("bad host"))?;
        outgoing
            .set_path_with_query(Some(path))
            .map_err(|()| invalid("bad path"))?;
        // A request without a body takes none: the host then sends it
        // without chunked framing and without waiting for a body's end.
        let body = if request.body.is_empty() {
            None
        } else {
            Some(
                outgoing
                    .body()
                    .map_err(|()| HttpError::Failed("the request body was taken".into()))?,
            )
        };
        let pending = outgoing_handler::handle(outgoing, options(&request)).map_err(error)?;
        if let Some(body) = body {
            write_body(&body, &request.body)?;
            OutgoingBody::finish(body, None).map_err(error)?;
        }
        pending.subscribe().block();
        let incoming = match pending.get() {
            Some(Ok(result)) => result.map_err(error)?,
            _ => return Err(HttpError::Failed("the response was lost".into())),
        };
        let status = incoming.status();
        let headers = incoming
            .headers()
            .entries()
            .into_iter()
            .map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let body = incoming
            .consume()
            .map_err(|()| HttpError::Failed("the response body was taken".into()))?;
        let bytes = read_body(&body)?;
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }

    fn method(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        }
    }

    fn options(request: &Request) -> Option<RequestOptions> {
        let timeout = request.timeout?;
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let options = RequestOptions::new();
        // The host never loosens its own timeouts; a setting it refuses
        // leaves the operator's.
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        let _ = options.set_between_bytes_timeout(Some(nanos));
        Some(options)
    }

    fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
        let stream = body
            .write()
            .map_err(|()| HttpError::Failed("the request body stream was taken".into()))?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(stream_error)?;
        }
        Ok(())
    }

    fn read_body(body: &IncomingBody) -> Result<Vec<u8>, HttpError> {
        let stream = body
            .stream()
            .map_err(|()| HttpError::Failed("the response body stream was taken".into()))?;
        let mut bytes = Vec::new();
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => return Ok(bytes),
                Err(other) => return Err(stream_error(other)),
            }
        }
    }

    fn stream_error(error: StreamError) -> HttpError {
        match error {
            StreamError::Closed => HttpError::Failed("the connection closed early".into()),
            StreamError::LastOperationFailed(io) => {
                match wasip2::http::types::http_error_code(&io) {
                    Some(code) => self::error(code),
                    None => body_error(io.to_debug_string()),
                }
            }
        }
    }

    /// A response body's error from its text: wasmtime 48 does not give
    /// body errors their `error-code` (`http-error-code` answers none), so
    /// the host's cap and timeouts are recognised by what they say.
    fn body_error(text: String) -> HttpError {
        if text.contains("body size exceeds limit") {
            let cap = text
                .rsplit(": ")
                .next()
                .and_then(|tail| tail.trim_end_matches(" bytes").parse().ok());
            HttpError::TooLarge(cap)
        } else if text.contains("timeout") {
            HttpError::Timeout("reading the response".into())
        } else {
            HttpError::Failed(text)
        }
    }

    fn error(code: ErrorCode) -> HttpError {
        match code {
            ErrorCode::HttpRequestDenied => HttpError::Denied,
            ErrorCode::HttpResponseBodySize(cap) => HttpError::TooLarge(cap),
            ErrorCode::ConnectionTimeout => HttpError::Timeout("connecting".into()),
            ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => {
                HttpError::Timeout("waiting for the response".into())
            }
            ErrorCode::ConnectionLimitReached => {
                HttpError::Failed("too many requests in flight".into())
            }
            ErrorCode::HttpRequestUriInvalid => HttpError::InvalidUrl("refused by the host".into()),
            other => HttpError::Failed(format!("{other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:8080/health?x=1#top").unwrap(),
            (false, "127.0.0.1:8080", "/health?x=1")
        );
        assert_eq!(
            split_url("https://example.com").unwrap(),
            (true, "example.com", "/")
        );
        assert_eq!(
            split_url("https://example.com?q").unwrap(),
            (true, "example.com", "?q")
        );
        for bad in ["example.com", "ftp://x/", "http:///path", "http://u@host/"] {
            assert!(
                matches!(split_url(bad), Err(HttpError::InvalidUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn responses_read_as_text_json_and_headers() {
        let mut response = Response::new(200, br#"{"ok":true}"#.to_vec());
        response
            .headers
            .push(("content-type".into(), "application/json".into()));
        assert!(response.is_success());
        assert_eq!(response.header("Content-Type"), Some("application/json"));
        assert_eq!(response.json::<serde_json::Value>().unwrap()["ok"], true);
        assert_eq!(Response::new(503, "down").text(), "down");
    }
}
