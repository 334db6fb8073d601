//! `beehive run` on a PostgreSQL store: wait as a standby until the store's
//! lease is free, hold it while serving, and step down when it is lost.

use std::time::Duration;

use beehive::Store;

/// This host's hold on the store's lease.
pub struct Tenure {
    store: Store,
    holder: String,
    token: i64,
    period: Duration,
}

impl Tenure {
    /// Waits until this host takes the lease: while another host holds it,
    /// this one stands by, trying again every third of `period`.
    pub async fn take(store: &Store, period: Duration) -> Result<Tenure, String> {
        let holder = holder_name();
        let mut announced = None;
        loop {
            let taken = store
                .try_take_lease(&holder, period)
                .map_err(|e| format!("taking the host lease: {e}"))?;
            if let Some(token) = taken {
                tracing::info!(holder = %holder, tenure = token, "active: this host holds the lease");
                return Ok(Tenure {
                    store: store.clone(),
                    holder,
                    token,
                    period,
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
            tokio::time::sleep(period / 3).await;
        }
    }

    /// Renews the lease every third of its period; returns (with why) once
    /// it is lost: not renewed in time, or taken over.
    pub async fn hold(&self) -> String {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.period / 3).await;
            match self
                .store
                .renew_lease(&self.holder, self.token, self.period)
            {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    return format!(
                        "lost the host lease (tenure {}): it lapsed or another host took it",
                        self.token
                    );
                }
                Err(error) if last_renewed.elapsed() >= self.period => {
                    return format!("could not renew the host lease in time: {error}");
                }
                Err(error) => tracing::warn!(%error, "renewing the host lease; retrying"),
            }
        }
    }

    /// Gives the lease up, so a standby takes over at once.
    pub fn release(self) {
        if let Err(error) = self.store.release_lease(&self.holder, self.token) {
            tracing::warn!(%error, "could not release the host lease; it lapses on its own");
        }
    }
}

/// `HOSTNAME:PID`: unique among live hosts, and says where to look.
fn holder_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}", std::process::id())
}
