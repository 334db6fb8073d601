//! The CPU deadline of a pass: an epoch ticker that runs only while passes
//! do, and a per-store clock that leaves out time spent in host calls.
//!
//! wasmtime checks the epoch at function entries and loop heads. The ticker
//! advances it every [`TICK`], and every store's deadline is one tick away,
//! so the callback runs once a tick while guest code runs. It asks the
//! [`PassClock`] how much of the elapsed time was the guest's own: while
//! some of the deadline is left the guest yields to the async runtime (so a
//! spinning plugin never holds a worker thread for more than a tick), and
//! once none is left the guest is interrupted. Time parked after a yield is
//! not the guest's. The clock also counts host calls against a per-pass
//! budget.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::{CallHook, Engine, Store, UpdateDeadline};

use crate::plugin::state::PluginState;
use crate::sync::lock;

/// How often the epoch advances while passes run: the deadline's grain.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Time a pass has spent in the guest versus in host calls, and how many
/// host calls it made.
#[derive(Debug)]
pub(crate) struct PassClock {
    started: Instant,
    deadline: Duration,
    /// When the outermost host call in progress began.
    entered_host: Option<Instant>,
    /// How many host calls are in progress, one inside another: a host
    /// call that hands a list back runs the guest's allocator, whose epoch
    /// check and memory growth are host calls of their own.
    host_depth: u32,
    in_host: Duration,
    /// Nanoseconds spent parked after yields, added by the yield futures
    /// (which cannot reach the store).
    parked: Arc<AtomicU64>,
    host_calls: u64,
    host_call_limit: u64,
}

impl PassClock {
    pub(crate) fn new(deadline: Duration, host_call_limit: u64) -> Self {
        PassClock {
            started: Instant::now(),
            deadline,
            entered_host: None,
            host_depth: 0,
            in_host: Duration::ZERO,
            parked: Arc::new(AtomicU64::new(0)),
            host_calls: 0,
            host_call_limit,
        }
    }

    /// Starts counting a new call into the guest. The parked counter is
    /// reset in place: no yield of the last call outlives that call (one
    /// cut short drops its instance, and this clock with it).
    pub(crate) fn restart(&mut self, deadline: Duration, host_call_limit: u64) {
        self.started = Instant::now();
        self.deadline = deadline;
        self.entered_host = None;
        self.host_depth = 0;
        self.in_host = Duration::ZERO;
        self.parked.store(0, Ordering::Relaxed);
        self.host_calls = 0;
        self.host_call_limit = host_call_limit;
    }

    /// The CPU deadline this call runs under.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    fn entering_host(&mut self) -> wasmtime::Result<()> {
        self.host_calls += 1;
        if self.host_calls > self.host_call_limit {
            wasmtime::bail!(
                "made more than {} host calls in one pass",
                self.host_call_limit
            );
        }
        if self.host_depth == 0 {
            self.entered_host = Some(Instant::now());
        }
        self.host_depth += 1;
        Ok(())
    }

    /// Ends a host call. Only the outermost one's end adds to the time in
    /// host calls: an inner one ending must not drop the outer one's start
    /// (a body read that waited two seconds, then grew the guest's memory
    /// to hand the bytes over, was counted as the guest's own time).
    fn leaving_host(&mut self) {
        self.host_depth = self.host_depth.saturating_sub(1);
        if self.host_depth > 0 {
            return;
        }
        if let Some(entered) = self.entered_host.take() {
            self.in_host += entered.elapsed();
        }
    }

    /// Wall time since the call began, less the time spent in host calls
    /// (awaiting the writer, a transaction's lease, a WASI sleep) and parked
    /// after yielding.
    pub(crate) fn guest_time(&self) -> Duration {
        let in_host = self.in_host + self.entered_host.map_or(Duration::ZERO, |e| e.elapsed());
        let parked = Duration::from_nanos(self.parked.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(in_host + parked)
    }

    /// What to do when the epoch deadline passes: yield for a turn while
    /// some of the deadline is left, interrupt once none is.
    fn on_deadline(&self) -> UpdateDeadline {
        match self.deadline.checked_sub(self.guest_time()) {
            Some(left) if !left.is_zero() => {
                UpdateDeadline::YieldCustom(1, Box::pin(park(self.parked.clone())))
            }
            _ => UpdateDeadline::Interrupt,
        }
    }
}

/// Gives the worker thread to other tasks for a turn, and adds the time
/// spent waiting for it back to `parked`.
async fn park(parked: Arc<AtomicU64>) {
    let since = Instant::now();
    tokio::task::yield_now().await;
    let waited = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    parked.fetch_add(waited, Ordering::Relaxed);
}

/// Wires the store's clock into wasmtime: host-call hooks and the deadline
/// callback. The store's deadline must still be set before each call.
pub(crate) fn install(store: &mut Store<PluginState>) {
    store.call_hook(|mut ctx, hook| {
        let clock = &mut ctx.data_mut().clock;
        match hook {
            CallHook::CallingHost => clock.entering_host()?,
            CallHook::ReturningFromHost => clock.leaving_host(),
            CallHook::CallingWasm | CallHook::ReturningFromWasm => {}
        }
        Ok(())
    });
    store.epoch_deadline_callback(|ctx| Ok(ctx.data().clock.on_deadline()));
}

/// Advances the engines' epochs while passes run, and sleeps otherwise: an
/// idle host's ticker thread is blocked, never woken on a timer. Dropping
/// the ticker ends the thread.
pub(crate) struct Ticker {
    shared: Arc<TickerShared>,
}

#[derive(Default)]
struct TickerShared {
    /// Passes in flight. Counted outside the lock: taking it for every pass
    /// cost more than the rest of the ticker's share.
    running: AtomicUsize,
    /// The thread is blocked on `changed`, or about to be. Only then does a
    /// pass signal it: a signal is a system call, and one per pass was a
    /// tenth of a quick pass's cost.
    waiting: AtomicBool,
    state: Mutex<TickerState>,
    changed: Condvar,
}

#[derive(Default)]
struct TickerState {
    closed: bool,
    /// Epochs the thread has advanced.
    ticks: u64,
}

impl TickerShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, TickerState> {
        lock(&self.state)
    }

    /// Blocks until a pass runs; false once the ticker is dropped.
    ///
    /// The thread says it is waiting before it looks at `running`, and a
    /// pass counts itself before it looks at `waiting` (both sequentially
    /// consistent), so at least one of them sees the other: either the
    /// thread sees the pass, or the pass signals. The signal cannot come
    /// between the look and the wait: the pass takes the lock to send it,
    /// and the thread holds the lock until the wait releases it.
    fn wait_for_passes(&self) -> bool {
        let mut state = self.lock();
        loop {
            if state.closed {
                return false;
            }
            self.waiting.store(true, Ordering::SeqCst);
            if self.running.load(Ordering::SeqCst) > 0 {
                self.waiting.store(false, Ordering::SeqCst);
                return true;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Ticker {
    /// Starts the ticker thread.
    ///
    /// # Errors
    /// When the thread cannot be started: without it no CPU deadline would
    /// ever fire, so the runtime must not start either.
    pub(crate) fn start(engines: Vec<Engine>) -> std::io::Result<Arc<Ticker>> {
        let shared = Arc::new(TickerShared::default());
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("beehive-epoch".into())
            .spawn(move || {
                while thread_shared.wait_for_passes() {
                    std::thread::sleep(TICK);
                    for engine in &engines {
                        engine.increment_epoch();
                    }
                    thread_shared.lock().ticks += 1;
                }
            })?;
        Ok(Arc::new(Ticker { shared }))
    }

    /// Marks a pass as running until the guard drops.
    pub(crate) fn running(&self) -> Running<'_> {
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        if self.shared.waiting.load(Ordering::SeqCst) {
            let _state = self.shared.lock();
            self.shared.changed.notify_one();
        }
        Running(&self.shared)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_one();
    }
}

/// A pass in flight, as far as the ticker knows.
pub(crate) struct Running<'t>(&'t TickerShared);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_in_host_calls_does_not_count() {
        let mut clock = PassClock::new(Duration::from_millis(50), 10);
        clock.entering_host().unwrap();
        std::thread::sleep(Duration::from_millis(80));
        clock.leaving_host();
        assert!(clock.guest_time() < Duration::from_millis(50));
        assert!(matches!(
            clock.on_deadline(),
            UpdateDeadline::YieldCustom(1, _)
        ));
    }

    #[test]
    fn a_host_call_inside_another_keeps_the_outer_ones_wait() {
        let mut clock = PassClock::new(Duration::from_millis(50), 10);
        clock.entering_host().unwrap();
        std::thread::sleep(Duration::from_millis(80));
        // Handing a list back: the guest's allocator grows its memory.
        clock.entering_host().unwrap();
        clock.leaving_host();
        clock.leaving_host();
        assert!(clock.guest_time() < Duration::from_millis(50));
    }

    #[test]
    fn host_calls_beyond_the_budget_fail() {
        let mut clock = PassClock::new(Duration::from_secs(1), 2);
        for _ in 0..2 {
            clock.entering_host().unwrap();
            clock.leaving_host();
        }
        let error = clock.entering_host().unwrap_err();
        assert!(
            error.to_string().contains("more than 2 host calls"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn time_parked_after_a_yield_does_not_count() {
        let clock = PassClock::new(Duration::from_millis(20), 10);
        let parked = clock.parked.clone();
        park(parked.clone()).await;
        parked.fetch_add(30_000_000, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert!(clock.guest_time() < Duration::from_millis(20));
    }

    /// Waits up to a minute for `done` to hold of the ticker.
    fn ticker_reaches(ticker: &Ticker, done: impl Fn(&TickerShared) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(60);
        while !done(&ticker.shared) {
            assert!(Instant::now() < give_up, "the ticker never got there");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn each_pass_after_a_quiet_spell_wakes_the_ticker() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("engine");
        let ticker = Ticker::start(vec![engine]).expect("ticker");
        for _ in 0..3 {
            ticker_reaches(&ticker, |s| s.waiting.load(Ordering::SeqCst));
            let before = ticker.shared.lock().ticks;
            let running = ticker.running();
            ticker_reaches(&ticker, |s| s.lock().ticks > before);
            drop(running);
        }
    }

    #[test]
    fn guest_time_past_the_deadline_interrupts() {
        let clock = PassClock::new(Duration::from_millis(20), 10);
        std::thread::sleep(Duration::from_millis(30));
        assert!(matches!(clock.on_deadline(), UpdateDeadline::Interrupt));
    }
}
