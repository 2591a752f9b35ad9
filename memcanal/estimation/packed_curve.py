"""A miss-ratio curve packed into one string, as reports carry and store it.

A curve of n points is n little-endian records of (uint64 size in bytes,
float64 miss ratio), deflated (zlib) and then base64 text. As a JSON list
of [size, ratio] pairs, a report's curves were most of what the broker's
consumer decoded, validated and the database stored, point by point;
packed, each curve is one short string to decode, checked in a few numpy
operations (memcanal.rpc.reports) and stored as it came. Sizes are
multiples of a page and ratios repeat, so deflate shrinks a curve several
times, and what it leaves is no longer worth PostgreSQL's compressing
again. float64 keeps every ratio the agent computed exactly: unpacking
gives back the same values.
"""

import base64
import binascii
import zlib

import numpy as np

POINT = np.dtype([('size', '<u8'), ('ratio', '<f8')])
# Deflate's fastest level: a curve is a few KiB, and level 6 shrinks it
# by a few more percent at four times the agent's CPU.
_LEVEL = 1


def pack(points):
    """The packed text of ``points``, [[size bytes, miss ratio], ...]."""
    array = np.array([tuple(point) for point in points], dtype=POINT)
    return base64.b64encode(zlib.compress(array.tobytes(),
                                          _LEVEL)).decode('ascii')


def max_text_length(max_points):
    """The longest text of a curve of ``max_points`` points: deflate
    grows data it cannot shrink by a few bytes per 16 KiB at most."""
    deflated = max_points * POINT.itemsize
    deflated += deflated // 1000 + 64
    return 4 * -(-deflated // 3)


def points_array(text, max_points=None):
    """The records packed in ``text``, at most ``max_points`` + 1 of them
    (so that a caller can tell a curve too long without inflating all of
    it); ValueError if ``text`` is not a packed curve."""
    try:
        deflated = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error as err:
        raise ValueError('not base64: %s' % err) from None
    inflater = zlib.decompressobj()
    limit = 0 if max_points is None else (max_points + 1) * POINT.itemsize
    try:
        raw = inflater.decompress(deflated, limit)
    except zlib.error as err:
        raise ValueError('not deflated: %s' % err) from None
    if len(raw) != limit and not inflater.eof:
        raise ValueError('the deflated points are cut short')
    if len(raw) % POINT.itemsize:
        raise ValueError('%d bytes are not whole points' % len(raw))
    return np.frombuffer(raw, dtype=POINT)


def unpack(curve):
    """A stored or reported curve as [[size bytes, miss ratio], ...],
    packed or (from an older agent) already a list."""
    if not isinstance(curve, str):
        return curve
    array = points_array(curve)
    return [list(point) for point in zip(array['size'].tolist(),
                                         array['ratio'].tolist())]
