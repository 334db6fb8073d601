//! Event watches: one object's timeline, then every run written to it.

use super::{Delivery, End, PAGE, WatchOptions, WatchStream};
use crate::client::RawClient;
use crate::error::{Error, Result};
use crate::event::{Event, EventFilter};
use crate::object::ObjectId;
use crate::store::Store;

/// An object's event runs, newest first, then every run written above
/// them, oldest first: a new run, or a run an occurrence extended (same id,
/// higher `resource_version`, bigger `count`: update it in place). It ends
/// with [`Error::NotFound`] once the object was collected (its log goes with
/// it), [`Error::WatchTooOld`] when retention trimmed runs it had not
/// delivered, or [`Error::Stopped`].
pub type EventStream = WatchStream<Vec<Event>, Event>;

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
        let (feed, delivery) = self.open_stream(options.floor_interval)?;
        let store = self.store().clone();
        let category = category.map(str::to_string);
        let (runs, head) = store.read(|r| {
            r.consistent(|r| {
                if r.kind_and_deletion(id)?.is_none() {
                    return Err(Error::not_found(format!("object {id}")));
                }
                let head = r.store_head()?;
                let runs = match options.resume_from {
                    Some(_) => Vec::new(),
                    None => {
                        let filter = match &category {
                            Some(c) => EventFilter::all().category(c.clone()),
                            None => EventFilter::all(),
                        };
                        r.events(id, &filter)?
                    }
                };
                Ok((runs, head))
            })
        })?;
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
            delivery,
        };
        tail.store.clone().spawn(tail.run());
        Ok(EventStream {
            snapshot: runs,
            resource_version: cursor,
            feed,
        })
    }
}

/// The task behind one event stream.
struct EventTail {
    store: Store,
    id: ObjectId,
    category: Option<String>,
    cursor: i64,
    delivery: Delivery<Event>,
}

impl EventTail {
    async fn run(mut self) {
        loop {
            let page = self.store.read(|r| {
                r.consistent(|r| {
                    let exists = r.kind_and_deletion(self.id)?.is_some();
                    if r.event_horizon(self.id, self.category.as_deref())? > self.cursor {
                        return Ok(None);
                    }
                    let runs =
                        r.events_above(self.id, self.category.as_deref(), self.cursor, PAGE)?;
                    Ok(Some((exists, runs)))
                })
            });
            match page {
                Ok(None) => {
                    self.delivery.end(End::TooOld);
                    return;
                }
                Ok(Some((false, _))) => {
                    self.delivery.end(End::Gone(self.id));
                    return;
                }
                Ok(Some((true, runs))) => {
                    let full = runs.len() == PAGE;
                    for run in runs {
                        self.cursor = self.cursor.max(run.resource_version);
                        if !self.delivery.send(run).await {
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
            if !self.delivery.next_wake().await {
                return;
            }
        }
    }
}
