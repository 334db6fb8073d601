//! Who holds the database: a running host, reached over its Unix socket, or
//! nobody, in which case a command takes the same lock the host takes and
//! opens the database itself. The lock decides; the socket only carries.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufReader, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::failure::Failure;
use crate::protocol::{Outcome, Request, read_line};

/// How long a command waits for a host that holds the lock to answer on its
/// socket (it may be starting) before saying it does not.
const HOST_PATIENCE: Duration = Duration::from_secs(3);

/// How long a command waits for a running host's answer unless
/// `--request-timeout` says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The files beside a database, and how long to wait for the host serving
/// it. A PostgreSQL store has no file to sit beside: its lock, socket and
/// plugin cache go in the temporary directory, named after its connection
/// string, so commands on this machine find the host that serves it.
#[derive(Clone, Debug)]
pub struct Paths {
    pub db: PathBuf,
    /// How the database is named in messages (never with a password).
    pub shown: String,
    pub lock: PathBuf,
    pub socket: PathBuf,
    /// How long a request waits for the host's answer (a watch: for its
    /// first one); `None` waits for ever.
    pub request_timeout: Option<Duration>,
    /// The stem the other files are named from.
    local: PathBuf,
}

impl Paths {
    pub fn new(db: &Path) -> Paths {
        let shown = beehive::store::shown_location(db);
        let local = if beehive::store::is_postgres_location(db) {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(db.as_os_str().as_encoded_bytes());
            let tag: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            std::env::temp_dir().join(format!("beehive-postgres-{tag}"))
        } else {
            db.to_path_buf()
        };
        let mut paths = Paths {
            db: db.to_path_buf(),
            shown,
            lock: PathBuf::new(),
            socket: PathBuf::new(),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            local,
        };
        paths.lock = paths.beside(".lock");
        paths.socket = paths.beside(".sock");
        paths
    }

    /// Opens the store. Its errors name the database once: the library's
    /// own messages already name the file or server when they are about it.
    pub fn open_store(&self) -> Result<beehive::Store, Failure> {
        beehive::Store::open(&self.db).map_err(|error| Failure::about(&self.shown, error))
    }

    /// Whether the database is a PostgreSQL store.
    pub fn is_postgres(&self) -> bool {
        beehive::store::is_postgres_location(&self.db)
    }

    /// A file named after the database with `suffix`.
    pub fn beside(&self, suffix: &str) -> PathBuf {
        let mut name = self.local.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }
}

/// The exclusive lock beside the database, held until dropped. It records
/// the holder's process id for other commands' messages.
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Takes the lock, or `None` when another process holds it. The file
    /// is made owner-only; a symlink, or a file another user owns (who could
    /// hold it forever), is refused.
    pub fn try_acquire(path: &Path) -> Result<Option<Lock>, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => format!(
                    "lock file {} is a symbolic link; refusing to follow it",
                    path.display()
                ),
                _ => format!("cannot open lock file {}: {e}", path.display()),
            })?;
        let owner = file
            .metadata()
            .map_err(|e| format!("cannot inspect lock file {}: {e}", path.display()))?
            .uid();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if owner != me {
            return Err(format!(
                "lock file {} belongs to another user (uid {owner}); remove it or use another --db",
                path.display()
            ));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
        // Only the holder writes, so readers see a whole pid or nothing.
        let pid = std::process::id().to_string();
        let recorded = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(pid.as_bytes()));
        if let Err(e) = recorded {
            tracing::debug!("cannot record the pid in {}: {e}", path.display());
        }
        Ok(Some(Lock { _file: file }))
    }
}

/// The process id recorded in a lock file, for messages.
pub fn holder(lock: &Path) -> String {
    let mut text = String::new();
    let read = File::open(lock).and_then(|mut f| f.read_to_string(&mut text));
    match read {
        Ok(_) if !text.trim().is_empty() => format!("pid {}", text.trim()),
        _ => "another process".into(),
    }
}

/// Whoever will run a command.
pub enum Endpoint {
    /// A running host, connected.
    Host(UnixStream),
    /// Nobody: this process holds the lock and may open the database. A
    /// PostgreSQL store needs no lock: its writers coordinate in the
    /// database.
    Direct(Option<Lock>),
}

/// Finds the host, or takes the lock when there is none. A socket left by a
/// killed host is removed. A host's connection gives up on an answer after
/// the paths' request timeout.
pub fn reach(paths: &Paths) -> Result<Endpoint, Failure> {
    let deadline = Instant::now() + HOST_PATIENCE;
    loop {
        if let Ok(stream) = UnixStream::connect(&paths.socket) {
            be_patient(&stream, paths.request_timeout)?;
            return Ok(Endpoint::Host(stream));
        }
        if paths.is_postgres() {
            return Ok(Endpoint::Direct(None));
        }
        if let Some(lock) = Lock::try_acquire(&paths.lock)? {
            remove_stale_socket(&paths.socket);
            return Ok(Endpoint::Direct(Some(lock)));
        }
        if Instant::now() >= deadline {
            return Err(Failure::unreachable(format!(
                "a host holds {} ({}) but its socket {} does not answer",
                paths.lock.display(),
                holder(&paths.lock),
                paths.socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Gives up on the host after `patience` (`None`: never) for each read
/// and write on `stream`.
pub fn be_patient(stream: &UnixStream, patience: Option<Duration>) -> Result<(), Failure> {
    stream
        .set_read_timeout(patience)
        .and_then(|()| stream.set_write_timeout(patience))
        .map_err(|e| Failure::from(format!("cannot set the request timeout: {e}")))
}

/// Removes a socket file nobody serves: only call while holding the lock.
pub fn remove_stale_socket(socket: &Path) {
    match std::fs::remove_file(socket) {
        Ok(()) => tracing::debug!("removed a stale socket {}", socket.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("cannot remove stale socket {}: {e}", socket.display()),
    }
}

/// Sends `request` to the host and waits for its reply.
pub fn ask(connection: UnixStream, request: &Request) -> Outcome {
    ask_unless(connection, request, &mut || None)
}

/// [`ask`], giving up early when `replaced` (asked every
/// [`REPLACED_CHECK`] until the host starts answering) says why the host
/// no longer serves the store.
pub fn ask_unless(
    connection: UnixStream,
    request: &Request,
    replaced: &mut dyn FnMut() -> Option<String>,
) -> Outcome {
    let mut reply = None;
    stream_unless(connection, request, replaced, |outcome| {
        reply = Some(outcome);
        false
    })?;
    reply.unwrap_or_else(|| {
        Err(Failure::unreachable(
            "the host closed the connection without replying",
        ))
    })
}

/// How often a command waiting for a host's first answer asks whether the
/// host was replaced.
pub const REPLACED_CHECK: Duration = Duration::from_millis(200);

/// Sends `request` to the host and hands each reply line to `each` until the
/// host closes the connection or `each` returns false. The first reply must
/// come within the connection's timeout; later ones (a watch's changes) may
/// take as long as they take.
pub fn stream(
    stream: UnixStream,
    request: &Request,
    each: impl FnMut(Outcome) -> bool,
) -> Result<(), Failure> {
    stream_unless(stream, request, &mut || None, each)
}

/// [`stream`], giving up early as [`ask_unless`] does.
pub fn stream_unless(
    stream: UnixStream,
    request: &Request,
    replaced: &mut dyn FnMut() -> Option<String>,
    mut each: impl FnMut(Outcome) -> bool,
) -> Result<(), Failure> {
    let patience = stream.read_timeout().ok().flatten();
    let lost = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            Failure::timeout(no_answer(&stream, patience))
        }
        _ => Failure::unreachable(format!("lost the connection to the host: {e}")),
    };
    let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let started = Instant::now();
    let mut waiting = Waiting {
        stream: &stream,
        patience,
        started,
        replaced,
    };
    waiting.send(&line).map_err(lost)??;
    waiting.first_answer().map_err(lost)??;
    let mut reader = BufReader::new(stream.try_clone().map_err(lost)?);
    let mut first = true;
    loop {
        match read_line::<Outcome>(&mut reader) {
            Ok(outcome) => {
                if std::mem::take(&mut first) {
                    reader.get_ref().set_read_timeout(None).map_err(lost)?;
                }
                if !each(outcome) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(lost(e)),
        }
    }
}

/// A request on its way to a host that may stop serving meanwhile: the
/// request is written and the first answer awaited in slices of
/// [`REPLACED_CHECK`], asking between slices whether the host was
/// replaced (a paused host's socket still accepts, and its buffer takes a
/// request, so only asking tells).
struct Waiting<'a> {
    stream: &'a UnixStream,
    patience: Option<Duration>,
    started: Instant,
    replaced: &'a mut dyn FnMut() -> Option<String>,
}

impl Waiting<'_> {
    /// Writes all of `line`; the outer error is the socket's.
    fn send(&mut self, line: &[u8]) -> std::io::Result<Result<(), Failure>> {
        let mut writer = self.stream;
        writer.set_write_timeout(Some(REPLACED_CHECK))?;
        let mut sent = 0;
        while sent < line.len() {
            match writer.write(&line[sent..]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => sent += n,
                Err(e) if is_timeout(&e) => {
                    if let Err(failure) = self.still_waiting() {
                        return Ok(Err(failure));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        writer.flush()?;
        Ok(Ok(()))
    }

    /// Returns once the host has something to say (or hung up).
    fn first_answer(&mut self) -> std::io::Result<Result<(), Failure>> {
        use std::os::fd::AsRawFd;
        loop {
            let mut poll = libc::pollfd {
                fd: self.stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let slice = REPLACED_CHECK.as_millis() as libc::c_int;
            // SAFETY: one valid pollfd, living across the call.
            let ready = unsafe { libc::poll(&mut poll, 1, slice) };
            match ready {
                0 => {
                    if let Err(failure) = self.still_waiting() {
                        return Ok(Err(failure));
                    }
                }
                n if n > 0 => return Ok(Ok(())),
                _ => {
                    let error = std::io::Error::last_os_error();
                    if error.kind() != std::io::ErrorKind::Interrupted {
                        return Err(error);
                    }
                }
            }
        }
    }

    /// Between slices: a failure once the patience is spent or the host
    /// was replaced.
    fn still_waiting(&mut self) -> Result<(), Failure> {
        if self.patience.is_some_and(|p| self.started.elapsed() >= p) {
            return Err(Failure::timeout(no_answer(self.stream, self.patience)));
        }
        match (self.replaced)() {
            Some(why) => Err(Failure::unreachable(why)),
            None => Ok(()),
        }
    }
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Says which host kept a command waiting, and for how long.
fn no_answer(stream: &UnixStream, patience: Option<Duration>) -> String {
    let socket = stream
        .peer_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
        .unwrap_or_else(|| "its socket".into());
    let pid = peer_pid(stream).map_or_else(String::new, |pid| format!(" (pid {pid})"));
    let waited = patience.map_or_else(|| "in time".into(), |p| format!("within {p:?}"));
    format!(
        "the host on {socket}{pid} did not answer {waited}: it may be stopped or overloaded \
         (wait longer with --request-timeout, 0 for no limit)"
    )
}

/// The process at the other end of a Unix socket, as the kernel knows it.
pub fn peer_pid(stream: &UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut credentials = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor, and a buffer of the size passed.
    let done = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut length,
        )
    };
    (done == 0 && credentials.pid > 0).then_some(credentials.pid)
}
