use std::time::Duration;

/// What a pass concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The pass observed the object's current generation.
    Settled,
    /// Real work done, not caught up yet.
    Unsettled,
    /// The pass failed; the message becomes a `ReconcileFailed` event.
    Failed(String),
}

/// What happens after a pass: what `reconcile` returns inside `Ok`, and what
/// a controller's `error_policy` makes of an `Err`.
///
/// | action | records the generation | next pass |
/// |---|---|---|
/// | `settled()` | yes | none scheduled |
/// | `unsettled()` | no | after the owed-pass interval |
/// | either `.requeue_after(d)` | as above | after `d` (zero: as soon as the per-object floor allows) |
/// | `backoff(e)` | no | the backoff ladder, with a `ReconcileFailed` event; `requeue_after` is ignored |
///
/// ```
/// use std::time::Duration;
/// use beehive_types::{Action, Verdict};
///
/// let action = Action::unsettled().requeue_after(Duration::from_secs(5));
/// assert_eq!(action.verdict(), &Verdict::Unsettled);
/// assert_eq!(action.requeue_delay(), Some(Duration::from_secs(5)));
/// let failed = Action::backoff("dial timeout").requeue_after(Duration::from_secs(5));
/// assert_eq!(failed.error(), Some("dial timeout"));
/// assert_eq!(failed.requeue_delay(), None, "a backoff follows the ladder");
/// ```
///
/// An action is made only through these constructors, so none carries a
/// combination the table calls meaningless.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    verdict: Verdict,
    requeue_after: Option<Duration>,
}

impl Action {
    /// The pass observed the object's current generation, which the host
    /// records. It claims nothing about health.
    pub fn settled() -> Self {
        Self::of(Verdict::Settled)
    }

    /// Real work done, not caught up: nothing is recorded, and the object
    /// comes back after the owed-pass interval unless
    /// [`Action::requeue_after`] says otherwise.
    pub fn unsettled() -> Self {
        Self::of(Verdict::Unsettled)
    }

    /// The pass failed: nothing is recorded, the object retries on the
    /// backoff ladder, and a `ReconcileFailed` event carries `error`.
    pub fn backoff(error: impl std::fmt::Display) -> Self {
        Self::of(Verdict::Failed(error.to_string()))
    }

    fn of(verdict: Verdict) -> Self {
        Action {
            verdict,
            requeue_after: None,
        }
    }

    /// Schedules the next pass after `delay`; zero means as soon as the
    /// per-object floor allows. Ignored by `backoff`, whose next pass is
    /// the backoff ladder's.
    pub fn requeue_after(mut self, delay: Duration) -> Self {
        if !matches!(self.verdict, Verdict::Failed(_)) {
            self.requeue_after = Some(delay);
        }
        self
    }

    /// The verdict.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// When the next pass was asked for, if it was (never for a backoff).
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The verdict and the requeue delay, by value.
    pub fn into_parts(self) -> (Verdict, Option<Duration>) {
        (self.verdict, self.requeue_after)
    }

    /// The failure this action carries, if any.
    pub fn error(&self) -> Option<&str> {
        match &self.verdict {
            Verdict::Failed(message) => Some(message),
            Verdict::Settled | Verdict::Unsettled => None,
        }
    }
}
