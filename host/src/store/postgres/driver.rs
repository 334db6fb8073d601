//! Runs `tokio-postgres` synchronously on the calling thread.
//!
//! The store's interface is synchronous and is called from anywhere: plain
//! threads, tokio workers, plugin host calls. A tokio runtime cannot be
//! blocked on from inside another, and handing each statement to a
//! connection task on another thread costs two thread hops per statement.
//! So each connection's socket is a plain non-blocking socket, and
//! [`Driver::block_on`] polls the request and the connection together on the
//! caller's thread, sleeping in `poll(2)` on the socket while neither can
//! move: the way a blocking client library works, with tokio-postgres's
//! protocol code.

use std::future::Future;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::{AsyncMessage, Connection, Notification};

use super::tls::TlsSocket;

/// A connected socket, non-blocking, that reports "would block" as
/// `Pending` without arranging a wake: the driver waits on it itself.
pub(crate) struct Socket {
    stream: Stream,
    state: Arc<SocketState>,
}

/// What the driver needs to know of a socket the connection owns.
pub(crate) struct SocketState {
    fd: RawFd,
    /// Set when a write could not go out whole: the driver then also waits
    /// for the socket to drain.
    write_blocked: AtomicBool,
}

enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Socket {
    /// Connects to a Unix socket at `path`.
    pub(crate) fn unix(path: &std::path::Path) -> io::Result<Socket> {
        let stream = std::os::unix::net::UnixStream::connect(path)?;
        stream.set_nonblocking(true)?;
        Ok(Socket::new(Stream::Unix(stream)))
    }

    /// Connects over TCP to `host:port`, giving up after `timeout`.
    pub(crate) fn tcp(host: &str, port: u16, timeout: Duration) -> io::Result<Socket> {
        use std::net::ToSocketAddrs;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for address in (host, port).to_socket_addrs()? {
            match std::net::TcpStream::connect_timeout(&address, timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    stream.set_nonblocking(true)?;
                    return Ok(Socket::new(Stream::Tcp(stream)));
                }
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    fn new(stream: Stream) -> Socket {
        let fd = match &stream {
            Stream::Unix(stream) => stream.as_raw_fd(),
            Stream::Tcp(stream) => stream.as_raw_fd(),
        };
        Socket {
            stream,
            state: Arc::new(SocketState {
                fd,
                write_blocked: AtomicBool::new(false),
            }),
        }
    }

    /// What the driver watches; taken before the connection owns the socket.
    pub(crate) fn state(&self) -> Arc<SocketState> {
        self.state.clone()
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let unfilled = buf.initialize_unfilled();
        let read = match &mut self.stream {
            Stream::Unix(stream) => stream.read(unfilled),
            Stream::Tcp(stream) => stream.read(unfilled),
        };
        match read {
            Ok(n) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = match &mut self.stream {
            Stream::Unix(stream) => stream.write(data),
            Stream::Tcp(stream) => stream.write(data),
        };
        match written {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.state.write_blocked.store(true, Ordering::SeqCst);
                Poll::Pending
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Why a driven request did not finish.
#[derive(Debug)]
pub(crate) enum DriveError {
    /// The connection failed or closed.
    Connection(tokio_postgres::Error),
    /// No answer came within the deadline.
    TimedOut(Duration),
    /// Waiting on the socket failed.
    Io(io::Error),
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::Connection(error) => write!(f, "{error}"),
            DriveError::TimedOut(after) => {
                write!(f, "the server did not answer within {after:?}")
            }
            DriveError::Io(error) => write!(f, "waiting on the server's socket: {error}"),
        }
    }
}

/// A flag a future's wake sets, so the driver knows to poll again before
/// it sleeps on the socket.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One connection's protocol state and socket, driven by whoever asks.
pub(crate) struct Driver {
    connection: Connection<Socket, TlsSocket>,
    socket: Arc<SocketState>,
    flag: Arc<Flag>,
    waker: Waker,
    /// Notifications that arrived while a request was being driven.
    notifications: Vec<Notification>,
}

impl Driver {
    pub(crate) fn new(
        connection: Connection<Socket, TlsSocket>,
        socket: Arc<SocketState>,
    ) -> Driver {
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        Driver {
            connection,
            socket,
            waker: Waker::from(flag.clone()),
            flag,
            notifications: Vec::new(),
        }
    }

    /// Runs `request` to completion, moving the connection's traffic as it
    /// goes; gives up after `deadline`.
    pub(crate) fn block_on<F: Future>(
        &mut self,
        request: F,
        deadline: Duration,
    ) -> Result<F::Output, DriveError> {
        let Driver {
            connection,
            socket,
            flag,
            waker,
            notifications,
        } = self;
        drive(request, socket, flag, waker, deadline, |cx| {
            pump(connection, notifications, cx)
        })
    }

    /// Waits up to `timeout` for notifications, and returns those that came.
    pub(crate) fn notifications(
        &mut self,
        timeout: Duration,
    ) -> Result<Vec<Notification>, DriveError> {
        let give_up = Instant::now() + timeout;
        loop {
            self.flag.0.store(false, Ordering::SeqCst);
            let waker = self.waker.clone();
            let mut cx = Context::from_waker(&waker);
            pump(&mut self.connection, &mut self.notifications, &mut cx)?;
            if !self.notifications.is_empty() {
                return Ok(std::mem::take(&mut self.notifications));
            }
            if self.flag.0.load(Ordering::SeqCst) {
                continue;
            }
            match wait(&self.socket, give_up, timeout) {
                Ok(()) => {}
                Err(DriveError::TimedOut(_)) => return Ok(Vec::new()),
                Err(error) => return Err(error),
            }
        }
    }
}

/// Runs the handshake future `connecting`, which owns the socket, to
/// completion.
pub(crate) fn handshake<F: Future>(
    connecting: F,
    socket: &SocketState,
    deadline: Duration,
) -> Result<F::Output, DriveError> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    drive(connecting, socket, &flag, &waker, deadline, |_| Ok(()))
}

/// Polls `request`, then `pump`, until `request` is done; sleeps on the
/// socket only when neither made progress that could wake the other.
fn drive<F: Future>(
    request: F,
    socket: &SocketState,
    flag: &Flag,
    waker: &Waker,
    deadline: Duration,
    mut pump: impl FnMut(&mut Context<'_>) -> Result<(), DriveError>,
) -> Result<F::Output, DriveError> {
    let mut request = std::pin::pin!(request);
    let give_up = Instant::now() + deadline;
    loop {
        flag.0.store(false, Ordering::SeqCst);
        let mut cx = Context::from_waker(waker);
        if let Poll::Ready(output) = request.as_mut().poll(&mut cx) {
            return Ok(output);
        }
        pump(&mut cx)?;
        if flag.0.load(Ordering::SeqCst) {
            continue;
        }
        wait(socket, give_up, deadline)?;
    }
}

/// Moves a connection's traffic until it would block, keeping what
/// notifications arrive.
fn pump(
    connection: &mut Connection<Socket, TlsSocket>,
    notifications: &mut Vec<Notification>,
    cx: &mut Context<'_>,
) -> Result<(), DriveError> {
    loop {
        match connection.poll_message(cx) {
            Poll::Ready(Some(Ok(AsyncMessage::Notification(notification)))) => {
                notifications.push(notification);
            }
            Poll::Ready(Some(Ok(_notice))) => {}
            Poll::Ready(Some(Err(error))) => return Err(DriveError::Connection(error)),
            // Closed: the request's own future reports it.
            Poll::Ready(None) => return Ok(()),
            Poll::Pending => return Ok(()),
        }
    }
}

const SPIN: Duration = Duration::from_micros(40);

/// Sleeps until the socket can be read (or written, if a write is
/// waiting), or `give_up` passes.
fn wait(socket: &SocketState, give_up: Instant, deadline: Duration) -> Result<(), DriveError> {
    let mut events = libc::POLLIN;
    if socket.write_blocked.swap(false, Ordering::SeqCst) {
        events |= libc::POLLOUT;
    }
    let mut poll = libc::pollfd {
        fd: socket.fd,
        events,
        revents: 0,
    };
    let left = give_up.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(DriveError::TimedOut(deadline));
    }
    let spin_until = Instant::now() + SPIN;
    loop {
        // SAFETY: one valid pollfd, living across the call.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        if ready != 0 || Instant::now() >= spin_until {
            break;
        }
        std::thread::yield_now();
    }
    let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd, living across the call.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(DriveError::Io(error));
        }
    }
    if ready == 0 && Instant::now() >= give_up {
        return Err(DriveError::TimedOut(deadline));
    }
    Ok(())
}
