//! The reconcile engine: controllers, the work queue, passes and drivers.

mod admin;
pub(crate) mod cadence;
mod controller;
mod controller_client;
pub mod finalizer;
pub(crate) mod grid;
mod host;
mod kind;
mod options;
mod pace;
mod pass;
mod pass_trace;
mod queue;
mod quiet;
mod rollout;
mod schedule;
mod status_grace;
mod sweeper;
mod tenure;
mod trigger;
mod waker;

pub use admin::AdminClient;
pub use cadence::Cadence;
pub use controller::{Action, Controller, ControllerOptions, Document, Verdict};
pub use controller_client::{ControllerClient, STATUS_GRACE};
pub use host::{Host, StopHandle};
pub use options::HostOptions;
pub use schedule::{Schedule, ScheduleStream};
pub use tenure::{DEFAULT_LEASE, STANDBY_POLL, Tenure};
