//! A small HTTP/1.1 server on 127.0.0.1 for tests and benchmarks: each path
//! answers as the test says, one thread per connection, `Connection: close`
//! (or kept alive, as a collector keeps its clients' connections, when
//! started with [`TestServer::start_keeping_alive`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How one path answers.
#[derive(Clone, Debug)]
struct Route {
    status: u16,
    body: Arc<Vec<u8>>,
    delay: Duration,
    /// The pause between one body byte and the next: a slow server.
    trickle: Duration,
    /// Whether the head gives the body's length; without it the body ends
    /// when the connection closes.
    sized: bool,
    /// A `location` header: where a redirect points.
    location: Option<String>,
}

#[derive(Default)]
struct Routes {
    by_path: HashMap<String, Route>,
    hits: HashMap<String, usize>,
    /// The headers of each path's latest request, names in lower case.
    last_headers: HashMap<String, Vec<(String, String)>>,
    /// Each path's request bodies, oldest first (the newest
    /// [`KEPT_BODIES`]).
    bodies: HashMap<String, Vec<Vec<u8>>>,
}

/// How many request bodies a path keeps.
const KEPT_BODIES: usize = 1000;

/// A running test server; it stops when dropped.
pub struct TestServer {
    address: SocketAddr,
    routes: Arc<Mutex<Routes>>,
    stopping: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
}

impl TestServer {
    /// Starts a server on a free port of 127.0.0.1. Unknown paths get 404.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start() -> TestServer {
        TestServer::listen(false)
    }

    /// As [`TestServer::start`], but a connection serves request after
    /// request until its client closes it (a sized, untrickled answer
    /// keeps it open).
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start_keeping_alive() -> TestServer {
        TestServer::listen(true)
    }

    fn listen(keep_alive: bool) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("a bound address");
        let routes = Arc::new(Mutex::new(Routes::default()));
        let stopping = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let (serving, stop, accepted) = (routes.clone(), stopping.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                let routes = serving.clone();
                std::thread::spawn(move || serve(stream, &routes, keep_alive));
            }
        });
        TestServer {
            address,
            routes,
            stopping,
            connections,
        }
    }

    /// A server whose `/health` answers 200 `ok`.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn healthy() -> TestServer {
        let server = TestServer::start();
        server.route("/health", 200, "ok");
        server
    }

    /// `host:port`, as a policy grants it.
    pub fn authority(&self) -> String {
        self.address.to_string()
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// The URL of `path` on this server by the name `localhost`: the same
    /// server, but another destination than the `127.0.0.1` authority a
    /// policy grants.
    pub fn localhost_url(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.address.port())
    }

    /// Makes `path` answer `status` with `body`.
    pub fn route(&self, path: &str, status: u16, body: impl Into<Vec<u8>>) {
        self.route_after(path, Duration::ZERO, status, body);
    }

    /// Makes `path` answer `status` with `body`, after waiting `delay`
    /// before the first byte.
    pub fn route_after(&self, path: &str, delay: Duration, status: u16, body: impl Into<Vec<u8>>) {
        let route = Route {
            status,
            body: Arc::new(body.into()),
            delay,
            trickle: Duration::ZERO,
            sized: true,
            location: None,
        };
        lock(&self.routes).by_path.insert(path.to_string(), route);
    }

    /// Makes `path` answer `307 Temporary Redirect` to `location`.
    pub fn route_redirect(&self, path: &str, location: &str) {
        self.route(path, 307, "");
        if let Some(route) = lock(&self.routes).by_path.get_mut(path) {
            route.location = Some(location.to_string());
        }
    }

    /// Makes `path` answer 200 with `body`, sent one byte at a time with
    /// `gap` between bytes: a server that is slow for the whole body, not
    /// only for its first byte.
    pub fn route_trickled(&self, path: &str, gap: Duration, body: impl Into<Vec<u8>>) {
        let route = Route {
            status: 200,
            body: Arc::new(body.into()),
            delay: Duration::ZERO,
            trickle: gap,
            sized: true,
            location: None,
        };
        lock(&self.routes).by_path.insert(path.to_string(), route);
    }

    /// As [`TestServer::route_trickled`], with no `content-length`: the
    /// body ends when the server closes the connection, so a client
    /// streams it rather than reading it whole.
    pub fn route_trickled_unsized(&self, path: &str, gap: Duration, body: impl Into<Vec<u8>>) {
        self.route_trickled(path, gap, body);
        if let Some(route) = lock(&self.routes).by_path.get_mut(path) {
            route.sized = false;
        }
    }

    /// The value of header `name` in `path`'s latest request.
    pub fn last_header(&self, path: &str, name: &str) -> Option<String> {
        let routes = lock(&self.routes);
        let headers = routes.last_headers.get(path)?;
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }

    /// The bodies of the requests `path` has had, oldest first.
    pub fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        lock(&self.routes)
            .bodies
            .get(path)
            .cloned()
            .unwrap_or_default()
    }

    /// How many connections clients have opened.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// How many requests `path` has had.
    pub fn hits(&self, path: &str) -> usize {
        lock(&self.routes).hits.get(path).copied().unwrap_or(0)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

fn lock(routes: &Mutex<Routes>) -> std::sync::MutexGuard<'_, Routes> {
    routes.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve(stream: TcpStream, routes: &Mutex<Routes>, keep_alive: bool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    while let Some(request) = read_request(&mut reader) {
        if !answer(&stream, routes, request, keep_alive) {
            return;
        }
    }
}

/// Answers one request; returns whether the connection stays open.
fn answer(stream: &TcpStream, routes: &Mutex<Routes>, request: Request, keep_alive: bool) -> bool {
    let (path, headers, body) = request;
    let route = {
        let mut routes = lock(routes);
        *routes.hits.entry(path.clone()).or_default() += 1;
        routes.last_headers.insert(path.clone(), headers);
        let bodies = routes.bodies.entry(path.clone()).or_default();
        if bodies.len() == KEPT_BODIES {
            bodies.remove(0);
        }
        bodies.push(body);
        routes.by_path.get(&path).cloned()
    };
    let route = route.unwrap_or(Route {
        status: 404,
        body: Arc::new(b"not found".to_vec()),
        delay: Duration::ZERO,
        trickle: Duration::ZERO,
        sized: true,
        location: None,
    });
    std::thread::sleep(route.delay);
    let length = match route.sized {
        true => format!("content-length: {}\r\n", route.body.len()),
        false => String::new(),
    };
    let stays_open = keep_alive && route.sized && route.trickle.is_zero();
    let connection = if stays_open { "keep-alive" } else { "close" };
    let location = match &route.location {
        Some(location) => format!("location: {location}\r\n"),
        None => String::new(),
    };
    let head = format!(
        "HTTP/1.1 {} X\r\n{length}{location}connection: {connection}\r\n\r\n",
        route.status
    );
    let mut writer = stream;
    if writer.write_all(head.as_bytes()).is_err() {
        return false;
    }
    if route.trickle.is_zero() {
        let written = writer.write_all(&route.body).and_then(|()| writer.flush());
        return stays_open && written.is_ok();
    }
    for byte in route.body.iter() {
        if writer
            .write_all(&[*byte])
            .and_then(|()| writer.flush())
            .is_err()
        {
            return false;
        }
        std::thread::sleep(route.trickle);
    }
    false
}

/// A request's path, headers and body.
type Request = (String, Vec<(String, String)>, Vec<u8>);

/// Reads a request: its path, headers and body.
fn read_request(reader: &mut BufReader<&TcpStream>) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut length = 0usize;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let (name, value) = (name.to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        headers.push((name, value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, headers, body))
}
