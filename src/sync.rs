//! The shard lock.
//!
//! Why not `parking_lot::Mutex`: its unlock is an atomic compare-and-swap (it must see
//! whether a waiter parked), so a cache-hit alloc+free pair costs four locked
//! instructions, which profiling showed to be most of the pair's time. This lock is
//! released with a plain store, two locked instructions a pair. It spins briefly, then
//! yields, then sleeps in short steps, so a thread waiting while the holder is inside a
//! slow device call does not burn a core. Shards are per thread, so waiting is rare:
//! it happens on frees of another thread's blocks, statistics reads and reclaims.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A raw lock for `lock_api`: acquire is one compare-and-swap, release one store.
pub struct RawShardLock {
    locked: AtomicBool,
}

// SAFETY: `lock` returns only after setting `locked` from false to true with Acquire
// ordering, and `unlock` clears it with Release ordering, so at most one holder exists
// and the holder's writes are visible to the next.
unsafe impl lock_api::RawMutex for RawShardLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawShardLock = RawShardLock { locked: AtomicBool::new(false) };
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        if !self.acquire() {
            self.lock_contended();
        }
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.acquire().then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        self.locked.store(false, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

impl RawShardLock {
    #[inline]
    fn acquire(&self) -> bool {
        self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[cold]
    fn lock_contended(&self) {
        let mut round = 0u32;
        loop {
            // Wait until it looks free before trying again (no write traffic while spinning).
            while self.locked.load(Ordering::Relaxed) {
                match round {
                    0..64 => std::hint::spin_loop(),
                    64..128 => std::thread::yield_now(),
                    _ => std::thread::sleep(Duration::from_micros(20)),
                }
                round = round.saturating_add(1);
            }
            if self.acquire() {
                return;
            }
        }
    }
}

/// A mutex guarding one shard's state.
pub type ShardMutex<T> = lock_api::Mutex<RawShardLock, T>;

#[cfg(test)]
mod tests {
    use super::ShardMutex;
    use std::sync::Arc;

    #[test]
    fn excludes() {
        let m = Arc::new(ShardMutex::new(0u64));
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*m.lock(), 400_000);
    }
}
