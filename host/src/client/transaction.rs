//! Several writes, from outside a pass, that commit together or not at all.

use std::sync::Arc;
use std::time::Duration;

use crate::client::RawClient;
use crate::client::raw::TransactionSource;
use crate::error::Result;
use crate::object::GroupKind;
use crate::store::Session;
use crate::store::Store;

/// An open transaction: clients from [`Transaction::client`] write into it
/// and read their own writes. It holds the store's only writer, so it has a
/// hold limit after which it is rolled back; dropping it rolls it back.
///
/// # Example
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> beehive::Result<()> {
/// use std::time::Duration;
/// use beehive::{CreateOptions, GroupKind, Json, Store};
///
/// let store = Store::temporary()?;
/// let tx = store.transaction(Duration::from_secs(5)).await?;
/// let clusters = tx.client(GroupKind::new("acme.com", "Cluster"));
/// clusters.create("prod", Json::parse(r#"{"replicas":3}"#)?, CreateOptions::new()).await?;
/// clusters.create("test", Json::parse(r#"{"replicas":1}"#)?, CreateOptions::new()).await?;
/// tx.commit()?;
/// # Ok(()) }
/// ```
pub struct Transaction {
    store: Store,
    session: Arc<Session>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").finish_non_exhaustive()
    }
}

/// Hands the transaction to the clients made from it.
struct Joined(Arc<Session>);

impl TransactionSource for Joined {
    fn open_transaction(&self) -> Option<Arc<Session>> {
        Some(self.0.clone())
    }
}

impl Store {
    /// Opens a transaction once the writer is free; it is rolled back if
    /// still open after `hold_limit`.
    ///
    /// # Errors
    /// A store error when the transaction cannot begin.
    pub async fn transaction(&self, hold_limit: Duration) -> Result<Transaction> {
        let session = self.begin_session(hold_limit).await?;
        Ok(Transaction {
            store: self.clone(),
            session,
        })
    }
}

impl Transaction {
    /// A client of `group_kind` whose writes join this transaction.
    pub fn client(&self, group_kind: GroupKind) -> RawClient {
        let source: Arc<dyn TransactionSource> = Arc::new(Joined(self.session.clone()));
        RawClient::joining(&self.store, group_kind, source)
    }

    /// Commits every write made through it.
    ///
    /// # Errors
    /// [`crate::Error::TransactionTimedOut`] when the hold limit ran out
    /// first (nothing was committed); a store error when the commit fails.
    pub fn commit(self) -> Result<()> {
        self.session.commit()
    }

    /// Undoes every write made through it.
    ///
    /// # Errors
    /// [`crate::Error::TransactionTimedOut`] when the hold limit already
    /// rolled it back.
    pub fn rollback(self) -> Result<()> {
        self.session.rollback()
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // Ended already after a commit or rollback; the error says only that.
        let _ = self.session.rollback();
    }
}
