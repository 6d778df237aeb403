//! The expandable pool's nodes: a block in use or a free range of an arena
//! ([`super::arena`]), linked to its address neighbours and, when free, to the other
//! free ranges of its size class ([`super::free_lists`]). Both modules use it; it uses
//! neither.

/// No node (the end of a list).
pub(super) const NIL: u32 = u32::MAX;

/// [`Node::fnext`] of a block in use (a free range's is a node or [`NIL`]).
pub(super) const USED: u32 = u32::MAX - 1;

/// [`Node::fnext`] of a dead node (in the slab's list of reusable nodes).
pub(super) const DEAD: u32 = u32::MAX - 2;

/// The low bits of [`Node::size_cls`] that hold a free range's size class (sizes are
/// multiples of 512 bytes, [`crate::pool::MIN_BLOCK`]).
pub(super) const CLASS_BITS: u64 = crate::pool::MIN_BLOCK - 1;

/// A block in use or a free range: 32 bytes, aligned to 32, so that a node lies on one
/// cache line and two share a line. Nodes of 40 bytes (a size class, a free and a dead
/// flag besides these fields) put half of them across two lines: on random_seed1, whose
/// nodes and neighbours' nodes do not stay in the first-level cache, that was a quarter
/// of a first-level miss per event (cachegrind, bench/results/host-2026-11-29-exp14b). So
/// the class rides in the size's low bits (computing it from the size where the lists
/// need it was 8 instructions per event on random_seed1), and whether the node is free,
/// in use or dead is told by `fnext` ([`USED`], [`DEAD`]).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct Node {
    pub addr: u64,
    /// The size in bytes (a multiple of 512) or-ed, while the node is on a free list,
    /// with its size class ([`CLASS_BITS`]; [`super::free_lists`] sets it). Read the size
    /// by [`Node::size`]. The free lists compare it as it is: the entries of one list
    /// share their class bits, and a request's size has none, so `size_cls >= request`
    /// and the (size, address) order are those of the sizes.
    pub size_cls: u64,
    /// Address neighbours ([`NIL`] at the ends of the arena); for a dead node `next` is
    /// the next dead one.
    pub prev: u32,
    pub next: u32,
    /// Neighbours on the free list of the size class (free ranges only;
    /// [`super::free_lists`]).
    pub fprev: u32,
    /// As `fprev`; [`USED`] for a block in use, [`DEAD`] for a dead node.
    pub fnext: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() == 32);

impl Node {
    /// A node not linked to any neighbour yet: a free range (not on a list yet) or a
    /// block in use.
    #[inline(always)]
    pub(super) fn new(addr: u64, size: u64, free: bool) -> Node {
        Node { addr, size_cls: size, prev: NIL, next: NIL, fprev: NIL, fnext: if free { NIL } else { USED } }
    }

    /// The size in bytes.
    #[inline(always)]
    pub(super) fn size(&self) -> u64 {
        self.size_cls & !CLASS_BITS
    }

    /// Whether the node, live (not dead), is a free range rather than a block in use.
    #[inline(always)]
    pub(super) fn is_free(&self) -> bool {
        self.fnext != USED
    }

    /// Whether the node is dead (reusable; the tests' structure checks ask).
    #[cfg(test)]
    pub(super) fn is_dead(&self) -> bool {
        self.fnext == DEAD
    }
}

/// The slab of an arena's nodes. Nodes are never taken out (a node no longer needed is
/// marked dead and reused), so an index once handed out stays in bounds, and every index
/// the arena and its free lists store came from [`Nodes::push`]: indexing checks bounds
/// only in debug builds (the checks were a tenth of the pool's warm instructions).
pub(super) struct Nodes(Vec<Node>);

impl Nodes {
    /// A slab holding `first` at index 0.
    pub(super) fn new(first: Node) -> Nodes {
        Nodes(vec![first])
    }

    /// Appends `n`, returning its index (below [`DEAD`]: 2^32 − 2 nodes of 32 bytes
    /// would be 128 GiB of host memory).
    #[inline]
    pub(super) fn push(&mut self, n: Node) -> u32 {
        self.0.push(n);
        let i = (self.0.len() - 1) as u32;
        assert!(i < DEAD, "more nodes than indexes");
        i
    }

    /// Number of nodes, dead ones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Node `i`, if `i` is in bounds (for indexes that come from outside the slab).
    pub(super) fn get(&self, i: usize) -> Option<&Node> {
        self.0.get(i)
    }
}

impl std::ops::Index<usize> for Nodes {
    type Output = Node;
    #[inline(always)]
    fn index(&self, i: usize) -> &Node {
        debug_assert!(i < self.0.len(), "node {i} out of the slab");
        // SAFETY: indexes come from `push` (see the type's notes) and the slab never
        // shrinks.
        unsafe { self.0.get_unchecked(i) }
    }
}

impl std::ops::IndexMut<usize> for Nodes {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Node {
        debug_assert!(i < self.0.len(), "node {i} out of the slab");
        // SAFETY: as in `index`.
        unsafe { self.0.get_unchecked_mut(i) }
    }
}
