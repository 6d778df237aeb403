//! `HostDevice`: page-aligned host memory standing in for a GPU, so every pool, the Julia
//! package and CI run without one, and tests can read device memory through its address.
//! Its virtual memory (for the expandable pool) is the operating system's: address
//! ranges reserved with `mmap(PROT_NONE)`, granules committed with `mprotect` (and
//! counted against the capacity) and decommitted with `madvise(MADV_DONTNEED)` +
//! `mprotect(PROT_NONE)`, at the granularity of a GPU, so that reserved-memory figures
//! measured here are a GPU's.

use super::Device;
use super::chunks::ChunkTable;
use super::host_stream::HostStreams;
use crate::error::{Error, Result};
use crate::format::format_bytes;
use std::alloc::{Layout, alloc, dealloc};
use std::sync::atomic::{AtomicU64, Ordering};

/// Alignment of every host-device allocation (a page; more than the 256 bytes promised).
pub const HOST_ALIGN: u64 = 4096;

/// Allocations of at least this many bytes are mappings of their own (`mmap`), returned
/// to the operating system at their free (`munmap`). Smaller ones come from the C
/// allocator. glibc serves large blocks from its heap once a free has raised its dynamic
/// mmap threshold, and keeps freed heap memory: a long run's RSS then grew to every
/// segment it ever freed while its reserved bytes stayed flat.
pub(crate) const HOST_MMAP_MIN: u64 = 1 << 20;

/// Granule of the host device's virtual memory: 2 MiB, what `cuMemGetAllocationGranularity`
/// reports on current NVIDIA GPUs.
pub const HOST_VM_GRANULE: u64 = 2 << 20;

/// Host memory with a capacity: `alloc` fails with out of memory once `capacity` bytes
/// are in use, as a GPU would.
pub struct HostDevice {
    capacity: u64,
    used: AtomicU64,
    ordinal: u32,
    /// Streams and events, emulated by worker threads (see `host_stream`).
    streams: HostStreams,
    /// The mapped ranges, one per `vm_map` (CUDA's physical allocations): unmapping or
    /// moving a part of one fails as on a GPU.
    chunks: parking_lot::Mutex<ChunkTable<()>>,
}

impl HostDevice {
    /// A host device of `capacity` bytes (default: the machine's physical memory).
    pub fn new(capacity: Option<u64>) -> HostDevice {
        HostDevice::with_ordinal(capacity, 0)
    }

    /// Stand-in device `ordinal` of `CUMEM_DEVICE=host:N`, of `capacity` bytes (each
    /// stand-in has its own capacity, count of bytes in use and streams).
    pub fn with_ordinal(capacity: Option<u64>, ordinal: u32) -> HostDevice {
        HostDevice {
            capacity: capacity.unwrap_or_else(physical_memory),
            used: AtomicU64::new(0),
            ordinal,
            streams: HostStreams::default(),
            chunks: parking_lot::Mutex::default(),
        }
    }
}

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`; 16 GiB if
/// unreadable).
pub fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(16 << 30)
}

fn layout(bytes: u64) -> Result<Layout> {
    usize::try_from(bytes)
        .ok()
        .and_then(|b| Layout::from_size_align(b, HOST_ALIGN as usize).ok())
        .ok_or_else(|| Error::InvalidValue(format!("{bytes} bytes cannot be allocated on the host")))
}

impl HostDevice {
    /// Counts `bytes` more in use; out of memory (counting nothing) past the capacity.
    fn charge(&self, bytes: u64) -> Result<()> {
        let prev = self.used.fetch_add(bytes, Ordering::Relaxed);
        if prev.checked_add(bytes).is_none_or(|u| u > self.capacity) {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Error::OutOfMemory(format!(
                "host device cannot provide {} ({} of {} in use; CUMEM_HOST_CAPACITY sets the capacity)",
                format_bytes(bytes),
                format_bytes(prev),
                format_bytes(self.capacity)
            )));
        }
        Ok(())
    }
}

/// A private anonymous read-write mapping of `bytes` (page-aligned: [`HOST_ALIGN`]), or
/// null when the system refuses.
fn map_anonymous(bytes: u64) -> *mut u8 {
    let Ok(len) = usize::try_from(bytes) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a new anonymous mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p as *mut u8 }
}

fn os_err(what: &str) -> Error {
    Error::Device(format!("{what} failed: {}", std::io::Error::last_os_error()))
}

/// Checks that `addr` and `bytes` are whole granules.
fn check_granules(addr: u64, bytes: u64) -> Result<()> {
    if !addr.is_multiple_of(HOST_VM_GRANULE) || !bytes.is_multiple_of(HOST_VM_GRANULE) || bytes == 0 {
        return Err(Error::InvalidValue(format!(
            "{addr:#x}+{bytes} is not a whole number of {} granules",
            format_bytes(HOST_VM_GRANULE)
        )));
    }
    Ok(())
}

impl Device for HostDevice {
    fn name(&self) -> &str {
        "host memory (no GPU)"
    }

    fn is_host(&self) -> bool {
        true
    }

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn can_access_peer(&self, src: &dyn Device) -> Result<bool> {
        Ok(src.is_host())
    }

    unsafe fn copy_from_peer(&self, dst: u64, src_dev: &dyn Device, src: u64, bytes: u64) -> Result<()> {
        if !src_dev.is_host() {
            return Err(Error::NotSupported(format!(
                "{} cannot read the memory of {}",
                self.name(),
                src_dev.name()
            )));
        }
        // SAFETY: the caller guarantees both ranges; host stand-ins share the process's
        // address space, and `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize) };
        Ok(())
    }

    fn alloc(&self, bytes: u64) -> Result<u64> {
        let oom = || {
            Error::OutOfMemory(format!(
                "host device cannot provide {} ({} of {} in use; CUMEM_HOST_CAPACITY sets the capacity)",
                format_bytes(bytes),
                format_bytes(self.used.load(Ordering::Relaxed)),
                format_bytes(self.capacity)
            ))
        };
        let prev = self.used.fetch_add(bytes, Ordering::Relaxed);
        if prev.checked_add(bytes).is_none_or(|u| u > self.capacity) {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(oom());
        }
        let p = if bytes >= HOST_MMAP_MIN {
            map_anonymous(bytes)
        } else {
            // SAFETY: the layout has a non-zero size (the caller never asks for 0 bytes).
            layout(bytes).map(|l| unsafe { alloc(l) }).unwrap_or(std::ptr::null_mut())
        };
        if p.is_null() {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(oom());
        }
        Ok(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: u64) -> Result<()> {
        // cuMemFree waits for the device: no stream may still be copying into the memory.
        self.streams.barrier(true);
        if bytes >= HOST_MMAP_MIN {
            // SAFETY: the caller guarantees `ptr` came from `alloc(bytes)`: a mapping of
            // `bytes` of its own.
            if unsafe { libc::munmap(ptr as *mut libc::c_void, bytes as usize) } != 0 {
                return Err(os_err("munmap"));
            }
        } else {
            // SAFETY: the caller guarantees `ptr` came from `alloc(bytes)`.
            unsafe { dealloc(ptr as *mut u8, layout(bytes)?) };
        }
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        Ok((self.capacity.saturating_sub(self.used.load(Ordering::Relaxed)), self.capacity))
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()> {
        self.streams.barrier(false); // the legacy stream's implicit synchronisation
        // SAFETY: the caller guarantees `src` readable and `[dst, dst+bytes)` device
        // memory, which on this device is host memory of this process.
        unsafe { std::ptr::copy(src, dst as *mut u8, bytes as usize) };
        Ok(())
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()> {
        self.streams.barrier(false); // the legacy stream's implicit synchronisation
        // SAFETY: the caller guarantees `dst` writable and `[src, src+bytes)` device
        // (here: host) memory.
        unsafe { std::ptr::copy(src as *const u8, dst, bytes as usize) };
        Ok(())
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.streams.barrier(false); // the legacy stream's implicit synchronisation
        // SAFETY: the caller guarantees both ranges are device (here: host) memory;
        // `copy` allows them to overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize) };
        Ok(())
    }

    unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        self.streams.barrier(false); // the legacy stream's implicit synchronisation
        // SAFETY: the caller guarantees `[dst, dst+bytes)` is device (here: host) memory.
        unsafe { std::ptr::write_bytes(dst as *mut u8, value, bytes as usize) };
        Ok(())
    }

    fn vm_granularity(&self) -> Result<u64> {
        Ok(HOST_VM_GRANULE)
    }

    fn synchronize_all(&self) -> Result<()> {
        self.streams.barrier(true);
        Ok(())
    }

    fn stream_create(&self, blocking: bool) -> Result<u64> {
        self.streams.create(blocking)
    }

    fn stream_destroy(&self, s: u64) -> Result<()> {
        self.streams.destroy(s)
    }

    fn stream_synchronize(&self, s: u64) -> Result<()> {
        self.streams.synchronize(s)
    }

    fn stream_query(&self, s: u64) -> Result<bool> {
        self.streams.query(s)
    }

    fn stream_raw(&self, s: u64) -> Result<u64> {
        self.streams.check(s).map(|()| s)
    }

    fn stream_wait_event(&self, s: u64, e: u64) -> Result<()> {
        self.streams.wait_event(s, e)
    }

    fn stream_sleep(&self, s: u64, ns: u64) -> Result<()> {
        self.streams.sleep(s, ns)
    }

    fn event_create(&self, timing: bool) -> Result<u64> {
        self.streams.event_create(timing)
    }

    fn event_destroy(&self, e: u64) -> Result<()> {
        self.streams.event_destroy(e)
    }

    fn event_record(&self, e: u64, s: u64) -> Result<()> {
        self.streams.record(e, s)
    }

    fn event_query(&self, e: u64) -> Result<bool> {
        self.streams.event_query(e)
    }

    fn event_synchronize(&self, e: u64) -> Result<()> {
        self.streams.event_synchronize(e)
    }

    fn event_elapsed_ms(&self, start: u64, end: u64) -> Result<f32> {
        self.streams.elapsed_ms(start, end)
    }

    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, s: u64) -> Result<()> {
        let (d, p) = (dst as usize, src as usize);
        // SAFETY: the caller keeps both ranges valid until the copy has run.
        self.streams.enqueue(
            s,
            Box::new(move || unsafe { std::ptr::copy(p as *const u8, d as *mut u8, bytes as usize) }),
        )
    }

    unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, s: u64) -> Result<()> {
        let (d, p) = (dst as usize, src as usize);
        // SAFETY: the caller keeps both ranges valid until the copy has run.
        self.streams.enqueue(
            s,
            Box::new(move || unsafe { std::ptr::copy(p as *const u8, d as *mut u8, bytes as usize) }),
        )
    }

    unsafe fn memset_async(&self, dst: u64, pattern: u32, elsize: u32, count: u64, s: u64) -> Result<()> {
        let d = dst as usize;
        // SAFETY: the caller keeps the range valid until the memset has run and aligns
        // `dst` to `elsize` (1, 2 or 4).
        self.streams.enqueue(s, Box::new(move || unsafe { fill_pattern(d, pattern, elsize, count) }))
    }

    unsafe fn copy_dtod_async(&self, dst: u64, src: u64, bytes: u64, s: u64) -> Result<()> {
        let (d, p) = (dst as usize, src as usize);
        // SAFETY: the caller keeps both ranges valid until the copy has run; `copy`
        // allows them to overlap.
        self.streams.enqueue(
            s,
            Box::new(move || unsafe { std::ptr::copy(p as *const u8, d as *mut u8, bytes as usize) }),
        )
    }

    fn vm_reserve(&self, bytes: u64) -> Result<u64> {
        check_granules(0, bytes)?;
        let len = usize::try_from(bytes + HOST_VM_GRANULE).map_err(|_| {
            Error::OutOfMemory(format!("cannot reserve {} of addresses", format_bytes(bytes)))
        })?;
        // Over-reserve by one granule and trim, for an address aligned to the granule.
        // SAFETY: a new anonymous mapping with no access; nothing else is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::OutOfMemory(format!(
                "mmap of {} of addresses failed: {}",
                format_bytes(bytes),
                std::io::Error::last_os_error()
            )));
        }
        let start = p as u64;
        let base = start.next_multiple_of(HOST_VM_GRANULE);
        let (head, tail) = (base - start, start + len as u64 - (base + bytes));
        // SAFETY: both trimmed pieces lie in the mapping just made.
        unsafe {
            if head > 0 {
                libc::munmap(p, head as usize);
            }
            if tail > 0 {
                libc::munmap((base + bytes) as *mut libc::c_void, tail as usize);
            }
        }
        Ok(base)
    }

    unsafe fn vm_release(&self, base: u64, bytes: u64) -> Result<()> {
        check_granules(base, bytes)?;
        // SAFETY: the caller guarantees this is one reserved range.
        if unsafe { libc::munmap(base as *mut libc::c_void, bytes as usize) } != 0 {
            return Err(os_err("munmap"));
        }
        Ok(())
    }

    /// One allocation for the whole range (recorded, so that only whole allocations
    /// unmap and move, as on CUDA), committed with one `mprotect`.
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> Result<()> {
        check_granules(addr, bytes)?;
        let mut chunks = self.chunks.lock();
        if !chunks.is_free(addr, bytes) {
            return Err(Error::InvalidValue(format!("{addr:#x}+{bytes} is mapped already")));
        }
        self.charge(bytes)?;
        // SAFETY: the caller guarantees the range is reserved by `vm_reserve`.
        if unsafe {
            libc::mprotect(addr as *mut libc::c_void, bytes as usize, libc::PROT_READ | libc::PROT_WRITE)
        } != 0
        {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(os_err("mprotect(PROT_READ|PROT_WRITE)"));
        }
        chunks.insert(addr, bytes, ())
    }

    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> Result<()> {
        check_granules(addr, bytes)?;
        let mut chunks = self.chunks.lock();
        let whole = chunks.tiling(addr, bytes)?;
        for (a, _, ()) in whole {
            chunks.remove(a);
        }
        drop(chunks);
        self.streams.barrier(true);
        let p = addr as *mut libc::c_void;
        // SAFETY: the caller guarantees the range is mapped and unused: dropping its
        // pages (they read as zero when mapped again) and access to it is what it asks.
        unsafe {
            if libc::madvise(p, bytes as usize, libc::MADV_DONTNEED) != 0 {
                return Err(os_err("madvise(MADV_DONTNEED)"));
            }
            if libc::mprotect(p, bytes as usize, libc::PROT_NONE) != 0 {
                return Err(os_err("mprotect(PROT_NONE)"));
            }
        }
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// The pages themselves move (`mremap` to the fixed address `to`, contents and all, a
    /// granule at a time: `vm_map`'s `mprotect`s may leave a run in several kernel
    /// mappings, and `mremap` moves one), as CUDA's physical allocations do; `from` is
    /// reserved again with no access.
    unsafe fn vm_move(&self, from: u64, to: u64, bytes: u64) -> Result<()> {
        check_granules(from, bytes)?;
        check_granules(to, bytes)?;
        if from.max(to) < from.min(to) + bytes {
            return Err(Error::InvalidValue(format!(
                "moving {bytes} bytes from {from:#x} onto itself at {to:#x}"
            )));
        }
        let mut chunks = self.chunks.lock();
        let whole = chunks.tiling(from, bytes)?;
        if !chunks.is_free(to, bytes) {
            return Err(Error::InvalidValue(format!("moving onto {to:#x}+{bytes}, which is mapped")));
        }
        // Each allocation keeps its extent at its new place (on error none stays mapped).
        for &(a, _, ()) in &whole {
            chunks.remove(a);
        }
        self.streams.barrier(true);
        let none = |at: u64, len: u64| {
            // SAFETY: `[at, at+len)` lies in a reservation of this device; replacing it by
            // fresh pages with no access is what reserving it again means.
            unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    len as usize,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                    -1,
                    0,
                ) != libc::MAP_FAILED
            }
        };
        let g = HOST_VM_GRANULE;
        let mut done = 0;
        let mut err = None;
        // MREMAP_DONTUNMAP (Linux 5.7) leaves `from` mapped, empty, until `none` below
        // replaces it: a plain move leaves a hole in the reservation for that moment, and
        // another thread's `mmap` may be given addresses in it, which `none`'s MAP_FIXED
        // would then take from under it (seen as blocks of other pools overwritten and
        // segfaults when the library's tests ran in parallel). Without it (older
        // kernels: EINVAL) the plain move.
        let mut flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP;
        while done < bytes {
            // SAFETY: the caller guarantees `from` is mapped and unused and `to` reserved
            // and unmapped (MREMAP_FIXED replaces its PROT_NONE pages).
            let p = unsafe {
                libc::mremap(
                    (from + done) as *mut libc::c_void,
                    g as usize,
                    g as usize,
                    flags,
                    (to + done) as *mut libc::c_void,
                )
            };
            if p == libc::MAP_FAILED {
                if flags & libc::MREMAP_DONTUNMAP != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
                {
                    flags &= !libc::MREMAP_DONTUNMAP;
                    continue;
                }
                err = Some(os_err("mremap"));
                break;
            }
            done += g;
        }
        // `from` (emptied, or holes where granules moved out) reserved again; on error
        // this also returns the memory not moved.
        let back = none(from, bytes);
        if err.is_none() && !back {
            err = Some(os_err("mmap(PROT_NONE) of the range moved from"));
        }
        if let Some(e) = err {
            // Keep the contract: nothing of either range stays mapped.
            none(to, done);
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(e);
        }
        for (a, b, ()) in whole {
            chunks.insert(to + (a - from), b, ())?;
        }
        Ok(())
    }
}

/// Writes `count` copies of the low `elsize` bytes of `pattern` from address `dst`, as
/// `cuMemsetD8/D16/D32` do.
///
/// # Safety
/// `[dst, dst+count*elsize)` must be writable memory of this process, aligned to `elsize`
/// (1, 2 or 4).
pub(crate) unsafe fn fill_pattern(dst: usize, pattern: u32, elsize: u32, count: u64) {
    let n = count as usize;
    // SAFETY: the caller's guarantees.
    unsafe {
        match elsize {
            1 => std::ptr::write_bytes(dst as *mut u8, pattern as u8, n),
            2 => std::slice::from_raw_parts_mut(dst as *mut u16, n).fill(pattern as u16),
            _ => std::slice::from_raw_parts_mut(dst as *mut u32, n).fill(pattern),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_carries_the_pages_and_leaves_the_source_reserved() {
        let g = HOST_VM_GRANULE;
        let d = HostDevice::new(Some(4 * g));
        let base = d.vm_reserve(8 * g).unwrap();
        // SAFETY: `base` is a reserved range of eight granules; each granule is mapped
        // once at a time, and all are unmapped before the range is released.
        unsafe {
            // Two granules mapped in two calls (two kernel mappings), each marked.
            d.vm_map(base, g).unwrap();
            d.vm_map(base + g, g).unwrap();
            *(base as *mut u64) = 11;
            *((base + g + 8) as *mut u64) = 22;
            d.vm_move(base, base + 5 * g, 2 * g).unwrap();
            assert_eq!(*((base + 5 * g) as *const u64), 11);
            assert_eq!(*((base + 6 * g + 8) as *const u64), 22);
            assert_eq!(d.used.load(Ordering::Relaxed), 2 * g, "no memory obtained or returned");
            // The source is reserved and unmapped: it maps again, with fresh pages.
            d.vm_map(base, 2 * g).unwrap();
            assert_eq!(*((base + g + 8) as *const u64), 0);
            // Overlapping ranges are refused, nothing changed.
            assert!(matches!(d.vm_move(base, base + g, 2 * g), Err(Error::InvalidValue(_))));
            assert_eq!(*((base + 5 * g) as *const u64), 11);
            // A part of an allocation neither unmaps nor moves (as on CUDA); whole ones
            // do, several neighbours at once too.
            assert!(matches!(d.vm_unmap(base, g), Err(Error::InvalidValue(_))));
            assert!(matches!(d.vm_move(base + g, base + 3 * g, g), Err(Error::InvalidValue(_))));
            assert_eq!(*((base + g + 8) as *const u64), 0, "still mapped");
            d.vm_unmap(base, 2 * g).unwrap();
            d.vm_unmap(base + 5 * g, 2 * g).unwrap();
            assert_eq!(d.used.load(Ordering::Relaxed), 0);
            d.vm_release(base, 8 * g).unwrap();
        }
    }
}
