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
use crate::store::Store;
use crate::store::backend::Connection;
use crate::store::rows::lease::{LeaseHolder, holder, release, renew, try_take};
use crate::sync::lock;

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
        // Holding the lease must mean being able to write: a writer whose
        // connection is lost and cannot be reopened fails the renewal, so
        // the holder steps down. A writer busy with a batch is alive.
        if let Ok(mut writer) = self.inner.writer.conn.try_lock() {
            writer.heal()?;
        }
        self.read_conn(|conn| renew(conn, holder, token, period))
    }

    /// Why this store cannot write now, as far as it knows without asking
    /// the server: its writer's connection is lost, and the last attempt
    /// to reopen it failed (PostgreSQL). `None` while the writer is busy
    /// or its connection looks alive; a cut network that closes nothing
    /// shows up instead as a lease renewal that does not answer in time.
    pub fn write_outage(&self) -> Option<String> {
        let writer = self.inner.writer.conn.try_lock().ok()?;
        writer.outage()
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
