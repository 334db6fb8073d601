//! Watching objects: a snapshot, then every change above it.
//!
//! A watch reads the kind's write log above a cursor. A commit in this
//! process wakes it at once; a floor tick covers writes another process
//! made and reads that failed. Changes collapse: each delivery carries the
//! object's current state, so several writes may arrive as one change.
//! Each change also carries its resume position: every log entry at or
//! below it has been delivered (or folded into a change delivered no later),
//! so a reader that resumes from the last position it handled loses
//! nothing. Positions rise along the stream. Nothing is dropped: a slow
//! subscriber only stalls its own stream.
//!
//! A stream lives until its receiver is dropped or it ends with an error.
//! One opened through a host's client ([`crate::Host::client`]) also ends
//! when that host stops, with [`Error::Stopped`]; one opened on the store
//! ([`RawClient::new`]) lives as long as the store.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::RawClient;
use crate::error::{Error, Result};
use crate::metrics::Held;
use crate::object::{GroupKind, Loads, ObjectId, RawObject};
use crate::store::Store;
use crate::sync::lock;

mod events;
mod objects;

pub use events::EventStream;
pub use objects::{ObjectListStream, ObjectStream};

/// What a watch read first, as of `resource_version`, then, as a
/// [`Stream`](futures_util::Stream), every change above it. The stream's
/// last item is the error that ended it, if something other than dropping it
/// did. [`ObjectListStream`], [`ObjectStream`] and [`EventStream`] say what
/// each watch reads and how it ends.
///
/// # Cancel safety
/// Reading with `next()` in a `select!` loses nothing: a change is taken
/// from the stream only when it is returned.
#[derive(Debug)]
pub struct WatchStream<Snapshot, Change> {
    /// What the watch read first (empty when resuming).
    pub snapshot: Snapshot,
    /// The log position the snapshot is complete as of; the stream carries
    /// what lies strictly above it.
    pub resource_version: i64,
    feed: Feed<Change>,
}

impl<Snapshot: Unpin, Change> futures_util::Stream for WatchStream<Snapshot, Change> {
    type Item = Result<Change>;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().feed.poll(cx)
    }
}

/// Log entries read per step, and changes buffered per stream.
const PAGE: usize = 256;

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    /// Here is this object: not in the snapshot, or not yet seen by the
    /// stream. May repeat for an object the snapshot held.
    Added,
    /// Its current state, after one or more writes. A deletion request is
    /// a `Modified` with `deletion_requested_at` set.
    Modified,
    /// Collected: the row is gone. Evict it from a cache.
    Deleted,
}

/// One change on a stream.
#[derive(Clone, Debug)]
pub struct ObjectChange {
    /// What happened.
    pub change: ChangeType,
    /// The object's id.
    pub id: ObjectId,
    /// Its current state; on `Deleted`, its state when it was collected
    /// (`None` only for a collection logged before final states were kept).
    pub object: Option<RawObject>,
    /// Where to resume after handling this change
    /// ([`WatchOptions::resume_from`]): the stream is complete up to here.
    /// Use this, not the object's own `resource_version`, which may already
    /// be ahead of changes to other objects still to come.
    pub resource_version: i64,
}

/// How a watch starts and how often it looks without a wake.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    resume_from: Option<i64>,
    loads: Loads,
    floor_interval: Duration,
    selector: Option<crate::object::Selector>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            resume_from: None,
            loads: Loads::none(),
            floor_interval: Duration::from_secs(30),
            selector: None,
        }
    }
}

impl WatchOptions {
    /// A snapshot, no relations, a 30 s floor.
    pub fn new() -> Self {
        Self::default()
    }

    /// Streams the changes above `resource_version` instead of taking a
    /// snapshot: for a reader reconnecting from the last position it
    /// handled. A position retention has trimmed ends the stream with
    /// [`Error::WatchTooOld`]; one above everything the log has held fails
    /// the call with [`Error::WatchTooNew`].
    pub fn resume_from(mut self, resource_version: i64) -> Self {
        self.resume_from = Some(resource_version);
        self
    }

    /// Follows only the objects whose labels match `selector`. As in
    /// Kubernetes, an object whose labels stop matching arrives as
    /// [`ChangeType::Deleted`] with its current state (it still exists),
    /// and as [`ChangeType::Added`] when they match again.
    pub fn selector(mut self, selector: crate::object::Selector) -> Self {
        self.selector = Some(selector);
        self
    }

    /// The relations each delivered object carries.
    pub fn loads(mut self, loads: Loads) -> Self {
        self.loads = loads;
        self
    }

    /// How often the watch reads without being woken by a commit in this
    /// process (writes by another process arrive at this pace).
    pub fn floor_interval(mut self, interval: Duration) -> Self {
        self.floor_interval = interval;
        self
    }
}

/// Why a stream ended, when it was not the subscriber's doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    TooOld,
    /// The host the stream was opened through stopped.
    Stopped,
    /// The watched object was collected (an event watch).
    Gone(ObjectId),
}

/// The reason a stream's `changes` closed, shared with its tailer.
#[derive(Clone, Default)]
struct Ended(Arc<Mutex<Option<End>>>);

impl Ended {
    fn set(&self, end: End) {
        *lock(&self.0) = Some(end);
    }

    fn error(&self, group_kind: &GroupKind) -> Option<Error> {
        let end = *lock(&self.0);
        end.map(|end| match end {
            End::TooOld => Error::WatchTooOld {
                kind: group_kind.to_string(),
            },
            End::Stopped => Error::Stopped,
            End::Gone(id) => Error::NotFound {
                what: format!("object {id} (collected)"),
            },
        })
    }
}

/// What a tail sends, read as a stream whose last item says why it ended.
struct Feed<T> {
    receiver: mpsc::Receiver<T>,
    group_kind: GroupKind,
    ended: Ended,
    finished: bool,
    /// Counted in `beehive_watches_open` while the stream lives.
    _open: Held,
}

impl<T> std::fmt::Debug for Feed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("group_kind", &self.group_kind)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<T> Feed<T> {
    fn new(
        receiver: mpsc::Receiver<T>,
        group_kind: GroupKind,
        ended: Ended,
        store: &Store,
    ) -> Self {
        Feed {
            receiver,
            group_kind,
            ended,
            finished: false,
            _open: Held::new(store.metrics().watches_open()),
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(Ok(item))),
            Poll::Ready(None) => {
                self.finished = true;
                Poll::Ready(self.ended.error(&self.group_kind).map(Err))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl RawClient {
    /// What ends this client's watches besides their reader: its host's
    /// stop, already past if the host has stopped.
    fn watch_lifetime(&self) -> Result<CancellationToken> {
        match self.host_stopped() {
            Some(stopped) if stopped.is_cancelled() => Err(Error::Stopped),
            Some(stopped) => Ok(stopped.clone()),
            // Never cancelled: the stream lives as long as the store.
            None => Ok(CancellationToken::new()),
        }
    }
}

/// A tail task's end of its stream: where it delivers, why the stream
/// ended, and what wakes it to read again.
struct Delivery<T> {
    sender: mpsc::Sender<T>,
    ended: Ended,
    floor: Duration,
    host_stopped: CancellationToken,
    commits: tokio::sync::watch::Receiver<i64>,
}

impl<T> Delivery<T> {
    /// Hands `item` to the reader; `false` once the reader has gone.
    async fn send(&self, item: T) -> bool {
        self.sender.send(item).await.is_ok()
    }

    /// Records why the stream ends. Set before the sender drops, so a
    /// reader that sees the close also sees why.
    fn end(&self, end: End) {
        self.ended.set(end);
    }

    /// Waits for the next reason to read again: a commit in this process
    /// or the floor tick. `false` when the stream should end instead: its
    /// reader hung up, or the host it was opened through stopped.
    async fn next_wake(&mut self) -> bool {
        tokio::select! {
            _ = self.commits.changed() => true,
            _ = tokio::time::sleep(self.floor) => true,
            _ = self.sender.closed() => false,
            _ = self.host_stopped.cancelled() => {
                self.ended.set(End::Stopped);
                false
            }
        }
    }
}

impl RawClient {
    /// Opens a stream's two ends: the feed its reader polls and the
    /// delivery its tail task sends into, woken by this store's commits
    /// and every `floor`.
    ///
    /// # Errors
    /// [`Error::Stopped`] when the host this client came from has stopped.
    fn open_stream<T>(&self, floor: Duration) -> Result<(Feed<T>, Delivery<T>)> {
        let host_stopped = self.watch_lifetime()?;
        let ended = Ended::default();
        let (sender, receiver) = mpsc::channel(PAGE);
        let feed = Feed::new(
            receiver,
            self.group_kind().clone(),
            ended.clone(),
            self.store(),
        );
        let delivery = Delivery {
            sender,
            ended,
            floor,
            host_stopped,
            commits: self.store().commits(),
        };
        Ok((feed, delivery))
    }
}
