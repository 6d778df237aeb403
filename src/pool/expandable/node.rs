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
