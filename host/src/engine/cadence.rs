//! When a kind's objects get passes besides the ones their writes push, and
//! how far failures back off: one type for every place that sets them.

use std::time::Duration;

use crate::error::{Error, Result};

/// A kind's cadences. Every field is optional: an unset one takes the next
/// level's value — a kind's registration over the host's options, over the
/// defaults documented on each field.
///
/// One rule for zero: it turns off a cadence that may be off (the full and
/// individual passes) and is refused with [`Error::InvalidOption`] where the
/// cadence is what keeps the host correct (the owed pass, the backoff cap).
///
/// Set on [`HostOptions`](crate::HostOptions) for every kind, on
/// [`ControllerOptions`](crate::ControllerOptions) for one, by a plugin's
/// registration, and by `beehive run`'s flags of the same names.
///
/// ```
/// use std::time::Duration;
/// use beehive::engine::Cadence;
///
/// let cadence = Cadence::new()
///     .full_pass_interval(Duration::from_secs(600))
///     .startup_full_pass(true);
/// let options = beehive::ControllerOptions::new().cadence(cadence);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cadence {
    /// How often the kind drains the work the store records as owed: the
    /// backstop under every push (default 30 s; zero refused).
    pub owed_pass_interval: Option<Duration>,
    /// How often the kind passes over all its objects (default off).
    pub full_pass_interval: Option<Duration>,
    /// A per-object cadence measured from each object's last pass, jittered
    /// (default off).
    pub individual_pass_interval: Option<Duration>,
    /// Whether the kind passes over all its objects once when the host
    /// starts, for state that lives in the process (default no).
    pub startup_full_pass: Option<bool>,
    /// The cap of the backoff ladder after failed passes (default 30 s; zero
    /// refused).
    pub max_retry_interval: Option<Duration>,
}

impl Cadence {
    /// Nothing set: every value comes from the next level.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Cadence::owed_pass_interval`].
    pub fn owed_pass_interval(mut self, interval: Duration) -> Self {
        self.owed_pass_interval = Some(interval);
        self
    }

    /// Sets [`Cadence::full_pass_interval`]; zero turns it off.
    pub fn full_pass_interval(mut self, interval: Duration) -> Self {
        self.full_pass_interval = Some(interval);
        self
    }

    /// Sets [`Cadence::individual_pass_interval`]; zero turns it off.
    pub fn individual_pass_interval(mut self, interval: Duration) -> Self {
        self.individual_pass_interval = Some(interval);
        self
    }

    /// Sets [`Cadence::startup_full_pass`].
    pub fn startup_full_pass(mut self, enabled: bool) -> Self {
        self.startup_full_pass = Some(enabled);
        self
    }

    /// Sets [`Cadence::max_retry_interval`].
    pub fn max_retry_interval(mut self, interval: Duration) -> Self {
        self.max_retry_interval = Some(interval);
        self
    }

    /// These values where set, `base`'s elsewhere.
    pub(crate) fn over(self, base: Cadence) -> Cadence {
        Cadence {
            owed_pass_interval: self.owed_pass_interval.or(base.owed_pass_interval),
            full_pass_interval: self.full_pass_interval.or(base.full_pass_interval),
            individual_pass_interval: self
                .individual_pass_interval
                .or(base.individual_pass_interval),
            startup_full_pass: self.startup_full_pass.or(base.startup_full_pass),
            max_retry_interval: self.max_retry_interval.or(base.max_retry_interval),
        }
    }

    /// The values that apply, defaults filled in.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a zero owed-pass interval or backoff cap.
    pub(crate) fn resolve(self) -> Result<Resolved> {
        Ok(Resolved {
            owed_pass_interval: required(
                "owed pass interval",
                self.owed_pass_interval,
                Duration::from_secs(30),
            )?,
            full_pass_interval: optional(self.full_pass_interval),
            individual_pass_interval: optional(self.individual_pass_interval),
            startup_full_pass: self.startup_full_pass.unwrap_or(false),
            max_retry_interval: required(
                "backoff cap (max retry interval)",
                self.max_retry_interval,
                Duration::from_secs(30),
            )?,
        })
    }
}

/// A cadence with every value decided; an off cadence is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) owed_pass_interval: Duration,
    pub(crate) full_pass_interval: Option<Duration>,
    pub(crate) individual_pass_interval: Option<Duration>,
    pub(crate) startup_full_pass: bool,
    pub(crate) max_retry_interval: Duration,
}

fn required(what: &str, set: Option<Duration>, default: Duration) -> Result<Duration> {
    match set {
        Some(interval) if interval.is_zero() => Err(Error::InvalidOption(format!(
            "the {what} must be positive: it cannot be turned off"
        ))),
        Some(interval) => Ok(interval),
        None => Ok(default),
    }
}

fn optional(set: Option<Duration>) -> Option<Duration> {
    set.filter(|interval| !interval.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn unset_values_take_the_defaults() {
        let resolved = Cadence::new().resolve().unwrap();
        assert_eq!(resolved.owed_pass_interval, Duration::from_secs(30));
        assert_eq!(resolved.full_pass_interval, None);
        assert_eq!(resolved.individual_pass_interval, None);
        assert!(!resolved.startup_full_pass);
        assert_eq!(resolved.max_retry_interval, Duration::from_secs(30));
    }

    #[test]
    fn zero_turns_optional_cadences_off_and_is_refused_for_required_ones() {
        let off = Cadence::new()
            .full_pass_interval(Duration::ZERO)
            .individual_pass_interval(Duration::ZERO)
            .resolve()
            .unwrap();
        assert_eq!(off.full_pass_interval, None);
        assert_eq!(off.individual_pass_interval, None);
        for refused in [
            Cadence::new().owed_pass_interval(Duration::ZERO),
            Cadence::new().max_retry_interval(Duration::ZERO),
        ] {
            assert!(matches!(refused.resolve(), Err(Error::InvalidOption(_))));
        }
    }

    #[test]
    fn a_set_value_wins_over_the_base_and_an_unset_one_inherits() {
        let host = Cadence::new()
            .full_pass_interval(MINUTE)
            .startup_full_pass(true);
        let kind = Cadence::new().full_pass_interval(Duration::ZERO);
        let resolved = kind.over(host).resolve().unwrap();
        assert_eq!(resolved.full_pass_interval, None, "the kind turned it off");
        assert!(resolved.startup_full_pass, "inherited from the host");
    }
}
