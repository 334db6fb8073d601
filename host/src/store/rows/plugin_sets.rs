//! The `plugin_blobs` and `plugin_set` tables of a PostgreSQL store.

use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::object::Timestamp;
use crate::store::backend::{Conn, params};

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
