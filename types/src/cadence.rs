use std::time::Duration;

/// A kind's cadences: when its objects get passes besides the ones their
/// writes push, and how far failures back off. Every field is optional: an
/// unset one takes the next level's value — a controller's own cadence over
/// the host's, over the defaults documented on each field.
///
/// One rule for zero: it turns off a cadence that may be off (the full and
/// individual passes) and is refused where the cadence is what keeps the host
/// correct (the owed pass, the backoff cap).
///
/// The same type is set on the host's options for every kind, on one
/// controller's options, in a plugin's registration, and by `beehive run`'s
/// flags of the same names.
///
/// ```
/// use std::time::Duration;
/// use beehive_types::Cadence;
///
/// let cadence = Cadence::new()
///     .full_pass_interval(Duration::from_secs(600))
///     .startup_full_pass(true);
/// assert_eq!(cadence.owed_pass_interval, None, "left to the next level");
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
    pub fn over(self, base: Cadence) -> Cadence {
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
}
