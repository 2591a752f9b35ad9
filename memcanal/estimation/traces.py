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
- ``text``: one reference per line, ``ADDRESS [R|W]``, the address a byte
  address in decimal or ``0x`` hexadecimal; ``#`` starts a comment. Reads
  are the default; the line number is the time.
- ``oracleGeneral``: libCacheSim's binary format, 24-byte little-endian
  records ``<u4 clock_time (s), <u8 obj_id, <u4 obj_size, <i8
  next_access_vtime`` (the 1-based position of the next request to the
  same object, -1 if none, as libCacheSim's traceConv writes it). Objects
  are pages: obj_id is the page, obj_size the page
  size. It has no read/write flag, so reads are assumed.
"""

import dataclasses
import os

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
    pages, writes = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split('#', 1)[0].split()
            if not fields:
                continue
            if len(fields) > 2 or (len(fields) == 2 and fields[1].upper()
                                   not in ('R', 'W')):
                raise ValueError('%s:%d: expected "ADDRESS [R|W]", got %r' % (
                    path, number, line.strip()))
            try:
                address = int(fields[0], 0)
            except ValueError:
                raise ValueError('%s:%d: %r is not an address' % (
                    path, number, fields[0]))
            if address < 0:
                raise ValueError('%s:%d: negative address' % (path, number))
            pages.append(address // page_size)
            writes.append(len(fields) == 2 and fields[1].upper() == 'W')
    return Trace.of(np.array(pages, dtype=np.uint64), writes)


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
