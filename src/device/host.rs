//! `HostDevice`: page-aligned host memory standing in for a GPU, so every pool, the Julia
//! package and CI run without one, and tests can read device memory through its address.

use super::Device;
use crate::error::{Error, Result};
use crate::format::format_bytes;
use std::alloc::{Layout, alloc, dealloc};
use std::sync::atomic::{AtomicU64, Ordering};

/// Alignment of every host-device allocation (a page; more than the 256 bytes promised).
pub const HOST_ALIGN: u64 = 4096;

/// Host memory with a capacity: `alloc` fails with out of memory once `capacity` bytes
/// are in use, as a GPU would.
pub struct HostDevice {
    capacity: u64,
    used: AtomicU64,
}

impl HostDevice {
    /// A host device of `capacity` bytes (default: the machine's physical memory).
    pub fn new(capacity: Option<u64>) -> HostDevice {
        HostDevice { capacity: capacity.unwrap_or_else(physical_memory), used: AtomicU64::new(0) }
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

impl Device for HostDevice {
    fn name(&self) -> &str {
        "host memory (no GPU)"
    }

    fn is_host(&self) -> bool {
        true
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
        // SAFETY: the layout has a non-zero size (the caller never asks for 0 bytes).
        let p = unsafe { alloc(layout(bytes)?) };
        if p.is_null() {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(oom());
        }
        Ok(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: u64) -> Result<()> {
        // SAFETY: the caller guarantees `ptr` came from `alloc(bytes)`.
        unsafe { dealloc(ptr as *mut u8, layout(bytes)?) };
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        Ok((self.capacity.saturating_sub(self.used.load(Ordering::Relaxed)), self.capacity))
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()> {
        // SAFETY: the caller guarantees `src` readable and `[dst, dst+bytes)` device
        // memory, which on this device is host memory of this process.
        unsafe { std::ptr::copy(src, dst as *mut u8, bytes as usize) };
        Ok(())
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()> {
        // SAFETY: the caller guarantees `dst` writable and `[src, src+bytes)` device
        // (here: host) memory.
        unsafe { std::ptr::copy(src as *const u8, dst, bytes as usize) };
        Ok(())
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        // SAFETY: the caller guarantees both ranges are device (here: host) memory;
        // `copy` allows them to overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize) };
        Ok(())
    }

    unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        // SAFETY: the caller guarantees `[dst, dst+bytes)` is device (here: host) memory.
        unsafe { std::ptr::write_bytes(dst as *mut u8, value, bytes as usize) };
        Ok(())
    }
}
