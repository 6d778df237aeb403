//! Memsets and device-to-device copies queued on a stream (`Engine::memset_async`,
//! `Engine::copy_dtod_async`, what `fill!` and `copyto!` between CuArrays use): the bytes
//! they write, that they are queued (not done before the stream reaches them), that a
//! block used by one on another stream is not handed out again before it has run, and
//! that bad input changes nothing.
//!
//! Runs on the host device (streams are worker threads) and with `CUMEM_TEST_CUDA=1` on
//! GPU 0 (the slow operation is then a kernel spinning on the GPU's timer).

mod common;

use common::{engine, read};
use cumem::compute::module;
use cumem::{Engine, Error, PoolKind};

/// Long enough that the rest of each test is queued well before the slow operation ends.
const SLOW_NS: u64 = 300_000_000;

fn slow(e: &Engine, s: u64) {
    module::sleep(e.device(), s, SLOW_NS).expect("slow operation");
}

fn upload(e: &Engine, ptr: u64, data: &[u8]) {
    e.copy_htod(ptr, data).unwrap();
}

#[test]
fn memset_async_writes_each_element_size() {
    let e = engine(PoolKind::Binned, 1);
    let x = e.alloc(64).unwrap();
    for (elsize, pattern, count, expect) in [
        (1u32, 0xabu32, 64u64, vec![0xabu8; 64]),
        (2, 0x0102, 32, [0x02u8, 0x01].repeat(32)),
        (4, 0x3f80_0000, 16, 1f32.to_le_bytes().repeat(16)),
        // Only the first 8 bytes: the rest keeps the previous value.
        (4, 0xdead_beef, 2, [0xdeadbeef_u32.to_le_bytes().repeat(2), 1f32.to_le_bytes().repeat(14)].concat()),
    ] {
        e.memset_async(x, pattern, elsize, count, 0).unwrap();
        e.device().stream_synchronize(0).unwrap();
        assert_eq!(read(&e, x, 64), expect, "elsize {elsize}, pattern {pattern:#x}");
    }
    // 16-bit pattern at an address aligned to 2 only.
    e.memset_async(x + 2, 0xffff, 2, 3, 0).unwrap();
    e.device().stream_synchronize(0).unwrap();
    let b = read(&e, x, 8);
    assert_eq!(&b[..8], &[0xef, 0xbe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    e.free(x).unwrap();
}

#[test]
fn queued_on_a_stream_and_done_in_its_order() {
    let e = engine(PoolKind::Binned, 1);
    let s = e.stream_create(false).unwrap();
    let (x, y) = (e.alloc(4096).unwrap(), e.alloc(4096).unwrap());
    upload(&e, x, &[1u8; 4096]);
    upload(&e, y, &[2u8; 4096]);
    slow(&e, s);
    e.memset_async(x, 7, 1, 4096, s).unwrap();
    e.copy_dtod_async(y, x, 4096, s).unwrap();
    // Behind the slow operation nothing has run yet (the copies on the default stream do
    // not wait for a non-blocking stream).
    assert_eq!(read(&e, x, 4096), vec![1u8; 4096], "the memset ran before the stream reached it");
    assert_eq!(read(&e, y, 4096), vec![2u8; 4096], "the copy ran before the stream reached it");
    e.device().stream_synchronize(s).unwrap();
    // In order: the copy saw the memset's bytes.
    assert_eq!(read(&e, y, 4096), vec![7u8; 4096]);
    e.free(x).unwrap();
    e.free(y).unwrap();
    e.stream_destroy(s).unwrap();
}

#[test]
fn overlapping_copy_on_the_default_stream() {
    let e = engine(PoolKind::Split, 1);
    let x = e.alloc(16).unwrap();
    upload(&e, x, &(0..16).collect::<Vec<u8>>());
    e.copy_dtod_async(x + 4, x, 8, 0).unwrap();
    e.device().stream_synchronize(0).unwrap();
    assert_eq!(read(&e, x, 16), [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15]);
    e.free(x).unwrap();
}

#[test]
fn a_block_used_on_another_stream_is_not_reused_before_the_work_ran() {
    for pool in [PoolKind::Binned, PoolKind::Split, PoolKind::Simple, PoolKind::Expandable] {
        let e = engine(pool, 1);
        let s = e.stream_create(false).unwrap();
        let n = 1 << 16;
        let src = e.alloc(n).unwrap(); // a default-stream block, read on `s`
        let dst = e.alloc(n).unwrap();
        upload(&e, src, &vec![5u8; n as usize]);
        slow(&e, s);
        e.copy_dtod_async(dst, src, n, s).unwrap();
        e.free(src).unwrap();
        // A new default-stream block of the same size, written at once: it must not be
        // `src`'s memory while the copy on `s` still has to read it.
        let other = e.alloc(n).unwrap();
        upload(&e, other, &vec![9u8; n as usize]);
        e.device().stream_synchronize(s).unwrap();
        assert_eq!(read(&e, dst, n), vec![5u8; n as usize], "{pool:?}: the queued copy read reused memory");
        e.free(other).unwrap();
        e.free(dst).unwrap();
        e.stream_destroy(s).unwrap();
    }
}

#[test]
fn bad_input_changes_nothing() {
    let e = engine(PoolKind::Binned, 1);
    let x = e.alloc(64).unwrap();
    upload(&e, x, &[3u8; 64]);
    let bad = |r: cumem::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidValue(_))), "{what}: {r:?}");
    };
    bad(e.memset_async(x, 0, 3, 4, 0), "element size 3");
    bad(e.memset_async(x, 0, 8, 4, 0), "element size 8");
    bad(e.memset_async(x + 1, 0, 4, 4, 0), "misaligned");
    bad(e.memset_async(x, 0, 4, 17, 0), "past the end");
    bad(e.memset_async(x, 0, 4, u64::MAX / 2, 0), "overflow");
    bad(e.memset_async(x, 0, 1, 4, 0xdead), "unknown stream");
    bad(e.copy_dtod_async(x, x + 32, 64, 0), "source past the end");
    bad(e.copy_dtod_async(x + 8, x, 64, 0), "destination past the end");
    bad(e.copy_dtod_async(x, 0x10, 8, 0), "source not allocated");
    bad(e.copy_dtod_async(x, x + 8, 8, 0xdead), "unknown stream");
    e.device().stream_synchronize(0).unwrap();
    assert_eq!(read(&e, x, 64), vec![3u8; 64]);
    // Zero elements and zero bytes are no-ops (even at any address).
    e.memset_async(x, 0, 4, 0, 0).unwrap();
    e.copy_dtod_async(x, x, 0, 0).unwrap();
    e.free(x).unwrap();
}
