"""memcanal-trace, through its main() as the console script calls it."""

import json
import os
import subprocess
import sys

import pytest

from memcanal.cmd import trace as trace_cli


def run(capsys, *argv):
    assert trace_cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def rrww(tmp_path, capsys):
    path = str(tmp_path / 'rrww.npy')
    out = run(capsys, 'generate', 'prl-synthetic', path, '--order', 'RRWW',
              '--size-mb', '4', '--pass-seconds', '1', '--phase-seconds',
              '45', '--duration', '200')
    assert out['distinct_pages'] == 1024
    assert out['working_set_bytes'] == 4 * 2 ** 20
    return path


def test_wss_by_estimator(capsys, rrww):
    prl = run(capsys, 'wss', rrww, '--estimator', 'prl', '--tau', '10')
    assert prl['wss_bytes'] == 4 * 2 ** 20
    assert prl['converged_at_s'] is not None
    # RRWW reads first: PML finds nothing dirty in the first interval.
    pml = run(capsys, 'wss', rrww, '--estimator', 'pml')
    assert pml['wss_bytes'] == 0
    esx = run(capsys, 'wss', rrww, '--estimator', 'esx', '--memory-mb', '8')
    assert 0 < esx['wss_bytes'] <= 8 * 2 ** 20


def test_logsim_modes(capsys, rrww):
    prl = run(capsys, 'logsim', rrww, '--mode', 'prl')
    pml = run(capsys, 'logsim', rrww, '--mode', 'pml')
    assert prl['events'] > pml['events'] > 0
    assert prl['delivered_distinct_pages'] == 1024
    assert pml['vm_cpu_ns'] > 0 and prl['vm_cpu_ns'] == 0
    assert set(prl) >= {'logged', 'missed', 'missed_per_event'}


@pytest.mark.parametrize('method', ['exact', 'shards', 'shards_fixed_size',
                                    'aet'])
def test_mrc_methods_on_an_oracle_general_trace(capsys, tmp_path, method):
    path = str(tmp_path / 'z.oracleGeneral')
    run(capsys, 'generate', 'zipf', path, '--references', '20000',
        '--size-mb', '8')
    out = run(capsys, 'mrc', path, '--method', method, '--rate', '0.5',
              '--points', '16')
    assert out['references'] == 20000
    sizes = [size for size, _ in out['points']]
    assert len(sizes) <= 16 and sizes == sorted(sizes)
    assert all(0 <= ratio <= 1 for _, ratio in out['points'])


@pytest.fixture
def file_server(tmp_path, capsys):
    path = str(tmp_path / 'zipf.oracleGeneral')
    run(capsys, 'generate', 'file-server', path, '--pattern', 'zipf',
        '--files', '24', '--file-mb', '1', '--write-ratio', '0.1',
        '--references', '60000')
    return path


def test_hcache_prediction_matches_simulate_at_each_size(capsys,
                                                         file_server):
    predicted = run(capsys, 'mrc', file_server, '--method', 'hcache',
                    '--direct-mb', '4', '--cache-mb', '12', '--warmup',
                    '20000', '--points', '10000')
    assert predicted['method'] == 'hcache'
    assert predicted['references'] == 40000
    assert predicted['corrupted_reads'] == 0
    points = predicted['points']
    assert points[0][0] == 4 * 2 ** 20
    for size_mb in (4, 8, 16, 24):
        alone = run(capsys, 'simulate', file_server, '--memory-mb',
                    str(size_mb), '--warmup', '20000')
        expected = [ratio for size, ratio in points
                    if size <= size_mb * 2 ** 20][-1]
        assert alone['miss_ratio'] == pytest.approx(expected, abs=0.03)
        assert alone['misses'] == alone['device_reads']


def test_hcache_without_its_sizes_is_a_usage_error(file_server):
    with pytest.raises(SystemExit) as exit_info:
        trace_cli.main(['mrc', file_server, '--method', 'hcache',
                        '--direct-mb', '4'])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        trace_cli.main(['simulate', file_server, '--memory-mb', '-1'])
    assert exit_info.value.code == 2


def test_unreadable_trace_exits_1(capsys, tmp_path):
    assert trace_cli.main(['mrc', str(tmp_path / 'missing.npy')]) == 1
    assert 'memcanal-trace:' in capsys.readouterr().err


def test_mrc_reads_a_text_trace(capsys, tmp_path):
    path = tmp_path / 'mine.trace'
    path.write_text('# page 1 twice, then 2\n0x1000 R\n4096 w # again\n'
                    '\n0x2000\n')
    out = run(capsys, 'mrc', str(path), '--points', '4')
    assert out['references'] == 3


def test_malformed_text_trace_exits_1_naming_the_line(capsys, tmp_path):
    path = tmp_path / 'bad.txt'
    path.write_text('# header\n0x1000 R\n\n0x2000 X\n')
    assert trace_cli.main(['mrc', str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ''
    assert captured.err == (
        "memcanal-trace: %s:4: the flag is not R or W: '0x2000 X'\n" % path)


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        trace_cli.main(['wss', 'x.npy'])
    assert exit_info.value.code == 2


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), 'memcanal-trace')
    result = subprocess.run([script, '--help'], capture_output=True,
                            text=True, check=True)
    assert 'generate' in result.stdout
