//! How a command on a PostgreSQL store rides out the loss of its host or
//! of the database, within its `--request-timeout`.
//!
//! Any number of hosts run on one PostgreSQL store and one holds its
//! lease. A command talks to the holder on this machine through the socket
//! named after the store, or to the database itself when no host serves
//! there. Three faults would otherwise leave it waiting or failing:
//!
//! - the host it talks to is paused, or cut off from the database: its
//!   socket still accepts, and nothing answers. While it waits, the
//!   command asks the database who holds the lease; once another host
//!   does, it goes to that one (or to the database, when the holder runs
//!   on another machine);
//! - the host dies mid-request: the connection closes without an answer;
//! - the database restarts: the write fails with the server unreachable.
//!
//! In each case a request that is safe to send again is sent again, until
//! the request timeout is spent. An `apply` creates or updates, so sending
//! it twice converges on the same objects (a manifest carrying a
//! `resourceVersion` may then be refused as a conflict by its own first
//! attempt). A `delete` or `finalize` is never sent again: the first
//! attempt may have done it, and the second would report it missing; the
//! command fails, saying to check.

use std::time::{Duration, Instant};

use crate::endpoint::{self, Endpoint, Paths};
use crate::failure::{Code, Failure};
use crate::protocol::Request;

/// How long a command waits between attempts.
pub const BETWEEN_ATTEMPTS: Duration = Duration::from_millis(100);

/// Whether `request`, sent twice, does what it does once.
pub fn safe_to_repeat(request: &Request) -> bool {
    match request {
        Request::Apply { .. }
        | Request::Get { .. }
        | Request::Describe { .. }
        | Request::Events { .. }
        | Request::Plugins
        | Request::Version
        | Request::Kinds
        | Request::Rollout { .. }
        | Request::Names { .. }
        | Request::Label { .. }
        | Request::Explain { .. }
        | Request::Metrics
        | Request::Requeue { .. } => true,
        // A merge patch applied twice is applied once; a JSON patch may
        // add to a list again, or fail its own `test`.
        // Sent again after it committed, it finds the generation moved on.
        Request::ReplaceSpec { .. } => false,
        Request::Patch { patch_type, .. } => *patch_type == crate::patch::PatchType::Merge,
        // Sent again after it wrote the file, it finds the file there.
        Request::Backup { .. } => false,
        Request::Delete { .. }
        | Request::RemoveFinalizer { .. }
        | Request::Wait { .. }
        | Request::Logs { .. }
        | Request::Watch { .. }
        | Request::WatchEvents { .. } => false,
    }
}

/// How often a command that keeps trying says so.
const SAY_AGAIN_AFTER: Duration = Duration::from_secs(10);

/// One command's attempts at a request on a PostgreSQL store.
pub struct Attempts {
    paths: Paths,
    /// When the whole command gives up (`None`: never).
    deadline: Option<Instant>,
    repeatable: bool,
    /// The store, opened on the first need to ask who holds the lease.
    store: Option<beehive::Store>,
    /// A host this command gave up on: its socket is not tried again.
    abandoned: Option<i32>,
    /// When the command last said it was trying again.
    said_at: Option<Instant>,
}

impl Attempts {
    pub fn new(paths: &Paths, request: &Request) -> Attempts {
        Attempts {
            paths: paths.clone(),
            deadline: paths.request_timeout.map(|t| Instant::now() + t),
            repeatable: safe_to_repeat(request),
            store: None,
            abandoned: None,
            said_at: None,
        }
    }

    /// How long the next attempt may wait for an answer.
    pub fn patience(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether to make another attempt after `failure` (after waiting
    /// [`BETWEEN_ATTEMPTS`]). A failure is kept when the request may not be
    /// repeated, or when time is up.
    pub fn again(&mut self, failure: &Failure) -> bool {
        let out_of_time = self
            .deadline
            .is_some_and(|d| Instant::now() + BETWEEN_ATTEMPTS >= d);
        if failure.code != Code::Unreachable || !self.repeatable || out_of_time {
            return false;
        }
        // Attempts come every BETWEEN_ATTEMPTS; a line each would bury the
        // terminal in the same sentence while a database restarts.
        if self
            .said_at
            .is_none_or(|at| at.elapsed() >= SAY_AGAIN_AFTER)
        {
            self.said_at = Some(Instant::now());
            tracing::info!("{failure}; trying again (until --request-timeout)");
        }
        true
    }

    /// The failure that ends a request that was not repeated, saying so.
    pub fn unrepeated(&self, failure: Failure) -> Failure {
        if failure.code != Code::Unreachable || self.repeatable {
            return failure;
        }
        Failure::new(
            failure.code,
            format!(
                "{failure}; not sent again, as it may have been done: check with `beehive get`"
            ),
        )
    }

    /// The host serving the store on this machine, or the database itself:
    /// [`endpoint::reach`], except that the socket of a host given up on is
    /// not used again. Until another host's socket replaces it, the command
    /// goes to the database once the lease holder is elsewhere, and
    /// otherwise waits for the new holder's socket.
    pub fn reach(&mut self) -> Result<Endpoint, Failure> {
        loop {
            let endpoint = endpoint::reach(&self.paths)?;
            let Endpoint::Host(stream) = &endpoint else {
                return Ok(endpoint);
            };
            let peer = endpoint::peer_pid(stream);
            if peer.is_none() || peer != self.abandoned {
                return Ok(endpoint);
            }
            if self.holder_elsewhere() {
                return Ok(Endpoint::Direct(None));
            }
            if self.patience().is_some_and(|p| p.is_zero()) {
                return Err(Failure::timeout(format!(
                    "no host took over from pid {} within --request-timeout",
                    peer.unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Why the host at the other end of `stream` no longer serves the
    /// store, once the database says another holds the lease. A host whose
    /// process cannot be told is never given up on.
    pub fn replaced(&mut self, peer: Option<i32>) -> Option<String> {
        let pid = u32::try_from(peer?).ok()?;
        let holder = self.lease_holder()?;
        if !holder.live || holder.is_process(pid) {
            return None;
        }
        self.abandoned = peer;
        Some(format!(
            "the host (pid {pid}) stopped answering and {} holds the store's lease now",
            holder.holder
        ))
    }

    /// Whether the live lease holder runs on another machine, so no socket
    /// here will serve.
    fn holder_elsewhere(&mut self) -> bool {
        self.lease_holder()
            .is_some_and(|h| h.live && !h.is_on_this_machine())
    }

    fn lease_holder(&mut self) -> Option<beehive::store::LeaseHolder> {
        if self.store.is_none() {
            self.store = self.paths.open_store().ok();
        }
        let asked = self.store.as_ref()?.lease_holder();
        match asked {
            Ok(holder) => holder,
            Err(error) => {
                tracing::debug!("cannot ask who holds the lease: {error}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_converges_is_sent_twice() {
        let delete = Request::Delete {
            kind: "Greeting".into(),
            name: "a".into(),
        };
        assert!(!safe_to_repeat(&delete));
        assert!(safe_to_repeat(&Request::Apply {
            objects: vec![],
            new_kinds: false,
            force_conflicts: false,
            dry_run: false,
            trace: None,
        }));
    }

    #[test]
    fn a_refusal_is_never_retried() {
        let paths = Paths::new(std::path::Path::new("postgresql://localhost/x"));
        let request = Request::Apply {
            objects: vec![],
            new_kinds: false,
            force_conflicts: false,
            dry_run: false,
            trace: None,
        };
        let mut attempts = Attempts::new(&paths, &request);
        assert!(!attempts.again(&Failure::conflict("taken")));
        assert!(attempts.again(&Failure::unreachable("restarting")));
    }

    #[test]
    fn an_unrepeated_request_says_to_check() {
        let paths = Paths::new(std::path::Path::new("postgresql://localhost/x"));
        let request = Request::Delete {
            kind: "Greeting".into(),
            name: "a".into(),
        };
        let attempts = Attempts::new(&paths, &request);
        let failure = attempts.unrepeated(Failure::unreachable("lost"));
        assert!(failure.message.contains("check with"), "{failure}");
    }
}
