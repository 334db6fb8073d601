//! Whether this host can do its job now, as `/readyz` reports it: it
//! serves (on PostgreSQL: it holds the store's lease) and its store can
//! write. A load balancer or a supervisor reads it; `/healthz` only says
//! the process answers.

use std::sync::{Arc, Mutex};

use beehive::Store;

/// Where the host is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Loading its plugins, before it serves for the first time.
    Starting,
    /// On PostgreSQL: another host holds the lease; this one waits for it.
    StandingBy,
    /// Serving the socket and running passes.
    Serving,
}

/// The host's phase and its store, shared by the run loop (which moves the
/// phase) and the HTTP endpoint (which reads it).
#[derive(Clone)]
pub struct Readiness {
    phase: Arc<Mutex<Phase>>,
    store: Store,
}

impl Readiness {
    pub fn new(store: Store) -> Readiness {
        Readiness {
            phase: Arc::new(Mutex::new(Phase::Starting)),
            store,
        }
    }

    pub fn set(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
    }

    /// `None` when ready; otherwise why not, in a sentence.
    pub fn not_ready(&self) -> Option<String> {
        let phase = *self.phase.lock().unwrap_or_else(|e| e.into_inner());
        match phase {
            Phase::Starting => Some("starting: loading plugins".into()),
            Phase::StandingBy => Some("standing by: another host holds the store's lease".into()),
            Phase::Serving => self.store.write_outage(),
        }
    }
}
