//! Plugins that travel with a PostgreSQL store: each pushed component is
//! kept once, under the SHA-256 of its bytes, and a set names which version
//! (and which policy) serves under each plugin name. Every active host
//! serves the set, so a push is a hot swap on every host, and pushing an
//! older file again is a rollback.

use crate::error::Result;
use crate::store::Store;
use crate::store::rows::plugin_sets::{PushedPlugin, bytes, list, push, remove};

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
