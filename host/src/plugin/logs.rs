//! Plugins' log lines, kept for readers other than the host's stderr: the
//! most recent ones, and a live feed for followers (`beehive logs -f`).
//!
//! Both are bounded: a plugin that logs without pause costs at most
//! [`PluginLogs::RECENT`] lines of [`PluginLogs::LINE_BYTES`] each, and a
//! follower that falls [`PluginLogs::FEED`] lines behind is told how many it
//! missed rather than holding the plugin back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::object::Timestamp;
use crate::sync::lock;

/// One line a plugin logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// When it was logged.
    pub at: Timestamp,
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.
    pub level: &'static str,
    /// The plugin's name (its file stem).
    pub plugin: String,
    /// The object of the pass it was logged in (`Kind.group/name`), or
    /// empty outside a pass.
    pub object: String,
    /// What it said, control characters escaped, cut at
    /// [`PluginLogs::LINE_BYTES`].
    pub message: String,
}

/// The log lines of every plugin a runtime loads. Cloning shares them.
#[derive(Clone, Debug)]
pub struct PluginLogs {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    recent: Mutex<VecDeque<LogLine>>,
    feed: broadcast::Sender<LogLine>,
}

impl Default for PluginLogs {
    fn default() -> Self {
        PluginLogs {
            shared: Arc::new(Shared {
                recent: Mutex::new(VecDeque::with_capacity(Self::RECENT)),
                feed: broadcast::channel(Self::FEED).0,
            }),
        }
    }
}

impl PluginLogs {
    /// How many of the latest lines are kept, all plugins together.
    pub const RECENT: usize = 1000;
    /// How far a follower may fall behind before it misses lines.
    pub const FEED: usize = 1024;
    /// The longest message kept, in bytes; the rest is cut.
    pub const LINE_BYTES: usize = 4096;

    /// Keeps `line` and hands it to every follower.
    pub(crate) fn record(&self, mut line: LogLine) {
        cut(&mut line.message, Self::LINE_BYTES);
        // Under the lock, so a follower's snapshot and its feed neither
        // miss nor repeat a line.
        let mut recent = lock(&self.shared.recent);
        if recent.len() == Self::RECENT {
            recent.pop_front();
        }
        recent.push_back(line.clone());
        // No follower is not an error: the line is kept all the same.
        let _ = self.shared.feed.send(line);
    }

    /// The latest lines, oldest first.
    pub fn recent(&self) -> Vec<LogLine> {
        lock(&self.shared.recent).iter().cloned().collect()
    }

    /// The latest lines, and every line logged after them.
    pub fn follow(&self) -> (Vec<LogLine>, broadcast::Receiver<LogLine>) {
        let recent = lock(&self.shared.recent);
        let feed = self.shared.feed.subscribe();
        (recent.iter().cloned().collect(), feed)
    }
}

/// Cuts `text` to at most `limit` bytes, on a character boundary, saying
/// how much went.
fn cut(text: &mut String, limit: usize) {
    if text.len() <= limit {
        return;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut_bytes = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("… ({cut_bytes} more bytes)"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> LogLine {
        LogLine {
            at: Timestamp::from_millis(0),
            level: "INFO",
            plugin: "p".into(),
            object: String::new(),
            message: message.into(),
        }
    }

    #[test]
    fn the_latest_lines_are_kept_and_long_ones_cut() {
        let logs = PluginLogs::default();
        for i in 0..PluginLogs::RECENT + 5 {
            logs.record(line(&i.to_string()));
        }
        let recent = logs.recent();
        assert_eq!(recent.len(), PluginLogs::RECENT);
        assert_eq!(recent[0].message, "5");
        logs.record(line(&"é".repeat(PluginLogs::LINE_BYTES)));
        let long = logs.recent().pop().unwrap().message;
        assert!(long.len() < PluginLogs::LINE_BYTES + 40, "{}", long.len());
        assert!(long.ends_with(&format!("({} more bytes)", PluginLogs::LINE_BYTES)));
    }

    #[tokio::test]
    async fn a_follower_gets_the_snapshot_then_every_later_line_once() {
        let logs = PluginLogs::default();
        logs.record(line("before"));
        let (snapshot, mut feed) = logs.follow();
        logs.record(line("after"));
        assert_eq!(snapshot, vec![line("before")]);
        assert_eq!(feed.recv().await.unwrap(), line("after"));
    }
}
