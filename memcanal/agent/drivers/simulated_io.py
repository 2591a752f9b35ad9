"""What the simulated hypervisor keeps of a VM's I/O: the P2S and S2P
tables Lu and Shen's hypervisor keeps, what it saw leave the VM's memory
(to list it when a tracing window starts, and to count the refills after
one), and its hypervisor cache's storage and size.
"""

import collections
import itertools

from memcanal.estimation import hcache


class MappedIo(hcache.DirectIo):
    """Direct I/O that keeps the hypervisor's P2S and S2P tables.

    Lu and Shen's hypervisor sees every I/O of the VM, cached or not; a
    hypervisor cache started later takes these tables over, so it admits
    the pages the VM read before the cache existed. It also sees, from
    the guest's eviction notices and its own cache, what leaves the VM's
    memory, and lists it, oldest first, until the VM reads it again:

    - ``dropped``: what the last tracing window's cache held when it gave
      its memory back empty, as much of it as the VM's free memory has
      room for: a VM never traced would still hold it, and a read of it
      is a refill, a miss that VM would not have had;
    - ``evicted``: older, what that VM would no longer hold either (the
      guest's evictions, and what was dropped beyond its room), at most
      ``max_evicted`` blocks.

    ``free_pages()`` is how many pages of the VM's memory hold no block.
    """

    def __init__(self, storage, free_pages, max_evicted):
        super().__init__(storage)
        self.tables = hcache.MappingTables()
        self.dropped = collections.OrderedDict()
        self.evicted = collections.OrderedDict()
        self.refills = 0
        self._free_pages = free_pages
        self._max_evicted = max_evicted

    def note_read(self, block):
        """A device read of ``block``, the VM's or a hypervisor cache's
        on its behalf: a refill if the last window dropped it."""
        if block in self.dropped:
            del self.dropped[block]
            self.refills += 1
        else:
            self.evicted.pop(block, None)
        # The block takes a free page.
        self.fit(reserve=1)

    def fit(self, reserve=0):
        """Keep no more of what was dropped than the VM's free memory has
        room for, ``reserve`` pages aside: a VM never traced would have
        evicted the oldest it held to make room for what it read."""
        while self.dropped and (len(self.dropped) + reserve
                                > self._free_pages()):
            self._note_evicted(self.dropped.popitem(last=False)[0])

    def _note_evicted(self, block):
        self.evicted[block] = None
        self.evicted.move_to_end(block)
        if len(self.evicted) > self._max_evicted:
            self.evicted.popitem(last=False)

    def note_dropped(self, blocks):
        """A window's cache gave its memory back empty, dropping
        ``blocks`` (its next to discard first): newer than what an
        earlier window dropped and the VM has not read again, which a VM
        never traced may hold still (``fit`` once the memory is back)."""
        self.dropped.update(dict.fromkeys(blocks))

    def listed(self):
        """What left the VM's memory and was not read again, oldest
        first."""
        return itertools.chain(self.evicted, self.dropped)

    def read(self, page, block):
        self.tables.insert(page, block)
        self.note_read(block)
        return self.storage.read(block)

    def write(self, page, block, signature):
        self.tables.insert(page, block)
        self.storage.write(block, signature)

    def evict(self, page, signature):
        block = self.tables.lookup(page)
        if block is not None:
            self._note_evicted(block)
        self.tables.delete(page)

    def release(self, page):
        self.tables.delete(page)


class RefillCountingStorage:
    """A VM's storage as a tracing window's hypervisor cache reads it:
    its device reads are the VM's, and may refill what the last window
    dropped."""

    def __init__(self, storage, io):
        self._storage = storage
        self._io = io

    def read(self, block):
        self._io.note_read(block)
        return self._storage.read(block)

    def write(self, block, signature):
        self._storage.write(block, signature)


def trim(cache, capacity):
    """Make a hypervisor cache ``capacity`` pages, discarding its oldest
    units (writing the dirty ones) as its own replacement does."""
    cache.capacity = capacity
    while len(cache.queue) > capacity:
        block, (signature, dirty) = cache.queue.discard_head()
        if dirty:
            cache.storage.write(block, signature)
