"""A guest OS page cache over storage blocks, for the hypervisor cache.

``GuestPageCache`` is the VM side of Lu and Shen's design: a page cache
of ``pages`` pages with perfect LRU replacement (the model of their
section 3.4) that does its I/O through a hypervisor (``hcache.DirectIo``
or ``hcache.HypervisorCache``) and announces every page eviction and
release. Every read access checks the page holds the content the
application last wrote to the block (section 6.2's signatures).

How it behaves, and why:

- A miss reads the block into a spare page first and evicts its least
  recently used page afterwards, as a kernel that keeps free pages does.
  A hit in the hypervisor cache frees a cache slot just before the
  eviction needs one, so X pages plus a Y-page cache hold exactly the X+Y
  most recent blocks.
- A write to a block not in memory reads it first (a read-modify-write),
  so every miss is an I/O read the hypervisor sees.
- Dirty pages are written back when evicted, never while cached.

``replacement='clock'`` replaces perfect LRU by CLOCK (second chance), an
approximation of LRU like Linux's, to see what an imperfect LRU does to
the hypervisor's prediction, which assumes LRU.

Optional behaviours, off by default, reproduce what section 3.2 guards
against:

- ``recycle_ratio``: a write to a cached block goes to a fresh page, as
  when a file system recycles a block; the old page is released.
- ``leak_recycled``: the old page is kept instead, unreachable and
  unannounced (ext3 metadata pages), and evicted later: a stale mapping,
  which the S2P check catches.
- ``reuse_ratio``: per access, a page-cache page is taken for kernel data
  (a slab page), reclaimed later with an eviction notice and no I/O.
- ``drop_notices``: the fraction of eviction and release notices lost.
  With page reuse, this is the missed-eviction error.
"""

import collections
import itertools

import numpy as np

from memcanal.estimation import hcache

REPLACEMENTS = ('lru', 'clock')
HELD_PAGES = 64
"""Pages the guest holds outside its page cache (kernel data, leaked
pages) before it reclaims the oldest; at most a quarter of its memory."""


class GuestPageCache:
    """A guest page cache of ``pages`` pages doing I/O through ``io``."""

    def __init__(self, pages, io, recycle_ratio=0.0, leak_recycled=False,
                 reuse_ratio=0.0, drop_notices=0.0, rng=None,
                 replacement='lru'):
        if pages < 1:
            raise ValueError('a guest needs at least one page')
        if replacement not in REPLACEMENTS:
            raise ValueError('replacement must be one of %s' % ', '.join(
                REPLACEMENTS))
        for name, ratio in (('recycle_ratio', recycle_ratio),
                            ('reuse_ratio', reuse_ratio),
                            ('drop_notices', drop_notices)):
            if not 0.0 <= ratio <= 1.0:
                raise ValueError('%s must be in [0, 1]' % name)
        self.capacity = pages
        self.io = io
        self.recycle_ratio = recycle_ratio
        self.leak_recycled = leak_recycled
        self.reuse_ratio = reuse_ratio
        self.drop_notices = drop_notices
        self._clock = replacement == 'clock'
        # Blocks referenced since the clock hand last passed them.
        self._referenced = set()
        self._rng = rng if rng is not None else np.random.default_rng(0)
        # Block -> page in LRU order, least recent first.
        self._lru = collections.OrderedDict()
        self._content = {}
        self._dirty = set()
        # One spare page beyond the cache, for the read before the evict.
        self._free = list(range(pages, -1, -1))
        self._pages_made = pages + 1
        self._held = collections.deque()
        self._expected = {}
        self._signatures = itertools.count(1)
        self.accesses = 0
        self.misses = 0
        self.corrupted = 0
        self.first_corruption = None

    def _chance(self, ratio):
        return ratio > 0.0 and self._rng.random() < ratio

    def _notify(self, notice, *args):
        if not self._chance(self.drop_notices):
            notice(*args)

    def _evict_one(self):
        key, page = self._lru.popitem(last=False)
        while key in self._referenced:
            self._referenced.discard(key)
            self._lru[key] = page
            key, page = self._lru.popitem(last=False)
        if page in self._dirty:
            self._dirty.discard(page)
            self.io.write(page, key, self._content[page])
        self._notify(self.io.evict, page, self._content[page])
        self._free.append(page)

    def _shrink(self):
        while len(self._lru) > self.capacity - len(self._held):
            self._evict_one()

    def _recycle(self, block, page):
        """Move ``block`` to a fresh page; return it."""
        del self._lru[block]
        self._referenced.discard(block)
        self._dirty.discard(page)
        if self.leak_recycled:
            self._hold(page)
        else:
            self._notify(self.io.release, page)
            self._free.append(page)
        fresh = self._free.pop()
        self._lru[block] = fresh
        self._shrink()
        return fresh

    def _hold(self, page):
        """Keep ``page`` outside the page cache (kernel data, or a leaked
        page); the oldest such page is reclaimed, announced as evicted."""
        self._held.append(page)
        if len(self._held) > min(HELD_PAGES, self.capacity // 4):
            reclaimed = self._held.popleft()
            self._notify(self.io.evict, reclaimed, self._content[reclaimed])
            self._free.append(reclaimed)

    def _reuse_for_kernel(self):
        page = self._free.pop()
        self._content[page] = next(self._signatures)
        self._hold(page)
        self._shrink()

    def resize(self, pages):
        """Grow or shrink to ``pages`` pages, as a balloon does; shrinking
        evicts the least recently used pages."""
        if pages < 1:
            raise ValueError('a guest needs at least one page')
        self._free.extend(range(self._pages_made, self._pages_made + max(
            0, pages - self.capacity)))
        self._pages_made += max(0, pages - self.capacity)
        self.capacity = pages
        self._shrink()

    @property
    def free_pages(self):
        """Pages that hold no block now (a guest given memory back empty
        has them until it reads enough)."""
        return self.capacity - len(self._lru) - len(self._held)

    def resident_blocks(self):
        """The blocks in the page cache now, as an int64 array."""
        return np.fromiter(self._lru, np.int64, len(self._lru))

    def access(self, block, write):
        """Read or overwrite one page-sized ``block``; True on a hit."""
        self.accesses += 1
        page = self._lru.get(block)
        hit = page is not None
        if hit:
            if self._clock:
                self._referenced.add(block)
            else:
                self._lru.move_to_end(block)
            if write and self._chance(self.recycle_ratio):
                page = self._recycle(block, page)
        else:
            self.misses += 1
            page = self._free.pop()
            self._content[page] = self.io.read(page, block)
            self._lru[block] = page
            if self._clock:
                # Referenced, as the read was a use: the hand must not
                # take the page it has just read for.
                self._referenced.add(block)
            self._shrink()
        if write:
            signature = next(self._signatures)
            self._expected[block] = signature
            self._content[page] = signature
            self._dirty.add(page)
        elif self._content[page] != self._expected.get(
                block, hcache.initial_signature(block)):
            self.corrupted += 1
            if self.first_corruption is None:
                self.first_corruption = (block, self.accesses)
        if self._chance(self.reuse_ratio):
            self._reuse_for_kernel()
        return hit

    def run(self, blocks, writes):
        """Access every block of a stream (int arrays or lists)."""
        access = self.access
        for block, write in zip(np.asarray(blocks).tolist(),
                                np.asarray(writes).tolist()):
            access(block, write)

    def sync(self):
        """Write back every dirty page, then make the hypervisor write what
        it holds (they stay cached, now clean)."""
        for key, page in self._lru.items():
            if page in self._dirty:
                self.io.write(page, key, self._content[page])
        self._dirty.clear()
        self.io.flush(self._content.__getitem__)
