"""Which of a guest's pages hold x86-64 page tables, read from the host
side: what benchmarks/sampling_accuracy.py asks of the pages the sampler
saw and memtrace did not (doc/estimation.md, "The reference").

memtrace sees the guest's loads, stores and (``code=on``) the code TCG
translates, not the MMU's walks of the guest's page tables; the sampler
sees those walks too (a walk reads a zapped page and faults). Whether
the sampler's extra pages are such walks is a question of their content,
which the host can read without the guest's help and without touching
the guest's mapping (the sampler would see that): the pages of QEMU's
RAM memfd, read with pread on the memfd itself.

A page looks like a page table (any level) when it has at least two
non-zero entries, and every non-zero entry is present (bit 0) and points
at a frame inside the guest's RAM other than frame 0. Text, pointers
(their high bits), doubles and most small integers fail one of these;
the classifier can still take a page of odd integers between 4 KiB and
the RAM's size for one, so what it counts is an upper bound on the
walks, stated as such.
"""

import os

import numpy as np

PAGE = 4096
ENTRIES = PAGE // 8
MIN_ENTRIES = 2
ADDRESS_BITS = (1 << 52) - 1    # bits 12..51: the frame


def ram_memfd(pid, ram_bytes):
    """A read-only descriptor of process ``pid``'s memfd of ``ram_bytes``
    (QEMU's guest RAM with ``memfd=True``)."""
    directory = '/proc/%d/fd' % pid
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if (os.readlink(path).startswith('/memfd:')
                    and os.stat(path).st_size == ram_bytes):
                return os.open(path, os.O_RDONLY)
        except OSError:
            continue    # closed while listed
    raise RuntimeError('process %d has no memfd of %d bytes' % (
        pid, ram_bytes))


def look_like_page_tables(entries, ram_pages):
    """For pages given as an (n, 512) array of uint64 entries: which
    look like page tables, as a boolean array of n."""
    entries = np.asarray(entries, dtype=np.uint64).reshape(-1, ENTRIES)
    nonzero = entries != 0
    frames = (entries & np.uint64(ADDRESS_BITS)) >> np.uint64(12)
    valid = ((entries & np.uint64(1)) == 1) & (frames > 0) & (
        frames < ram_pages)
    return (nonzero.sum(axis=1) >= MIN_ENTRIES) & np.all(
        valid | ~nonzero, axis=1)


class PageTables:
    """Reads pages of a guest's RAM memfd and tells its page tables."""

    def __init__(self, pid, ram_bytes):
        self.fd = ram_memfd(pid, ram_bytes)
        self.ram_pages = ram_bytes // PAGE

    def among(self, pages):
        """The pages of ``pages`` (page indexes) that look like page
        tables now."""
        pages = np.unique(np.asarray(pages, dtype=np.int64))
        if not pages.size:
            return pages
        entries = np.empty((pages.size, ENTRIES), dtype=np.uint64)
        for row, page in enumerate(pages):
            entries[row] = np.frombuffer(
                os.pread(self.fd, PAGE, int(page) * PAGE), dtype=np.uint64)
        return pages[look_like_page_tables(entries, self.ram_pages)]

    def close(self):
        os.close(self.fd)
