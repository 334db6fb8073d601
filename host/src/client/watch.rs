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

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::RawClient;
use crate::error::{Error, Result};
use crate::event::{Event, EventFilter};
use crate::metrics::Held;
use crate::object::{GroupKind, Loads, ObjectId, RawObject};
use crate::store::{Store, events, rows};
use crate::sync::lock;

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
#[derive(Clone, Copy, Debug)]
pub struct WatchOptions {
    resume_from: Option<i64>,
    loads: Loads,
    floor_interval: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            resume_from: None,
            loads: Loads::none(),
            floor_interval: Duration::from_secs(30),
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

/// Which objects of the kind a stream follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Kind,
    Object(ObjectId),
    OwnedBy(ObjectId),
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

/// A kind's objects as of `resource_version`, then, as a [`Stream`], every
/// change above it. The stream's last item is the error that ended it, if
/// something other than dropping it did: [`Error::WatchTooOld`] (watch
/// again for a fresh snapshot) or [`Error::Stopped`].
///
/// # Cancel safety
/// Reading with `next()` in a `select!` loses nothing: a change is taken
/// from the stream only when it is returned.
pub struct ObjectListStream {
    /// The snapshot (empty when resuming).
    pub objects: Vec<RawObject>,
    /// The log position the snapshot is complete as of; the stream carries
    /// what lies strictly above it.
    pub resource_version: i64,
    feed: Feed<ObjectChange>,
}

impl Stream for ObjectListStream {
    type Item = Result<ObjectChange>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().feed.poll(cx)
    }
}

impl std::fmt::Debug for ObjectListStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectListStream")
            .field("objects", &self.objects.len())
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

/// One object as of `resource_version`, then, as a [`Stream`], every change
/// to it above that; it ends as [`ObjectListStream`] does.
pub struct ObjectStream {
    /// The object, or `None` when the id holds nothing of the kind yet.
    pub object: Option<RawObject>,
    /// The log position the snapshot is complete as of.
    pub resource_version: i64,
    feed: Feed<ObjectChange>,
}

impl Stream for ObjectStream {
    type Item = Result<ObjectChange>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().feed.poll(cx)
    }
}

impl std::fmt::Debug for ObjectStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStream")
            .field("object", &self.object.as_ref().map(|o| o.meta.id))
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

impl RawClient {
    /// Every object of this kind, and every change to them from here on.
    /// The snapshot is read before this returns, so a write made after it is
    /// always on the stream. Needs a tokio runtime; needs no controller.
    ///
    /// # Errors
    /// A store error when the snapshot cannot be read.
    pub fn watch_list(&self, options: WatchOptions) -> Result<ObjectListStream> {
        self.start_watch(Scope::Kind, options)
    }

    /// Object `id` of this kind, and every change to it from here on. The id
    /// need not hold anything yet: its creation arrives as `Added`.
    ///
    /// # Errors
    /// As [`RawClient::watch_list`].
    pub fn watch(&self, id: ObjectId, options: WatchOptions) -> Result<ObjectStream> {
        let list = self.start_watch(Scope::Object(id), options)?;
        Ok(ObjectStream {
            object: list.objects.into_iter().next(),
            resource_version: list.resource_version,
            feed: list.feed,
        })
    }

    /// [`RawClient::watch_list`] narrowed to the objects `owner` owns: a
    /// child created later arrives as `Added`, a child collected as
    /// `Deleted`.
    ///
    /// # Errors
    /// As [`RawClient::watch_list`].
    pub fn watch_owned_objects(
        &self,
        owner: ObjectId,
        options: WatchOptions,
    ) -> Result<ObjectListStream> {
        self.start_watch(Scope::OwnedBy(owner), options)
    }

    /// Reads the snapshot (or checks the resume position) and starts the tail.
    fn start_watch(&self, scope: Scope, options: WatchOptions) -> Result<ObjectListStream> {
        let host_stopped = self.watch_lifetime()?;
        let store = self.store().clone();
        let group_kind = self.group_kind().clone();
        let ended = Ended::default();
        let (sender, changes) = mpsc::channel(PAGE);
        let (objects, position) = match options.resume_from {
            Some(position) => {
                let head = store.read(|conn| head(conn, &group_kind))?;
                if position > head {
                    // Nothing can be streamed truthfully.
                    return Err(Error::WatchTooNew {
                        kind: group_kind.to_string(),
                    });
                }
                (Vec::new(), position)
            }
            None => {
                let loads = options.loads;
                let (objects, head) = store.read(|conn| {
                    // One read transaction, so the snapshot is exactly as of `head`.
                    let tx = conn.unchecked_transaction()?;
                    let head = head(&tx, &group_kind)?;
                    let objects = current(&tx, &store, &group_kind, scope, loads)?;
                    tx.commit()?;
                    Ok((objects, head))
                })?;
                (store.migrations().upgrade_all(objects), head)
            }
        };
        let tail = Tail {
            known: objects.iter().map(|o| o.meta.id).collect(),
            store,
            group_kind: group_kind.clone(),
            scope,
            loads: options.loads,
            cursor: position,
            sender,
            ended: ended.clone(),
            floor: options.floor_interval,
            host_stopped,
        };
        tokio::spawn(tail.run());
        Ok(ObjectListStream {
            objects,
            resource_version: position,
            feed: Feed::new(changes, group_kind, ended, self.store()),
        })
    }
}

/// An object's event log as of `resource_version`, then, as a [`Stream`],
/// every run written above it, oldest first: a new run, or a run an
/// occurrence extended (same id, higher `resource_version`, bigger `count`:
/// update it in place). Its last item is the error that ended it:
/// [`Error::NotFound`] once the object was collected (its log goes with it),
/// [`Error::WatchTooOld`] when retention trimmed runs it had not delivered,
/// or [`Error::Stopped`].
pub struct EventStream {
    /// The runs as of the snapshot, newest first (empty when resuming).
    pub runs: Vec<Event>,
    /// The log position the snapshot is complete as of.
    pub resource_version: i64,
    feed: Feed<Event>,
}

impl Stream for EventStream {
    type Item = Result<Event>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().feed.poll(cx)
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("runs", &self.runs.len())
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

impl RawClient {
    /// Object `id`'s event log (one `category`'s timeline, if given), and
    /// every run written to it from here on. Reads by id, whatever kind
    /// holds it. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `id` holds nothing; [`Error::WatchTooNew`]
    /// for a resume position above the log's head; a store error when the
    /// snapshot cannot be read. A resume position below what retention
    /// trimmed from this object's log ends the stream with
    /// [`Error::WatchTooOld`].
    pub fn watch_events(
        &self,
        id: ObjectId,
        category: Option<&str>,
        options: WatchOptions,
    ) -> Result<EventStream> {
        let host_stopped = self.watch_lifetime()?;
        let store = self.store().clone();
        let category = category.map(str::to_string);
        let (runs, head) = store.read(|conn| {
            let tx = conn.unchecked_transaction()?;
            if rows::select_kind_and_deletion(&tx, id)?.is_none() {
                return Err(Error::not_found(format!("object {id}")));
            }
            let head = store_head(&tx)?;
            let runs = match options.resume_from {
                Some(_) => Vec::new(),
                None => {
                    let filter = match &category {
                        Some(c) => EventFilter::all().category(c.clone()),
                        None => EventFilter::all(),
                    };
                    events::list_events(&tx, id, &filter)?
                }
            };
            tx.commit()?;
            Ok((runs, head))
        })?;
        let ended = Ended::default();
        let (sender, receiver) = mpsc::channel(PAGE);
        let cursor = options.resume_from.unwrap_or(head);
        if cursor > head {
            return Err(Error::WatchTooNew {
                kind: self.group_kind().to_string(),
            });
        }
        let tail = EventTail {
            store,
            id,
            category,
            cursor,
            sender,
            ended: ended.clone(),
            floor: options.floor_interval,
            host_stopped,
        };
        tokio::spawn(tail.run());
        Ok(EventStream {
            runs,
            resource_version: cursor,
            feed: Feed::new(receiver, self.group_kind().clone(), ended, self.store()),
        })
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

/// The newest committed position, as this read sees the store.
fn store_head(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM objects), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM events), 0))",
        [],
        |row| row.get(0),
    )?)
}

/// The task behind one event stream.
struct EventTail {
    store: Store,
    id: ObjectId,
    category: Option<String>,
    cursor: i64,
    sender: mpsc::Sender<Event>,
    ended: Ended,
    floor: Duration,
    host_stopped: CancellationToken,
}

impl EventTail {
    async fn run(mut self) {
        let mut commits = self.store.commits();
        loop {
            let page = self.store.read(|conn| {
                let tx = conn.unchecked_transaction()?;
                let exists = rows::select_kind_and_deletion(&tx, self.id)?.is_some();
                let horizon: i64 = tx
                    .prepare_cached(
                        "SELECT resource_version FROM event_horizons WHERE object_id = ?1",
                    )?
                    .query_row([self.id], |row| row.get(0))
                    .optional()?
                    .unwrap_or(0);
                if horizon > self.cursor {
                    tx.commit()?;
                    return Ok(None);
                }
                let runs = events::events_above(
                    &tx,
                    self.id,
                    self.category.as_deref(),
                    self.cursor,
                    PAGE,
                )?;
                tx.commit()?;
                Ok(Some((exists, runs)))
            });
            match page {
                Ok(None) => {
                    self.ended.set(End::TooOld);
                    return;
                }
                Ok(Some((false, _))) => {
                    self.ended.set(End::Gone(self.id));
                    return;
                }
                Ok(Some((true, runs))) => {
                    let full = runs.len() == PAGE;
                    for run in runs {
                        self.cursor = self.cursor.max(run.resource_version);
                        if self.sender.send(run).await.is_err() {
                            return;
                        }
                    }
                    if full {
                        continue;
                    }
                }
                Err(error) => {
                    tracing::warn!(object = self.id, %error, "an event watch could not read; retrying at the next wake");
                }
            }
            tokio::select! {
                _ = commits.changed() => {}
                _ = tokio::time::sleep(self.floor) => {}
                _ = self.sender.closed() => return,
                _ = self.host_stopped.cancelled() => {
                    self.ended.set(End::Stopped);
                    return;
                }
            }
        }
    }
}

/// The newest position the kind's stream can be complete as of.
fn head(conn: &Connection, group_kind: &GroupKind) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT MAX(COALESCE((SELECT MAX(resource_version) FROM object_writes), 0), \
                    COALESCE((SELECT MAX(resource_version) FROM objects), 0), \
                    COALESCE((SELECT resource_version FROM write_log_horizons \
                              WHERE grp = ?1 AND kind = ?2), 0))",
        params![group_kind.group, group_kind.kind],
        |row| row.get(0),
    )?)
}

/// The objects in `scope` now, with conditions and `loads`.
fn current(
    conn: &Connection,
    store: &Store,
    group_kind: &GroupKind,
    scope: Scope,
    loads: Loads,
) -> Result<Vec<RawObject>> {
    let mut objects = match scope {
        Scope::Object(id) => rows::select_by_id(conn, id)?
            .filter(|o| o.meta.group_kind == *group_kind)
            .into_iter()
            .collect(),
        Scope::Kind => rows::select_kind(conn, group_kind)?,
        Scope::OwnedBy(owner) => rows::select_owned(conn, group_kind, owner)?,
    };
    rows::load_conditions(conn, store.session(), &mut objects)?;
    rows::load_relations(conn, loads, &mut objects)?;
    Ok(objects)
}

/// One object that moved in a page of the log.
struct Moved {
    id: ObjectId,
    /// Its last entry in the page: the change's resume position.
    position: i64,
    /// Its current state; `None` once its row is gone.
    current: Option<RawObject>,
    /// Its state when collected, if the row is gone and the log kept it.
    last_image: Option<RawObject>,
}

/// One step of a tail: the objects that moved and how far the log was read.
struct Page {
    /// In the order of their last entry in the page.
    moved: Vec<Moved>,
    last: i64,
    full: bool,
    horizon: i64,
}

fn read_page(
    conn: &Connection,
    store: &Store,
    group_kind: &GroupKind,
    scope: Scope,
    cursor: i64,
    loads: Loads,
) -> Result<Page> {
    let only = match scope {
        Scope::Object(id) => Some(id),
        Scope::Kind | Scope::OwnedBy(_) => None,
    };
    let tx = conn.unchecked_transaction()?;
    let horizon: i64 = tx
        .query_row(
            "SELECT resource_version FROM write_log_horizons WHERE grp = ?1 AND kind = ?2",
            params![group_kind.group, group_kind.kind],
            |row| row.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let mut stmt = tx.prepare_cached(
        "SELECT resource_version, object_id FROM object_writes \
         WHERE resource_version > ?1 AND grp = ?2 AND kind = ?3 \
           AND (?4 IS NULL OR object_id = ?4) \
         ORDER BY resource_version LIMIT ?5",
    )?;
    let entries: Vec<(i64, ObjectId)> = stmt
        .query_map(
            params![cursor, group_kind.group, group_kind.kind, only, PAGE as i64],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<rusqlite::Result<_>>()?;
    drop(stmt);
    let last = entries.last().map_or(cursor, |(rv, _)| *rv);
    let mut latest: Vec<(ObjectId, i64)> = Vec::new();
    for (rv, id) in entries.iter().rev() {
        if !latest.iter().any(|(seen, _)| seen == id) {
            latest.push((*id, *rv));
        }
    }
    latest.reverse();
    let mut moved = Vec::with_capacity(latest.len());
    for (id, position) in latest {
        let current = current(&tx, store, group_kind, Scope::Object(id), loads)?.pop();
        if let (Scope::OwnedBy(owner), Some(_)) = (scope, &current)
            && !rows::is_owned_by(&tx, id, owner)?
        {
            continue;
        }
        let last_image = match current {
            Some(_) => None,
            None => collected_image(&tx, id)?,
        };
        moved.push(Moved {
            id,
            position,
            current,
            last_image,
        });
    }
    tx.commit()?;
    Ok(Page {
        moved,
        last,
        full: entries.len() == PAGE,
        horizon,
    })
}

/// The state object `id` was collected in, as its delete entry logged it.
fn collected_image(conn: &Connection, id: ObjectId) -> Result<Option<RawObject>> {
    let image: Option<Option<String>> = conn
        .prepare_cached(
            "SELECT row_image FROM object_writes WHERE object_id = ?1 AND op = 'delete' \
             ORDER BY resource_version DESC LIMIT 1",
        )?
        .query_row([id], |row| row.get(0))
        .optional()?;
    Ok(image
        .flatten()
        .and_then(|text| serde_json::from_str::<crate::object::ObjectDocument>(&text).ok())
        .map(crate::object::ObjectDocument::into_raw))
}

/// The task behind one stream.
struct Tail {
    store: Store,
    group_kind: GroupKind,
    scope: Scope,
    loads: Loads,
    cursor: i64,
    known: HashSet<ObjectId>,
    sender: mpsc::Sender<ObjectChange>,
    ended: Ended,
    floor: Duration,
    host_stopped: CancellationToken,
}

impl Tail {
    async fn run(mut self) {
        let mut commits = self.store.commits();
        loop {
            match self.drain().await {
                Ok(true) => {}
                Ok(false) => return,
                Err(end) => {
                    // Set before the sender drops, so a reader that sees the
                    // close also sees why.
                    self.ended.set(end);
                    return;
                }
            }
            tokio::select! {
                _ = commits.changed() => {}
                _ = tokio::time::sleep(self.floor) => {}
                _ = self.sender.closed() => return,
                _ = self.host_stopped.cancelled() => {
                    self.ended.set(End::Stopped);
                    return;
                }
            }
        }
    }

    /// Delivers everything above the cursor. `Ok(false)` once the subscriber
    /// has gone.
    async fn drain(&mut self) -> std::result::Result<bool, End> {
        loop {
            let (group_kind, scope, cursor, loads) =
                (&self.group_kind, self.scope, self.cursor, self.loads);
            let store = &self.store;
            let page = match store
                .read(|conn| read_page(conn, store, group_kind, scope, cursor, loads))
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(kind = %self.group_kind, %error, "a watch could not read; retrying at the next wake");
                    return Ok(true);
                }
            };
            if page.horizon > self.cursor {
                return Err(End::TooOld);
            }
            for moved in page.moved {
                let Some(change) = self.change(moved) else {
                    continue;
                };
                if self.sender.send(change).await.is_err() {
                    return Ok(false);
                }
            }
            self.cursor = page.last;
            if !page.full {
                return Ok(true);
            }
        }
    }

    fn change(&mut self, moved: Moved) -> Option<ObjectChange> {
        let Moved {
            id,
            position,
            current,
            last_image,
        } = moved;
        let Some(object) = current else {
            // The row is gone, and with it whom it belonged to: an owner's
            // stream reports only the children it knew.
            if !self.known.remove(&id) && matches!(self.scope, Scope::OwnedBy(_)) {
                return None;
            }
            // A final state this build cannot read is left out; the deletion
            // itself is still news.
            let object = last_image.and_then(|o| self.store.migrations().upgrade(o).ok());
            return Some(ObjectChange {
                change: ChangeType::Deleted,
                id,
                object,
                resource_version: position,
            });
        };
        let object = match self.store.migrations().upgrade(object) {
            Ok(object) => object,
            Err(error) => {
                tracing::warn!(%error, "a watch skips an object it cannot read");
                return None;
            }
        };
        let change = if self.known.insert(id) {
            ChangeType::Added
        } else {
            ChangeType::Modified
        };
        Some(ObjectChange {
            change,
            id,
            object: Some(object),
            resource_version: position,
        })
    }
}
