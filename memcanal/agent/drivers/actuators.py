"""How a simulated VM's memory is resized: a balloon or memory hotplug,
with U-tube's semantics and the latencies Liu et al. measured (U-tube,
IEEE TPDS 2015, sections 2, 3.2 and 4.2).

- ``Balloon``: inflating takes pages from wherever the guest has them
  free, so the pages it holds are scattered over the guest's memory
  map (``holes``: the runs of them, section 4.3); deflating gives back
  the most recently taken pages first and can never give the VM more
  than it booted with (section 2.1, the memory cap).
- ``Hotplug``: growing onlines pages already plugged but offline, from
  low addresses up, and hot-adds whole sections only when those do not
  suffice; shrinking offlines pages from the highest address down and
  hot-removes a section once all its pages are offline (section 3.2).
  Online memory stays one run from address 0: no holes, and no cap.

``resize(current_bytes, target_bytes, loaded)`` returns the seconds the
change takes (``loaded``: the guest uses most of its memory, so removal
must page out or migrate what it uses). Each actuator applies the change
``target_bytes - current_bytes`` to its own state; the guest page cache
itself is resized by the driver. A resize that cannot be done raises
ResizeFailed and changes nothing; targets are at least one page.
"""

import numpy as np

from memcanal import estimation
from memcanal import exception

MIB = 2 ** 20
SECTION_BYTES = 128 * MIB
"""x86-64's memory section, the unit of hot-add and hot-remove (2.2)."""

# Fig. 3 (idle VM, 128 MB steps): adding memory costs 60 ms per
# hot-added section and 55 ms per 128 MB deflated from a balloon.
HOTPLUG_ADD_SECTION_SECONDS = 0.060
BALLOON_DEFLATE_SECONDS = 0.055
# Fig. 5, idle VM: removing costs 46 ms per hot-removed section and
# 56 ms per 128 MB inflated into a balloon.
HOTPLUG_REMOVE_SECTION_SECONDS = 0.046
BALLOON_INFLATE_SECONDS = 0.056
# Figs. 4 and 6: onlining or offlining pages of sections already plugged
# only changes their state, "much faster" than either mechanism; the
# paper gives no number, so 5 ms per 128 MB is an assumption.
PAGE_STATE_SECONDS = 0.005
# Fig. 5, heavily loaded VM (TPC-C): removal must swap (balloon) or
# migrate and page out (hotplug) what the guest uses. The paper gives no
# absolute cost: ballooning is taken as 4 times its idle cost (an
# assumption read off the figure's slopes), and hotplug as the 30.4 %
# less than ballooning the text measures.
LOADED_BALLOON_FACTOR = 4.0
HOTPLUG_LOADED_SAVING = 0.304
# What a loaded removal adds to hotplug's idle cost, per 128 MB removed,
# so that removing a loaded section costs 30.4 % less than ballooning
# out 128 MB of a loaded VM.
HOTPLUG_LOADED_EXTRA_SECONDS = (
    BALLOON_INFLATE_SECONDS * LOADED_BALLOON_FACTOR
    * (1.0 - HOTPLUG_LOADED_SAVING) - HOTPLUG_REMOVE_SECTION_SECONDS)

_SECTION_PAGES = SECTION_BYTES // estimation.PAGE_SIZE


def _per_128mb(pages, seconds):
    """The cost of ``pages`` at ``seconds`` per 128 MB."""
    return pages / _SECTION_PAGES * seconds


def _pages(size_bytes):
    return size_bytes // estimation.PAGE_SIZE


class Balloon:
    """A balloon driver in a VM that booted with ``boot_bytes`` (its cap).

    The guest's memory map is its boot memory, a page each; ``rng``
    picks which free pages an inflation takes (the guest's free memory is
    scattered among the pages it uses, so anywhere).
    """

    def __init__(self, boot_bytes, uuid=None, rng=None):
        self.boot_bytes = boot_bytes
        self.uuid = uuid
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._held = np.zeros(_pages(boot_bytes), bool)
        # The pages each inflation took, oldest first: deflation gives
        # back the newest first, as Linux's balloon page list does.
        self._inflations = []

    @property
    def held_pages(self):
        return sum(len(pages) for pages in self._inflations)

    @property
    def holes(self):
        """Runs of pages the balloon holds in the guest's memory map: the
        fragmentation it causes (Fig. 7)."""
        held = self._held
        return int(held[:1].sum() + np.count_nonzero(held[1:] & ~held[:-1]))

    def _fail(self, reason):
        raise exception.ResizeFailed(uuid=self.uuid, reason=reason)

    def resize(self, current_bytes, target_bytes, loaded):
        change = _pages(target_bytes) - _pages(current_bytes)
        if change > 0:
            if target_bytes > self.boot_bytes:
                self._fail('a balloon cannot grow a VM past the %d bytes '
                           'it booted with' % self.boot_bytes)
            if change > self.held_pages:
                self._fail('the balloon holds only %d bytes to give back' % (
                    self.held_pages * estimation.PAGE_SIZE))
            self._deflate(change)
            return _per_128mb(change, BALLOON_DEFLATE_SECONDS)
        if change < 0:
            self._inflate(-change, _pages(current_bytes))
        return _per_128mb(-change, BALLOON_INFLATE_SECONDS) * (
            LOADED_BALLOON_FACTOR if loaded else 1.0)

    def _inflate(self, count, current_pages):
        # A VM grown by hotplug has more memory than it booted with.
        extra = current_pages + self.held_pages - self._held.size
        if extra > 0:
            self._held = np.concatenate([self._held, np.zeros(extra, bool)])
        taken = self._rng.choice(np.flatnonzero(~self._held), count,
                                 replace=False)
        self._held[taken] = True
        self._inflations.append(taken)

    def _deflate(self, count):
        while count:
            newest = self._inflations.pop()
            kept = max(0, newest.size - count)
            self._held[newest[kept:]] = False
            if kept:
                self._inflations.append(newest[:kept])
            count -= newest.size - kept


class Hotplug:
    """Memory hotplug (U-tube's hotmem driver) in a VM that booted with
    ``boot_bytes``.

    The address space is a list of sections: the boot memory's (the last
    one partial when the boot memory is not a whole number of sections),
    then the hot-added ones. Pages below ``online_pages`` are online, the
    rest of the plugged sections offline.
    """

    def __init__(self, boot_bytes, section_bytes=SECTION_BYTES):
        self.section_pages = _pages(section_bytes)
        full, partial = divmod(_pages(boot_bytes), self.section_pages)
        self._sections = [self.section_pages] * full + (
            [partial] if partial else [])
        self.online_pages = _pages(boot_bytes)

    @property
    def sections(self):
        return len(self._sections)

    @property
    def plugged_pages(self):
        return sum(self._sections)

    @property
    def offline_pages(self):
        return self.plugged_pages - self.online_pages

    @property
    def holes(self):
        """Hotplug keeps online memory contiguous: it never fragments."""
        return 0

    def resize(self, current_bytes, target_bytes, loaded):
        online = self.online_pages + _pages(target_bytes) - _pages(
            current_bytes)
        if online >= self.online_pages:
            return self._grow(online)
        return self._shrink(online, loaded)

    def _grow(self, online):
        plugged = self.plugged_pages
        # Offline pages first (page granularity), then new sections.
        seconds = _per_128mb(min(online, plugged) - self.online_pages,
                             PAGE_STATE_SECONDS)
        added = max(0, -(-(online - plugged) // self.section_pages))
        self._sections += [self.section_pages] * added
        self.online_pages = online
        return seconds + added * HOTPLUG_ADD_SECTION_SECONDS

    def _shrink(self, online, loaded):
        offlined = self.online_pages - online
        end = self.plugged_pages
        removed = 0
        # Pages offlined now in sections removed now: their cost is the
        # section's.
        in_removed = 0
        while end - self._sections[-1] >= online:
            start = end - self._sections.pop()
            in_removed += max(0, min(end, self.online_pages) - start)
            removed += 1
            end = start
        self.online_pages = online
        seconds = (removed * HOTPLUG_REMOVE_SECTION_SECONDS + _per_128mb(
            offlined - in_removed, PAGE_STATE_SECONDS))
        if loaded:
            seconds += _per_128mb(offlined, HOTPLUG_LOADED_EXTRA_SECONDS)
        return seconds
