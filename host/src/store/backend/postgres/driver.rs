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
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio_postgres::{AsyncMessage, Connection, Notification};

use crate::store::backend::postgres::socket::{Socket, SocketState};
use crate::store::backend::postgres::tls::TlsSocket;

/// Why a driven request did not finish.
#[derive(Debug)]
pub(crate) enum DriveError {
    /// The connection failed or closed.
    Connection(tokio_postgres::Error),
    /// No answer came within the deadline.
    TimedOut(Duration),
    /// Waiting on the socket failed.
    Io(io::Error),
    /// The server closed the connection while nothing was asked of it.
    Closed,
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::Connection(error) => write!(f, "{error}"),
            DriveError::TimedOut(after) => {
                write!(f, "the server did not answer within {after:?}")
            }
            DriveError::Io(error) => write!(f, "waiting on the server's socket: {error}"),
            DriveError::Closed => write!(f, "the server closed the connection"),
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
    /// Set once the server closed the connection or it failed.
    closed: bool,
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
            closed: false,
        }
    }

    /// Whether the server has closed the connection or it failed, from what
    /// has arrived, without waiting: a connection the server dropped while
    /// it sat idle (a restart, a terminated backend) is found out here
    /// rather than by the next statement. Notifications read on the way are
    /// kept for [`Driver::notifications`].
    pub(crate) fn is_closed(&mut self) -> bool {
        if !self.closed {
            let waker = self.waker.clone();
            let mut cx = Context::from_waker(&waker);
            let open = pump(&mut self.connection, &mut self.notifications, &mut cx);
            self.closed = !matches!(open, Ok(true));
        }
        self.closed
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
            closed,
        } = self;
        // A closed connection is reported by the request's own future.
        let driven = drive(request, socket, flag, waker, deadline, |cx| {
            pump(connection, notifications, cx).map(|_open| ())
        });
        if matches!(driven, Err(DriveError::Connection(_))) {
            *closed = true;
        }
        driven
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
            let open = pump(&mut self.connection, &mut self.notifications, &mut cx)?;
            if !self.notifications.is_empty() {
                return Ok(std::mem::take(&mut self.notifications));
            }
            // No request here reports a closed connection; a listener that
            // missed it would wait on a dead socket for ever, and hear no
            // other process's commits again.
            if !open {
                self.closed = true;
                return Err(DriveError::Closed);
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
/// notifications arrive; `false` once the server has closed it.
fn pump(
    connection: &mut Connection<Socket, TlsSocket>,
    notifications: &mut Vec<Notification>,
    cx: &mut Context<'_>,
) -> Result<bool, DriveError> {
    loop {
        match connection.poll_message(cx) {
            Poll::Ready(Some(Ok(AsyncMessage::Notification(notification)))) => {
                notifications.push(notification);
            }
            Poll::Ready(Some(Ok(_notice))) => {}
            Poll::Ready(Some(Err(error))) => return Err(DriveError::Connection(error)),
            Poll::Ready(None) => return Ok(false),
            Poll::Pending => return Ok(true),
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
