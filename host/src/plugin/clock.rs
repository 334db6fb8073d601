//! The CPU deadline of a pass: an epoch ticker that runs only while passes
//! do, and a per-store clock that leaves out time spent in host calls.
//!
//! wasmtime checks the epoch at function entries and loop heads. The ticker
//! advances it every [`TICK`]; when a store's deadline passes, its callback
//! asks the [`PassClock`] how much of the elapsed time was the guest's own
//! and either extends the deadline by what is left or interrupts the guest.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::{CallHook, Engine, Store, UpdateDeadline};

use crate::plugin::state::PluginState;

/// How often the epoch advances while passes run: the deadline's grain.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Epoch ticks that cover `time`, at least one.
pub(crate) fn ticks(time: Duration) -> u64 {
    time.as_millis().div_ceil(TICK.as_millis()).max(1) as u64
}

/// Time a pass has spent in the guest versus in host calls.
#[derive(Debug)]
pub(crate) struct PassClock {
    started: Instant,
    deadline: Duration,
    entered_host: Option<Instant>,
    in_host: Duration,
}

impl PassClock {
    pub(crate) fn new(deadline: Duration) -> Self {
        PassClock {
            started: Instant::now(),
            deadline,
            entered_host: None,
            in_host: Duration::ZERO,
        }
    }

    /// Starts counting a new call into the guest.
    pub(crate) fn restart(&mut self, deadline: Duration) {
        *self = PassClock::new(deadline);
    }

    fn entering_host(&mut self) {
        self.entered_host = Some(Instant::now());
    }

    fn leaving_host(&mut self) {
        if let Some(entered) = self.entered_host.take() {
            self.in_host += entered.elapsed();
        }
    }

    /// Wall time since the call began, less the time spent in host calls
    /// (awaiting the writer, a transaction's lease, a WASI sleep).
    pub(crate) fn guest_time(&self) -> Duration {
        let in_host = self.in_host + self.entered_host.map_or(Duration::ZERO, |e| e.elapsed());
        self.started.elapsed().saturating_sub(in_host)
    }

    /// What to do when the epoch deadline passes.
    fn on_deadline(&self) -> UpdateDeadline {
        match self.deadline.checked_sub(self.guest_time()) {
            Some(left) if !left.is_zero() => UpdateDeadline::Continue(ticks(left)),
            _ => UpdateDeadline::Interrupt,
        }
    }
}

/// Wires the store's clock into wasmtime: host-call hooks and the deadline
/// callback. The store's deadline must still be set before each call.
pub(crate) fn install(store: &mut Store<PluginState>) {
    store.call_hook(|mut ctx, hook| {
        let clock = &mut ctx.data_mut().clock;
        match hook {
            CallHook::CallingHost => clock.entering_host(),
            CallHook::ReturningFromHost => clock.leaving_host(),
            CallHook::CallingWasm | CallHook::ReturningFromWasm => {}
        }
        Ok(())
    });
    store.epoch_deadline_callback(|ctx| Ok(ctx.data().clock.on_deadline()));
}

/// Advances the engine's epoch while passes run, and sleeps otherwise.
pub(crate) struct Ticker {
    running: Mutex<usize>,
    changed: Condvar,
}

impl Ticker {
    /// Starts the ticker thread; it ends once the last handle is dropped.
    pub(crate) fn start(engine: Engine) -> Arc<Ticker> {
        let ticker = Arc::new(Ticker {
            running: Mutex::new(0),
            changed: Condvar::new(),
        });
        let weak = Arc::downgrade(&ticker);
        std::thread::Builder::new()
            .name("beehive-epoch".into())
            .spawn(move || {
                while let Some(ticker) = weak.upgrade() {
                    if !ticker.wait_for_passes() {
                        return;
                    }
                    drop(ticker);
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                }
            })
            .ok();
        ticker
    }

    /// Blocks until a pass runs; false once nothing else holds the ticker.
    fn wait_for_passes(self: &Arc<Self>) -> bool {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        while *running == 0 {
            let (guard, timeout) = self
                .changed
                .wait_timeout(running, Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner());
            running = guard;
            if timeout.timed_out() && Arc::strong_count(self) == 1 {
                return false;
            }
        }
        true
    }

    /// Marks a pass as running until the guard drops.
    pub(crate) fn running(self: &Arc<Self>) -> Running {
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.changed.notify_one();
        Running(self.clone())
    }
}

/// A pass in flight, as far as the ticker knows.
pub(crate) struct Running(Arc<Ticker>);

impl Drop for Running {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_in_host_calls_does_not_count() {
        let mut clock = PassClock::new(Duration::from_millis(50));
        clock.entering_host();
        std::thread::sleep(Duration::from_millis(80));
        clock.leaving_host();
        assert!(clock.guest_time() < Duration::from_millis(50));
        assert!(matches!(clock.on_deadline(), UpdateDeadline::Continue(_)));
    }

    #[test]
    fn guest_time_past_the_deadline_interrupts() {
        let clock = PassClock::new(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(30));
        assert!(matches!(clock.on_deadline(), UpdateDeadline::Interrupt));
    }

    #[test]
    fn ticks_round_up() {
        assert_eq!(ticks(Duration::ZERO), 1);
        assert_eq!(ticks(Duration::from_millis(11)), 2);
        assert_eq!(ticks(Duration::from_millis(300)), 30);
    }
}
