//! Live pages: `/live` is a stream of Server-Sent Events saying the
//! store moved, and `/console.js` refetches the open page when it does and
//! swaps in its new `<main>`, so an apply shows on an open page without a
//! reload or a poll from the browser.
//!
//! The stream reads the store's head, a number in memory, every
//! [`TICK`]: no store read, however many pages are open. A page that stops
//! reading holds its connection until the connection's lifetime ends it
//! (the browser's `EventSource` then reconnects).

use std::convert::Infallible;
use std::time::Duration;

use beehive::Store;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use tokio::time::Instant;

/// How often a stream looks at the store's head.
const TICK: Duration = Duration::from_millis(200);
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

/// The event stream: a `change` event with the store's new head each time
/// it moves.
pub fn stream(store: Store) -> super::Body {
    let seen = store.resource_version();
    let opening = Frame::data(Bytes::from_static(b"retry: 2000\n\n"));
    let changes = futures_util::stream::unfold(
        (store, seen, Instant::now()),
        |(store, mut seen, mut quiet_since)| async move {
            loop {
                tokio::time::sleep(TICK).await;
                let head = store.resource_version();
                if head != seen {
                    seen = head;
                    let event = format!("event: change\ndata: {head}\n\n");
                    let frame = Frame::data(Bytes::from(event));
                    return Some((Ok(frame), (store, seen, Instant::now())));
                }
                if quiet_since.elapsed() >= KEEP_ALIVE {
                    quiet_since = Instant::now();
                    let frame = Frame::data(Bytes::from_static(b": still here\n\n"));
                    return Some((Ok(frame), (store, seen, quiet_since)));
                }
            }
        },
    );
    let frames =
        futures_util::stream::once(async move { Ok::<_, Infallible>(opening) }).chain(changes);
    BodyExt::boxed(StreamBody::new(frames))
}
