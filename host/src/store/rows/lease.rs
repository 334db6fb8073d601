//! The `host_lease` row of a PostgreSQL store: taken, renewed and
//! released by the database's clock.

use std::time::Duration;

use crate::error::Result;
use crate::store::backend::{Conn, params};

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

impl LeaseHolder {
    /// Whether the holder is process `pid` of this machine, as `beehive
    /// run` names itself (`HOSTNAME:PID`).
    pub fn is_process(&self, pid: u32) -> bool {
        self.holder == crate::process::identity_of(pid)
    }

    /// Whether the holder runs on this machine.
    pub fn is_on_this_machine(&self) -> bool {
        self.holder
            .rsplit_once(':')
            .is_some_and(|(machine, _)| machine == crate::process::machine())
    }
}

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

/// Takes the lease from whoever held it, for a store restored from a dump:
/// its row is the one the dump held, and a host from before the restore
/// still holds that token. The token moves on, so that host's renewals and
/// commits are refused, and the lease is free for the first host to take.
pub(crate) fn fence_out(conn: Conn<'_>) -> Result<()> {
    conn.execute(
        "UPDATE host_lease SET holder = '', token = token + 1, expires_at = '-infinity' \
         WHERE id = 1",
        params![],
    )?;
    Ok(())
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
