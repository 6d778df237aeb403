"""A model of PyTorch's caching allocator with expandable segments, for explaining replay figures.

    python3 bench/anchors/torch_expandable_model.py data/bertlike_infer_varlen.trace [--no-twist] [--page-mib 20]

Prints the peak reserved bytes of one replay of the trace (data/README.md's format) under the
policy of `c10/cuda/CUDACachingAllocator.cpp` with `expandable_segments:True`, as read for
issue 27 (2026-11-27): requests rounded up to 512 B; up to 1 MiB from the small pool's segment
(2 MiB pages), larger ones from the large pool's (20 MiB pages); a request takes the free mapped
block with the smallest (size, address) that fits, except that a free block at the mapped end of
a segment is passed over while another block fits (`get_free_block`'s `expandable_size`);
otherwise the segment grows at its end by whole pages, taking its free end block along; the rest
of a block is split off when at least 512 B (small pool) or more than 1 MiB (large pool); frees
merge at once; nothing is unmapped (PyTorch unmaps only on out of memory and `empty_cache`).
Reserved = pages mapped. It gives the H100's `torch_expandable_peak_reserved` of 2026-11-25
(bench/results/h100-2026-11-25-session4/replay/anchor.jsonl) to the byte on bertlike_infer_varlen
(970 981 376), encoder_infer_varlen, gpt2_train and resnet50_train; on random_seed1 it is 2.7 %
high (some rule for its 256 B - 64 MiB mix is missing). `--no-twist` (the end block competes as
any other) gives 1 012 924 416 on bertlike_infer_varlen. Python's standard library only.
"""
import argparse
import bisect

MIB = 1 << 20


class Pool:
    """One expandable segment: blocks by address, free mapped blocks by (size, address)."""

    def __init__(self, page, small, twist):
        self.page, self.small, self.twist = page, small, twist
        self.blocks = {}   # address -> [size, free]
        self.addrs = []    # sorted addresses of all blocks
        self.free = []     # sorted (size, address) of free blocks
        self.top = 0       # end of the mapped part

    def _add(self, a, size, free):
        self.blocks[a] = [size, free]
        bisect.insort(self.addrs, a)
        if free:
            bisect.insort(self.free, (size, a))

    def _remove(self, a):
        size, free = self.blocks.pop(a)
        self.addrs.pop(bisect.bisect_left(self.addrs, a))
        if free:
            self.free.remove((size, a))
        return size

    def alloc(self, n):
        i = bisect.bisect_left(self.free, (n, -1))
        if i < len(self.free):
            if self.twist:
                # A free block ending at the mapped end can grow: its "size" is unbounded.
                def esize(e):
                    return e[0] + (1 << 60 if e[1] + e[0] == self.top else 0)
                while i + 1 < len(self.free) and esize(self.free[i + 1]) < esize(self.free[i]):
                    i += 1
            size, a = self.free[i]
        else:
            # Grow at the end, taking the free end block along.
            a, have = self.top, 0
            j = bisect.bisect_left(self.addrs, self.top) - 1
            if j >= 0 and self.blocks[self.addrs[j]][1]:
                a = self.addrs[j]
                have = self._remove(a)
            pages = -(-(n - have) // self.page)
            self.top += pages * self.page
            size = have + pages * self.page
            self._add(a, size, True)
        self._remove(a)
        rest = size - n
        if rest >= 512 if self.small else rest > MIB:
            self._add(a, n, False)
            self._add(a + n, rest, True)
        else:
            self._add(a, size, False)
        return a

    def release(self, a):
        size = self._remove(a)
        if a + size in self.blocks and self.blocks[a + size][1]:
            size += self._remove(a + size)
        j = bisect.bisect_left(self.addrs, a) - 1
        if j >= 0:
            p = self.addrs[j]
            if self.blocks[p][1] and p + self.blocks[p][0] == a:
                size += self._remove(p)
                a = p
        self._add(a, size, True)


def replay(path, twist=True, page=20 * MIB):
    small, large = Pool(2 * MIB, True, twist), Pool(page, False, twist)
    where, peak = {}, 0
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.split()
            if p[0] == "a":
                n = max(512, (int(p[2]) + 511) // 512 * 512)
                pool = small if n <= MIB else large
                where[p[1]] = (pool, pool.alloc(n))
                peak = max(peak, small.top + large.top)
            elif p[1] in where:
                pool, a = where.pop(p[1])
                pool.release(a)
    return peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--no-twist", action="store_true", help="let the end block compete as any other")
    ap.add_argument("--page-mib", type=int, default=20, help="the large pool's page (MiB)")
    a = ap.parse_args()
    print(replay(a.trace, not a.no_twist, a.page_mib * MIB))


if __name__ == "__main__":
    main()
