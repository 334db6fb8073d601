//! When a kind's objects get passes besides the ones their writes push, and
//! how far failures back off: the defaults and the zero rule behind the
//! [`Cadence`] every place sets.

use std::time::Duration;

pub use beehive_types::Cadence;

use crate::error::{Error, Result};

/// The values that apply, defaults filled in (the defaults are documented on
/// [`Cadence`]'s fields).
///
/// # Errors
/// [`Error::InvalidOption`] for a zero owed-pass interval or backoff cap.
pub(crate) fn resolve(cadence: Cadence) -> Result<Resolved> {
    Ok(Resolved {
        owed_pass_interval: required(
            "owed pass interval",
            cadence.owed_pass_interval,
            Duration::from_secs(30),
        )?,
        full_pass_interval: optional(cadence.full_pass_interval),
        individual_pass_interval: optional(cadence.individual_pass_interval),
        startup_full_pass: cadence.startup_full_pass.unwrap_or(false),
        max_retry_interval: required(
            "backoff cap (max retry interval)",
            cadence.max_retry_interval,
            Duration::from_secs(30),
        )?,
    })
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
        let resolved = resolve(Cadence::new()).unwrap();
        assert_eq!(resolved.owed_pass_interval, Duration::from_secs(30));
        assert_eq!(resolved.full_pass_interval, None);
        assert_eq!(resolved.individual_pass_interval, None);
        assert!(!resolved.startup_full_pass);
        assert_eq!(resolved.max_retry_interval, Duration::from_secs(30));
    }

    #[test]
    fn zero_turns_optional_cadences_off_and_is_refused_for_required_ones() {
        let off = resolve(
            Cadence::new()
                .full_pass_interval(Duration::ZERO)
                .individual_pass_interval(Duration::ZERO),
        )
        .unwrap();
        assert_eq!(off.full_pass_interval, None);
        assert_eq!(off.individual_pass_interval, None);
        for refused in [
            Cadence::new().owed_pass_interval(Duration::ZERO),
            Cadence::new().max_retry_interval(Duration::ZERO),
        ] {
            assert!(matches!(resolve(refused), Err(Error::InvalidOption(_))));
        }
    }

    #[test]
    fn a_set_value_wins_over_the_base_and_an_unset_one_inherits() {
        let host = Cadence::new()
            .full_pass_interval(MINUTE)
            .startup_full_pass(true);
        let kind = Cadence::new().full_pass_interval(Duration::ZERO);
        let resolved = resolve(kind.over(host)).unwrap();
        assert_eq!(resolved.full_pass_interval, None, "the kind turned it off");
        assert!(resolved.startup_full_pass, "inherited from the host");
    }
}
