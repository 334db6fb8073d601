//! What a plugin may use: the operator's ceilings, and the registration a
//! plugin asked for clamped under them.
//!
//! The operator's word is a ceiling. A plugin's registration may ask for less
//! (a shorter deadline, fewer workers, a slower cadence), never more; what it
//! asks beyond a ceiling is cut to the ceiling, and the cut is logged once
//! when the plugin loads.

use std::time::Duration;

use crate::engine::Cadence;
use crate::naming;
use crate::plugin::contract::v0_2 as wit;
use crate::plugin::http::HttpLimits;

/// The limits plugins run under. As [`RuntimeOptions::limits`] they are the
/// host-wide ceilings; from [`Plugin::limits`] they are what applies to one
/// loaded plugin (its own requests under the ceilings).
///
/// [`RuntimeOptions::limits`]: crate::plugin::RuntimeOptions::limits
/// [`Plugin::limits`]: crate::plugin::Plugin::limits
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Time one pass may spend running guest code, not counting time blocked
    /// in host calls or waiting for a turn on a thread (default 10 s).
    pub pass_deadline: Duration,
    /// Wall-clock time one pass may take in all, host calls included
    /// (default 60 s).
    pub pass_wall_limit: Duration,
    /// Linear memory one instance may grow to (default 64 MiB).
    pub memory: usize,
    /// The most passes of the plugin's kind that run at once, and so the most
    /// instances of one plugin version (default 16).
    pub concurrency: usize,
    /// The shortest cadence a plugin may ask for: owed, full and individual
    /// pass intervals and the backoff cap (default 1 s).
    pub min_interval: Duration,
    /// Kind-client handles one instance may hold at once (default 256).
    pub kind_clients: usize,
    /// Host calls one pass may make, WASI calls included (default 10,000).
    pub host_calls_per_pass: u64,
    /// The bounds on outbound HTTP requests, for plugins granted any hosts.
    pub http: HttpLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pass_deadline: Duration::from_secs(10),
            pass_wall_limit: Duration::from_secs(60),
            memory: 64 << 20,
            concurrency: 16,
            min_interval: Duration::from_secs(1),
            kind_clients: 256,
            host_calls_per_pass: 10_000,
            http: HttpLimits::default(),
        }
    }
}

/// The operator's limits for one plugin; what is unset takes the host-wide
/// value. These are ceilings too: the plugin may still ask for less.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitOverrides {
    /// The pass deadline ceiling for this plugin.
    pub pass_deadline: Option<Duration>,
    /// The pass wall-clock limit for this plugin.
    pub pass_wall_limit: Option<Duration>,
    /// The memory cap for this plugin.
    pub memory: Option<usize>,
    /// The concurrency ceiling for this plugin.
    pub concurrency: Option<usize>,
}

impl LimitOverrides {
    /// The host-wide `limits` with this plugin's overrides applied.
    pub(crate) fn over(&self, limits: Limits) -> Limits {
        Limits {
            pass_deadline: self.pass_deadline.unwrap_or(limits.pass_deadline),
            pass_wall_limit: self.pass_wall_limit.unwrap_or(limits.pass_wall_limit),
            memory: self.memory.unwrap_or(limits.memory),
            concurrency: self.concurrency.unwrap_or(limits.concurrency),
            ..limits
        }
    }
}

/// What makes `registration` unusable, if anything: a kind or finalizer
/// outside the naming policy, or a cadence no kind may have.
pub(crate) fn registration_problem(registration: &wit::Registration) -> Option<String> {
    if let Some(problem) = naming::kind_problem(&registration.group, &registration.kind) {
        return Some(format!("an invalid kind: {problem}"));
    }
    if let Err(error) = crate::engine::cadence::resolve(cadence(registration)) {
        return Some(error.to_string());
    }
    registration
        .finalizers
        .iter()
        .find_map(|f| naming::label_problem("a finalizer", f))
        .map(|problem| format!("an invalid finalizer: {problem}"))
}

/// Cuts what `registration` asks for down to `ceiling`, in place, and
/// returns the limits that apply to the plugin, with one line per request
/// that was cut.
pub(crate) fn clamp(
    registration: &mut wit::Registration,
    ceiling: Limits,
) -> (Limits, Vec<String>) {
    let mut cuts = Vec::new();
    let mut applied = ceiling;
    if let Some(asked) = registration.pass_deadline_ms {
        let asked = Duration::from_millis(asked);
        if asked > ceiling.pass_deadline {
            cuts.push(format!(
                "a pass deadline of {asked:?}; {:?} applies",
                ceiling.pass_deadline
            ));
            registration.pass_deadline_ms = Some(millis(ceiling.pass_deadline));
        } else {
            applied.pass_deadline = asked;
        }
    }
    if let Some(asked) = registration.concurrency {
        let asked = asked as usize;
        if asked > ceiling.concurrency || asked == 0 {
            let workers = asked.clamp(1, ceiling.concurrency.max(1));
            cuts.push(format!("concurrency {asked}; {workers} applies"));
            registration.concurrency = Some(workers as u32);
        }
        applied.concurrency = registration.concurrency.map_or(asked, |n| n as usize);
    }
    let floor = ceiling.min_interval;
    // Zero turns the full and individual cadences off, which costs nothing;
    // a zero owed interval or backoff cap was refused before this.
    let cadences: [(&str, &mut Option<u64>, bool); 4] = [
        (
            "owed-pass interval",
            &mut registration.owed_pass_interval_ms,
            false,
        ),
        (
            "full-pass interval",
            &mut registration.full_pass_interval_ms,
            true,
        ),
        (
            "individual-pass interval",
            &mut registration.individual_pass_interval_ms,
            true,
        ),
        ("backoff cap", &mut registration.max_retry_interval_ms, true),
    ];
    for (what, asked, zero_is_off) in cadences {
        let Some(ms) = *asked else { continue };
        if ms == 0 && zero_is_off {
            continue;
        }
        let interval = Duration::from_millis(ms);
        if interval < floor {
            cuts.push(format!("a {what} of {interval:?}; {floor:?} applies"));
            *asked = Some(millis(floor));
        }
    }
    (applied, cuts)
}

/// The cadence a plugin's registration asks for, before any cut.
pub(crate) fn cadence(registration: &wit::Registration) -> Cadence {
    let ms = |set: Option<u64>| set.map(Duration::from_millis);
    Cadence {
        owed_pass_interval: ms(registration.owed_pass_interval_ms),
        full_pass_interval: ms(registration.full_pass_interval_ms),
        individual_pass_interval: ms(registration.individual_pass_interval_ms),
        startup_full_pass: registration.startup_full_pass,
        max_retry_interval: ms(registration.max_retry_interval_ms),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(concurrency: u32, deadline_ms: u64, cadence_ms: u64) -> wit::Registration {
        wit::Registration {
            group: "test.dev".into(),
            kind: "Hostile".into(),
            finalizers: Vec::new(),
            concurrency: Some(concurrency),
            owed_pass_interval_ms: Some(cadence_ms),
            full_pass_interval_ms: Some(cadence_ms),
            individual_pass_interval_ms: Some(cadence_ms),
            startup_full_pass: None,
            max_retry_interval_ms: Some(cadence_ms),
            spec_schema_version: 0,
            status_schema_version: 0,
            pass_deadline_ms: Some(deadline_ms),
            spec_schema: None,
            status_schema: None,
            validates: false,
            migrates: false,
        }
    }

    /// The owed, full and individual pass intervals and the backoff cap, in ms.
    fn cadences_ms(registration: &wit::Registration) -> [Option<u64>; 4] {
        [
            registration.owed_pass_interval_ms,
            registration.full_pass_interval_ms,
            registration.individual_pass_interval_ms,
            registration.max_retry_interval_ms,
        ]
    }

    #[test]
    fn requests_beyond_the_ceiling_are_cut_to_it() {
        let ceiling = Limits::default();
        let thirty_years = 31 * 365 * 24 * 3600 * 1000;
        let mut registration = asking(u32::MAX, thirty_years, 1);
        let (applied, cuts) = clamp(&mut registration, ceiling);
        assert_eq!(applied.pass_deadline, ceiling.pass_deadline);
        assert_eq!(registration.concurrency, Some(16));
        assert_eq!(registration.pass_deadline_ms, Some(10_000));
        assert_eq!(cadences_ms(&registration), [Some(1000); 4], "the floor");
        assert_eq!(cuts.len(), 6, "{cuts:?}");
    }

    #[test]
    fn a_plugin_may_ask_for_less() {
        let mut registration = asking(2, 300, 5000);
        let (applied, cuts) = clamp(&mut registration, Limits::default());
        assert!(cuts.is_empty(), "{cuts:?}");
        assert_eq!(applied.pass_deadline, Duration::from_millis(300));
        assert_eq!(registration.concurrency, Some(2));
        assert_eq!(applied.concurrency, 2);
        assert_eq!(registration.full_pass_interval_ms, Some(5000));
    }

    #[test]
    fn zero_turns_a_cadence_off_and_zero_workers_is_one() {
        let mut registration = asking(0, 300, 0);
        registration.owed_pass_interval_ms = None;
        registration.max_retry_interval_ms = None;
        assert_eq!(registration_problem(&registration), None);
        let (_, cuts) = clamp(&mut registration, Limits::default());
        assert_eq!(cadences_ms(&registration), [None, Some(0), Some(0), None]);
        assert_eq!(registration.concurrency, Some(1));
        assert_eq!(cuts.len(), 1, "{cuts:?}");
    }

    #[test]
    fn a_zero_owed_interval_or_backoff_cap_is_refused() {
        let mut registration = asking(1, 300, 5000);
        registration.owed_pass_interval_ms = Some(0);
        let problem = registration_problem(&registration).unwrap();
        assert!(
            problem.contains("owed pass interval must be positive"),
            "{problem}"
        );
        let mut registration = asking(1, 300, 5000);
        registration.max_retry_interval_ms = Some(0);
        let problem = registration_problem(&registration).unwrap();
        assert!(problem.contains("backoff cap"), "{problem}");
    }

    #[test]
    fn per_plugin_overrides_replace_the_host_wide_values() {
        let limits = LimitOverrides {
            memory: Some(8 << 20),
            concurrency: Some(2),
            ..LimitOverrides::default()
        }
        .over(Limits::default());
        assert_eq!(limits.memory, 8 << 20);
        assert_eq!(limits.concurrency, 2);
        assert_eq!(limits.pass_deadline, Limits::default().pass_deadline);
    }
}
