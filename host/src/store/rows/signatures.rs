//! The newest signing time served per plugin, kept in `kv` under
//! `signed_at:NAME`: what the rollback rule compares a newly signed file
//! with, so a host restarted after an older signed build was dropped into
//! its directory refuses it as a running host would.

use crate::error::Result;
use crate::store::backend::{Conn, params};

fn key(plugin: &str) -> String {
    format!("signed_at:{plugin}")
}

/// The newest signing time recorded for `plugin`, if any.
pub(crate) fn newest(conn: Conn<'_>, plugin: &str) -> Result<Option<i64>> {
    let key = key(plugin);
    conn.query_opt(
        "SELECT value FROM kv WHERE key = ?1",
        params![&key],
        |row| row.get(0),
    )
}

/// Records `at` for `plugin`, unless a newer time is recorded: the time
/// only moves forward.
pub(crate) fn record(conn: Conn<'_>, plugin: &str, at: i64) -> Result<()> {
    let key = key(plugin);
    conn.execute(
        "INSERT INTO kv (key, value) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE excluded.value > kv.value",
        params![&key, at],
    )?;
    Ok(())
}
