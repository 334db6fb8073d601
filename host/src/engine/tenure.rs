//! A host's tenure as the one active host of a PostgreSQL store: wait as a
//! standby until the store's lease is free, hold it while serving, step
//! down when it is lost.

use std::time::Duration;

use tokio::time::Instant;

use crate::Store;

/// How often a standby asks whether the active host's lease has lapsed: a
/// takeover comes at most this long after it does.
pub const STANDBY_POLL: Duration = Duration::from_millis(250);

/// The lease `beehive run` holds unless told otherwise. Failover, from the
/// active host's death to its successor's first pass, takes at most the
/// lease, plus [`STANDBY_POLL`], plus the successor's start (plugins from
/// the compiled cache): under 5 s with this one.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(4);

/// This process's hold on a PostgreSQL store's host lease, renewed in the
/// background from the moment it is taken until it is released or dropped:
/// a host that takes longer to start than its lease lasts keeps it.
///
/// # Example
/// ```no_run
/// # async fn serve(store: beehive::Store) -> beehive::Result<()> {
/// use std::time::Duration;
/// let tenure = beehive::engine::Tenure::take(&store, Duration::from_secs(5)).await?;
/// // ... start the host (the lease is renewed meanwhile), then serve
/// // until the lease is lost:
/// let why = tenure.hold().await;
/// eprintln!("stepping down: {why}");
/// # Ok(()) }
/// ```
pub struct Tenure {
    store: Store,
    holder: String,
    token: i64,
    /// Why the lease was lost, once it is.
    lost: tokio::sync::watch::Receiver<Option<String>>,
    renewals: tokio::task::AbortHandle,
}

impl Tenure {
    /// Waits until this process takes the store's lease (named `HOST:PID`)
    /// for `period`: while another holds it, this one stands by, asking
    /// again every 250 ms. From then on the store's commits check the
    /// tenure (see [`Store::try_take_lease`]). A database that cannot be
    /// reached meanwhile is logged and asked again: a standby outlives an
    /// outage.
    ///
    /// # Errors
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) on a SQLite store.
    pub async fn take(store: &Store, period: Duration) -> crate::Result<Tenure> {
        let holder = crate::process::identity();
        let mut announced = None;
        let mut unreachable = false;
        loop {
            let taken = match store.try_take_lease(&holder, period) {
                Ok(taken) => {
                    if std::mem::take(&mut unreachable) {
                        tracing::info!("the store answers again");
                    }
                    taken
                }
                Err(error @ crate::Error::InvalidOption(_)) => return Err(error),
                Err(error) => {
                    // Said once per outage, not at every poll.
                    if !std::mem::replace(&mut unreachable, true) {
                        tracing::warn!(%error, "cannot reach the store to take its lease; retrying");
                    }
                    None
                }
            };
            if let Some(token) = taken {
                tracing::info!(holder = %holder, tenure = token, "active: this host holds the lease");
                let (tell, lost) = tokio::sync::watch::channel(None);
                let renewer = Renewer {
                    store: store.clone(),
                    holder: holder.clone(),
                    token,
                    period,
                };
                let renewals = tokio::spawn(renewer.run(tell)).abort_handle();
                return Ok(Tenure {
                    store: store.clone(),
                    holder,
                    token,
                    lost,
                    renewals,
                });
            }
            let active = store.lease_holder().ok().flatten();
            if let Some(active) = active.filter(|a| announced.as_ref() != Some(&a.token)) {
                tracing::info!(
                    active = %active.holder,
                    tenure = active.token,
                    "standing by: another host is active; taking over when its lease lapses"
                );
                announced = Some(active.token);
            }
            tokio::time::sleep(STANDBY_POLL.min(period / 3)).await;
        }
    }

    /// Waits until the lease is lost (not renewed in time, or taken over)
    /// and says why. The store's writes fail from then on; the caller
    /// should stop its host.
    pub async fn hold(&self) -> String {
        let mut lost = self.lost.clone();
        match lost.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => "the lease's renewals stopped".to_string(),
        }
    }

    /// The tenure's fencing token.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Stops renewing and gives the lease up, so a standby takes over at
    /// once.
    pub fn release(&self) {
        self.renewals.abort();
        if let Err(error) = self.store.release_lease(&self.holder, self.token) {
            tracing::warn!(%error, "could not release the host lease; it lapses on its own");
        }
    }
}

impl Drop for Tenure {
    /// Stops renewing; the lease lapses on its own.
    fn drop(&mut self) {
        self.renewals.abort();
    }
}

/// The task that renews a tenure every third of its period.
struct Renewer {
    store: Store,
    holder: String,
    token: i64,
    period: Duration,
}

impl Renewer {
    /// Renews until the lease is lost, then says why through `tell`.
    async fn run(self, tell: tokio::sync::watch::Sender<Option<String>>) {
        let why = self.renew_until_lost().await;
        tell.send_replace(Some(why));
    }

    async fn renew_until_lost(&self) -> String {
        // When the last renewal that succeeded was asked for: the database
        // dated the new expiry no earlier, so the lease runs at least
        // `period` from here.
        let mut renewed_at = Instant::now();
        let mut failing = false;
        loop {
            tokio::time::sleep(self.period / 3).await;
            let asked_at = Instant::now();
            // A renewal still unanswered when the lease would lapse is as
            // good as refused: on a cut network a statement waits far
            // longer than any lease for its answer. One asked late (this
            // process was paused or starved) still gets a third of the
            // lease, so the database, not this clock, says it was lost.
            let left = self
                .period
                .saturating_sub(renewed_at.elapsed())
                .max(self.period / 3);
            let renewal = tokio::task::spawn_blocking({
                let (store, holder, token, period) = (
                    self.store.clone(),
                    self.holder.clone(),
                    self.token,
                    self.period,
                );
                move || store.renew_lease(&holder, token, period)
            });
            match tokio::time::timeout(left, renewal).await {
                Ok(Ok(Ok(true))) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("renewed the host lease again: the store answers");
                    }
                    renewed_at = asked_at;
                }
                Ok(Ok(Ok(false))) => {
                    return format!(
                        "lost the host lease (tenure {}): it lapsed or another host took it",
                        self.token
                    );
                }
                Ok(Ok(Err(error))) if renewed_at.elapsed() >= self.period => {
                    return format!("could not renew the host lease in time: {error}");
                }
                Ok(Ok(Err(error))) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%error, "cannot renew the host lease: the store does not answer; retrying");
                    }
                }
                Ok(Err(panicked)) => return format!("renewing the host lease failed: {panicked}"),
                Err(_) => {
                    return format!(
                        "could not renew the host lease in time: the store did not answer within {left:?}"
                    );
                }
            }
        }
    }
}
