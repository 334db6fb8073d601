//! One active host per PostgreSQL store: a lease row judged by the
//! database's clock, and the fencing token every write transaction of the
//! active host checks before it commits.
//!
//! The holder takes the lease only once it has expired, bumping the token;
//! it renews it well before expiry. Each write transaction of a fenced store
//! takes a share lock on the lease row and checks, just before COMMIT, that
//! the token is still its own and unexpired: a takeover (an UPDATE of that
//! row) waits for such a commit to finish, and a holder that was paused past
//! its lease finds its token stale and its commit refused. A paused holder
//! cannot hold the row's lock for ever: its writer connection's
//! `idle_in_transaction_session_timeout` ends the transaction.

use std::time::Duration;

use crate::error::Result;
use crate::store::sql::{Conn, params};
use crate::store::{Connection, Store};
use crate::sync::lock;

/// Who holds the lease, as the database says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's name (`beehive run` uses `HOST:PID`).
    pub holder: String,
    /// The fencing token of its tenure: each takeover increments it.
    pub token: i64,
    /// Whether its lease is still running.
    pub live: bool,
}

impl Store {
    /// Tries to become the store's one active host, as `holder`, for
    /// `period`: `Some(token)` (the tenure's fencing token) when the lease
    /// had expired or was never taken, `None` while another holds it. From
    /// then on every write transaction through this store commits only if
    /// the tenure is still current: a holder that failed to renew in time
    /// finds its writes refused. PostgreSQL stores only.
    ///
    /// # Errors
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) on a SQLite store;
    /// [`Error::Database`](crate::Error::Database) when the database cannot be reached.
    pub fn try_take_lease(&self, holder: &str, period: Duration) -> Result<Option<i64>> {
        self.require_postgres()?;
        let token = self.read_conn(|conn| try_take(conn, holder, period))?;
        if let Some(token) = token {
            let writer = lock(&self.inner.writer.conn);
            if let Connection::Postgres(conn) = &writer.conn {
                conn.set_fence(Some(token));
            }
        }
        Ok(token)
    }

    /// Extends tenure `token` by `period` from now; `false` when it had
    /// already expired or been taken over, and the holder must step down.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub fn renew_lease(&self, holder: &str, token: i64, period: Duration) -> Result<bool> {
        self.require_postgres()?;
        self.read_conn(|conn| renew(conn, holder, token, period))
    }

    /// Ends tenure `token` at once, so a standby takes over without waiting
    /// for it to expire.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub fn release_lease(&self, holder: &str, token: i64) -> Result<()> {
        self.require_postgres()?;
        self.read_conn(|conn| release(conn, holder, token))
    }

    /// Who holds the store's lease, if anyone ever took it.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub fn lease_holder(&self) -> Result<Option<LeaseHolder>> {
        self.require_postgres()?;
        self.read_conn(holder)
    }
}

/// The prefix of the error a fenced commit raises; see [`FENCE_CHECK`].
pub(crate) const LOST: &str = "lease lost";

fn millis(period: Duration) -> i64 {
    i64::try_from(period.as_millis()).unwrap_or(i64::MAX)
}

/// Takes the lease for `holder` if it has expired (or was never taken);
/// the new fencing token, or `None` while another holds it.
pub(crate) fn try_take(conn: Conn<'_>, holder: &str, period: Duration) -> Result<Option<i64>> {
    conn.query_opt(
        "UPDATE host_lease SET holder = ?1, token = token + 1, \
                expires_at = clock_timestamp() + CAST(?2 AS BIGINT) * interval '1 millisecond' \
         WHERE id = 1 AND expires_at < clock_timestamp() RETURNING token",
        params![holder, millis(period)],
        |row| row.get(0),
    )
}

/// Extends `holder`'s tenure `token` by `period` from now; `false` if it
/// had already expired or been taken (the holder must step down).
pub(crate) fn renew(conn: Conn<'_>, holder: &str, token: i64, period: Duration) -> Result<bool> {
    let renewed = conn.execute(
        "UPDATE host_lease \
         SET expires_at = clock_timestamp() + CAST(?3 AS BIGINT) * interval '1 millisecond' \
         WHERE id = 1 AND holder = ?1 AND token = ?2 AND expires_at > clock_timestamp()",
        params![holder, token, millis(period)],
    )?;
    Ok(renewed == 1)
}

/// Gives the lease up at once, so a standby need not wait for it to expire.
pub(crate) fn release(conn: Conn<'_>, holder: &str, token: i64) -> Result<()> {
    conn.execute(
        "UPDATE host_lease SET expires_at = '-infinity' WHERE id = 1 AND holder = ?1 AND token = ?2",
        params![holder, token],
    )?;
    Ok(())
}

/// Who holds the lease now, if anyone ever took it.
pub(crate) fn holder(conn: Conn<'_>) -> Result<Option<LeaseHolder>> {
    conn.query_opt(
        "SELECT holder, token, expires_at > clock_timestamp() FROM host_lease \
         WHERE id = 1 AND token > 0",
        params![],
        |row| {
            Ok(LeaseHolder {
                holder: row.get(0)?,
                token: row.get(1)?,
                live: row.get(2)?,
            })
        },
    )
}

/// The statement a fenced write transaction runs just before COMMIT: locks
/// the lease row against a takeover until the commit ends, and fails the
/// transaction unless tenure `?1` is still current (`beehive_fence` is
/// made by the fourth migration).
pub(crate) const FENCE_CHECK: &str = "SELECT beehive_fence(?1)";
