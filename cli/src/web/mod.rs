//! `beehive run --web-addr`: a read-only console in the browser, served by
//! the host process itself: server-rendered pages, no script, no build
//! step, nothing fetched from elsewhere. One small script of the host's
//! own refreshes an open page when the store changes (see [`live`]).
//!
//! The adversaries: what the pages show was written by plugins and
//! manifests (escaped, see [`html`]; no script runs, the
//! Content-Security-Policy admits only the host's own script); whoever can reach the port (on
//! loopback unless the operator binds elsewhere, and then only with the
//! operator's token); a client that opens connections and never reads
//! (at most [`MAX_CONNECTIONS`] at once, each ended after
//! [`CONNECTION_LIFETIME`]). The console has no write path: it asks only
//! the socket's read requests.

mod graph;
mod html;
mod live;
mod pages;
mod rates;
mod timeline;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::handlers::Context;

/// The most connections served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection is served, however busy it keeps.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// The most bytes of a token file.
const MAX_TOKEN_BYTES: u64 = 4096;
/// The cookie a browser keeps the token in once given it in the URL.
const TOKEN_COOKIE: &str = "beehive_console";

/// What an answer carries: a page at once, or the live stream.
type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Where the console listens: `PORT` alone means 127.0.0.1.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse::<SocketAddr>()
        .map_err(|e| format!("{text:?}: {e} (write PORT, or HOST:PORT such as 127.0.0.1:8080)"))
}

/// The token a console off loopback requires, read from `file`.
pub struct Token(String);

impl Token {
    /// Reads the token from `file`: its first line, at least 16 characters.
    pub fn read(file: &Path) -> Result<Token, String> {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_TOKEN_BYTES).read_to_string(&mut text))
            .map_err(|e| format!("--web-token-file {}: {e}", file.display()))?;
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic() && b != b';') {
            return Err(format!(
                "--web-token-file {}: the token must be one line of at least 16 printable characters (e.g. `openssl rand -hex 16 > {}`)",
                file.display(),
                file.display()
            ));
        }
        Ok(Token(token))
    }

    /// Whether `given` is the token, compared in time that does not
    /// depend on where they differ.
    fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Why `addr`, off loopback, needs a token, and what to do.
pub fn needs_token(addr: SocketAddr) -> String {
    format!(
        "--web-addr {addr} is reachable from other machines, and the console shows every object: \
         give --web-token-file FILE (the token a browser must present), or bind a loopback address such as 127.0.0.1:{}",
        addr.port()
    )
}

/// Binds `addr`. Done before the store is opened, so a taken port fails
/// `run` before it creates anything.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--web-addr {addr}: {e}"))
}

/// Serves the console on `listener` until the returned task is aborted;
/// the connections it serves end with it.
pub fn serve(
    listener: Arc<TcpListener>,
    ctx: Context,
    token: Option<Arc<Token>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let rates = Arc::new(rates::Rates::default());
        rates.read(&ctx).await;
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        // Owned here: aborting this task drops the set, which aborts every
        // connection it serves.
        let mut connections = JoinSet::new();
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!("console: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // Reaps the connections that ended, so the set holds only live ones.
            while connections.try_join_next().is_some() {}
            let (ctx, token, rates) = (ctx.clone(), token.clone(), rates.clone());
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let (ctx, token, rates) = (ctx.clone(), token.clone(), rates.clone());
                    async move {
                        Ok::<_, Infallible>(answer(request, &ctx, &rates, token.as_deref()).await)
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service);
                let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
                drop(slot);
            });
        }
    })
}

async fn answer(
    request: Request<Incoming>,
    ctx: &Context,
    rates: &rates::Rates,
    token: Option<&Token>,
) -> Response<Body> {
    if request.method() != hyper::Method::GET {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "the console only reads: GET\n",
        );
    }
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    if let Some(token) = token {
        match admitted(&request, &query, token) {
            Admission::Admitted => {}
            Admission::GivenInUrl => return keep_token(&path, token),
            Admission::Refused => {
                return plain(
                    StatusCode::UNAUTHORIZED,
                    "this console needs its token: open it once as /?token=TOKEN, or send `Authorization: Bearer TOKEN`\n",
                );
            }
        }
    }
    match path.as_str() {
        "/console.css" => {
            return respond(
                StatusCode::OK,
                "text/css; charset=utf-8",
                html::STYLE.to_string(),
            );
        }
        "/console.js" => {
            return respond(
                StatusCode::OK,
                "text/javascript; charset=utf-8",
                live::SCRIPT.to_string(),
            );
        }
        "/live" => {
            return with_headers(
                StatusCode::OK,
                "text/event-stream",
                live::stream(&ctx.store),
            );
        }
        _ => {}
    }
    let page = route(ctx, rates, &path, &query).await;
    match page {
        Ok(page) => respond(StatusCode::OK, "text/html; charset=utf-8", page),
        Err((status, why)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = html::page(
                status.canonical_reason().unwrap_or("Error"),
                &format!("<p>{}</p>", html::text(&why)),
            );
            respond(status, "text/html; charset=utf-8", body)
        }
    }
}

async fn route(ctx: &Context, rates: &rates::Rates, path: &str, query: &str) -> pages::Answer {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let decoded = |segment: &str| {
        html::decode_segment(segment)
            .ok_or((400, format!("{segment:?} is not a valid path segment")))
    };
    match segments.as_slice() {
        [""] => pages::first_screen(ctx, &rates.read(ctx).await).await,
        ["plugins"] => pages::plugins_page(ctx).await,
        ["kinds", kind] => {
            let selector = query_value(query, "l")
                .map(|l| html::decode_segment(&l.replace('+', " ")).unwrap_or(l));
            let failing = query.split('&').any(|pair| pair == "failing");
            let after = match query_value(query, "after") {
                Some(after) => Some(
                    after
                        .parse::<i64>()
                        .map_err(|_| (400, format!("after={after:?} is not an object id")))?,
                ),
                None => None,
            };
            pages::kind_page(ctx, &decoded(kind)?, selector, failing, after).await
        }
        ["objects", kind, name] => pages::object_page(ctx, &decoded(kind)?, &decoded(name)?).await,
        _ => Err((
            404,
            format!(
                "no page at {path}: the console has /, /plugins, /kinds/KIND and /objects/KIND/NAME"
            ),
        )),
    }
}

fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

enum Admission {
    Admitted,
    /// The right token, in the URL: kept in a cookie, then the URL without it.
    GivenInUrl,
    Refused,
}

fn admitted(request: &Request<Incoming>, query: &str, token: &Token) -> Admission {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v: &hyper::header::HeaderValue| v.to_str().ok())
    };
    if header(hyper::header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| token.matches(given))
    {
        return Admission::Admitted;
    }
    let from_cookie = header(hyper::header::COOKIE).is_some_and(|cookies| {
        cookies.split(';').any(|cookie| {
            cookie
                .trim()
                .strip_prefix(TOKEN_COOKIE)
                .and_then(|rest| rest.strip_prefix('='))
                .is_some_and(|given| token.matches(given))
        })
    });
    if from_cookie {
        return Admission::Admitted;
    }
    match query_value(query, "token") {
        Some(given) if token.matches(&given) => Admission::GivenInUrl,
        _ => Admission::Refused,
    }
}

/// Keeps a token given in the URL in a cookie only this site's requests
/// carry, and sends the browser to the same page without it (so it is not
/// left in the address bar or the history).
fn keep_token(path: &str, token: &Token) -> Response<Body> {
    let location = if path.starts_with('/') && !path.starts_with("//") {
        path
    } else {
        "/"
    };
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(hyper::header::LOCATION, location)
        .header(
            hyper::header::SET_COOKIE,
            format!(
                "{TOKEN_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
                token.0
            ),
        )
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(whole(String::new()))
        .unwrap_or_else(|_| Response::new(whole(String::new())))
}

fn whole(text: String) -> Body {
    Full::new(Bytes::from(text)).boxed()
}

fn plain(status: StatusCode, body: &str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

/// A response with the headers every answer carries: no script from
/// anywhere, nothing fetched from elsewhere, not framed, not sniffed, not
/// cached.
fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    with_headers(status, content_type, whole(body))
}

/// `body` with the headers every answer carries.
fn with_headers(status: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .header(
            "content-security-policy",
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; \
             base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        )
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(body)
        .unwrap_or_else(|_| Response::new(whole(String::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback() {
        assert_eq!(
            parse_addr("8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_addr("0.0.0.0:9").unwrap(),
            "0.0.0.0:9".parse().unwrap()
        );
        assert!(parse_addr("nowhere").unwrap_err().contains("HOST:PORT"));
    }

    #[test]
    fn tokens_match_exactly() {
        let token = Token("0123456789abcdef".to_string());
        assert!(token.matches("0123456789abcdef"));
        assert!(!token.matches("0123456789abcdeF"));
        assert!(!token.matches("0123456789abcde"));
    }
}
