use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time, in UTC milliseconds since the Unix epoch, as the store keeps it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Timestamp {
        Timestamp::from(SystemTime::now())
    }

    /// A timestamp from milliseconds since the epoch.
    pub fn from_millis(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    /// Milliseconds since the epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// How long ago this was, or zero if it is in the future.
    pub fn elapsed(self) -> Duration {
        Duration::from_millis(Timestamp::now().0.saturating_sub(self.0).max(0) as u64)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(time: SystemTime) -> Timestamp {
        let ms = match time.duration_since(UNIX_EPOCH) {
            Ok(since) => since.as_millis() as i64,
            Err(before) => -(before.duration().as_millis() as i64),
        };
        Timestamp(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_epoch_are_negative_and_the_future_has_not_elapsed() {
        let before = UNIX_EPOCH - Duration::from_millis(1500);
        assert_eq!(Timestamp::from(before).as_millis(), -1500);
        let later = Timestamp::from_millis(Timestamp::now().as_millis() + 60_000);
        assert_eq!(later.elapsed(), Duration::ZERO);
    }
}
