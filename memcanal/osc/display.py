"""How the commands show sizes and miss-ratio curves.

Tables show sizes in MiB, and a curve as a small ASCII chart; ``-f json``
and ``-f yaml`` get the API's raw numbers (cliff's FormattableColumn
gives each formatter its own rendering).
"""

import json

from cliff import columns
import numpy

MIB = 2 ** 20
# The curve the policies read when a VM has several: hcache's (a traced
# VM's exact one), else SHARDS' sample (doc/api.md, decisions).
CURVE_PREFERENCE = ('hcache', 'shards')
PLOT_WIDTH = 40
PLOT_HEIGHT = 5


def mib(size):
    """Bytes -> MiB (an int; None stays None)."""
    return None if size is None else round(size / MIB)


def mib_by_key(sizes):
    """{name: bytes} -> {name: MiB}, for WSS by estimator."""
    return {name: mib(size) for name, size in (sizes or {}).items()}


def preferred_curve(mrc):
    """(method, [[bytes, miss ratio], ...]) of the curve to read from a
    report's ``mrc``, or (None, None) when it has none."""
    if not mrc:
        return None, None
    for method in CURVE_PREFERENCE:
        if method in mrc:
            return method, mrc[method]
    method = sorted(mrc)[0]
    return method, mrc[method]


def plot(points, width=PLOT_WIDTH, height=PLOT_HEIGHT):
    """A few lines of ASCII: miss ratio (0 to 1, up) against memory
    size (0 to the curve's last size, right), one ``*`` per column,
    linearly interpolated between the curve's points and from "no
    memory, every access misses" to the first."""
    if points[0][0] > 0:
        points = [[0, 1.0]] + list(points)
    sizes = [size for size, _ in points]
    ratios = [ratio for _, ratio in points]
    columns_at = numpy.interp(numpy.linspace(0, sizes[-1], width), sizes,
                              ratios)
    rows = [[' '] * width for _ in range(height)]
    for column, ratio in enumerate(columns_at):
        row = min(height - 1, int((1 - min(max(ratio, 0.0), 1.0)) * height))
        rows[row][column] = '*'
    labels = ['    |'] * height
    labels[0], labels[-1] = '1.0 |', '0.0 |'
    last = '%d MiB' % mib(sizes[-1])
    return '\n'.join(
        [label + ''.join(row).rstrip() for label, row in zip(labels, rows)]
        + ['    +' + '-' * width,
           '     0' + last.rjust(width - 1)])


class CurveColumn(columns.FormattableColumn):
    """A report's ``mrc`` (method -> points): charted in tables, raw
    otherwise."""

    def human_readable(self):
        method, points = preferred_curve(self._value)
        if not points:
            return ''
        return 'miss ratio by memory (%s):\n%s' % (method, plot(points))

    def machine_readable(self):
        return self._value


class JSONColumn(columns.FormattableColumn):
    """A nested structure: indented JSON in tables, as is otherwise."""

    def human_readable(self):
        return json.dumps(self._value, indent=1, sort_keys=True)

    def machine_readable(self):
        return self._value
