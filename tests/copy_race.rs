//! A copy racing a free of its block. One thread allocates and frees a block in a loop
//! and publishes each new address; copier threads copy into (and out of, and set) the
//! last address they saw. With the `none` pool every free goes straight back to the
//! device, so a copy that is checked, then loses the block, then writes would write into
//! released memory (on the host device: unmapped pages, a crash). The engine must
//! either complete the copy into a block that was live when it was checked, or refuse it
//! with `InvalidValue`; nothing else, and never a crash.
//!
//! Runs on the host device (the blocks are 64 MiB, above glibc's largest mmap threshold,
//! so each one is its own mapping and a free unmaps it).

mod common;

use common::MIB;
use cumem::device::HostDevice;
use cumem::{Config, Engine, Error, PoolKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

const BLOCK: u64 = 64 * MIB;

#[test]
fn copies_racing_frees_write_only_into_live_blocks() {
    for pool in [PoolKind::None, PoolKind::Binned] {
        let cfg = Config { pool, ..Config::default() };
        let e = Arc::new(Engine::with_device(cfg, Box::new(HostDevice::new(Some(1 << 30))), 4).unwrap());
        let last = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let copiers: Vec<_> = (0..3)
            .map(|k| {
                let (e, last, stop) = (e.clone(), last.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![k as u8; 4096];
                    let (mut ok, mut refused) = (0u64, 0u64);
                    while !stop.load(SeqCst) {
                        let p = last.load(SeqCst);
                        if p == 0 {
                            continue;
                        }
                        // Near the end of the block: the last pages of a mapping.
                        let at = p + BLOCK - 4096;
                        let r = match k {
                            0 => e.copy_htod(at, &buf),
                            1 => e.copy_dtoh(&mut buf, at),
                            _ => e.memset(at, 0x5a, 4096),
                        };
                        match r {
                            Ok(()) => ok += 1,
                            Err(Error::InvalidValue(_)) => refused += 1,
                            Err(other) => panic!("copy into {at:#x}: {other}"),
                        }
                    }
                    (ok, refused)
                })
            })
            .collect();
        let t = Instant::now();
        let mut rounds = 0u64;
        while t.elapsed() < Duration::from_millis(1500) {
            let p = e.alloc(BLOCK).unwrap();
            last.store(p, SeqCst);
            std::thread::yield_now();
            e.free(p).unwrap();
            rounds += 1;
            if rounds % 64 == 0 {
                e.reclaim(u64::MAX);
            }
        }
        stop.store(true, SeqCst);
        let (mut ok, mut refused) = (0, 0);
        for c in copiers {
            let (o, r) = c.join().expect("copier");
            ok += o;
            refused += r;
        }
        // Both outcomes happened, so the race was exercised.
        assert!(ok > 0 && refused > 0, "{pool:?}: {ok} copies done, {refused} refused in {rounds} rounds");
        let s = e.stats();
        assert_eq!((s.requested_bytes, s.num_allocations, s.num_frees), (0, rounds, rounds), "{pool:?}");
        e.reclaim(u64::MAX);
        assert_eq!(e.stats().reserved_bytes, 0, "{pool:?}: a deferred free was lost");
    }
}
