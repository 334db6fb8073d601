//! An object's events as a picture: one row per category, each run drawn
//! from its first occurrence to its last, warnings in red, so a flapping
//! connection reads at a glance (the reference's connection-health panel).
//! Drawn on the server as SVG markup: no script, and every word in it
//! (categories, reasons, messages) goes through [`text`].

use std::collections::BTreeMap;
use std::fmt::Write;

use beehive::object::Timestamp;

use crate::output::rfc3339;
use crate::protocol::EventView;
use crate::web::html::text;

/// The drawing's width in pixels, and the room its row labels take.
const WIDTH: i64 = 800;
const LABEL: i64 = 120;
const ROW: i64 = 22;
/// The narrowest a run is drawn, so a single occurrence shows.
const MIN_RUN: i64 = 3;

/// The SVG for `events` (ended by `now`), or nothing when there are none.
pub fn svg(events: &[EventView], now: Timestamp) -> String {
    let Some(start) = events.iter().map(|e| e.first_at.as_millis()).min() else {
        return String::new();
    };
    let end = now.as_millis().max(start + 1);
    let mut rows: BTreeMap<&str, Vec<&EventView>> = BTreeMap::new();
    for event in events {
        rows.entry(&event.category).or_default().push(event);
    }
    let span = WIDTH - LABEL - 10;
    let x = |at: i64| LABEL + (at - start) * span / (end - start);
    let height = ROW * rows.len() as i64 + 24;
    let mut svg = format!(
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"event timeline\">"
    );
    for (index, (category, runs)) in rows.iter().enumerate() {
        let y = index as i64 * ROW + 4;
        let _ = write!(
            svg,
            "<text class=\"category\" x=\"0\" y=\"{}\" font-size=\"12\">{}</text>",
            y + 13,
            text(category)
        );
        for run in runs {
            let left = x(run.first_at.as_millis());
            let width = (x(run.last_at.as_millis()) - left).max(MIN_RUN);
            let (class, fill) = match run.warning {
                true => ("run warning", "#b3261e"),
                false => ("run normal", "#1b7f3b"),
            };
            let _ = write!(
                svg,
                "<rect class=\"{class}\" x=\"{left}\" y=\"{y}\" width=\"{width}\" height=\"{}\" fill=\"{fill}\">\
<title>{} ×{}: {} (first {}, last {})</title></rect>",
                ROW - 6,
                text(&run.reason),
                run.count,
                text(&run.message),
                rfc3339(run.first_at),
                rfc3339(run.last_at),
            );
        }
    }
    let axis = ROW * rows.len() as i64 + 18;
    let _ = write!(
        svg,
        "<text class=\"axis\" x=\"{LABEL}\" y=\"{axis}\" font-size=\"11\">{}</text>\
<text class=\"axis\" x=\"{WIDTH}\" y=\"{axis}\" font-size=\"11\" text-anchor=\"end\">now</text></svg>",
        rfc3339(Timestamp::from_millis(start)),
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(category: &str, warning: bool, first: i64, last: i64) -> EventView {
        EventView {
            object: None,
            category: category.to_string(),
            warning,
            reason: "<b>Probe</b>".to_string(),
            message: "down \u{202e}".to_string(),
            detail: None,
            count: 2,
            first_at: Timestamp::from_millis(first),
            last_at: Timestamp::from_millis(last),
            trace_id: None,
        }
    }

    #[test]
    fn each_category_is_a_row_and_each_run_a_bar_in_time() {
        let events = [
            run("connection", false, 1_000, 2_000),
            run("connection", true, 3_000, 3_000),
            run("reconcile", true, 1_500, 4_000),
        ];
        let drawn = svg(&events, Timestamp::from_millis(5_000));
        assert_eq!(drawn.matches("<text class=\"category\"").count(), 2);
        assert_eq!(drawn.matches("<rect class=\"run warning\"").count(), 2);
        assert_eq!(drawn.matches("<rect class=\"run normal\"").count(), 1);
        assert!(
            drawn.contains("&lt;b&gt;Probe&lt;/b&gt; ×2: down \\u{202e}"),
            "{drawn}"
        );
        assert!(!drawn.contains("<b>"), "{drawn}");
        assert_eq!(svg(&[], Timestamp::from_millis(5_000)), "");
    }
}
