//! Passes per second, the 99th-percentile pass time and the failing
//! objects of each kind, for the first screen: read from the host's
//! metrics as `beehive top` reads them. The failing count is the latest
//! reading's; the rates are over the interval since the oldest of the few
//! readings kept, taken at least [`APART`] apart (the console takes its
//! first when it starts, so the first screen already has an interval).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::handlers::{self, Context};
use crate::protocol::{Reply, Request};
use crate::top::{KindRow, Snapshot, parse, rows, snapshot};

/// How far apart kept readings are.
const APART: Duration = Duration::from_secs(1);
/// How many readings are kept: pages rendered every second show rates
/// over about the last five.
const KEPT: usize = 5;

/// The readings a console keeps between renders, oldest first.
#[derive(Default)]
pub struct Rates {
    kept: Mutex<VecDeque<(Instant, Snapshot)>>,
}

impl Rates {
    /// Reads the host's metrics now, and returns each kind's row (by
    /// `Kind.group`); none when the metrics cannot be read.
    pub async fn read(&self, ctx: &Context) -> BTreeMap<String, KindRow> {
        let Ok(Reply::Metrics { text }) = handlers::execute(ctx, Request::Metrics).await else {
            return BTreeMap::new();
        };
        let (at, now) = (Instant::now(), snapshot(&parse(&text)));
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let rows = match kept.front() {
            Some((then, before)) => rows(before, &now, at - *then),
            None => rows(&now, &now, APART),
        };
        if kept.back().is_none_or(|(last, _)| at - *last >= APART) {
            kept.push_back((at, now));
            if kept.len() > KEPT {
                kept.pop_front();
            }
        }
        rows.into_iter()
            .map(|row| (row.kind.clone(), row))
            .collect()
    }
}
