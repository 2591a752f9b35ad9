"""Page-reference traces: what a VM touched, and their file formats.

A trace is four parallel columns, one entry per reference:

- ``pages``: guest page number (guest-physical address // page size);
- ``writes``: True for a store, False for a load;
- ``times``: when the reference happened, in units of ``time_unit_ns``
  nanoseconds (1 for our own traces; a trace with only an order, such as
  a text file, uses the sequence number with a unit of 1 ns);
- ``vcpus``: the virtual CPU that made it (per-vCPU TLBs and logs).

Files, chosen by extension or by name:

- ``npy``: a numpy structured array of ``RECORD_DTYPE`` (page <u8, write
  u1, vcpu <u2, time <i8 in ns): lossless, memory-mapped on reading.
- ``text``: one reference per line, ``ADDRESS [R|W]``. ADDRESS is a
  64-bit byte address, in decimal without leading zeros (``010`` could be
  octal) or in hexadecimal after ``0x`` (at most 16 digits), a ``+`` sign
  allowed; R or W, in either case, says read or write, reads by default.
  Fields are separated by ASCII whitespace, ``#`` starts a comment to the
  end of the line, blank lines are skipped, lines end in LF or CRLF. A
  malformed line is refused with its number and text. The reference's
  position in the file is its time.
- ``oracleGeneral``: libCacheSim's binary format, 24-byte little-endian
  records ``<u4 clock_time (s), <u8 obj_id, <u4 obj_size, <i8
  next_access_vtime`` (the 1-based position of the next request to the
  same object, -1 if none, as libCacheSim's traceConv writes it). Objects
  are pages: obj_id is the page, obj_size the page
  size. It has no read/write flag, so reads are assumed.
"""

import collections
from concurrent import futures
import dataclasses
import os
import re

import numpy as np

from memcanal import estimation

RECORD_DTYPE = np.dtype([('page', '<u8'), ('write', 'u1'), ('vcpu', '<u2'),
                         ('time', '<i8')])
ORACLE_GENERAL_DTYPE = np.dtype([('clock_time', '<u4'), ('obj_id', '<u8'),
                                 ('obj_size', '<u4'),
                                 ('next_access_vtime', '<i8')])
FORMATS = ('npy', 'text', 'oracleGeneral')
NO_NEXT_ACCESS = -1
SECOND_NS = 10 ** 9
# Bytes of a text trace parsed at once: a few arrays of this size stay in
# the processor's caches.
TEXT_CHUNK_BYTES = 1 << 20
TEXT_THREADS = 2

_WORD = 8
_HEX_DIGITS = 16
_DECIMAL_DIGITS = 20
_MARGIN = b' ' * (_DECIMAL_DIGITS + 4)
_DECIMAL_HIGH, _DECIMAL_LOW = divmod(2 ** 64 - 1, 10 ** 8)
_LF, _TAB, _SPACE, _HASH, _PLUS, _ZERO, _A, _R, _W, _X = (
    np.uint8(ord(c)) for c in '\n\t #+0arwx')
_LOWER = np.uint8(0x20)
# _KEEP_LAST[n]: the last n bytes of a little-endian word.
_KEEP_LAST = np.array([0] + [(2 ** 64 - 1) << 8 * (_WORD - n) & (2 ** 64 - 1)
                             for n in range(1, _WORD + 1)], np.uint64)
_ASCII_ZEROS = np.frombuffer(b'0' * _WORD, '<u8')[0]
_ADDRESS = re.compile(rb'\+?(?:0[xX][0-9a-fA-F]+|[0-9]+)')


@dataclasses.dataclass(frozen=True)
class Trace:
    pages: np.ndarray
    writes: np.ndarray
    times: np.ndarray
    vcpus: np.ndarray
    time_unit_ns: int = 1

    def __post_init__(self):
        lengths = {len(self.pages), len(self.writes), len(self.times),
                   len(self.vcpus)}
        if len(lengths) != 1:
            raise ValueError('trace columns differ in length')

    def __len__(self):
        return len(self.pages)

    @classmethod
    def of(cls, pages, writes=None, times=None, vcpus=None, time_unit_ns=1):
        """A trace from columns; missing ones default to reads, sequence
        numbers as times and vCPU 0."""
        pages = np.asarray(pages)
        count = len(pages)
        return cls(
            pages,
            np.zeros(count, bool) if writes is None else np.asarray(
                writes, dtype=bool),
            np.arange(count, dtype=np.int64) if times is None
            else np.asarray(times),
            np.zeros(count, np.uint16) if vcpus is None
            else np.asarray(vcpus, dtype=np.uint16),
            time_unit_ns)

    def times_ns(self):
        return self.times.astype(np.int64) * self.time_unit_ns

    def slice(self, start, stop):
        return Trace(self.pages[start:stop], self.writes[start:stop],
                     self.times[start:stop], self.vcpus[start:stop],
                     self.time_unit_ns)


def format_of(path, name=None):
    """The format ``name`` names, or the one ``path``'s extension implies."""
    if name is not None:
        if name not in FORMATS:
            raise ValueError('unknown trace format %r; one of %s' % (
                name, ', '.join(FORMATS)))
        return name
    extension = os.path.splitext(path)[1].lower()
    if extension == '.npy':
        return 'npy'
    if extension in ('.txt', '.text', '.trace'):
        return 'text'
    if extension in ('.oraclegeneral', '.bin'):
        return 'oracleGeneral'
    raise ValueError('cannot tell the format of %s from its extension; '
                     'name one of %s' % (path, ', '.join(FORMATS)))


def read(path, fmt=None, page_size=estimation.PAGE_SIZE):
    """The trace in ``path``; binary formats are memory-mapped."""
    return _READERS[format_of(path, fmt)](path, page_size)


def write(trace, path, fmt=None, page_size=estimation.PAGE_SIZE):
    _WRITERS[format_of(path, fmt)](trace, path, page_size)


def _read_npy(path, page_size):
    records = np.load(path, mmap_mode='r')
    if records.dtype != RECORD_DTYPE:
        raise ValueError('%s is not a memcanal trace: dtype %s' % (
            path, records.dtype))
    return Trace(records['page'], records['write'].view(bool),
                 records['time'], records['vcpu'])


def _write_npy(trace, path, page_size):
    records = np.empty(len(trace), RECORD_DTYPE)
    records['page'] = trace.pages
    records['write'] = trace.writes
    records['vcpu'] = trace.vcpus
    records['time'] = trace.times_ns()
    with open(path, 'wb') as f:
        np.save(f, records)


def _read_text(path, page_size):
    """Parse ``path`` by whole-array numpy operations a chunk of whole
    lines at a time (a Python loop over lines took 88 % of ``memcanal-trace
    mrc``); memory stays bounded by a few chunks besides the trace."""
    pages, writes = [], []
    number = 1
    for chunk in _parsed_chunks(path, page_size):
        if chunk.refused is not None:
            line, text = chunk.refused
            raise ValueError('%s:%d: %s: %s' % (
                path, number + line, _refusal(text), _shown(text)))
        pages.append(chunk.pages)
        writes.append(chunk.writes)
        number += chunk.lines
    if not pages:
        return Trace.of(np.empty(0, np.uint64))
    return Trace.of(np.concatenate(pages), np.concatenate(writes))


def _parsed_chunks(path, page_size):
    """The file's chunks parsed in order, TEXT_THREADS at once (numpy
    releases the GIL for the work); a few chunks in flight at most."""
    with open(path, 'rb') as f, futures.ThreadPoolExecutor(
            TEXT_THREADS) as pool:
        pending = collections.deque()
        while True:
            block = f.read(TEXT_CHUNK_BYTES)
            if not block:
                break
            pending.append(pool.submit(
                _TextChunk, _MARGIN + block + f.readline(), page_size))
            if len(pending) > TEXT_THREADS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class _TextChunk:
    """The references of a run of whole text lines.

    The lines and their fields are found on the bytes at once: token
    bytes are those neither whitespace nor in a comment, and the fields of
    a line are the tokens between two newlines. ``refused`` is the first
    malformed line: its index among the ``lines`` here and its bytes.
    """

    def __init__(self, block, page_size):
        if not block.endswith(b'\n'):
            block += b'\n'
        text = np.frombuffer(block, np.uint8)
        newlines = np.flatnonzero(text == _LF)
        self.lines = len(newlines)
        token = _tokens(text, newlines)
        # Counting starts up to each newline is cheaper than searching.
        started = np.cumsum(token[1:] > token[:-1], dtype=np.int32)
        before = started[newlines - 1]
        bounds = np.flatnonzero(token[1:] ^ token[:-1])
        bounds += 1
        starts, ends = bounds[0::2], bounds[1::2]
        fields = np.diff(before, prepend=0)
        lines = np.flatnonzero(fields)
        fields = fields[lines]
        first = before[lines] - fields
        bad = fields > 2
        self.writes = np.zeros(len(lines), bool)
        flagged = np.flatnonzero(fields == 2)
        if len(flagged):
            flag = first[flagged] + 1
            letter = text[starts[flag]] | _LOWER
            bad[flagged] |= ((ends[flag] - starts[flag] != 1)
                             | ((letter != _R) & (letter != _W)))
            self.writes[flagged] = letter == _W
        addresses, wrong = _addresses(block, text, starts[first], ends[first])
        bad |= wrong
        self.pages = addresses // page_size
        self.refused = None
        if bad.any():
            index = int(lines[np.argmax(bad)])
            start = newlines[index - 1] + 1 if index else len(_MARGIN)
            self.refused = index, block[start:newlines[index]]


def _addresses(block, text, starts, ends):
    """The numbers in text[starts:ends], and True where one is not an
    address.

    Each is read from its last bytes, taken as little-endian machine words
    (the _MARGIN spaces before the first line keep them inside the block),
    bytes before the number made '0' so that every row reads as a whole
    number.
    """
    addresses = np.zeros(len(ends), np.uint64)
    bad = np.zeros(len(ends), bool)
    if not len(ends):
        return addresses, bad
    starts = starts + (text[starts] == _PLUS)
    second = text[np.minimum(starts + 1, len(text) - 1)]
    hexadecimal = ((ends - starts > 2) & (text[starts] == _ZERO)
                   & ((second | _LOWER) == _X))
    starts += 2 * hexadecimal
    digits = ends - starts
    words = np.ndarray((len(text) - _WORD + 1,), '<u8', block, strides=(1,))
    for read, chosen in ((_hexadecimal, hexadecimal),
                         (_decimal, ~hexadecimal)):
        if chosen.all():
            rows = slice(None)
        elif chosen.any():
            rows = np.flatnonzero(chosen)
        else:
            continue
        addresses[rows], bad[rows] = read(words, ends[rows], digits[rows])
        if read is _decimal:
            # As Python's int(): 010 could be octal, so it is neither.
            bad[rows] |= ((digits[rows] > 1) & (text[starts[rows]] == _ZERO)
                          & (addresses[rows] != 0))
    return addresses, bad


def _tokens(text, newlines):
    """True for the bytes of fields: not ASCII whitespace (as bytes.split()
    has it) nor from a '#' to the end of its line."""
    token = ~((text == _SPACE) | (text - _TAB < 5) | (text == _HASH))
    hashes = np.flatnonzero(text == _HASH)
    if len(hashes):
        line = np.searchsorted(newlines, hashes)
        first = np.ones(len(hashes), bool)
        first[1:] = line[1:] != line[:-1]
        edge = np.zeros(len(text), np.int8)
        edge[hashes[first]] = 1
        edge[newlines[line[first]]] = -1
        token &= np.cumsum(edge, dtype=np.int8) == 0
    return token


def _right_aligned(words, ends, digits, most):
    """Each number's last ``most`` digits or fewer, right-aligned in rows
    of whole words with '0' before them, as an (N, 8 * words) byte array."""
    count = max(1, -(-min(int(digits.max()), most) // _WORD))
    rows = np.empty((len(ends), count), np.uint64)
    for k in range(count):
        after = count - 1 - k
        keep = _KEEP_LAST[np.clip(digits - _WORD * after, 0, _WORD)]
        rows[:, k] = ((words[ends - _WORD * (after + 1)] & keep)
                      | (_ASCII_ZEROS & ~keep))
    return rows.view(np.uint8)


def _any_per_row(matrix):
    """np.any(matrix, axis=1), a word at a time (axis=1 is slow on short
    rows)."""
    words = matrix.view(np.uint64)
    found = words[:, 0] != 0
    for k in range(1, words.shape[1]):
        found |= words[:, k] != 0
    return found


def _hexadecimal(words, ends, digits):
    chars = _right_aligned(words, ends, digits, _HEX_DIGITS)
    valid = (chars - _ZERO < 10) | ((chars | _LOWER) - _A < 6)
    bad = (digits > _HEX_DIGITS) | _any_per_row(~valid)
    nibbles = (chars & np.uint8(0xf)) + (chars >> np.uint8(6)) * np.uint8(9)
    octets = (nibbles[:, 0::2] << np.uint8(4)) | nibbles[:, 1::2]
    return (octets.view('>u%d' % octets.shape[1])[:, 0].astype(np.uint64),
            bad)


def _decimal(words, ends, digits):
    # Three whole words hold the 20 digits of 2**64 - 1 and a few more.
    values = _right_aligned(words, ends, digits, 3 * _WORD) - _ZERO
    bad = ((digits == 0) | (digits > _DECIMAL_DIGITS)
           | _any_per_row(values >= 10))
    # Digits in groups of 2, 4 then 8, each in the narrowest exact type.
    values = values[:, 0::2] * np.uint8(10) + values[:, 1::2]
    values = values[:, 0::2] * np.uint16(100) + values[:, 1::2]
    values = values[:, 0::2] * np.uint32(10 ** 4) + values[:, 1::2]
    number = values[:, 0].astype(np.uint64)
    for k in range(1, values.shape[1]):
        if k == 2:
            bad |= (number > _DECIMAL_HIGH) | ((number == _DECIMAL_HIGH) & (
                values[:, k] > _DECIMAL_LOW))
        number = number * np.uint64(10 ** 8) + values[:, k]
    return number, bad


def _refusal(line):
    """Why the text reader refused ``line``: the same rules, one line at a
    time."""
    fields = line.split(b'#', 1)[0].split()
    if len(fields) > 2:
        return 'more than two fields, expected "ADDRESS [R|W]"'
    if len(fields) == 2 and fields[1] not in (b'R', b'W', b'r', b'w'):
        return 'the flag is not R or W'
    address = fields[0]
    if address.startswith(b'-') and _ADDRESS.fullmatch(address[1:]):
        return 'negative address'
    if not _ADDRESS.fullmatch(address):
        return 'not an address (decimal, or hexadecimal after 0x)'
    number = address.lstrip(b'+')
    if number[1:2] in (b'x', b'X'):
        value = int(number[2:], 16)
    else:
        value = int(number)
        if value and number.startswith(b'0'):
            return ('leading 0 on a decimal address (octal? hexadecimal '
                    'needs 0x)')
    if value >> 64:
        return 'address beyond 64 bits'
    return 'more than %d hexadecimal or %d decimal digits' % (
        _HEX_DIGITS, _DECIMAL_DIGITS)


def _shown(line, most=80):
    text = line.decode('utf-8', 'backslashreplace').strip()
    return repr(text if len(text) <= most else text[:most] + '...')


def _write_text(trace, path, page_size):
    with open(path, 'w') as f:
        for page, is_write in zip(trace.pages.tolist(),
                                  trace.writes.tolist()):
            f.write('0x%x %s\n' % (page * page_size, 'W' if is_write else 'R'))


def _read_oracle_general(path, page_size):
    if os.path.getsize(path) % ORACLE_GENERAL_DTYPE.itemsize:
        raise ValueError('%s is not a whole number of %d-byte oracleGeneral '
                         'records' % (path, ORACLE_GENERAL_DTYPE.itemsize))
    records = np.memmap(path, dtype=ORACLE_GENERAL_DTYPE, mode='r')
    count = len(records)
    return Trace(records['obj_id'], np.zeros(count, bool),
                 records['clock_time'], np.zeros(count, np.uint16),
                 time_unit_ns=SECOND_NS)


def next_access(pages):
    """1-based position of the next reference to the same page (the
    0-based index plus one), NO_NEXT_ACCESS if none."""
    pages = np.asarray(pages)
    order = np.argsort(pages, kind='stable')
    following = np.full(len(pages), NO_NEXT_ACCESS, dtype=np.int64)
    same = pages[order[1:]] == pages[order[:-1]]
    following[order[:-1][same]] = order[1:][same] + 1
    return following


def _write_oracle_general(trace, path, page_size):
    records = np.empty(len(trace), ORACLE_GENERAL_DTYPE)
    records['clock_time'] = trace.times_ns() // SECOND_NS
    records['obj_id'] = trace.pages
    records['obj_size'] = page_size
    records['next_access_vtime'] = next_access(trace.pages)
    records.tofile(path)


_READERS = {'npy': _read_npy, 'text': _read_text,
            'oracleGeneral': _read_oracle_general}
_WRITERS = {'npy': _write_npy, 'text': _write_text,
            'oracleGeneral': _write_oracle_general}
