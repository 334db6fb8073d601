//! What a PostgreSQL write transaction adds to its COMMIT for others to
//! see: the notification that tells other processes a commit landed, and
//! the fence check that refuses the commit of a host whose lease is gone.

/// The prefix of the error a fenced commit raises; see [`FENCE_CHECK`].
pub(crate) const LOST: &str = "lease lost";

/// The statement a fenced write transaction runs just before COMMIT: locks
/// the lease row against a takeover until the commit ends, and fails the
/// transaction unless tenure `?1` is still current (`beehive_fence` is
/// made by the fourth migration).
pub(crate) const FENCE_CHECK: &str = "SELECT beehive_fence(?1)";

/// The payload a commit sends: its store session and its version.
pub(crate) fn payload(session: i64, resource_version: i64) -> String {
    format!("{session}:{resource_version}")
}

/// The session and version a commit's payload carries, if it is one.
pub(crate) fn parse_payload(payload: &str) -> Option<(i64, i64)> {
    let (session, version) = payload.split_once(':')?;
    Some((session.parse().ok()?, version.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_back() {
        assert_eq!(parse_payload(&payload(42, 7)), Some((42, 7)));
        assert_eq!(parse_payload("nonsense"), None);
    }
}
