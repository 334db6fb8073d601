//! Helpers shared by the integration tests.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::time::{Duration, Instant};

/// Polls `condition` every few milliseconds until it holds, failing the test
/// with `what` if it has not within `limit`. Generous limits keep the tests
/// reliable on two loaded cores; a passing run returns as soon as it holds.
pub async fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The usual limit for a condition that needs a few passes.
pub const PATIENCE: Duration = Duration::from_secs(20);
