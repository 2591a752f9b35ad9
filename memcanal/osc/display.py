"""How the commands show sizes and miss-ratio curves.

Tables show sizes in MiB, and a curve as a small ASCII chart; ``-f json``
and ``-f yaml`` get the API's raw numbers (cliff's FormattableColumn
gives each formatter its own rendering). A sampled estimate's 95 %
interval (API 1.8) shows as ``low..high`` MiB, a curve's band as dots
around its chart's line.
"""

import json

from cliff import columns
import numpy

MIB = 2 ** 20
# The curve the policies read when a VM has several: hcache's (a traced
# VM's exact one), else SHARDS' sample (doc/api.md, decisions).
CURVE_PREFERENCE = ('hcache', 'shards')
PLOT_WIDTH = 40
# Eight rows: an eighth of the miss ratio each, fine enough to see where
# a curve's knee is and still short in a table.
PLOT_HEIGHT = 8


def mib(size):
    """Bytes -> MiB (an int; None stays None)."""
    return None if size is None else round(size / MIB)


def mib_by_key(sizes):
    """{name: bytes} -> {name: MiB}, for WSS by estimator."""
    return {name: mib(size) for name, size in (sizes or {}).items()}


def interval_mib(bounds):
    """[low, high] bytes -> [low, high] MiB (None stays None)."""
    return None if bounds is None else [mib(bound) for bound in bounds]


def _interval_text(bounds):
    return '' if bounds is None else '%s..%s' % tuple(bounds)


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


def _rows_at(points, width, height, largest=None):
    """The row of each of ``width`` columns from 0 to ``largest`` bytes
    (the curve's last size), the curve linearly interpolated between its
    points and from "no memory, every access misses" to the first."""
    if points[0][0] > 0:
        points = [[0, 1.0]] + list(points)
    sizes = [size for size, _ in points]
    ratios = [ratio for _, ratio in points]
    columns_at = numpy.interp(numpy.linspace(0, largest or sizes[-1], width),
                              sizes, ratios)
    return [min(height - 1, int((1 - min(max(ratio, 0.0), 1.0)) * height))
            for ratio in columns_at]


def plot(points, width=PLOT_WIDTH, height=PLOT_HEIGHT, band=None):
    """A few lines of ASCII: miss ratio (0 to 1, up) against memory
    size (0 to the curve's last size, right), one ``*`` per column,
    linearly interpolated between the curve's points and from "no
    memory, every access misses" to the first; ``band`` ({"low": points,
    "high": points}, a 95 % band at the curve's sizes) fills the rows
    between its edges with ``.``. The axes are labelled at their ends
    and middles."""
    sizes = [size for size, _ in points]
    rows = [[' '] * width for _ in range(height)]
    if band:
        for column, (top, bottom) in enumerate(zip(
                _rows_at(band['high'], width, height, sizes[-1]),
                _rows_at(band['low'], width, height, sizes[-1]))):
            for row in range(top, bottom + 1):
                rows[row][column] = '.'
    for column, row in enumerate(_rows_at(points, width, height)):
        rows[row][column] = '*'
    labels = ['    |'] * height
    labels[0], labels[height // 2], labels[-1] = '1.0 |', '0.5 |', '0.0 |'
    return '\n'.join(
        [label + ''.join(row).rstrip() for label, row in zip(labels, rows)]
        + ['    +' + '-' * width, '     ' + _size_axis(sizes[-1], width)])


def _size_axis(largest, width):
    """``0``, the middle size under the middle column and the largest at
    the right end, the middle left out when it would not fit."""
    last = '%d MiB' % mib(largest)
    middle = '%d' % mib(largest / 2)
    half = width // 2
    axis = '0' + middle.rjust(half)
    if len(axis) + 1 + len(last) > width:
        axis = '0'
    return axis + last.rjust(width - len(axis))


class SizesColumn(columns.FormattableColumn):
    """{name: MiB}, e.g. WSS by estimator: ``esx=420, prl=512`` in
    tables (osc-lib's DictColumn would quote the numbers), the dict
    otherwise."""

    def human_readable(self):
        return ', '.join('%s=%s' % item for item in sorted(
            (self._value or {}).items()))

    def machine_readable(self):
        return self._value


class IntervalColumn(columns.FormattableColumn):
    """A 95 % interval, [low, high] MiB or None: ``low..high`` in
    tables."""

    def human_readable(self):
        return _interval_text(self._value)

    def machine_readable(self):
        return self._value


class IntervalsColumn(columns.FormattableColumn):
    """{name: [low, high] MiB}, e.g. working sets' 95 % intervals by
    estimator: ``sampled=180..230`` in tables."""

    def human_readable(self):
        return ', '.join('%s=%s' % (name, _interval_text(bounds))
                         for name, bounds in sorted(
                             (self._value or {}).items()))

    def machine_readable(self):
        return self._value


class CurveColumn(columns.FormattableColumn):
    """A report's ``mrc`` (method -> points): charted in tables, with
    the chosen curve's 95 % band when ``bands`` (method -> {"low",
    "high"}) has one; raw otherwise."""

    def __init__(self, value, bands=None):
        super().__init__(value)
        self._bands = bands or {}

    def human_readable(self):
        method, points = preferred_curve(self._value)
        if not points:
            return ''
        band = self._bands.get(method)
        return 'miss ratio by memory (%s%s):\n%s' % (
            method, ', 95 % band: .' if band else '',
            plot(points, band=band))

    def machine_readable(self):
        return self._value


class BandColumn(columns.FormattableColumn):
    """A report's ``mrc_bands`` (method -> {"low", "high"}): in tables
    how wide each band is at its widest, and where; raw otherwise."""

    def human_readable(self):
        lines = []
        for method, band in sorted((self._value or {}).items()):
            widths = [(high - low, size) for (size, low), (_, high)
                      in zip(band['low'], band['high'])]
            width, size = max(widths)
            lines.append('%s: widest %.3f at %d MiB' % (method, width,
                                                       mib(size)))
        return '\n'.join(lines)

    def machine_readable(self):
        return self._value


def abridged(value):
    """``value`` with each ``mrc`` list (a curve's points, hundreds of
    them) replaced by its point count."""
    if isinstance(value, dict):
        return {key: ('%d-point curve' % len(item)
                      if key == 'mrc' and isinstance(item, list)
                      else abridged(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [abridged(item) for item in value]
    return value


class JSONColumn(columns.FormattableColumn):
    """A nested structure: indented JSON in tables, its curves abridged
    to their point counts (a decision's inputs carry every VM's curve);
    as is otherwise."""

    def human_readable(self):
        return json.dumps(abridged(self._value), indent=1, sort_keys=True)

    def machine_readable(self):
        return self._value
