//! Live pages: `/live` is a stream of Server-Sent Events saying the
//! store moved, and `/console.js` refetches the open page when it does and
//! swaps in its new `<main>`, so an apply shows on an open page without a
//! reload or a poll.
//!
//! The stream waits on the store's commit notification
//! ([`beehive::Store::watch_commits`]): nothing runs while nothing
//! commits, however many pages are open. A busy store's commits are
//! coalesced to one event every [`MIN_GAP`]. A page that stops reading
//! holds its connection until the connection's lifetime ends it (the
//! browser's `EventSource` then reconnects).

use std::convert::Infallible;
use std::time::Duration;

use beehive::Store;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use tokio::sync::watch;
use tokio::time::Instant;

/// The least time between two events: a converging store commits
/// thousands of times a second, and a page needs to hear of it once.
const MIN_GAP: Duration = Duration::from_millis(100);
/// How long a quiet stream waits before a comment that keeps proxies from
/// closing it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The page's script: refetch on a change, at most one fetch at a time.
pub const SCRIPT: &str = r#""use strict";
(() => {
  const source = new EventSource("/live");
  let fetching = false;
  let again = false;
  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const response = await fetch(location.href, { headers: { accept: "text/html" } });
      if (response.ok) {
        const page = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = page.querySelector("main");
        const shown = document.querySelector("main");
        if (fresh && shown) { shown.replaceWith(fresh); }
      }
    } finally {
      fetching = false;
      if (again) { again = false; refresh(); }
    }
  }
  source.addEventListener("change", refresh);
})();
"#;

/// What the stream sends next.
enum Next {
    Change(i64),
    StillHere,
    Ended,
}

/// The event stream: a `change` event with the store's new head each time
/// it moves.
pub fn stream(store: &Store) -> super::Body {
    let mut commits = store.watch_commits();
    // Only what commits after the page opened is news.
    let seen = *commits.borrow_and_update();
    let opening = Frame::data(Bytes::from_static(b"retry: 2000\n\n"));
    let changes = futures_util::stream::unfold(
        (commits, seen, None),
        |(mut commits, seen, last_sent): (watch::Receiver<i64>, i64, Option<Instant>)| async move {
            let (frame, seen, sent) = match next(&mut commits, seen, last_sent).await {
                Next::Change(head) => {
                    let event = format!("event: change\ndata: {head}\n\n");
                    (Frame::data(Bytes::from(event)), head, Some(Instant::now()))
                }
                Next::StillHere => {
                    let comment = Frame::data(Bytes::from_static(b": still here\n\n"));
                    (comment, seen, last_sent)
                }
                Next::Ended => return None,
            };
            Some((Ok::<_, Infallible>(frame), (commits, seen, sent)))
        },
    );
    let frames =
        futures_util::stream::once(async move { Ok::<_, Infallible>(opening) }).chain(changes);
    BodyExt::boxed(StreamBody::new(frames))
}

/// Waits for the store's head to move past `seen` (or the keep-alive),
/// and, when an event went out less than [`MIN_GAP`] ago, for the rest of
/// the gap, so the commits landing meanwhile are told by one event. A
/// commit that wrote only bookkeeping (the head unmoved) is no news.
async fn next(commits: &mut watch::Receiver<i64>, seen: i64, last_sent: Option<Instant>) -> Next {
    loop {
        tokio::select! {
            changed = commits.changed() => {
                // An error: the store is gone, the host stopped.
                if changed.is_err() {
                    return Next::Ended;
                }
                if let Some(sent) = last_sent {
                    tokio::time::sleep_until(sent + MIN_GAP).await;
                }
                let head = *commits.borrow_and_update();
                if head != seen {
                    return Next::Change(head);
                }
            }
            () = tokio::time::sleep(KEEP_ALIVE) => return Next::StillHere,
        }
    }
}
