"""The hypervisor exclusive cache of Lu and Shen (USENIX ATC'07).

The hypervisor takes part of a VM's memory as a cache of its own, so it
sees every access that misses the memory the VM keeps: each I/O read of
the VM, and each page the VM evicts. Those are what the MRC prediction
below the VM's allocation is made from (``mrc.ghost_curve``).

- ``Storage``: the VM's disk, a content signature per block, so every
  read can be checked (section 6.2).
- ``MappingTables``: P2S (page to storage location) and S2P (the
  reverse), set by every I/O; an evicted page is admitted only when
  P2S(p) = s and S2P(s) = p (section 3.2).
- ``CacheQueue``: the cached units in discard order, head first.
- ``HypervisorCache``: the policy of section 3.1 for I/O reads, page
  evictions and releases, and write-through or delayed writes.
- ``DirectIo``: no hypervisor cache, the VM-only baseline.
- ``GhostEvents``: what the hypervisor saw, in order, for the ghost
  buffer: admitted evictions and I/O reads.

Pages are guest page frames and blocks are storage locations, both ints.
The guest side (which pages it evicts, when it writes back) is
``memcanal.estimation.guest``.
"""

import collections

import numpy as np

WRITE_POLICIES = ('delayed', 'through')


def initial_signature(block):
    """The content of a block nobody has written: distinct per block and
    never equal to a written signature (those are positive)."""
    return -(block + 1)


class Storage:
    """Blocks holding a content signature each; counts device I/Os."""

    def __init__(self):
        self._content = {}
        self.reads = 0
        self.writes = 0

    def read(self, block):
        self.reads += 1
        return self._content.get(block, initial_signature(block))

    def write(self, block, signature):
        self.writes += 1
        self._content[block] = signature


class MappingTables:
    """P2S and S2P: which storage location each page last did I/O with,
    and which page last did I/O with each location.

    A new I/O replaces both mappings; an eviction or release deletes the
    page's P2S entry. The S2P entry it leaves is stale but harmless: it is
    only consulted through a P2S entry, and a later I/O on the location
    replaces it.
    """

    def __init__(self, check_s2p=True):
        self.check_s2p = check_s2p
        self._p2s = {}
        self._s2p = {}

    def insert(self, page, block):
        self._p2s[page] = block
        self._s2p[block] = page

    def delete(self, page):
        """The location ``page`` was mapped to, or None; the mapping goes."""
        return self._p2s.pop(page, None)

    def lookup(self, page):
        """The location ``page`` may be cached under, or None.

        With ``check_s2p`` off only P2S is consulted: the stale-mapping
        error of section 3.2 then gets through.
        """
        block = self._p2s.get(page)
        if block is None or (self.check_s2p and self._s2p.get(block) != page):
            return None
        return block


class CacheQueue:
    """Cached units keyed by storage location, the head discarded first."""

    def __init__(self):
        self._units = collections.OrderedDict()

    def __len__(self):
        return len(self._units)

    def lookup(self, block):
        """The unit cached for ``block``, (signature, dirty), or None."""
        return self._units.get(block)

    def insert(self, block, signature, dirty):
        """Add a unit at the tail; a block already cached keeps its place.

        Units are tuples: the garbage collector skips them, where lists
        made inserting into a large cache six times slower."""
        self._units[block] = (signature, dirty)

    def delete(self, block):
        """Remove and return the unit of ``block``, or None."""
        return self._units.pop(block, None)

    def move_to_tail(self, block):
        self._units.move_to_end(block)

    def discard_head(self):
        """Remove the unit nearest to being discarded: (block, unit)."""
        return self._units.popitem(last=False)

    def dirty_units(self):
        return [(block, unit) for block, unit in self._units.items()
                if unit[1]]

    def blocks(self):
        """The storage locations cached now, the head (discarded first)
        first."""
        return list(self._units)


class GhostEvents:
    """The hypervisor's view, in order: pages entering its LRU list (an
    admitted eviction) and I/O reads (looking a location up in it).

    ``mrc.ghost_curve`` turns the two arrays into the VM's miss ratios
    from its direct memory upward.
    """

    def __init__(self):
        self._blocks = []
        self._reads = []

    def __len__(self):
        return len(self._blocks)

    def evicted(self, block):
        self._blocks.append(block)
        self._reads.append(False)

    def read(self, block):
        self._blocks.append(block)
        self._reads.append(True)

    def arrays(self):
        """(blocks int64, reads bool) of every event so far."""
        return (np.asarray(self._blocks, dtype=np.int64),
                np.asarray(self._reads, dtype=bool))

    def clear(self):
        self._blocks.clear()
        self._reads.clear()


class DirectIo:
    """A VM with no hypervisor cache: I/O goes to storage, notices are
    ignored."""

    def __init__(self, storage):
        self.storage = storage

    def read(self, page, block):
        return self.storage.read(block)

    def write(self, page, block, signature):
        self.storage.write(block, signature)

    def evict(self, page, signature):
        pass

    def release(self, page):
        pass

    def flush(self, page_content):
        pass


class HypervisorCache:
    """An exclusive cache of ``capacity`` pages below a VM (section 3.1).

    - Read: a hit hands the unit to the VM and discards it (the paper's
      "or explicitly discard it"; moving it to the head instead is the
      same thing here, as the VM's next eviction would discard it). A
      miss reads storage and caches nothing.
    - Eviction: admitted at the tail if the mapping tables allow it; one
      that hits a cached copy just moves that copy to the tail.
    - Release: deletes the page's mapping, admits nothing.
    - Write-through: writes storage and discards a cached copy.
    - Delayed write: caches the data dirty at the tail, dropping an older
      copy of the location; a dirty unit is written when discarded.

    One case the paper leaves open: a read hit on a dirty unit hands the
    VM data storage does not have, in a page the VM believes clean. The
    page is marked as owing its write (``_owed``), and its next admitted
    eviction caches it dirty again, so the write happens when it would
    have in a VM that kept the page: Hcache and VMonly then do the same
    device writes too.
    """

    def __init__(self, storage, capacity, write_policy='delayed',
                 check_s2p=True, ghost=None):
        if write_policy not in WRITE_POLICIES:
            raise ValueError('write_policy must be one of %s' % ', '.join(
                WRITE_POLICIES))
        if capacity < 0:
            raise ValueError('capacity must not be negative')
        self.storage = storage
        self.capacity = capacity
        self.write_policy = write_policy
        self.tables = MappingTables(check_s2p)
        self.queue = CacheQueue()
        self.ghost = ghost
        self._owed = set()
        self.read_hits = 0
        self.read_misses = 0
        self.admitted = 0
        self.rejected = 0

    def _map(self, page, block):
        self.tables.insert(page, block)
        self._owed.discard(page)

    def _cache(self, block, signature, dirty):
        if self.capacity == 0:
            if dirty:
                self.storage.write(block, signature)
            return
        if len(self.queue) >= self.capacity:
            discarded, (old_signature, old_dirty) = self.queue.discard_head()
            if old_dirty:
                self.storage.write(discarded, old_signature)
        self.queue.insert(block, signature, dirty)

    def read(self, page, block):
        self._map(page, block)
        if self.ghost is not None:
            self.ghost.read(block)
        unit = self.queue.delete(block)
        if unit is None:
            self.read_misses += 1
            return self.storage.read(block)
        self.read_hits += 1
        signature, dirty = unit
        if dirty:
            self._owed.add(page)
        return signature

    def write(self, page, block, signature):
        self._map(page, block)
        self.queue.delete(block)
        if self.write_policy == 'through':
            self.storage.write(block, signature)
        else:
            self._cache(block, signature, True)

    def evict(self, page, signature):
        owed = page in self._owed
        self._owed.discard(page)
        block = self.tables.lookup(page)
        self.tables.delete(page)
        if block is None:
            self.rejected += 1
            return
        self.admitted += 1
        if self.ghost is not None:
            self.ghost.evicted(block)
        if self.queue.lookup(block) is not None:
            self.queue.move_to_tail(block)
        else:
            self._cache(block, signature, owed)

    def release(self, page):
        self.tables.delete(page)
        self._owed.discard(page)

    def flush(self, page_content):
        """Write all the data storage lacks (a sync): dirty units, which
        stay cached, and the pages owing a write, read from guest memory
        through ``page_content(page)``."""
        for block, (signature, _) in self.queue.dirty_units():
            self.storage.write(block, signature)
            self.queue.insert(block, signature, False)
        for page in sorted(self._owed):
            block = self.tables.lookup(page)
            if block is not None:
                self.storage.write(block, page_content(page))
        self._owed.clear()
