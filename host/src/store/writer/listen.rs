//! Hears the commits of other processes on the same PostgreSQL store.
//!
//! Every write transaction that moves the store-wide version ends with a
//! `NOTIFY` on the store's channel carrying its session and version. One
//! thread per open store `LISTEN`s on a connection of its own and hands each
//! foreign commit to the writer, which wakes watches and the dependency
//! waker as for a local commit. A lost connection is reopened; what was
//! missed meanwhile costs latency (the scans find it), never correctness.

use std::sync::Weak;
use std::time::Duration;

use crate::store::backend::postgres::commit::parse_payload;
use crate::store::backend::postgres::{PgConn, Target};
use crate::store::writer::group_commit::Writer;

/// How often the thread looks up from the socket to see whether its store
/// is still open.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// How long it waits before reconnecting after losing its connection.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// Subscribes to the store's channel, then starts the thread that relays
/// what it hears to `writer`: once this returns, no commit goes unheard.
pub(crate) fn spawn(
    target: Target,
    channel: String,
    session: i64,
    writer: Weak<Writer>,
) -> crate::Result<()> {
    let conn = subscribe(&target, &channel)?;
    std::thread::Builder::new()
        .name("beehive-pg-listen".into())
        .spawn(move || listen(conn, &target, &channel, session, &writer))?;
    Ok(())
}

fn listen(conn: PgConn, target: &Target, channel: &str, session: i64, writer: &Weak<Writer>) {
    let mut conn = Some(conn);
    while writer.strong_count() > 0 {
        let subscribed = match conn.take() {
            Some(conn) => conn,
            None => match subscribe(target, channel).and_then(catch_up) {
                Ok((conn, version)) => {
                    // Commits made while no one listened were not heard:
                    // the store's version now stands for all of them, and
                    // everything waiting on one is woken.
                    if let Some(writer) = writer.upgrade() {
                        writer.heard_commit(version);
                    }
                    conn
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for other processes' commits; retrying");
                    std::thread::sleep(RECONNECT_DELAY);
                    continue;
                }
            },
        };
        if let Err(error) = relay(&subscribed, session, writer) {
            tracing::warn!(%error, "lost the connection that hears other processes' commits");
            std::thread::sleep(RECONNECT_DELAY);
        }
    }
}

fn subscribe(target: &Target, channel: &str) -> crate::Result<PgConn> {
    let conn = PgConn::connect(target, channel)?;
    conn.simple(&format!("LISTEN {}", quote_ident(channel)))?;
    Ok(conn)
}

/// The store's version, read once the connection listens: every commit
/// after it will be heard, every one before it is covered by it.
fn catch_up(conn: PgConn) -> crate::Result<(PgConn, i64)> {
    let version = conn.store_version()?;
    Ok((conn, version))
}

/// Hands each foreign commit to the writer until the store closes (`Ok`) or
/// the connection fails.
fn relay(conn: &PgConn, session: i64, writer: &Weak<Writer>) -> crate::Result<()> {
    loop {
        let heard = conn.notifications(CHECK_INTERVAL)?;
        let Some(writer) = writer.upgrade() else {
            return Ok(());
        };
        for notification in heard {
            match parse_payload(notification.payload()) {
                Some((from, _)) if from == session => {}
                Some((_, resource_version)) => writer.heard_commit(resource_version),
                None => writer.heard_commit(0),
            }
        }
    }
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identifier_cannot_break_out_of_its_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
