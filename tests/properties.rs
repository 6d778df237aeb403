//! Property tests: random sequences of allocations, frees and reclaims on every pool,
//! checked after each step against a model of the live blocks and the invariants of
//! docs/contract.md; every block carries its own byte pattern, checked before it is freed.
//! Runs on the host device, or on CUDA with `CUMEM_TEST_CUDA=1`.

mod common;

use common::*;
use cumem::{Config, Engine, Error, PoolKind};
use proptest::prelude::*;
use proptest::sample::Index;
use std::sync::atomic::Ordering::SeqCst;

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64),
    /// Free the live block at this index (of the live blocks in allocation order).
    Free(Index),
    /// Release at least this many cached bytes.
    Reclaim(u64),
}

/// A size drawn log-uniformly from `[lo, hi]`, so small sizes are as likely as large.
fn log_uniform(lo: u64, hi: u64) -> impl Strategy<Value = u64> {
    let (a, b) = (lo.max(1).ilog2(), hi.ilog2());
    (a..=b, any::<u64>()).prop_map(move |(k, r)| {
        let from = (1u64 << k).max(lo);
        let to = if k == b { hi } else { (1u64 << (k + 1)) - 1 };
        from + r % (to - from + 1)
    })
}

/// Request sizes from 0 B to 64 MiB, mostly small, with the boundaries of the pools'
/// rounding rules drawn often.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => log_uniform(1, 64 * KIB),
        3 => log_uniform(64 * KIB, 4 * MIB),
        1 => log_uniform(4 * MIB, 64 * MIB),
        2 => prop::sample::select(vec![
            0,
            1,
            255,
            256,
            511,
            512,
            513,
            4096,
            MIB - 512,
            MIB,
            MIB + 1,
            2 * MIB,
            10 * MIB - 1,
            10 * MIB,
            20 * MIB,
            64 * MIB,
        ]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => size().prop_map(Op::Alloc),
        7 => any::<Index>().prop_map(Op::Free),
        1 => prop_oneof![Just(u64::MAX), Just(1), log_uniform(1, 64 * MIB)].prop_map(Op::Reclaim),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=60)
}

struct Block {
    ptr: u64,
    requested: u64,
    size: u64,
    byte: u8,
}

struct Model {
    pool: PoolKind,
    e: Engine,
    held: std::sync::Arc<std::sync::atomic::AtomicU64>,
    live: Vec<Block>,
    next_byte: u8,
}

impl Model {
    fn new(pool: PoolKind) -> Model {
        let (dev, held) = counted_device();
        let e = Engine::with_device(Config { pool, ..Config::default() }, dev, 2).unwrap();
        Model { pool, e, held, live: Vec::new(), next_byte: 0 }
    }

    /// The invariants that hold after every step.
    fn check_invariants(&self) {
        let s = invariants(&self.e);
        let requested: u64 = self.live.iter().map(|b| b.requested).sum();
        let allocated: u64 = self.live.iter().map(|b| b.size).sum();
        assert_eq!(s.requested_bytes, requested, "requested vs model");
        assert_eq!(s.allocated_bytes, allocated, "allocated vs model");
        assert_eq!(s.num_allocations - s.num_frees, self.live.len() as u64, "live count");
        assert_eq!(s.reserved_bytes, self.held.load(SeqCst), "reserved vs bytes the device really holds");
        assert!(s.num_device_allocations >= s.num_device_frees);
        if self.pool == PoolKind::None {
            assert_eq!(s.cached_bytes, 0, "none caches nothing");
        }
        let out = self.e.outstanding();
        assert_eq!(out.len(), self.live.len());
    }

    fn alloc(&mut self, n: u64) {
        let before = self.e.stats();
        let p =
            self.e.alloc(n).unwrap_or_else(|err| panic!("alloc({n}) with {} live: {err}", self.live.len()));
        if n == 0 {
            assert_eq!(p, 0);
            assert_eq!(self.e.stats().num_allocations, before.num_allocations);
            return;
        }
        assert_ne!(p, 0);
        assert_eq!(p % 256, 0, "{p:#x} is not 256-byte aligned");
        let size = self.e.stats().allocated_bytes - before.allocated_bytes;
        let min = block_size(self.pool, n);
        // The largest block the pool may hand out for the request: split keeps a
        // remainder of up to 1 MiB in the block; simple hands out a cached block whole if
        // it is at most twice the request.
        let max = match self.pool {
            PoolKind::Split => min + MIB,
            PoolKind::Simple => 2 * min,
            PoolKind::Binned | PoolKind::None | PoolKind::Expandable => min,
        };
        assert!((min..=max).contains(&size), "{n} bytes got a block of {size}, expected {min}..={max}");
        for b in &self.live {
            assert!(
                p + size <= b.ptr || b.ptr + b.size <= p,
                "new block {p:#x}+{size} overlaps live block {:#x}+{}",
                b.ptr,
                b.size
            );
        }
        self.next_byte = self.next_byte % 255 + 1;
        fill(&self.e, p, n, self.next_byte);
        self.live.push(Block { ptr: p, requested: n, size, byte: self.next_byte });
    }

    fn free(&mut self, i: usize) {
        let b = self.live.remove(i);
        check(&self.e, b.ptr, b.requested, b.byte);
        self.e.free(b.ptr).unwrap();
        // Freeing it again is refused and changes nothing.
        let s = self.e.stats();
        assert!(matches!(self.e.free(b.ptr), Err(Error::InvalidValue(_))));
        assert_eq!(self.e.stats().num_frees, s.num_frees);
    }

    fn reclaim(&mut self, target: u64) {
        let before = self.e.stats();
        let released = self.e.reclaim(target);
        let s = self.e.stats();
        assert_eq!(before.reserved_bytes - s.reserved_bytes, released);
        assert!(released <= before.cached_bytes);
        if released < target {
            // Nothing more can be released.
            assert_eq!(self.e.reclaim(u64::MAX), 0, "reclaim stopped early");
            let s = self.e.stats();
            if matches!(self.pool, PoolKind::Split | PoolKind::Expandable) {
                // What stays cached lies in segments (granules) that are partly in use.
                assert_eq!(s.cached_bytes, s.inactive_split_bytes, "{s:#?}");
            } else {
                assert_eq!(s.cached_bytes, 0, "{s:#?}");
            }
        }
        // Nothing live was released with the cache.
        for b in &self.live {
            check(&self.e, b.ptr, b.requested, b.byte);
        }
    }

    fn finish(mut self) {
        while !self.live.is_empty() {
            self.free(self.live.len() - 1);
            self.check_invariants();
        }
        reclaim_all_and_check_empty(&self.e);
        assert_eq!(self.held.load(SeqCst), 0);
    }
}

fn run(pool: PoolKind, ops: Vec<Op>) {
    let mut m = Model::new(pool);
    for op in ops {
        match op {
            Op::Alloc(n) => m.alloc(n),
            Op::Free(i) => {
                if !m.live.is_empty() {
                    let i = i.index(m.live.len());
                    m.free(i);
                }
            }
            Op::Reclaim(t) => m.reclaim(t),
        }
        m.check_invariants();
    }
    m.finish();
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn binned(ops in ops()) {
        run(PoolKind::Binned, ops);
    }

    #[test]
    fn split(ops in ops()) {
        run(PoolKind::Split, ops);
    }

    #[test]
    fn simple(ops in ops()) {
        run(PoolKind::Simple, ops);
    }

    #[test]
    fn none(ops in ops()) {
        run(PoolKind::None, ops);
    }

    #[test]
    fn expandable(ops in ops()) {
        run(PoolKind::Expandable, ops);
    }
}

/// The same sequences with the split pool's small-block paths stressed: only sizes up
/// to 1 MiB, so everything is carved from shared 2 MiB segments and merged back.
fn small_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        10 => log_uniform(1, MIB).prop_map(Op::Alloc),
        8 => any::<Index>().prop_map(Op::Free),
        1 => Just(Op::Reclaim(u64::MAX)),
    ];
    prop::collection::vec(op, 1..=80)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn split_small_blocks(ops in small_ops()) {
        run(PoolKind::Split, ops);
    }

    #[test]
    fn binned_small_blocks(ops in small_ops()) {
        run(PoolKind::Binned, ops);
    }

    #[test]
    fn expandable_small_blocks(ops in small_ops()) {
        run(PoolKind::Expandable, ops);
    }
}
