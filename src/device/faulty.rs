//! Fault injection (`CUMEM_FAULT`): a device adaptor, in the manner of RMM's resource
//! adaptors, that wraps any [`Device`] and makes its calls fail with given
//! probabilities, so that the engine's error paths (out of memory, failed device frees,
//! copies, stream and event calls) can be exercised without a broken GPU. The pinned
//! host pool's device is wrapped too (`crate::pinned`).

use super::Device;
use crate::config::FaultSpec;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A [`Device`] whose calls fail with the probabilities of a [`FaultSpec`]: allocations
/// and virtual-memory mappings (`alloc`'s probability) with [`Error::OutOfMemory`],
/// frees and unmappings (`free`'s), copies and memsets, synchronous and asynchronous
/// (`copy`'s), and stream and event calls (`stream`'s: create, record, query,
/// synchronize, wait, sleep, elapsed time) with [`Error::Device`]. Reserving and
/// releasing address ranges, destroying streams and events, waiting for the whole device,
/// the stream look-up and the granularity query are forwarded without faults. Each call draws
/// the next number of a SplitMix64 sequence from the seed, so a single-threaded run fails
/// at the same calls every time.
pub struct FaultyDevice {
    inner: Box<dyn Device>,
    spec: FaultSpec,
    name: String,
    draws: AtomicU64,
}

impl FaultyDevice {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Device>, spec: FaultSpec) -> FaultyDevice {
        let name = format!("{} (with CUMEM_FAULT)", inner.name());
        FaultyDevice { inner, spec, name, draws: AtomicU64::new(0) }
    }

    /// True with probability `p`, from the next draw.
    fn fails(&self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        let n = self.draws.fetch_add(1, Relaxed);
        // SplitMix64 of seed + n·golden: a well-mixed 64-bit number per draw.
        let mut z = self.spec.seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn stream_fault(&self, what: &str) -> Result<()> {
        if self.fails(self.spec.stream) {
            return Err(Error::Device(format!("{what} failed: fault injected by CUMEM_FAULT")));
        }
        Ok(())
    }

    fn copy_fault(&self, what: &str) -> Result<()> {
        if self.fails(self.spec.copy) {
            return Err(Error::Device(format!("{what} failed: fault injected by CUMEM_FAULT")));
        }
        Ok(())
    }
}

impl Device for FaultyDevice {
    fn name(&self) -> &str {
        &self.name
    }
    // Not faulted: the engine's drop waits here before it frees every block.
    fn synchronize_all(&self) -> Result<()> {
        self.inner.synchronize_all()
    }
    fn stream_create(&self, blocking: bool) -> Result<u64> {
        self.stream_fault("stream create")?;
        self.inner.stream_create(blocking)
    }
    fn stream_destroy(&self, s: u64) -> Result<()> {
        self.inner.stream_destroy(s)
    }
    fn stream_synchronize(&self, s: u64) -> Result<()> {
        self.stream_fault("stream synchronize")?;
        self.inner.stream_synchronize(s)
    }
    fn stream_query(&self, s: u64) -> Result<bool> {
        self.stream_fault("stream query")?;
        self.inner.stream_query(s)
    }
    fn stream_raw(&self, s: u64) -> Result<u64> {
        self.inner.stream_raw(s)
    }
    fn capture_begin(&self, s: u64) -> Result<()> {
        self.inner.capture_begin(s)
    }
    fn capture_end(&self, s: u64) -> Result<u64> {
        self.inner.capture_end(s)
    }
    fn graph_instantiate(&self, g: u64) -> Result<u64> {
        self.inner.graph_instantiate(g)
    }
    fn graph_launch(&self, e: u64, s: u64) -> Result<()> {
        self.inner.graph_launch(e, s)
    }
    fn graph_exec_update(&self, e: u64, g: u64) -> Result<()> {
        self.inner.graph_exec_update(e, g)
    }
    fn graph_destroy(&self, g: u64) -> Result<()> {
        self.inner.graph_destroy(g)
    }
    fn graph_exec_destroy(&self, e: u64) -> Result<()> {
        self.inner.graph_exec_destroy(e)
    }
    fn capture_dependencies(&self, s: u64) -> Result<Vec<u64>> {
        self.inner.capture_dependencies(s)
    }
    fn capture_set_dependencies(&self, s: u64, nodes: &[u64]) -> Result<()> {
        self.inner.capture_set_dependencies(s, nodes)
    }
    fn graph_info(&self, g: u64) -> Result<super::GraphInfo> {
        self.inner.graph_info(g)
    }
    fn graph_programmatic_edges(&self, g: u64, waits: &dyn Fn(u64) -> bool) -> Result<u64> {
        self.inner.graph_programmatic_edges(g, waits)
    }
    fn stream_wait_event(&self, s: u64, e: u64) -> Result<()> {
        self.stream_fault("stream wait")?;
        self.inner.stream_wait_event(s, e)
    }
    fn stream_sleep(&self, s: u64, ns: u64) -> Result<()> {
        self.stream_fault("stream sleep")?;
        self.inner.stream_sleep(s, ns)
    }
    fn event_create(&self, timing: bool) -> Result<u64> {
        self.stream_fault("event create")?;
        self.inner.event_create(timing)
    }
    fn event_destroy(&self, e: u64) -> Result<()> {
        self.inner.event_destroy(e)
    }
    fn event_record(&self, e: u64, s: u64) -> Result<()> {
        self.stream_fault("event record")?;
        self.inner.event_record(e, s)
    }
    fn event_query(&self, e: u64) -> Result<bool> {
        self.stream_fault("event query")?;
        self.inner.event_query(e)
    }
    fn event_synchronize(&self, e: u64) -> Result<()> {
        self.stream_fault("event synchronize")?;
        self.inner.event_synchronize(e)
    }
    fn event_elapsed_ms(&self, start: u64, end: u64) -> Result<f32> {
        self.stream_fault("event elapsed time")?;
        self.inner.event_elapsed_ms(start, end)
    }
    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, s: u64) -> Result<()> {
        self.copy_fault("asynchronous copy to the device")?;
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.inner.copy_htod_async(dst, src, bytes, s) }
    }
    unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, s: u64) -> Result<()> {
        self.copy_fault("asynchronous copy from the device")?;
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.inner.copy_dtoh_async(dst, src, bytes, s) }
    }
    unsafe fn memset_async(&self, dst: u64, pattern: u32, elsize: u32, count: u64, s: u64) -> Result<()> {
        self.copy_fault("memset")?;
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.inner.memset_async(dst, pattern, elsize, count, s) }
    }
    unsafe fn copy_dtod_async(&self, dst: u64, src: u64, bytes: u64, s: u64) -> Result<()> {
        self.copy_fault("copy on the device")?;
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.inner.copy_dtod_async(dst, src, bytes, s) }
    }
    fn is_host(&self) -> bool {
        self.inner.is_host()
    }
    fn alloc(&self, bytes: u64) -> Result<u64> {
        if self.fails(self.spec.alloc) {
            return Err(Error::OutOfMemory(format!(
                "device allocation of {bytes} bytes failed: fault injected by CUMEM_FAULT"
            )));
        }
        self.inner.alloc(bytes)
    }
    unsafe fn free(&self, ptr: u64, bytes: u64) -> Result<()> {
        // SAFETY: forwarded under the caller's guarantee. The memory is released even
        // when a failure is injected, as the engine treats the segment as gone either way.
        unsafe { self.inner.free(ptr, bytes) }?;
        if self.fails(self.spec.free) {
            return Err(Error::Device(format!(
                "device free of {ptr:#x} failed: fault injected by CUMEM_FAULT"
            )));
        }
        Ok(())
    }
    fn mem_info(&self) -> Result<(u64, u64)> {
        self.inner.mem_info()
    }
    fn vm_granularity(&self) -> Result<u64> {
        self.inner.vm_granularity()
    }
    fn vm_reserve(&self, bytes: u64) -> Result<u64> {
        self.inner.vm_reserve(bytes)
    }
    unsafe fn vm_release(&self, base: u64, bytes: u64) -> Result<()> {
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.vm_release(base, bytes) }
    }
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> Result<()> {
        // Failing before the inner call keeps `vm_map`'s contract: nothing stays mapped.
        if self.fails(self.spec.alloc) {
            return Err(Error::OutOfMemory(format!(
                "mapping {bytes} bytes at {addr:#x} failed: fault injected by CUMEM_FAULT"
            )));
        }
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.vm_map(addr, bytes) }
    }
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> Result<()> {
        // SAFETY: forwarded under the caller's guarantee. As for `free`, the memory is
        // unmapped even when a failure is injected: the engine treats it as gone.
        unsafe { self.inner.vm_unmap(addr, bytes) }?;
        if self.fails(self.spec.free) {
            return Err(Error::Device(format!(
                "unmapping {bytes} bytes at {addr:#x} failed: fault injected by CUMEM_FAULT"
            )));
        }
        Ok(())
    }
    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()> {
        self.copy_fault("copy to the device")?;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.copy_htod(dst, src, bytes) }
    }
    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()> {
        self.copy_fault("copy from the device")?;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.copy_dtoh(dst, src, bytes) }
    }
    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.copy_fault("copy on the device")?;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.copy_dtod(dst, src, bytes) }
    }
    unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        self.copy_fault("memset")?;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.memset(dst, value, bytes) }
    }
    fn make_current(&self) -> Result<()> {
        self.inner.make_current()
    }
    fn ordinal(&self) -> u32 {
        self.inner.ordinal()
    }
    fn cuda_handles(&self) -> Option<(usize, i32)> {
        self.inner.cuda_handles()
    }
    fn can_access_peer(&self, src: &dyn Device) -> Result<bool> {
        self.inner.can_access_peer(src)
    }
    unsafe fn copy_from_peer(&self, dst: u64, src_dev: &dyn Device, src: u64, bytes: u64) -> Result<()> {
        self.copy_fault("peer copy")?;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.inner.copy_from_peer(dst, src_dev, src, bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::HostDevice;

    #[test]
    fn fails_with_the_given_probability_and_is_repeatable() {
        let run = |seed| {
            let spec = FaultSpec { alloc: 0.25, free: 0.0, copy: 0.0, stream: 0.0, seed };
            let d = FaultyDevice::new(Box::new(HostDevice::new(Some(1 << 30))), spec);
            (0..4000)
                .map(|_| match d.alloc(4096) {
                    Ok(p) => {
                        // SAFETY: just allocated with these bytes.
                        unsafe { d.free(p, 4096) }.unwrap();
                        false
                    }
                    Err(e) => {
                        assert!(e.is_oom(), "{e}");
                        true
                    }
                })
                .collect::<Vec<bool>>()
        };
        let a = run(7);
        let failed = a.iter().filter(|&&f| f).count();
        assert!((800..1200).contains(&failed), "{failed} of 4000 at p = 0.25");
        assert_eq!(run(7), a, "same seed, same failures");
        assert_ne!(run(8), a);
    }

    #[test]
    fn failed_frees_release_and_failed_copies_write_nothing() {
        let spec = FaultSpec { alloc: 0.0, free: 1.0, copy: 1.0, stream: 0.0, seed: 1 };
        let d = FaultyDevice::new(Box::new(HostDevice::new(Some(1 << 20))), spec);
        let p = d.alloc(1 << 20).unwrap();
        // SAFETY: `p` is 1 MiB of host memory.
        unsafe {
            std::ptr::write_bytes(p as *mut u8, 5, 16);
            assert!(matches!(d.memset(p, 9, 16), Err(Error::Device(_))));
            assert!(matches!(d.copy_htod(p, [1u8; 16].as_ptr(), 16), Err(Error::Device(_))));
            assert_eq!(*(p as *const [u8; 16]), [5; 16]);
            assert!(matches!(d.free(p, 1 << 20), Err(Error::Device(_))));
        }
        // The whole capacity is free again.
        let q = d.alloc(1 << 20).unwrap();
        // SAFETY: just allocated.
        assert!(unsafe { d.free(q, 1 << 20) }.is_err());
    }

    #[test]
    fn mappings_fail_like_allocations_and_unmappings_like_frees() {
        let g = crate::device::HOST_VM_GRANULE;
        let spec = FaultSpec { alloc: 1.0, free: 1.0, copy: 0.0, stream: 0.0, seed: 1 };
        let d = FaultyDevice::new(Box::new(HostDevice::new(Some(g))), spec);
        assert_eq!(d.vm_granularity().unwrap(), g);
        let base = d.vm_reserve(2 * g).unwrap();
        // SAFETY: `base` is a reserved range of two granules; each is mapped at most once
        // and unmapped before the range is released.
        unsafe {
            assert!(d.vm_map(base, g).unwrap_err().is_oom());
            // The failed mapping mapped nothing: the inner device maps its whole
            // capacity (one granule) at the same place.
            d.inner.vm_map(base, g).unwrap();
            std::ptr::write_bytes(base as *mut u8, 3, 16);
            assert!(matches!(d.vm_unmap(base, g), Err(Error::Device(_))));
            // The failed unmapping unmapped: the capacity is free again.
            d.inner.vm_map(base + g, g).unwrap();
            d.inner.vm_unmap(base + g, g).unwrap();
            d.vm_release(base, 2 * g).unwrap();
        }
    }
}
