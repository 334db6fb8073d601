//! `beehive top`: a live view of a running host, refreshed in place, built
//! on its metrics: per kind the objects, those not yet settled, those
//! failing, the queue, passes per second and the 99th-percentile pass time;
//! per plugin its instances and memory. `q`, Esc or Ctrl-C leaves. Its
//! reading of the metrics ([`parse`], [`snapshot`], [`rows`]) also gives
//! the console's first screen its rates.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ratatui::backend::{Backend, TestBackend};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::{Frame, Terminal};

use crate::failure::Failure;

/// One sample of the text format: name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Reads the Prometheus text format: every line but comments is
/// `name{label="value",...} number`. Lines that do not parse are skipped.
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)?),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn parse_labels(mut text: &str) -> Option<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    while !text.is_empty() {
        let (key, rest) = text.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        text = rest[end + 1..].trim_start_matches(',');
    }
    Some(labels)
}

/// What one export says, by kind and by plugin.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Snapshot {
    kinds: BTreeMap<String, KindNumbers>,
    plugins: BTreeMap<String, PluginNumbers>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct KindNumbers {
    objects: f64,
    unsettled: f64,
    failing: f64,
    queue: f64,
    passes: f64,
    /// The pass-time histogram: upper bound → passes at or under it.
    buckets: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct PluginNumbers {
    instances: f64,
    memory: f64,
}

pub(crate) fn snapshot(samples: &[Sample]) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for sample in samples {
        let label = |key: &str| sample.labels.get(key).cloned().unwrap_or_default();
        match sample.name.as_str() {
            "beehive_objects" => kind(&mut snapshot, &label("kind")).objects = sample.value,
            "beehive_objects_unsettled" => {
                kind(&mut snapshot, &label("kind")).unsettled = sample.value;
            }
            "beehive_objects_failing" => kind(&mut snapshot, &label("kind")).failing = sample.value,
            "workqueue_depth" => kind(&mut snapshot, &label("name")).queue = sample.value,
            "controller_runtime_reconcile_total" => {
                kind(&mut snapshot, &label("controller")).passes += sample.value;
            }
            "controller_runtime_reconcile_time_seconds_bucket" => {
                let le = match label("le").as_str() {
                    "+Inf" => f64::INFINITY,
                    other => other.parse().unwrap_or(f64::INFINITY),
                };
                kind(&mut snapshot, &label("controller"))
                    .buckets
                    .push((le, sample.value));
            }
            "beehive_plugin_instances" => {
                plugin(&mut snapshot, &label("plugin")).instances = sample.value;
            }
            "beehive_plugin_memory_bytes" => {
                plugin(&mut snapshot, &label("plugin")).memory = sample.value;
            }
            _ => {}
        }
    }
    snapshot
}

fn kind<'a>(snapshot: &'a mut Snapshot, name: &str) -> &'a mut KindNumbers {
    snapshot.kinds.entry(name.to_string()).or_default()
}

fn plugin<'a>(snapshot: &'a mut Snapshot, name: &str) -> &'a mut PluginNumbers {
    snapshot.plugins.entry(name.to_string()).or_default()
}

/// One kind's row: rates over the interval between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KindRow {
    pub(crate) kind: String,
    pub(crate) objects: u64,
    pub(crate) unsettled: u64,
    pub(crate) failing: u64,
    pub(crate) queue: u64,
    pub(crate) passes_per_second: f64,
    /// None when no pass ran in the interval.
    pub(crate) p99: Option<f64>,
}

pub(crate) fn rows(before: &Snapshot, now: &Snapshot, elapsed: Duration) -> Vec<KindRow> {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    now.kinds
        .iter()
        .filter(|(_, k)| k.objects > 0.0 || k.passes > 0.0)
        .map(|(name, k)| {
            let earlier = before.kinds.get(name);
            let passes = k.passes - earlier.map_or(0.0, |e| e.passes);
            KindRow {
                kind: name.clone(),
                objects: k.objects as u64,
                unsettled: k.unsettled as u64,
                failing: k.failing as u64,
                queue: k.queue as u64,
                passes_per_second: passes.max(0.0) / seconds,
                p99: percentile(&k.buckets, earlier.map(|e| e.buckets.as_slice()), 0.99),
            }
        })
        .collect()
}

/// The upper bound of the bucket holding the `q` quantile of the passes
/// between `before` and `now` (cumulative histograms).
fn percentile(now: &[(f64, f64)], before: Option<&[(f64, f64)]>, q: f64) -> Option<f64> {
    let count_before = |le: f64| {
        before
            .and_then(|b| b.iter().find(|(bound, _)| *bound == le))
            .map_or(0.0, |(_, count)| *count)
    };
    let deltas: Vec<(f64, f64)> = now
        .iter()
        .map(|(le, count)| (*le, count - count_before(*le)))
        .collect();
    let total = deltas.last()?.1;
    if total <= 0.0 {
        return None;
    }
    deltas
        .iter()
        .find(|(_, count)| *count >= q * total)
        .map(|(le, _)| *le)
}

/// What a frame shows.
struct View<'a> {
    host: &'a str,
    rows: Vec<KindRow>,
    plugins: &'a BTreeMap<String, PluginNumbers>,
    interval: Duration,
}

impl<'a> View<'a> {
    /// The rates between two readings, and the plugins as of the later one.
    fn between(host: &'a str, before: &Reading, now: &'a Reading, interval: Duration) -> Self {
        View {
            host,
            rows: rows(&before.snapshot, &now.snapshot, now.at - before.at),
            plugins: &now.snapshot.plugins,
            interval,
        }
    }
}

/// One export, read, and when.
struct Reading {
    snapshot: Snapshot,
    at: Instant,
}

async fn read(source: &mut impl Source) -> Result<Reading, Failure> {
    let snapshot = snapshot(&parse(&source.fetch().await?));
    Ok(Reading {
        snapshot,
        at: Instant::now(),
    })
}

fn draw(frame: &mut Frame, view: &View<'_>) {
    let [title, kinds, plugins] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(view.plugins.len() as u16 + 3),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(format!(
            "beehive top — {} — every {:?} — q to quit",
            view.host, view.interval
        ))),
        title,
    );
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let kind_rows = view.rows.iter().map(|r| {
        Row::new(vec![
            Cell::from(r.kind.clone()),
            Cell::from(r.objects.to_string()),
            Cell::from(r.unsettled.to_string()),
            Cell::from(r.failing.to_string()),
            Cell::from(r.queue.to_string()),
            Cell::from(format!("{:.1}", r.passes_per_second)),
            Cell::from(r.p99.map_or("-".to_string(), duration_text)),
        ])
    });
    let kinds_table = Table::new(
        kind_rows,
        [
            Constraint::Min(24),
            Constraint::Length(9),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(
        Row::new(vec![
            "KIND",
            "OBJECTS",
            "UNSETTLED",
            "FAILING",
            "QUEUE",
            "PASSES/S",
            "P99",
        ])
        .style(bold),
    )
    .block(Block::bordered().title("kinds"));
    frame.render_widget(kinds_table, kinds);
    let plugin_rows = view.plugins.iter().map(|(name, p)| {
        Row::new(vec![
            Cell::from(name.clone()),
            Cell::from((p.instances as u64).to_string()),
            Cell::from(format!("{:.1} MiB", p.memory / f64::from(1 << 20))),
        ])
    });
    let plugins_table = Table::new(
        plugin_rows,
        [
            Constraint::Min(24),
            Constraint::Length(10),
            Constraint::Length(12),
        ],
    )
    .header(Row::new(vec!["PLUGIN", "INSTANCES", "MEMORY"]).style(bold))
    .block(Block::bordered().title("plugins"));
    frame.render_widget(plugins_table, plugins);
}

/// `0.0004` as `400µs`; a bucket bound is a ceiling, so rounded up.
fn duration_text(seconds: f64) -> String {
    if seconds.is_infinite() {
        return ">84s".into();
    }
    let micros = (seconds * 1e6).ceil();
    if micros < 1000.0 {
        format!("≤{micros}µs")
    } else if micros < 1e6 {
        format!("≤{:.1}ms", micros / 1000.0)
    } else {
        format!("≤{:.1}s", micros / 1e6)
    }
}

/// Where the snapshots come from: one export of the host's metrics.
pub trait Source {
    /// The metrics text, or why there is none.
    fn fetch(&mut self) -> impl Future<Output = Result<String, Failure>>;
}

/// Renders one frame (rates over `interval`) as text, for `--once`.
pub async fn once(
    source: &mut impl Source,
    host: &str,
    interval: Duration,
) -> Result<String, Failure> {
    let before = read(source).await?;
    tokio::time::sleep(interval).await;
    let now = read(source).await?;
    let view = View::between(host, &before, &now, interval);
    Ok(render_text(
        &view,
        100,
        12 + view.rows.len() as u16 + view.plugins.len() as u16,
    ))
}

/// A frame drawn on a headless terminal of `width` × `height`, as text.
fn render_text(view: &View<'_>, width: u16, height: u16) -> String {
    let mut terminal =
        Terminal::new(TestBackend::new(width, height)).expect("a test backend always starts");
    let _ = terminal.draw(|frame| draw(frame, view));
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        let line: String = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol().to_string())
            .collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The interactive view, until `q`, Esc or Ctrl-C.
pub async fn interactive(
    source: &mut impl Source,
    host: &str,
    interval: Duration,
) -> Result<(), Failure> {
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use the terminal: {e}"))?;
    let result = refresh_until_quit(&mut terminal, source, host, interval).await;
    ratatui::restore();
    result
}

async fn refresh_until_quit<B: Backend>(
    terminal: &mut Terminal<B>,
    source: &mut impl Source,
    host: &str,
    interval: Duration,
) -> Result<(), Failure>
where
    B::Error: std::fmt::Display,
{
    let mut before = read(source).await?;
    loop {
        if wait_for_quit(interval).await? {
            return Ok(());
        }
        let now = read(source).await?;
        let view = View::between(host, &before, &now, interval);
        terminal
            .draw(|frame| draw(frame, &view))
            .map_err(|e| format!("cannot draw: {e}"))?;
        before = now;
    }
}

/// Waits up to `interval` for a key; true if it asks to quit.
async fn wait_for_quit(interval: Duration) -> Result<bool, Failure> {
    let deadline = Instant::now() + interval;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let key = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Event>> {
            if event::poll(left)? {
                Ok(Some(event::read()?))
            } else {
                Ok(None)
            }
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot read the terminal: {e}"))?;
        if let Some(Event::Key(key)) = key
            && asks_to_quit(key)
        {
            return Ok(true);
        }
    }
}

/// `q`, Esc or Ctrl-C (raw mode delivers Ctrl-C as a key, not a signal).
fn asks_to_quit(key: KeyEvent) -> bool {
    let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP beehive_objects Objects.
beehive_objects{kind="Greeting.example.dev"} 10
controller_runtime_reconcile_total{controller="Greeting.example.dev",result="success"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="0.001"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="0.01"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="+Inf"} 100
"#;

    const NOW: &str = r#"beehive_objects{kind="Greeting.example.dev"} 12
beehive_objects_unsettled{kind="Greeting.example.dev"} 2
beehive_objects_failing{kind="Greeting.example.dev"} 1
workqueue_depth{name="Greeting.example.dev"} 3
controller_runtime_reconcile_total{controller="Greeting.example.dev",result="success"} 290
controller_runtime_reconcile_total{controller="Greeting.example.dev",result="error"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="0.001"} 280
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="0.01"} 300
controller_runtime_reconcile_time_seconds_bucket{controller="Greeting.example.dev",le="+Inf"} 300
beehive_plugin_instances{plugin="greeting"} 1
beehive_plugin_memory_bytes{plugin="greeting"} 2097152
"#;

    #[test]
    fn q_escape_and_ctrl_c_quit_and_other_keys_do_not() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(asks_to_quit(key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(asks_to_quit(key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(asks_to_quit(key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!asks_to_quit(key(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!asks_to_quit(key(KeyCode::Char('x'), KeyModifiers::NONE)));
    }

    #[test]
    fn samples_parse_with_escaped_labels() {
        let samples = parse("x{a=\"q\\\"uote\",b=\"2\"} 1.5\n# comment\ny 3\nbroken line\n");
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].labels["a"], "q\"uote");
        assert_eq!(samples[0].value, 1.5);
        assert_eq!(samples[1].name, "y");
    }

    #[test]
    fn rates_and_the_p99_come_from_the_interval() {
        let before = snapshot(&parse(BEFORE));
        let now = snapshot(&parse(NOW));
        let rows = rows(&before, &now, Duration::from_secs(2));
        assert_eq!(
            rows,
            [KindRow {
                kind: "Greeting.example.dev".into(),
                objects: 12,
                unsettled: 2,
                failing: 1,
                queue: 3,
                passes_per_second: 100.0,
                // 180 of the interval's 200 passes took ≤ 1 ms: p99 is ≤ 10 ms.
                p99: Some(0.01),
            }]
        );
    }

    #[test]
    fn a_frame_on_a_headless_terminal_shows_kinds_and_plugins() {
        let before = snapshot(&parse(BEFORE));
        let now = snapshot(&parse(NOW));
        let view = View {
            host: "beehive.db",
            rows: rows(&before, &now, Duration::from_secs(2)),
            plugins: &now.plugins,
            interval: Duration::from_secs(1),
        };
        let text = render_text(&view, 100, 14);
        assert!(text.contains("beehive top — beehive.db"), "{text}");
        let row = text
            .lines()
            .find(|l| l.contains("Greeting.example.dev"))
            .unwrap();
        for cell in ["12", "100.0", "≤10.0ms"] {
            assert!(row.contains(cell), "{cell} missing in {row}");
        }
        assert!(
            text.contains("greeting") && text.contains("2.0 MiB"),
            "{text}"
        );
    }
}
