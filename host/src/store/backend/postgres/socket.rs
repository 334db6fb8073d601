//! The socket a PostgreSQL connection runs on: a plain non-blocking Unix
//! or TCP socket that the driver polls itself, under TLS or not.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connected socket, non-blocking, that reports "would block" as
/// `Pending` without arranging a wake: the driver waits on it itself.
pub(crate) struct Socket {
    stream: Stream,
    state: Arc<SocketState>,
}

/// What the driver needs to know of a socket the connection owns.
pub(crate) struct SocketState {
    pub(super) fd: RawFd,
    /// Set when a write could not go out whole: the driver then also waits
    /// for the socket to drain.
    pub(super) write_blocked: AtomicBool,
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
