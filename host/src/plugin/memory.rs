//! Guest memory, accounted: each instance has a cap, and every instance of a
//! runtime draws on one shared budget, so no number of plugins, instances or
//! hot swaps can take more of the host than the operator allowed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use wasmtime::ResourceLimiter;

/// The bytes of linear memory all instances of one runtime may hold at once.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    used: AtomicUsize,
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes held by live instances now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    fn try_charge(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::SeqCst);
    }
}

/// One store's memories: capped in sum, charged to the budget, and given
/// back to it when the store is dropped.
pub(crate) struct MemoryLimiter {
    cap: usize,
    used: usize,
    budget: Arc<Budget>,
    /// The plugin's `beehive_plugin_memory`, which this store's memory adds to.
    gauge: Option<Gauge>,
}

impl MemoryLimiter {
    pub(crate) fn new(cap: usize, budget: Arc<Budget>) -> Self {
        MemoryLimiter {
            cap,
            used: 0,
            budget,
            gauge: None,
        }
    }

    /// Adds this store's memory to `gauge` as it grows, and takes it back
    /// when the store goes.
    pub(crate) fn reporting_to(mut self, gauge: Gauge) -> Self {
        self.gauge = Some(gauge);
        self
    }

    /// The linear memory this instance holds, all its memories together.
    pub(crate) fn used(&self) -> usize {
        self.used
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        // An error (not `false`) traps the guest with this message, where a
        // refused growth would surface as a bare `unreachable`.
        if self.used.saturating_add(growth) > self.cap {
            wasmtime::bail!(
                "out of memory: the instance's cap of {} MiB is reached",
                self.cap >> 20
            );
        }
        if !self.budget.try_charge(growth) {
            wasmtime::bail!(
                "out of memory: the plugin runtime's budget of {} MiB is spent",
                self.budget.limit >> 20
            );
        }
        self.used += growth;
        if let Some(gauge) = &self.gauge {
            gauge.inc_by(i64::try_from(growth).unwrap_or(i64::MAX));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables are bounded by the pooling allocator's per-table limit.
        Ok(true)
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.budget.release(self.used);
        if let Some(gauge) = &self.gauge {
            gauge.dec_by(i64::try_from(self.used).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let budget = Budget::new(10 << 20);
        let mut a = MemoryLimiter::new(8 << 20, budget.clone());
        let mut b = MemoryLimiter::new(8 << 20, budget.clone());
        assert!(a.memory_growing(0, 6 << 20, None).unwrap());
        let refused = b.memory_growing(0, 6 << 20, None).unwrap_err();
        assert!(refused.to_string().contains("budget"), "{refused}");
        assert!(
            a.memory_growing(6 << 20, 9 << 20, None)
                .unwrap_err()
                .to_string()
                .contains("cap")
        );
        drop(a);
        assert_eq!(budget.used(), 0);
        assert!(b.memory_growing(0, 6 << 20, None).unwrap());
        assert_eq!(b.used(), 6 << 20);
    }
}
