//! The host's side of the Unix socket: one request line per connection,
//! answered with one line, or, for a watch, a line per change until either
//! side hangs up. Requests are bounded in size and in time to arrive.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::handlers::{self, Context, Following};
use crate::protocol::{Outcome, Request};

/// The largest request a command may send: room for an `apply` of many
/// objects at the largest document size.
const MAX_REQUEST_BYTES: u64 = 64 << 20;

/// How long a connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long accepting pauses after an error (out of file descriptors), so a
/// persistent error does not become a hot loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Binds the socket, readable and writable by this user only.
pub(super) fn listen(socket: &Path) -> Result<UnixListener, String> {
    let listener = UnixListener::bind(socket)
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", socket.display()))?;
    Ok(listener)
}

/// SIGINT and SIGTERM, heard from when the host starts until it exits: a
/// signal that arrives while nothing is waiting for one (a host between
/// taking the lease and serving) is kept for the next wait, never lost.
pub(super) struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub(super) fn new() -> Result<Signals, String> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).map_err(|e| e.to_string())?,
            terminate: signal(SignalKind::terminate()).map_err(|e| e.to_string())?,
        })
    }

    /// Waits for either signal.
    pub(super) async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {},
            _ = self.terminate.recv() => {},
        }
    }
}

/// Serves connections until SIGINT or SIGTERM; a second signal exits at once.
///
/// Returns when a signal asks it to stop (`None`), or when `lost` resolves
/// with why the host may no longer serve (`Some`).
pub(super) async fn serve(
    listener: UnixListener,
    ctx: &Context,
    signals: &mut Signals,
    lost: impl std::future::Future<Output = String>,
) -> Result<Option<String>, String> {
    let mut lost = std::pin::pin!(lost);
    let mut why = None;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let ctx = ctx.clone();
                    tokio::spawn(async move { answer(stream, &ctx).await });
                }
                Err(error) => {
                    tracing::warn!("socket: {error}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            () = signals.recv() => break,
            reason = &mut lost => {
                why = Some(reason);
                break;
            }
        }
    }
    // Only a stop has a second signal to watch for: a host stepping down
    // goes back to standing by, where the next signal stops it as usual.
    if why.is_none() {
        let mut again = Signals::new()?;
        tokio::spawn(async move {
            again.recv().await;
            eprintln!("second signal: exiting without waiting for passes in flight");
            std::process::exit(130);
        });
    }
    Ok(why)
}

/// Reads one request line, bounded in size and time; gives the read half
/// back, so a watch can notice the command hang up.
async fn read_request(
    read: tokio::net::unix::OwnedReadHalf,
) -> Result<(String, tokio::net::unix::OwnedReadHalf), String> {
    let mut line = String::new();
    let mut limited = BufReader::new(read.take(MAX_REQUEST_BYTES));
    match tokio::time::timeout(REQUEST_TIMEOUT, limited.read_line(&mut line)).await {
        Err(_) => Err(format!("no request within {REQUEST_TIMEOUT:?}")),
        Ok(Err(e)) => Err(format!("bad request: {e}")),
        Ok(Ok(_)) if !line.ends_with('\n') && line.len() as u64 >= MAX_REQUEST_BYTES => Err(
            format!("request too large: at most {} MiB", MAX_REQUEST_BYTES >> 20),
        ),
        Ok(Ok(_)) => Ok((line, limited.into_inner().into_inner())),
    }
}

/// Resolves once the command closes its end (or sends anything more, which
/// no command does): a watch it started is then dropped at once rather than
/// at its next change.
async fn hung_up(mut read: OwnedReadHalf) {
    let mut byte = [0u8; 1];
    let _ = read.read(&mut byte).await;
}

/// Answers one request on a connection.
async fn answer(stream: UnixStream, ctx: &Context) {
    let (read, mut write) = stream.into_split();
    let (line, read) = match read_request(read).await {
        Ok(read) => read,
        Err(why) => {
            let _ = send(&mut write, &Err(why.into())).await;
            return;
        }
    };
    let outcome: Outcome = match serde_json::from_str::<Request>(&line) {
        Ok(
            request @ (Request::Watch { .. }
            | Request::WatchEvents { .. }
            | Request::Logs { follow: true, .. }),
        ) => match handlers::follow(ctx, request) {
            Ok(following) => return relay_until_hung_up(write, read, following).await,
            Err(why) => Err(why),
        },
        Ok(request) => handlers::execute(ctx, request).await,
        Err(e) => Err(format!("bad request: {e}").into()),
    };
    // The command may have given up waiting; nothing to do about it.
    let _ = send(&mut write, &outcome).await;
}

async fn send(write: &mut OwnedWriteHalf, outcome: &Outcome) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(outcome).unwrap_or_default();
    line.push(b'\n');
    write.write_all(&line).await
}

/// Answers a watch: the snapshot, then a line per change, until the command
/// hangs up or the stream ends (its last line then says why).
async fn relay_until_hung_up(mut write: OwnedWriteHalf, read: OwnedReadHalf, following: Following) {
    tokio::select! {
        () = relay(&mut write, following) => {}
        () = hung_up(read) => {}
    }
}

async fn relay(write: &mut OwnedWriteHalf, following: Following) {
    let Following {
        snapshot,
        mut replies,
    } = following;
    if send(write, &Ok(snapshot)).await.is_err() {
        return;
    }
    while let Some(reply) = replies.next().await {
        let ended = reply.is_err();
        if send(write, &reply).await.is_err() || ended {
            return;
        }
    }
    let _ = send(write, &Err("the host stopped".into())).await;
}
