//! The expandable pool's nodes: a block in use or a free range of an arena
//! ([`super::arena`]), linked to its address neighbours and, when free, to the other
//! free ranges of its size class ([`super::free_lists`]). Both modules use it; it uses
//! neither.

/// No node (the end of a list).
pub(super) const NIL: u32 = u32::MAX;

/// A block in use or a free range.
#[derive(Clone, Copy)]
pub(super) struct Node {
    pub addr: u64,
    pub size: u64,
    /// Address neighbours ([`NIL`] at the ends of the arena).
    pub prev: u32,
    pub next: u32,
    /// Neighbours on the free list of the size class (free ranges only; [`super::free_lists`]).
    pub fprev: u32,
    pub fnext: u32,
    /// The size class whose list holds the node (free ranges only; [`super::free_lists`]).
    pub class: u16,
    pub free: bool,
    /// In the slab's list of reusable nodes.
    pub dead: bool,
}

impl Node {
    /// A node not linked to any neighbour yet.
    pub(super) fn new(addr: u64, size: u64, free: bool) -> Node {
        Node { addr, size, prev: NIL, next: NIL, fprev: NIL, fnext: NIL, class: 0, free, dead: false }
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

    /// Appends `n`, returning its index.
    #[inline]
    pub(super) fn push(&mut self, n: Node) -> u32 {
        self.0.push(n);
        (self.0.len() - 1) as u32
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
