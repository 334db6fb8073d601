//! The reconcile engine: controllers, the work queue, passes and drivers.

mod queue;
