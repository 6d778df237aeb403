//! Streams (PyTorch's `CUDACachingAllocator` model; the module documentation of
//! [`crate::engine`] describes it): each stream's own pools in a shard, the frees that
//! wait for events on the streams that used a block, `record_stream`, stream creation and
//! destruction, and the async copies (which record their stream's use of the block).

use super::copies::Pinned;
use super::{Engine, HOOK_RECORD, ShardState, Sink};
use crate::error::{Error, Result};
use crate::pool::{AnyPool, Block, MAX_REQUEST, Pool};
use std::sync::atomic::Ordering::Relaxed;

/// The pool of one stream.
pub(super) struct StreamPool {
    pub(super) stream: u64,
    pub(super) pool: AnyPool,
    /// The stream was destroyed: its pool serves no one and keeps no cache.
    pub(super) dead: bool,
    /// The pool is a graph pool (`graphs.rs`): while it lives its cache holds memory a
    /// graph's kernels use at every replay, so `reclaim` leaves it alone.
    pub(super) graph: bool,
}

/// The stream a block belongs to and the other streams it was used on.
#[derive(Default)]
pub(super) struct StreamUse {
    pub(super) stream: u64,
    pub(super) uses: Vec<u64>,
}

/// A freed block waiting for the events recorded on the streams that used it.
pub(super) struct PendingFree {
    pub(super) ptr: u64,
    pub(super) size: u64,
    pub(super) stream: u64,
    pub(super) events: Vec<u64>,
}

impl Engine {
    /// As [`Engine::alloc`] (`retry` true) or [`Engine::try_alloc`] (false), on stream
    /// `stream` (0: the legacy default stream, the same as `alloc`): the block comes from
    /// that stream's pool, and once freed is reused by that stream at once and by no
    /// other (PyTorch's per-stream pools). Work queued on `stream` may use it in stream
    /// order without synchronising; use on another stream must be declared with
    /// [`Engine::record_stream`]. While `stream` is captured ([`Engine::capture_begin`])
    /// the block comes from the capture's graph pool instead. Errors: those of `alloc`,
    /// and [`Error::InvalidValue`] for an unknown stream.
    pub fn alloc_on(&self, bytes: u64, stream: u64, retry: bool) -> Result<u64> {
        if stream == 0 {
            return if retry { self.alloc(bytes) } else { self.try_alloc(bytes) };
        }
        // While `stream` is captured, its allocations come from the capture's graph pool.
        let stream = match self.capture_pool(stream) {
            Some(pool) => pool,
            None => {
                self.up.device().stream_raw(stream)?;
                stream
            }
        };
        if self.hooks.load(Relaxed) & HOOK_RECORD != 0 {
            return self.alloc_recorded(bytes, retry, stream);
        }
        self.alloc_stream_with(bytes, stream, retry, &mut ())
    }

    /// [`Engine::alloc_on`] for a stream other than the default one, writing the block
    /// to `out` (for the history).
    pub(super) fn alloc_stream_with<S: Sink<Block>>(
        &self,
        bytes: u64,
        stream: u64,
        retry: bool,
        out: &mut S,
    ) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        if bytes > MAX_REQUEST {
            return self.alloc_beyond_capacity(bytes, retry);
        }
        // The cache is not used for the stream's blocks; the call registers the thread
        // (so that another thread's cache knows its view of the totals is not exact) and
        // lets the shard path close the cache's peak window.
        let tc = self.thread_cache();
        let home = self.home();
        match self.alloc_in(home, bytes, stream, tc, out) {
            Err(e) if e.is_oom() && retry => self.alloc_retry(home, bytes, stream, e, tc, out),
            r => r,
        }
    }

    /// The stream part of [`Engine::reclaim`]: waits for the pending frees (PyTorch's
    /// `synchronize_and_free_events` on out of memory), then releases the cache of the
    /// streams' pools, each after waiting for its stream (memory of a segment being
    /// released may still be read by work queued on it).
    #[cold]
    pub(super) fn reclaim_streams(&self, s: &mut ShardState, i: usize, bytes: u64) -> u64 {
        self.process_pending(s, i, true);
        let mut released = s.pool.reclaim(bytes, self.up.shard(i));
        for p in s.stream_pools.iter_mut() {
            if released >= bytes {
                break;
            }
            if p.graph && !p.dead {
                continue;
            }
            if p.pool.cached_bytes() > 0 {
                if !p.dead {
                    let _ = self.up.device().stream_synchronize(p.stream);
                }
                released += p.pool.reclaim(bytes - released, self.up.shard(i));
            }
        }
        released
    }

    /// Hands a freed block back: to its stream's pool at once when no other stream used
    /// it, else to the pending list behind one event per stream that used it.
    pub(super) fn return_block(&self, s: &mut ShardState, i: usize, ptr: u64, size: u64) {
        let Some(u) = s.stream_blocks.remove(&ptr) else {
            s.pool.free(ptr, size, self.up.shard(i));
            return;
        };
        if u.uses.is_empty() {
            self.free_to_pool(s, i, u.stream, ptr, size);
            return;
        }
        let mut events = Vec::with_capacity(u.uses.len());
        for st in u.uses {
            let ev = match s.spare_events.pop() {
                Some(e) => Ok(e),
                None => self.up.device().event_create(false),
            };
            match ev.and_then(|e| self.up.device().event_record(e, st).map(|()| e)) {
                Ok(e) => events.push(e),
                // A stream destroyed meanwhile had its work waited for (Engine::stream_destroy);
                // otherwise wait here rather than reuse memory the stream may still read.
                Err(err) => {
                    if let Err(e2) = self.up.device().stream_synchronize(st) {
                        log::debug!("free of {ptr:#x}: no event on stream {st} ({err}), no wait ({e2})");
                    }
                }
            }
        }
        s.pending.push(PendingFree { ptr, size, stream: u.stream, events });
    }

    /// Frees a block into the pool of `stream` (a dead stream's pool keeps no cache).
    pub(super) fn free_to_pool(&self, s: &mut ShardState, i: usize, stream: u64, ptr: u64, size: u64) {
        if stream == 0 {
            s.pool.free(ptr, size, self.up.shard(i));
            return;
        }
        match s.stream_pools.iter_mut().find(|p| p.stream == stream) {
            Some(p) => {
                p.pool.free(ptr, size, self.up.shard(i));
                if p.dead {
                    p.pool.reclaim(u64::MAX, self.up.shard(i));
                }
            }
            None => {
                debug_assert!(false, "block {ptr:#x} of stream {stream} without its pool");
                log::error!("block {ptr:#x} of stream {stream} has no pool; it is leaked");
            }
        }
    }

    /// The pool of `stream` in this shard, made on first use.
    pub(super) fn stream_pool<'s>(&self, s: &'s mut ShardState, stream: u64) -> &'s mut AnyPool {
        let k = match s.stream_pools.iter().position(|p| p.stream == stream) {
            Some(k) => k,
            None => {
                let graph = self.is_graph_pool(stream);
                s.stream_pools.push(StreamPool {
                    stream,
                    pool: AnyPool::new(self.cfg.pool),
                    dead: false,
                    graph,
                });
                s.stream_pools.len() - 1
            }
        };
        &mut s.stream_pools[k].pool
    }

    /// Returns the pending blocks whose events have all completed (`wait`: waits for
    /// them all) to their pools (PyTorch's `process_events`).
    #[cold]
    pub(super) fn process_pending(&self, s: &mut ShardState, i: usize, wait: bool) {
        let dev = self.up.device();
        let mut k = 0;
        while k < s.pending.len() {
            let done = s.pending[k].events.iter().all(|&e| {
                if wait { dev.event_synchronize(e).is_ok() } else { dev.event_query(e).unwrap_or(false) }
            });
            if done {
                let p = s.pending.swap_remove(k);
                s.spare_events.extend(p.events);
                self.free_to_pool(s, i, p.stream, p.ptr, p.size);
            } else {
                k += 1;
            }
        }
    }

    /// Declares that work queued on `stream` uses the live allocation containing `addr`
    /// (PyTorch's `Tensor.record_stream`): when the block is freed, it is reused only
    /// once the work queued on `stream` before the free is done. Use on the block's own
    /// stream needs no declaration. Errors: [`Error::InvalidValue`] for an address not
    /// inside a live allocation or an unknown stream; nothing changes then.
    pub fn record_stream(&self, addr: u64, stream: u64) -> Result<()> {
        self.pin_on_stream(addr, 1, stream).map(drop)
    }

    /// Pins `addr..addr + bytes` (inside one live allocation) and records that `stream`
    /// uses its block. Errors: an unknown stream, or the range of [`Engine::pin`].
    pub(super) fn pin_on_stream(&self, addr: u64, bytes: u64, stream: u64) -> Result<Pinned<'_>> {
        self.up.device().stream_raw(stream)?;
        let pin = self.pin(addr, bytes)?;
        self.note_use(pin.shard, pin.base, stream);
        Ok(pin)
    }

    /// Records that `stream` uses the block at `base` of shard `i` (pinned by the caller).
    fn note_use(&self, i: usize, base: u64, stream: u64) {
        // Work recorded in a capture runs at replays, ordered by the graph's own stream;
        // no event may be recorded on a stream under capture.
        if self.capture_pool(stream).is_some() {
            return;
        }
        let mut s = self.shards[i].state.lock();
        let u = s.stream_blocks.entry(base).or_default();
        if u.stream != stream && !u.uses.contains(&stream) {
            u.uses.push(stream);
        }
    }

    /// The stream an allocation belongs to (0 for the default stream). Errors:
    /// [`Error::InvalidValue`] for an address not inside a live allocation.
    pub fn block_stream(&self, addr: u64) -> Result<u64> {
        let pin = self.pin(addr, 1)?;
        let s = self.shards[pin.shard].state.lock();
        Ok(s.stream_blocks.get(&pin.base).map_or(0, |u| u.stream))
    }

    /// Creates a stream (see [`crate::device::Device::stream_create`]; CuMem's are non-blocking unless
    /// `blocking`). Errors: [`Error::NotSupported`] on a device without streams,
    /// [`Error::Device`].
    pub fn stream_create(&self, blocking: bool) -> Result<u64> {
        self.up.device().stream_create(blocking)
    }

    /// Waits for the work queued on `stream`, destroys it, and drops the cache of its
    /// pools (they serve no other stream). Blocks of the stream still live stay valid
    /// and return to the device when freed. Errors: [`Error::InvalidValue`] for an
    /// unknown stream or the default stream (0), which cannot be destroyed.
    pub fn stream_destroy(&self, stream: u64) -> Result<()> {
        if stream == 0 {
            return Err(Error::InvalidValue("the default stream cannot be destroyed".into()));
        }
        let dev = self.up.device();
        dev.stream_synchronize(stream)?;
        dev.stream_destroy(stream)?;
        for (i, shard) in self.shards.iter().enumerate() {
            let mut s = shard.state.lock();
            if let Some(p) = s.stream_pools.iter_mut().find(|p| p.stream == stream) {
                p.dead = true;
                p.pool.reclaim(u64::MAX, self.up.shard(i));
            }
        }
        Ok(())
    }

    /// Queues an upload of `bytes` from host memory `src` to device address `dst` on
    /// `stream` (`cuMemcpyHtoDAsync`) and returns. The destination is checked as by
    /// [`Engine::copy_htod`]; when its block belongs to another stream, the use is
    /// recorded as by [`Engine::record_stream`], so a free of the block before the copy
    /// has run does not hand the memory to anyone else. Errors as `copy_htod`, and
    /// [`Error::InvalidValue`] for an unknown stream.
    ///
    /// # Safety
    /// `src` must stay readable for `bytes` until the copy has run (synchronise
    /// `stream` or wait for an event recorded after it); page-locked memory lets the
    /// copy overlap other work, pageable memory is copied before the call returns.
    pub unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, stream: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin_on_stream(dst, bytes, stream)?;
        // SAFETY: the range is inside a live allocation that stays out of other hands
        // until the copy has run (the use on `stream` is recorded); the caller vouches
        // for `src`.
        unsafe { self.up.device().copy_htod_async(dst, src, bytes, stream) }
    }

    /// Queues a download of `bytes` from device address `src` to host memory `dst` on
    /// `stream` (`cuMemcpyDtoHAsync`); checks and use as [`Engine::copy_htod_async`].
    ///
    /// # Safety
    /// `dst` must stay writable for `bytes` until the copy has run.
    pub unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, stream: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin_on_stream(src, bytes, stream)?;
        // SAFETY: as in copy_htod_async.
        unsafe { self.up.device().copy_dtoh_async(dst, src, bytes, stream) }
    }
}
