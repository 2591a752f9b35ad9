import numpy as np
import pytest

from memcanal.estimation import traces


@pytest.fixture
def trace():
    return traces.Trace.of(np.array([3, 7, 3, 9, 7], dtype=np.uint64),
                           writes=[False, True, True, False, False],
                           times=[0, 10, 20, 30, 40],
                           vcpus=[0, 1, 0, 1, 0])


def test_npy_round_trip_is_lossless(tmp_path, trace):
    path = tmp_path / 't.npy'
    traces.write(trace, str(path))
    back = traces.read(str(path))
    for column in ('pages', 'writes', 'times', 'vcpus'):
        assert getattr(back, column).tolist() == getattr(trace,
                                                         column).tolist()


def test_text_round_trip_keeps_pages_and_kinds(tmp_path, trace):
    path = tmp_path / 't.txt'
    traces.write(trace, str(path))
    assert path.read_text().splitlines()[:2] == ['0x3000 R', '0x7000 W']
    back = traces.read(str(path))
    assert back.pages.tolist() == trace.pages.tolist()
    assert back.writes.tolist() == trace.writes.tolist()
    assert back.times.tolist() == [0, 1, 2, 3, 4]


def test_text_reader_takes_decimal_comments_and_default_reads(tmp_path):
    path = tmp_path / 'mine.trace'
    path.write_text('# a trace\n8192\n\n0x2000 w  # a store\n12288 R\n')
    back = traces.read(str(path))
    assert back.pages.tolist() == [2, 2, 3]
    assert back.writes.tolist() == [False, True, False]


@pytest.mark.parametrize('line', ['zz', '0x10 X', '0x10 R extra', '-4096'])
def test_text_reader_names_the_bad_line(tmp_path, line):
    path = tmp_path / 'bad.txt'
    path.write_text('0x1000\n%s\n' % line)
    with pytest.raises(ValueError, match='bad.txt:2'):
        traces.read(str(path))


def test_oracle_general_layout_matches_libcachesim(tmp_path, trace):
    path = tmp_path / 't.oracleGeneral'
    traces.write(traces.Trace.of(trace.pages, times=[0, 1, 2, 3, 4],
                                 time_unit_ns=10 ** 9), str(path))
    raw = np.fromfile(str(path), dtype=traces.ORACLE_GENERAL_DTYPE)
    assert traces.ORACLE_GENERAL_DTYPE.itemsize == 24
    assert raw['obj_id'].tolist() == [3, 7, 3, 9, 7]
    assert raw['obj_size'].tolist() == [4096] * 5
    assert raw['clock_time'].tolist() == [0, 1, 2, 3, 4]
    # 1-based position of the next request to the object, -1 for none.
    assert raw['next_access_vtime'].tolist() == [3, 5, -1, -1, -1]
    back = traces.read(str(path))
    assert back.pages.tolist() == [3, 7, 3, 9, 7]
    assert back.times_ns().tolist() == [0, 10 ** 9, 2 * 10 ** 9,
                                        3 * 10 ** 9, 4 * 10 ** 9]
    assert not back.writes.any()


def test_truncated_oracle_general_is_refused(tmp_path):
    path = tmp_path / 'cut.bin'
    path.write_bytes(b'\0' * 30)
    with pytest.raises(ValueError, match='24-byte'):
        traces.read(str(path))


def test_format_by_name_or_extension():
    assert traces.format_of('a.NPY') == 'npy'
    assert traces.format_of('whatever', 'text') == 'text'
    with pytest.raises(ValueError, match='extension'):
        traces.format_of('a.csv')
    with pytest.raises(ValueError, match='unknown trace format'):
        traces.format_of('a.npy', 'csv')


def test_wrong_npy_dtype_is_refused(tmp_path):
    path = tmp_path / 'plain.npy'
    np.save(str(path), np.arange(5))
    with pytest.raises(ValueError, match='not a memcanal trace'):
        traces.read(str(path))


def test_columns_must_agree_and_traces_slice(trace):
    with pytest.raises(ValueError):
        traces.Trace(trace.pages, trace.writes[:2], trace.times, trace.vcpus)
    assert trace.slice(1, 3).pages.tolist() == [7, 3]


def python_reader(path, page_size=4096):
    """The text reader before the numpy one, the reference for its results."""
    pages, writes = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split('#', 1)[0].split()
            if not fields:
                continue
            if len(fields) > 2 or (len(fields) == 2 and fields[1].upper()
                                   not in ('R', 'W')):
                raise ValueError(number)
            try:
                address = int(fields[0], 0)
            except ValueError:
                raise ValueError(number)
            if address < 0:
                raise ValueError(number)
            pages.append(address // page_size)
            writes.append(len(fields) == 2 and fields[1].upper() == 'W')
    return pages, writes


def read_text(tmp_path, body, name='t.txt', **kwargs):
    path = tmp_path / name
    path.write_bytes(body.encode() if isinstance(body, str) else body)
    return traces.read(str(path), **kwargs)


@pytest.fixture(params=[1, 5, 64, traces.TEXT_CHUNK_BYTES],
                ids=lambda size: 'chunk%d' % size)
def chunk_bytes(request, monkeypatch):
    """Every text test at chunk sizes that cut lines and fields anywhere."""
    monkeypatch.setattr(traces, 'TEXT_CHUNK_BYTES', request.param)
    return request.param


@pytest.mark.parametrize('body, pages, writes', [
    ('4096\n', [1], [False]),
    ('0x1000\n0X2000\n0xAbC000\n', [1, 2, 0xabc], [False] * 3),
    ('0x1000 R\n0x2000 W\n0x3000 r\n0x4000 w\n', [1, 2, 3, 4],
     [False, True, False, True]),
    ('+8192\n+0x3000 W\n', [2, 3], [False, True]),
    ('0\n00\n0x0\n0x000000000000F000\n', [0, 0, 0, 15], [False] * 4),
    ('\n   \n\t\n# only a comment\n  # indented\n4096\n\n', [1], [False]),
    ('4096#no space\n0x2000 W# after the flag\n8192 # W\n', [1, 2, 2],
     [False, True, False]),
    ('\t 4096 \t W \t\n  8192\x0b\x0cR\n', [1, 2], [True, False]),
    ('4096 W\r\n8192\r\n# crlf\r\n', [1, 2], [True, False]),
    ('4096\n8192 W', [1, 2], [False, True]),
    ('18446744073709551615 W\n0xffffffffffffffff\n',
     [(2 ** 64 - 1) // 4096] * 2, [True, False]),
    ('', [], []),
    ('# nothing but comments\n\n', [], []),
])
def test_text_syntax(tmp_path, chunk_bytes, body, pages, writes):
    trace = read_text(tmp_path, body)
    assert trace.pages.dtype == np.uint64
    assert trace.pages.tolist() == pages
    assert trace.writes.tolist() == writes
    assert trace.times.tolist() == list(range(len(pages)))


def test_text_addresses_are_split_by_the_page_size(tmp_path):
    trace = read_text(tmp_path, '0x1fffff W\n0x200000\n12345678901234567890\n',
                      page_size=2 ** 21)
    assert trace.pages.tolist() == [0, 1, 12345678901234567890 // 2 ** 21]


@pytest.mark.parametrize('line, reason', [
    ('zz', 'not an address'),
    ('0x', 'not an address'),
    ('0xg1 R', 'not an address'),
    ('12a', 'not an address'),
    ('+', 'not an address'),
    ('++5', 'not an address'),
    ('1.5', 'not an address'),
    ('W', 'not an address'),
    ('4096\x00', 'not an address'),
    # Python's int() took these, the format never named them.
    ('0o17', 'not an address'),
    ('0b101', 'not an address'),
    ('1_000', 'not an address'),
    ('\uff14\uff10\uff19\uff16', 'not an address'),
    ('0010', 'leading 0 on a decimal address'),
    ('-4096', 'negative address'),
    ('-0x1000 W', 'negative address'),
    ('0x10 X', 'the flag is not R or W'),
    ('0x10 RW', 'the flag is not R or W'),
    ('0x10 \xe9', 'the flag is not R or W'),
    ('0x10 R extra', 'more than two fields'),
    ('1 2 3 # c', 'more than two fields'),
    ('18446744073709551616', 'address beyond 64 bits'),
    ('99999999999999999999 W', 'address beyond 64 bits'),
    ('0x10000000000000000', 'address beyond 64 bits'),
    ('0x00000000000000001', 'more than 16 hexadecimal'),
    ('000000000000000000000', 'more than 16 hexadecimal or 20 decimal'),
])
def test_text_reader_names_the_line_and_why(tmp_path, chunk_bytes, line,
                                            reason):
    with pytest.raises(ValueError) as refused:
        read_text(tmp_path, '0x1000\n%s\n4096\n' % line, name='bad.txt')
    message = str(refused.value)
    assert message.startswith(str(tmp_path / 'bad.txt') + ':2: ' + reason)
    assert message.endswith(repr(line.strip()))


def test_text_line_numbers_count_comments_and_blank_lines(tmp_path,
                                                          chunk_bytes):
    body = '# header\n\n   \n0x1000 R # c\n\t# x\r\n4096\nbad one\n0x10 Q\n'
    with pytest.raises(ValueError, match=r'bad\.txt:7: .*'
                                         r"'bad one'$"):
        read_text(tmp_path, body, name='bad.txt')


def test_text_refusal_shows_a_long_line_cut(tmp_path):
    with pytest.raises(ValueError) as refused:
        read_text(tmp_path, '4096 ' + 'x' * 500, name='bad.txt')
    assert str(refused.value).endswith("'4096 %s...'" % ('x' * 75))


def random_text(rng, lines):
    """A trace in every syntax both readers take."""
    addresses = rng.integers(0, 2 ** 64, lines, dtype=np.uint64)
    addresses[rng.random(lines) < 0.5] >>= np.uint64(40)
    out = []
    for address, kind, space in zip(addresses.tolist(),
                                    rng.integers(0, 12, lines).tolist(),
                                    rng.integers(0, 4, lines).tolist()):
        blank = (' ', '\t', '  \t', '\x0c')[space]
        text = ('%d' % address, '0x%x' % address, '0X%X' % address,
                '+%d' % address)[kind % 4]
        if kind >= 4:
            text += blank + 'RWrw'[kind % 4]
        if kind >= 9:
            text = blank + text + blank + '# ' + 'RW'[kind % 2]
        elif kind == 8:
            text = ('', '# comment', blank)[space % 3]
        out.append(text)
    return '\n'.join(out) + '\n'


@pytest.mark.parametrize('seed', [0, 1])
def test_text_reader_equals_the_python_reader(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    path = tmp_path / 'random.txt'
    path.write_text(random_text(rng, 30000))
    pages, writes = python_reader(str(path))
    for chunk_bytes in (97, 4096, traces.TEXT_CHUNK_BYTES):
        monkeypatch.setattr(traces, 'TEXT_CHUNK_BYTES', chunk_bytes)
        trace = traces.read(str(path))
        assert trace.pages.tolist() == pages
        assert trace.writes.tolist() == writes


@pytest.mark.parametrize('bad', ['0x12 Z', 'nope', '-5', '7 W 8'])
def test_text_reader_refuses_where_the_python_reader_did(tmp_path,
                                                         monkeypatch, bad):
    lines = random_text(np.random.default_rng(2), 5000).splitlines()
    lines.insert(3210, bad)
    path = tmp_path / 'random.txt'
    path.write_text('\n'.join(lines))
    with pytest.raises(ValueError) as expected:
        python_reader(str(path))
    monkeypatch.setattr(traces, 'TEXT_CHUNK_BYTES', 333)
    with pytest.raises(ValueError, match=':%d: ' % expected.value.args[0]):
        traces.read(str(path))
