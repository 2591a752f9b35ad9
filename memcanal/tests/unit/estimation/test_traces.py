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
