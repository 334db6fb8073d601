//! Host-wide settings, and the per-kind settings resolved from them.

use std::time::Duration;

use crate::engine::ControllerOptions;
use crate::error::{Error, Result};

/// Settings for a whole host. Per-kind values given at registration override
/// the first six.
///
/// ```
/// use std::time::Duration;
/// let options = beehive::HostOptions::new()
///     .owed_pass_interval(Duration::from_secs(10))
///     .gc_interval(Duration::from_secs(5));
/// ```
#[derive(Clone, Debug)]
pub struct HostOptions {
    pub(crate) concurrency: usize,
    pub(crate) owed_pass_interval: Duration,
    pub(crate) full_pass_interval: Duration,
    pub(crate) individual_pass_interval: Duration,
    pub(crate) startup_full_pass: bool,
    pub(crate) max_retry_interval: Duration,
    pub(crate) gc_interval: Duration,
    pub(crate) requeue_floor: Duration,
    pub(crate) write_log_max_age: Duration,
    pub(crate) write_log_per_kind: usize,
    pub(crate) event_runs_per_timeline: usize,
    pub(crate) event_max_age: Duration,
    pub(crate) transaction_hold_limit: Duration,
    pub(crate) stale_dependents_interval: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            concurrency: 1,
            owed_pass_interval: Duration::from_secs(30),
            full_pass_interval: Duration::ZERO,
            individual_pass_interval: Duration::ZERO,
            startup_full_pass: false,
            max_retry_interval: Duration::from_secs(30),
            gc_interval: Duration::from_secs(30),
            requeue_floor: Duration::from_secs(1),
            write_log_max_age: Duration::from_secs(24 * 60 * 60),
            write_log_per_kind: 0,
            event_runs_per_timeline: 0,
            event_max_age: Duration::ZERO,
            transaction_hold_limit: Duration::from_secs(1),
            stale_dependents_interval: Duration::from_secs(60),
        }
    }
}

impl HostOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Workers per kind, unless a kind says otherwise (default 1).
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers;
        self
    }

    /// How often each kind drains the work the store records as owed
    /// (default 30 s). Cannot be disabled: non-positive is refused.
    pub fn owed_pass_interval(mut self, interval: Duration) -> Self {
        self.owed_pass_interval = interval;
        self
    }

    /// How often each kind passes over all its objects (default off).
    pub fn full_pass_interval(mut self, interval: Duration) -> Self {
        self.full_pass_interval = interval;
        self
    }

    /// A per-object cadence measured from each object's last pass (default off).
    pub fn individual_pass_interval(mut self, interval: Duration) -> Self {
        self.individual_pass_interval = interval;
        self
    }

    /// Whether each kind passes over all its objects once at start (default off).
    pub fn startup_full_pass(mut self, enabled: bool) -> Self {
        self.startup_full_pass = enabled;
        self
    }

    /// The cap of the backoff ladder (default 30 s).
    pub fn max_retry_interval(mut self, interval: Duration) -> Self {
        self.max_retry_interval = interval;
        self
    }

    /// How often the garbage-collection sweeper runs (default 30 s). Cannot be
    /// disabled: non-positive is refused.
    pub fn gc_interval(mut self, interval: Duration) -> Self {
        self.gc_interval = interval;
        self
    }

    /// The per-object re-enqueue floor (default 1 s).
    pub fn requeue_floor(mut self, floor: Duration) -> Self {
        self.requeue_floor = floor;
        self
    }

    /// Write-log retention: entries older than `max_age` (default 24 h; zero
    /// keeps them forever) and beyond the newest `per_kind` of each kind
    /// (default 0: no count bound) are removed by the sweeper.
    pub fn write_log_retention(mut self, per_kind: usize, max_age: Duration) -> Self {
        self.write_log_per_kind = per_kind;
        self.write_log_max_age = max_age;
        self
    }

    /// Event retention: at most `per_timeline` runs per (object, category) and
    /// none that ended more than `max_age` ago; zero leaves a bound off
    /// (both off by default).
    pub fn event_retention(mut self, per_timeline: usize, max_age: Duration) -> Self {
        self.event_runs_per_timeline = per_timeline;
        self.event_max_age = max_age;
        self
    }

    /// How long a pass may hold a transaction open before it is rolled back
    /// (default 1 s): a transaction holds the store's single writer.
    pub fn transaction_hold_limit(mut self, limit: Duration) -> Self {
        self.transaction_hold_limit = limit;
        self
    }

    /// How often the stale-dependents pass looks for dependents whose targets
    /// moved past what their last pass saw (default 60 s): the backstop under
    /// the dependency waker. Cannot be disabled: non-positive is refused.
    pub fn stale_dependents_interval(mut self, interval: Duration) -> Self {
        self.stale_dependents_interval = interval;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        require_positive("stale-dependents interval", self.stale_dependents_interval)?;
        require_positive("owed pass interval", self.owed_pass_interval)?;
        require_positive("GC interval", self.gc_interval)?;
        require_positive("transaction hold limit", self.transaction_hold_limit)?;
        Ok(())
    }

    /// The settings of one kind: its own options over these.
    pub(crate) fn resolve(&self, options: &ControllerOptions) -> Result<KindSettings> {
        if let Some(interval) = options.owed_pass_interval {
            require_positive("owed pass interval", interval)?;
        }
        let max_retry = options
            .max_retry_interval
            .filter(|d| !d.is_zero())
            .unwrap_or(self.max_retry_interval);
        Ok(KindSettings {
            concurrency: options.concurrency.unwrap_or(self.concurrency).max(1),
            owed_pass_interval: options
                .owed_pass_interval
                .unwrap_or(self.owed_pass_interval),
            full_pass_interval: options
                .full_pass_interval
                .unwrap_or(self.full_pass_interval),
            individual_pass_interval: options
                .individual_pass_interval
                .unwrap_or(self.individual_pass_interval),
            startup_full_pass: options.startup_full_pass.unwrap_or(self.startup_full_pass),
            max_retry_interval: max_retry,
            transaction_hold_limit: self.transaction_hold_limit,
        })
    }
}

fn require_positive(what: &str, interval: Duration) -> Result<()> {
    if interval.is_zero() {
        Err(Error::InvalidOption(format!(
            "the {what} must be positive: it cannot be turned off"
        )))
    } else {
        Ok(())
    }
}

/// A kind's effective settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KindSettings {
    pub(crate) concurrency: usize,
    pub(crate) owed_pass_interval: Duration,
    pub(crate) full_pass_interval: Duration,
    pub(crate) individual_pass_interval: Duration,
    pub(crate) startup_full_pass: bool,
    pub(crate) max_retry_interval: Duration,
    pub(crate) transaction_hold_limit: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cadences_that_cannot_be_disabled_refuse_zero() {
        let zero = Duration::ZERO;
        assert!(
            HostOptions::new()
                .owed_pass_interval(zero)
                .validate()
                .is_err()
        );
        assert!(HostOptions::new().gc_interval(zero).validate().is_err());
        assert!(
            HostOptions::new()
                .stale_dependents_interval(zero)
                .validate()
                .is_err()
        );
        assert!(
            HostOptions::new()
                .transaction_hold_limit(zero)
                .validate()
                .is_err()
        );
        assert!(
            HostOptions::new()
                .full_pass_interval(zero)
                .validate()
                .is_ok()
        );
        let per_kind = ControllerOptions::new().owed_pass_interval(zero);
        assert!(matches!(
            HostOptions::new().resolve(&per_kind),
            Err(Error::InvalidOption(_))
        ));
    }

    #[test]
    fn kind_options_override_host_options() {
        let host = HostOptions::new().concurrency(2);
        let settings = host
            .resolve(&ControllerOptions::new().max_retry_interval(Duration::ZERO))
            .unwrap();
        assert_eq!(settings.concurrency, 2);
        assert_eq!(
            settings.max_retry_interval,
            Duration::from_secs(30),
            "zero keeps the default"
        );
        let settings = host
            .resolve(&ControllerOptions::new().concurrency(4))
            .unwrap();
        assert_eq!(settings.concurrency, 4);
    }
}
