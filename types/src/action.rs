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
/// assert_eq!(action.verdict, Verdict::Unsettled);
/// assert_eq!(Action::backoff("dial timeout").error(), Some("dial timeout"));
/// ```
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// The verdict.
    pub verdict: Verdict,
    /// When to run again.
    pub requeue_after: Option<Duration>,
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
    /// per-object floor allows. Ignored by `backoff`.
    pub fn requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// The failure this action carries, if any.
    pub fn error(&self) -> Option<&str> {
        match &self.verdict {
            Verdict::Failed(message) => Some(message),
            Verdict::Settled | Verdict::Unsettled => None,
        }
    }
}
