"""memcanal-logdirty's lines, read as what a Xen domain wrote.

hypervisor-patches/xen/logdirty.c prints one JSON line per interval of a
domain's log-dirty bitmap (doc/xen.md)::

    {"interval": 0, "start_ns": .., "end_ns": .., "dirty": 4178,
     "pfns": [[first, count], ...], "cost_ns": 1974000, "pages": 1044480}

The agent reads those lines from a process running as root in dom0, but
it checks each one as it would a peer's message: a line that is not that
object (not JSON, a missing or mistyped field, a negative number, a run
that is not two counts, a ``dirty`` that its runs do not add up to, more
frames than the bitmap holds) is rejected whole and counted, never
raised to the agent. Frames outside the domain's range (its bitmap, and
at most its memory plus the 4 GiB below which Xen puts its holes and
special pages) are dropped and counted: they cannot be the guest's.
"""

import dataclasses
import json

import numpy as np

from memcanal.agent import paging

PAGE_SIZE = 4096
# Xen's x86 guests keep MMIO holes and special pages below 4 GiB: a PVH
# guest's highest frame is 0xfefff whatever its memory (doc/xen.md).
LOW_HOLE_BYTES = 4 * 2 ** 30
FIELDS = ('interval', 'start_ns', 'end_ns', 'dirty', 'cost_ns', 'pages')
# The longest line read: a bitmap of alternate dirty frames is one run a
# frame pair, ~24 characters each (a 1 TiB guest's 2**28 frames: 3 GiB).
# Beyond this a line is rejected unread.
MAX_LINE_BYTES = 64 * 2 ** 20


class BadLine(ValueError):
    """A line that is not one of memcanal-logdirty's intervals."""


@dataclasses.dataclass(frozen=True)
class Interval:
    """One interval of a domain's log-dirty: the frames written in it
    (distinct, sorted, within the domain's range), when it began and
    ended (dom0's CLOCK_MONOTONIC), what reading it cost dom0, and how
    many frames the line gave outside the range (``dropped``)."""

    index: int
    start_ns: int
    end_ns: int
    frames: np.ndarray
    cost_ns: int
    dropped: int


def domain_frames(max_memory_bytes):
    """The frames a domain of ``max_memory_bytes`` may have: its memory
    plus the holes below 4 GiB."""
    return (max_memory_bytes + LOW_HOLE_BYTES) // PAGE_SIZE


def _count(document, name):
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadLine('%s is not a count: %r' % (name, value))
    return value


def _runs(document):
    """The runs as an (n, 2) int64 array of [first, count]."""
    runs = document.get('pfns')
    if not isinstance(runs, list):
        raise BadLine('pfns is not a list')
    for run in runs:
        if (not isinstance(run, list) or len(run) != 2 or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0
                for n in run)):
            raise BadLine('a run is not [first, count]: %.40r' % (run,))
    array = np.array(runs, dtype=object).reshape(-1, 2)
    if array.size and array.max() >= 2 ** 62:
        raise BadLine('a run is beyond any frame')
    return array.astype(np.int64)


def _frames(runs, limit):
    """The distinct frames of ``runs`` below ``limit``, and how many of
    the runs' frames were not. Runs holding more frames than there are
    below the limit overlap: a line of them could make the agent expand
    any number of frames, so it is rejected."""
    first, count = runs[:, 0], runs[:, 1]
    end = np.minimum(first + count, limit)
    kept = np.maximum(end - first, 0)
    if kept.sum() > limit:
        raise BadLine('runs that overlap')
    dropped = int(count.sum() - kept.sum())
    return np.unique(paging.expand(np.column_stack([first, kept]))), dropped


def parse_line(line, domain_limit):
    """The Interval of one line, with frames at or above
    ``domain_limit`` (domain_frames of the domain) or the line's own
    bitmap dropped; raises BadLine."""
    if len(line) > MAX_LINE_BYTES:
        raise BadLine('a line of %d bytes' % len(line))
    try:
        document = json.loads(line)
    except (ValueError, RecursionError) as error:
        raise BadLine('not JSON: %s' % error)
    if not isinstance(document, dict):
        raise BadLine('not an object')
    values = {name: _count(document, name) for name in FIELDS}
    if values['end_ns'] < values['start_ns']:
        raise BadLine('the interval ends before it starts')
    runs = _runs(document)
    if int(runs[:, 1].sum()) != values['dirty']:
        raise BadLine('dirty %d is not what its runs hold' % values['dirty'])
    if values['dirty'] > values['pages']:
        raise BadLine('more dirty frames than the bitmap holds')
    frames, dropped = _frames(runs, min(values['pages'], domain_limit))
    return Interval(values['interval'], values['start_ns'],
                    values['end_ns'], frames, values['cost_ns'], dropped)
