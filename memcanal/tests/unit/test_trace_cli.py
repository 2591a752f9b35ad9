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


def test_unreadable_trace_exits_1(capsys, tmp_path):
    assert trace_cli.main(['mrc', str(tmp_path / 'missing.npy')]) == 1
    assert 'memcanal-trace:' in capsys.readouterr().err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        trace_cli.main(['wss', 'x.npy'])
    assert exit_info.value.code == 2


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), 'memcanal-trace')
    result = subprocess.run([script, '--help'], capture_output=True,
                            text=True, check=True)
    assert 'generate' in result.stdout
