//! Plugins that travel with a PostgreSQL store: each pushed component is
//! kept once, under the SHA-256 of its bytes, and a set names which version
//! (and which policy) serves under each plugin name. Every active host
//! serves the set, so a push is a hot swap on every host, and pushing an
//! older file again is a rollback.

use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::object::Timestamp;
use crate::store::Store;
use crate::store::sql::{Conn, params};

/// One entry of the store's plugin set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedPlugin {
    /// The plugin's name: it is served as `NAME.wasm`.
    pub name: String,
    /// `sha256:` and the hex digest of the component's bytes.
    pub hash: String,
    /// The text of its policy file (`NAME.toml`), if one was pushed with it.
    pub policy: Option<String>,
    /// When this version was pushed under this name.
    pub pushed_at: Timestamp,
}

impl Store {
    /// Pushes a plugin into the store: keeps `wasm` (once per content) and
    /// names it the version serving under `name`, with `policy` (a policy
    /// file's text) or none. Every active host serves the store's set, so
    /// this is a hot swap; pushing an older file again is a rollback.
    /// PostgreSQL stores only (a SQLite host serves a plugin directory).
    ///
    /// # Errors
    /// As [`Store::try_take_lease`], plus [`Error::InvalidName`](crate::Error::InvalidName)
    /// for a name that cannot be a file name.
    pub async fn push_plugin(
        &self,
        name: &str,
        wasm: Vec<u8>,
        policy: Option<String>,
    ) -> Result<PushedPlugin> {
        self.require_postgres()?;
        if name.is_empty()
            || name.starts_with('.')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            return Err(crate::Error::InvalidName(format!(
                "{name:?}: a plugin name is letters, digits, '-', '_' and '.', not first"
            )));
        }
        let name = name.to_string();
        self.write(move |tx| {
            let now = tx.now();
            push(tx.conn(), &name, &wasm, policy.as_deref(), now)
        })
        .await
    }

    /// Takes `name` out of the store's plugin set (hosts stop serving it);
    /// whether it was there.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub async fn remove_pushed_plugin(&self, name: &str) -> Result<bool> {
        self.require_postgres()?;
        let name = name.to_string();
        self.write(move |tx| remove(tx.conn(), &name)).await
    }

    /// The store's plugin set, by name.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub fn pushed_plugins(&self) -> Result<Vec<PushedPlugin>> {
        self.require_postgres()?;
        self.read_conn(list)
    }

    /// The component pushed with content hash `hash`, if any.
    ///
    /// # Errors
    /// As [`Store::try_take_lease`].
    pub fn pushed_plugin_bytes(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        self.require_postgres()?;
        self.read_conn(|conn| bytes(conn, hash))
    }
}

/// `sha256:HEX` of `bytes`.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Stores `wasm` (once per content) and points `name` at it, with `policy`.
pub(crate) fn push(
    conn: Conn<'_>,
    name: &str,
    wasm: &[u8],
    policy: Option<&str>,
    now: Timestamp,
) -> Result<PushedPlugin> {
    let hash = content_hash(wasm);
    conn.execute(
        "INSERT INTO plugin_blobs (hash, bytes, pushed_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (hash) DO NOTHING",
        params![hash.as_str(), wasm, now.as_millis()],
    )?;
    conn.execute(
        "INSERT INTO plugin_set (name, hash, policy, pushed_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (name) DO UPDATE SET hash = excluded.hash, policy = excluded.policy, \
             pushed_at = excluded.pushed_at",
        params![name, hash.as_str(), policy, now.as_millis()],
    )?;
    Ok(PushedPlugin {
        name: name.to_string(),
        hash,
        policy: policy.map(str::to_string),
        pushed_at: now,
    })
}

/// Takes `name` out of the set; whether it was there. Its bytes stay, for a
/// later push to point at again.
pub(crate) fn remove(conn: Conn<'_>, name: &str) -> Result<bool> {
    Ok(conn.execute("DELETE FROM plugin_set WHERE name = ?1", params![name])? > 0)
}

/// The set, by name.
pub(crate) fn list(conn: Conn<'_>) -> Result<Vec<PushedPlugin>> {
    conn.query_all(
        "SELECT name, hash, policy, pushed_at FROM plugin_set ORDER BY name",
        params![],
        |row| {
            Ok(PushedPlugin {
                name: row.get(0)?,
                hash: row.get(1)?,
                policy: row.get(2)?,
                pushed_at: Timestamp::from_millis(row.get(3)?),
            })
        },
    )
}

/// The bytes pushed under `hash`, if any.
pub(crate) fn bytes(conn: Conn<'_>, hash: &str) -> Result<Option<Vec<u8>>> {
    conn.query_opt(
        "SELECT bytes FROM plugin_blobs WHERE hash = ?1",
        params![hash],
        |row| row.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_hash_is_sha256_in_hex() {
        assert_eq!(
            content_hash(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
