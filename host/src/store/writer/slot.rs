//! Where a queued write's caller waits: for its answer, or for its turn to
//! lead a batch.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::sync::lock;

/// Where a queued job stands, as its caller sees it.
pub(super) enum SlotState<R> {
    /// Waiting in the queue.
    Queued,
    /// Its caller must lead the next batch.
    Lead,
    /// Its transaction's fate is known: here is its answer.
    Done(Result<R>),
    /// Its caller took the wake above and acts on it.
    Taken,
}

/// Where a caller waits for its answer.
pub(super) struct Slot<R> {
    state: Mutex<SlotState<R>>,
    waiter: Notify,
}

/// What wakes a waiting caller: its answer, or its turn to lead.
pub(super) enum Wake<R> {
    Done(Result<R>),
    Lead,
}

impl<R> Slot<R> {
    pub(super) fn new() -> Self {
        Slot {
            state: Mutex::new(SlotState::Queued),
            waiter: Notify::new(),
        }
    }

    pub(super) fn set(&self, state: SlotState<R>) {
        *lock(&self.state) = state;
        // notify_one stores a permit when nobody waits yet, so a waiter that
        // checks the state and then awaits cannot miss this.
        self.waiter.notify_one();
    }

    /// Takes a wake if one is there, leaving `Queued` untouched.
    fn take_wake(state: &mut SlotState<R>) -> Option<Wake<R>> {
        match std::mem::replace(state, SlotState::Taken) {
            SlotState::Done(result) => Some(Wake::Done(result)),
            SlotState::Lead => Some(Wake::Lead),
            other => {
                *state = other;
                None
            }
        }
    }

    /// The answer a leader finds in its own slot once its batch committed.
    pub(super) fn take_answer(&self) -> Result<R> {
        match Self::take_wake(&mut lock(&self.state)) {
            Some(Wake::Done(result)) => result,
            Some(Wake::Lead) => Err(Error::Internal("leadership granted twice".into())),
            None => Err(Error::Internal(
                "a led batch left its own job unanswered".into(),
            )),
        }
    }

    pub(super) async fn wait(&self) -> Wake<R> {
        loop {
            if let Some(wake) = Self::take_wake(&mut lock(&self.state)) {
                return wake;
            }
            self.waiter.notified().await;
        }
    }

    /// Back to waiting, after a lead that found a lease ahead of its job.
    pub(super) fn requeue(&self) {
        let mut state = lock(&self.state);
        if matches!(*state, SlotState::Taken) {
            *state = SlotState::Queued;
        }
    }

    pub(super) fn addr(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as *const () as usize
    }

    pub(super) fn is_lead(&self) -> bool {
        matches!(*lock(&self.state), SlotState::Lead)
    }

    pub(super) fn is_done_or_taken(&self) -> bool {
        matches!(*lock(&self.state), SlotState::Done(_) | SlotState::Taken)
    }
}
