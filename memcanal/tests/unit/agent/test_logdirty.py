"""memcanal-logdirty's lines as the Xen driver reads them, bad ones
included: each is rejected whole, never raised to the agent."""

import json

import numpy as np
import pytest

from memcanal.agent.drivers import logdirty
from memcanal.tests.unit.agent import fake_logdirty

LIMIT = logdirty.domain_frames(256 * 2 ** 20)


def test_a_line_is_its_frames():
    line = fake_logdirty.interval(3, [[16, 4], [4096, 2]], cost_ns=1974000)
    interval = logdirty.parse_line(line, LIMIT)
    assert (interval.index, interval.start_ns, interval.end_ns) == (
        3, 3000, 4000)
    assert interval.frames.tolist() == [16, 17, 18, 19, 4096, 4097]
    assert (interval.cost_ns, interval.dropped) == (1974000, 0)


def test_an_idle_interval_has_no_frames():
    interval = logdirty.parse_line(fake_logdirty.interval(0, []), LIMIT)
    assert interval.frames.size == 0 and interval.frames.dtype == np.int64


def test_the_helpers_own_output_parses():
    """The line logdirty.c prints, as doc/xen.md shows it."""
    line = ('{"interval": 7, "start_ns": 10, "end_ns": 20, "dirty": 3, '
            '"pfns": [[1044477, 3]], "cost_ns": 5, "pages": 1044480}')
    assert logdirty.parse_line(line, LIMIT).frames.tolist() == [
        1044477, 1044478, 1044479]


def test_a_256_mib_pvh_guests_special_pages_are_in_its_range():
    # Its highest frame is 0xfefff whatever its memory (doc/xen.md).
    assert LIMIT > 0xfefff


def test_frames_outside_the_domain_are_dropped_and_counted():
    line = fake_logdirty.interval(0, [[LIMIT - 2, 4], [10 ** 9, 5]],
                                  pages=2 * LIMIT)
    interval = logdirty.parse_line(line, LIMIT)
    assert interval.frames.tolist() == [LIMIT - 2, LIMIT - 1]
    assert interval.dropped == 7


def test_frames_beyond_the_lines_own_bitmap_are_dropped():
    line = fake_logdirty.interval(0, [[90, 20]], pages=100)
    interval = logdirty.parse_line(line, LIMIT)
    assert interval.frames.tolist() == list(range(90, 100))
    assert interval.dropped == 10


@pytest.mark.parametrize('line', [
    'memcanal-logdirty: clean: Operation not permitted',
    '',
    '[1, 2]',
    '{"interval": 0}',
    fake_logdirty.interval(0, [[1, 2]], dirty=3),             # runs disagree
    fake_logdirty.interval(0, [[1, 2]], interval=-1),
    fake_logdirty.interval(0, [[1, 2]], cost_ns=True),
    fake_logdirty.interval(0, [[1, 2]], pages='1044480'),
    fake_logdirty.interval(0, [[1, 2]], start_ns=5000),       # ends first
    fake_logdirty.interval(0, [[1, -2]]),
    fake_logdirty.interval(0, [[1, 2]], pfns=[[1, 2, 3]], dirty=2),
    fake_logdirty.interval(0, [[1.5, 2]]),
    fake_logdirty.interval(0, [], pfns=[1, 2]),
    fake_logdirty.interval(0, [[2 ** 63, 1]]),
    fake_logdirty.interval(0, [], pfns={'1': 2}),
    fake_logdirty.interval(0, [[1, 200]], pages=100),         # > its bitmap
    '[' * 100000 + ']' * 100000,
], ids=lambda line: line[:40])
def test_a_malformed_line_is_rejected(line):
    with pytest.raises(logdirty.BadLine):
        logdirty.parse_line(line, LIMIT)


def test_overlapping_runs_cannot_make_the_agent_expand_frames():
    """A line whose runs repeat the whole range a million times is
    rejected before any frame is made."""
    runs = [[0, 1000]] * 1000
    line = json.dumps({'interval': 0, 'start_ns': 0, 'end_ns': 1,
                       'dirty': 10 ** 6, 'pfns': runs, 'cost_ns': 0,
                       'pages': 10 ** 9})
    with pytest.raises(logdirty.BadLine, match='overlap'):
        logdirty.parse_line(line, 1000)


def test_a_line_longer_than_any_helper_prints_is_rejected_unread():
    with pytest.raises(logdirty.BadLine, match='bytes'):
        logdirty.parse_line(' ' * (logdirty.MAX_LINE_BYTES + 1), LIMIT)
