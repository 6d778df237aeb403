//! Checked copies: the pin of a live block for the length of a copy (a free of a
//! pinned block reaches the pool when the last copy ends), the range checks, the
//! synchronous copies and memset on one device, and [`copy_between`] two devices.

use super::{Engine, ShardState};
use crate::error::{Error, Result};
use crate::pool::Pool;
use std::sync::atomic::Ordering::Relaxed;

/// The copies using one block, and whether it was freed meanwhile.
pub(super) struct Pin {
    /// The block's address.
    pub(super) base: u64,
    /// Copies in flight.
    pub(super) count: u32,
    /// The block's size once it was freed while pinned (0 while live): the last unpin
    /// hands it to the pool.
    pub(super) freed_size: u64,
}

impl Engine {
    /// A free while some copy holds a pin in shard `i`: a pinned block goes to the pool
    /// only when its last copy ends (see [`Engine::pin`]).
    #[cold]
    pub(super) fn free_maybe_pinned(&self, s: &mut ShardState, i: usize, ptr: u64, size: u64) {
        match s.pins.iter_mut().find(|p| p.base == ptr) {
            Some(pin) => pin.freed_size = size,
            None => self.return_block(s, i, ptr, size),
        }
    }

    /// Checks that `[addr, addr+bytes)` lies inside one live allocation. Errors:
    /// [`Error::InvalidValue`] naming the range and, if found, the allocation it leaves.
    /// The answer may be stale as soon as it is returned (another thread may free the
    /// block); the copies check and pin in one step instead.
    pub fn check_range(&self, addr: u64, bytes: u64) -> Result<()> {
        self.pin(addr, bytes).map(drop)
    }

    /// Whether `addr` lies inside a live allocation of this engine (used to find the
    /// device that owns an address when several are in use).
    pub fn owns(&self, addr: u64) -> bool {
        addr != 0 && self.pin(addr, 1).is_ok()
    }

    /// Checks that `[addr, addr+bytes)` lies inside one live allocation and pins that
    /// block until the returned guard drops: a free of a pinned block takes effect for
    /// the caller at once (the address is no longer live, statistics count it freed) but
    /// the block reaches the pool, and so the device, only when its last pin goes. So a
    /// copy racing a free writes into memory that was live when it was checked and that
    /// nothing else can own before the copy ends. Errors as [`Engine::check_range`].
    ///
    /// The block is found under its shard's lock: first as a block base (the usual copy
    /// target) in the home shard and then in the other shards in use; an address inside
    /// a block goes through the upstream's segment map and the pool's `block_base`.
    ///
    /// A block live in a thread cache moves into its shard's table first: the calling
    /// thread's own block at once, any other after a claim of all caches when the search
    /// fails.
    pub(super) fn pin(&self, addr: u64, bytes: u64) -> Result<Pinned<'_>> {
        if let Some(tc) = self.thread_cache() {
            self.migrate_own(tc, addr);
        }
        match self.pin_search(addr, bytes) {
            Err(_) if self.tc.is_some() => {
                self.with_caches(|cs| cs.iter_mut().for_each(|c| self.migrate_live(c)));
                self.pin_search(addr, bytes)
            }
            r => r,
        }
    }

    /// [`Engine::pin`]'s search of the shards.
    fn pin_search(&self, addr: u64, bytes: u64) -> Result<Pinned<'_>> {
        let bad = |why: String| Err(Error::InvalidValue(format!("device range {addr:#x}+{bytes} {why}")));
        let Some(end) = addr.checked_add(bytes) else {
            return bad("overflows 64 bits".into());
        };
        let home = self.home();
        let mut bits = self.used_shards.load(Relaxed) | (1u64 << home);
        let mut i = home;
        loop {
            if let Some(r) = self.pin_in(i, addr, addr, end) {
                return r;
            }
            bits &= !(1u64 << i);
            if bits == 0 {
                break;
            }
            i = bits.trailing_zeros() as usize;
        }
        let Some((seg_base, seg)) = self.up.segment_containing(addr) else {
            return bad("is not inside any allocation of CuMem".into());
        };
        let base = {
            // The pool that owns the segment answers: the shard's default pool or one of
            // its streams' pools.
            let s = self.shards[seg.shard].state.lock();
            std::iter::once(&s.pool)
                .chain(s.stream_pools.iter().map(|p| &p.pool))
                .find_map(|p| p.block_base(addr, seg_base))
                .unwrap_or(seg_base)
        };
        match self.pin_in(seg.shard, base, addr, end) {
            Some(r) => r,
            None => bad(format!("is inside freed or cached memory (block {base:#x})")),
        }
    }

    /// Pins the live block at `base` of shard `i` if `[addr, end)` lies inside it; None
    /// if no live block of shard `i` starts at `base`.
    fn pin_in(&self, i: usize, base: u64, addr: u64, end: u64) -> Option<Result<Pinned<'_>>> {
        let mut s = self.shards[i].state.lock();
        let requested = s.live.get(base)?.requested;
        if end > base + requested {
            return Some(Err(Error::InvalidValue(format!(
                "device range {addr:#x}+{} crosses the end of the allocation of {requested} bytes at {base:#x} by {} bytes",
                end - addr,
                end - (base + requested)
            ))));
        }
        match s.pins.iter_mut().find(|p| p.base == base) {
            Some(pin) => pin.count += 1,
            None => s.pins.push(Pin { base, count: 1, freed_size: 0 }),
        }
        Some(Ok(Pinned { engine: self, shard: i, base }))
    }

    /// Drops one pin of the block at `base` in shard `i`; the last one of a block freed
    /// meanwhile hands it to the pool.
    fn unpin(&self, i: usize, base: u64) {
        let mut s = self.shards[i].state.lock();
        let Some(k) = s.pins.iter().position(|p| p.base == base) else {
            debug_assert!(false, "unpin of {base:#x}, which is not pinned");
            return;
        };
        s.pins[k].count -= 1;
        if s.pins[k].count == 0 {
            let freed = s.pins.swap_remove(k).freed_size;
            if freed != 0 {
                self.return_block(&mut s, i, base, freed);
            }
        }
    }

    /// Uploads `src` to device address `dst`. Errors: [`Error::InvalidValue`] when the
    /// destination is not inside one live allocation (nothing is written), or the
    /// device's error. A concurrent free of the block waits for the copy to end before
    /// the memory is reused (see [`Engine::pin`]).
    pub fn copy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let _pin = self.pin(dst, src.len() as u64)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().copy_htod(dst, src.as_ptr(), src.len() as u64) }
    }

    /// Downloads `dst.len()` bytes from device address `src`. Errors as
    /// [`Engine::copy_htod`].
    pub fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let _pin = self.pin(src, dst.len() as u64)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().copy_dtoh(dst.as_mut_ptr(), src, dst.len() as u64) }
    }

    /// Copies `bytes` between device addresses (overlap allowed). Errors as
    /// [`Engine::copy_htod`], for either range. A copy of a range onto itself
    /// (`dst == src`) changes no byte, so it only checks the range and makes no device
    /// call: checking a range this way (CuMem.jl's `unsafe_wrap` does) reads no byte,
    /// so bytes never written are not read (`compute-sanitizer --tool initcheck`
    /// reports such a read).
    pub fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _dst = self.pin(dst, bytes)?;
        let _src = self.pin(src, bytes)?;
        if dst == src {
            return Ok(());
        }
        // SAFETY: both ranges are inside live allocations, pinned until the copy ends.
        unsafe { self.up.device().copy_dtod(dst, src, bytes) }
    }

    /// Sets `bytes` bytes at `dst` to `value`. Errors as [`Engine::copy_htod`].
    pub fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin(dst, bytes)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().memset(dst, value, bytes) }
    }
}

/// How [`copy_between`] moved the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum CopyPath {
    /// Both ranges are on one device: a device-to-device copy.
    Same = 0,
    /// Directly between two devices (CUDA peer access: `cuMemcpyPeer` over NVLink or
    /// PCIe; host stand-ins: one `memcpy`).
    Peer = 1,
    /// Staged through host memory: downloaded from the source device and uploaded to the
    /// destination, in chunks of [`STAGING_CHUNK`] bytes.
    Host = 2,
}

/// The size of the host buffer a staged copy between devices goes through.
pub const STAGING_CHUNK: u64 = 64 << 20;

/// Copies `bytes` from `src` (an address of `src_e`'s device) to `dst` (of `dst_e`'s
/// device), both ranges checked and pinned as for [`Engine::copy_dtod`]. On one engine
/// this is [`Engine::copy_dtod`] ([`CopyPath::Same`]). Between two devices: a peer copy
/// when the destination can read the source's memory directly
/// ([`crate::device::Device::can_access_peer`]; CUDA enables peer access on first use,
/// as PyTorch's `tensor.to("cuda:1")` does) and `staged` is false ([`CopyPath::Peer`]);
/// otherwise staged through a host buffer ([`CopyPath::Host`]). Returns the path taken.
/// Errors as [`Engine::copy_htod`], for either range, and the devices' errors.
pub fn copy_between(
    dst_e: &Engine,
    dst: u64,
    src_e: &Engine,
    src: u64,
    bytes: u64,
    staged: bool,
) -> Result<CopyPath> {
    if std::ptr::eq(dst_e, src_e) {
        dst_e.copy_dtod(dst, src, bytes)?;
        return Ok(CopyPath::Same);
    }
    let _dst = dst_e.pin(dst, bytes)?;
    let _src = src_e.pin(src, bytes)?;
    if bytes == 0 {
        return Ok(if staged { CopyPath::Host } else { CopyPath::Peer });
    }
    let (dd, sd) = (dst_e.device(), src_e.device());
    if !staged && dd.can_access_peer(sd)? {
        // SAFETY: both ranges are inside live allocations of their devices, pinned.
        unsafe { dd.copy_from_peer(dst, sd, src, bytes) }?;
        return Ok(CopyPath::Peer);
    }
    let mut buf = vec![0u8; bytes.min(STAGING_CHUNK) as usize];
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(STAGING_CHUNK);
        // SAFETY: `buf` holds at least `n` bytes; the device ranges are pinned.
        unsafe {
            sd.copy_dtoh(buf.as_mut_ptr(), src + done, n)?;
            dd.copy_htod(dst + done, buf.as_ptr(), n)?;
        }
        done += n;
    }
    Ok(CopyPath::Host)
}

/// A pin of one block (see [`Engine::pin`]), dropped when the copy ends, also on panic.
pub(super) struct Pinned<'a> {
    pub(super) engine: &'a Engine,
    pub(super) shard: usize,
    pub(super) base: u64,
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.engine.unpin(self.shard, self.base);
    }
}
