//! A cut network between one process and PostgreSQL, for chaos tests: a
//! proxy on a Unix socket of its own forwards every connection to a
//! [`TestPostgres`], and tells the connections apart by the process that
//! opened them (the `application_name` a store's connection announces,
//! `beehive HOST:PID`). Cutting a process holds its bytes, both ways, on
//! the connections it has and on any it opens, without closing anything:
//! what a pulled cable looks like to both ends. Mending it delivers them.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::TestPostgres;

/// How much of a connection's first bytes is searched for its process.
const STARTUP_BYTES: usize = 4096;

/// A proxy in front of a test server; stops when dropped.
pub struct PostgresProxy {
    _dir: tempfile::TempDir,
    url: String,
    cut: Arc<Mutex<HashSet<u32>>>,
    stopped: Arc<AtomicBool>,
}

impl PostgresProxy {
    /// Starts a proxy to `server`.
    ///
    /// # Panics
    /// When its socket cannot be made.
    pub fn start(server: &TestPostgres) -> PostgresProxy {
        let dir = tempfile::Builder::new()
            .prefix("beehive-cut-")
            .tempdir()
            .expect("a temporary directory");
        let port = server.port();
        let listener = UnixListener::bind(dir.path().join(format!(".s.PGSQL.{port}")))
            .expect("the proxy's socket");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let upstream = server.socket_path();
        let (cut, stopped) = (Arc::default(), Arc::new(AtomicBool::new(false)));
        let proxy = PostgresProxy {
            url: format!(
                "postgres://beehive@localhost/postgres?host={}&port={port}",
                dir.path().display()
            ),
            _dir: dir,
            cut: Arc::clone(&cut),
            stopped: Arc::clone(&stopped),
        };
        std::thread::spawn(move || accept(listener, upstream, cut, stopped));
        proxy
    }

    /// The connection string that goes through the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Cuts process `pid` off from the server.
    pub fn cut(&self, pid: u32) {
        self.cut.lock().unwrap().insert(pid);
    }

    /// Reconnects process `pid`: the bytes held are delivered.
    pub fn mend(&self, pid: u32) {
        self.cut.lock().unwrap().remove(&pid);
    }
}

impl Drop for PostgresProxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

fn accept(
    listener: UnixListener,
    upstream: std::path::PathBuf,
    cut: Arc<Mutex<HashSet<u32>>>,
    stopped: Arc<AtomicBool>,
) {
    while !stopped.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let Ok(server) = UnixStream::connect(&upstream) else {
                    continue;
                };
                let link = Arc::new(Link {
                    owner: Mutex::new(None),
                    cut: Arc::clone(&cut),
                    stopped: Arc::clone(&stopped),
                });
                let (client_in, server_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let outbound = Arc::clone(&link);
                std::thread::spawn(move || outbound.carry(client_in, server_out, true));
                std::thread::spawn(move || link.carry(server, client, false));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
}

/// One proxied connection.
struct Link {
    /// The process that opened it, once its startup message said.
    owner: Mutex<Option<u32>>,
    cut: Arc<Mutex<HashSet<u32>>>,
    stopped: Arc<AtomicBool>,
}

impl Link {
    /// Copies `from` to `to` until either closes; `outbound` is the
    /// client's side, whose first bytes name its process.
    fn carry(&self, mut from: UnixStream, mut to: UnixStream, outbound: bool) {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let read = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if outbound && seen.len() < STARTUP_BYTES {
                seen.extend_from_slice(&buffer[..read]);
                if let Some(pid) = process_named_in(&seen) {
                    *self.owner.lock().unwrap() = Some(pid);
                }
            }
            while self.is_cut() {
                if self.stopped.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if to.write_all(&buffer[..read]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    }

    fn is_cut(&self) -> bool {
        let owner = *self.owner.lock().unwrap();
        owner.is_some_and(|pid| self.cut.lock().unwrap().contains(&pid))
    }
}

/// The pid in `application_name\0beehive HOST:PID\0`, if `bytes` hold it.
fn process_named_in(bytes: &[u8]) -> Option<u32> {
    let key = b"application_name\0";
    let start = bytes.windows(key.len()).position(|w| w == key)? + key.len();
    let value = &bytes[start..];
    let end = value.iter().position(|&b| b == 0)?;
    let value = std::str::from_utf8(&value[..end]).ok()?;
    value.rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::process_named_in;

    #[test]
    fn a_startup_message_names_its_process() {
        let startup = b"\0\0\0\x30\0\x03\0\0user\0beehive\0application_name\0beehive box:4242\0\0";
        assert_eq!(process_named_in(startup), Some(4242));
        assert_eq!(process_named_in(b"user\0beehive\0"), None);
    }
}
