//! The blocks of the split pool: nodes of a slab, each a run of one device segment,
//! linked to its address neighbours so that merging costs no search; and the operations
//! that carve, merge and obtain them.

use super::{BIG_HOLES, BIG_WHOLE, MEDIUM_HOLES, MEDIUM_WHOLE, MIN_BLOCK, SMALL, SMALL_SIZE, SplitPool};
use crate::error::Result;
use crate::pool::Pool;
use crate::upstream::ShardUpstream;

/// No node.
pub(super) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum State {
    /// Handed out, or freed onto a quick list and not merged yet.
    Used,
    /// Free and in an index.
    Free,
    /// A slab slot not in use.
    Dead,
}

/// What a segment serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Small,
    Medium,
    Big,
}

/// A block: a run of a segment, free or not.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) addr: u64,
    pub(super) size: u64,
    /// The blocks before and after this one in its segment (NIL at the ends).
    pub(super) prev: u32,
    pub(super) next: u32,
    /// Index of the segment in `SplitPool::segs`.
    pub(super) seg: u32,
    pub(super) state: State,
    pub(super) kind: Kind,
}

impl Node {
    /// A free node that is its segment's only block.
    #[inline]
    pub(super) fn whole(&self) -> bool {
        self.prev == NIL && self.next == NIL
    }

    /// The index a free node belongs in.
    #[inline]
    pub(super) fn index(&self) -> usize {
        match self.kind {
            Kind::Small => SMALL,
            Kind::Medium if self.whole() => MEDIUM_WHOLE,
            Kind::Medium => MEDIUM_HOLES,
            Kind::Big if self.whole() => BIG_WHOLE,
            Kind::Big => BIG_HOLES,
        }
    }
}

/// A device segment. A released one has `first == NIL` and waits in `free_segs`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seg {
    pub(super) base: u64,
    pub(super) size: u64,
    /// Its first block.
    pub(super) first: u32,
}

impl SplitPool {
    pub(super) fn new_node(&mut self, n: Node) -> u32 {
        if let Some(i) = self.dead_nodes.pop() {
            self.nodes[i as usize] = n;
            i
        } else {
            self.nodes.push(n);
            (self.nodes.len() - 1) as u32
        }
    }

    pub(super) fn kill(&mut self, i: u32) {
        self.nodes[i as usize].state = State::Dead;
        self.dead_nodes.push(i);
    }

    /// Merges block `right` into its left neighbour `left` (both free, unindexed).
    pub(super) fn absorb(&mut self, left: u32, right: u32) {
        let r = self.nodes[right as usize];
        let l = &mut self.nodes[left as usize];
        l.size += r.size;
        l.next = r.next;
        if r.next != NIL {
            self.nodes[r.next as usize].prev = left;
        }
        self.kill(right);
    }

    /// Marks block `i` free, merges it with free neighbours and indexes the result.
    pub(super) fn release(&mut self, mut i: u32) {
        let n = self.nodes[i as usize];
        self.node_at.remove(&n.addr);
        self.nodes[i as usize].state = State::Free;
        if n.next != NIL && self.nodes[n.next as usize].state == State::Free {
            self.index_remove(n.next);
            self.absorb(i, n.next);
        }
        if n.prev != NIL && self.nodes[n.prev as usize].state == State::Free {
            self.index_remove(n.prev);
            self.absorb(n.prev, i);
            i = n.prev;
        }
        self.index_insert(i);
    }

    /// Hands out free block `i` for a request of `size`, splitting off the rest when it
    /// is worth keeping. Returns the size of the block handed out.
    pub(super) fn take(&mut self, i: u32, size: u64) -> u64 {
        self.index_remove(i);
        let n = self.nodes[i as usize];
        let rest = n.size - size;
        let keep = if n.kind == Kind::Small { rest >= MIN_BLOCK } else { rest > SMALL_SIZE };
        if keep {
            let j = self.new_node(Node {
                addr: n.addr + size,
                size: rest,
                prev: i,
                next: n.next,
                seg: n.seg,
                state: State::Free,
                kind: n.kind,
            });
            if n.next != NIL {
                self.nodes[n.next as usize].prev = j;
            }
            let me = &mut self.nodes[i as usize];
            me.size = size;
            me.next = j;
            self.index_insert(j);
        }
        let me = &mut self.nodes[i as usize];
        me.state = State::Used;
        let (addr, used) = (me.addr, me.size);
        self.node_at.insert(addr, i);
        self.used_bytes += used;
        used
    }

    /// Obtains a segment of `size` bytes, first releasing whole free segments if it
    /// would lift reserved memory above its all-time high-water mark. Returns its node.
    pub(super) fn grow(&mut self, size: u64, kind: Kind, up: ShardUpstream<'_>) -> Result<u32> {
        self.reclaim(up.growth_excess(size), up);
        let base = up.alloc(size)?;
        self.reserved += size;
        if self.reserved > self.peak_reserved {
            self.peak_reserved = self.reserved;
            self.served = 0;
        }
        let seg = Seg { base, size, first: NIL };
        let s = match self.free_segs.pop() {
            Some(s) => {
                self.segs[s as usize] = seg;
                s
            }
            None => {
                self.segs.push(seg);
                (self.segs.len() - 1) as u32
            }
        };
        let i =
            self.new_node(Node { addr: base, size, prev: NIL, next: NIL, seg: s, state: State::Free, kind });
        self.segs[s as usize].first = i;
        self.seg_at.insert(base, s);
        self.index_insert(i);
        Ok(i)
    }
}
