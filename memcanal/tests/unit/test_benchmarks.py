"""CI runs the benchmarks that check the papers' bars, at reduced size."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_fidelity_reproduces_fig8_and_table2_reduced():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', 'fidelity.py'),
         '--reduced'], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith('RRWW') for line in lines)
    assert any(line.startswith('512, paper') for line in lines)
    assert 'FAILED' not in result.stdout


def test_hcache_reproduces_fig11_fig10_and_table1_reduced():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', 'hcache.py'),
         '--reduced'], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for title in ('Fig. 11', 'Fig. 10', 'Table 1'):
        assert title in result.stdout
    assert 'worst LRU error 0.00 %' in result.stdout
    assert 'FAILED' not in result.stdout


def test_policies_reproduce_hcache_table2_and_utube_reduced():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', 'policies.py'),
         '--reduced'], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for title in ('Hcache Table 2, isolation constraint 5 %',
                  'Hcache Table 2, isolation constraint 25 %',
                  'U-tube Figs. 12-13', 'U-tube Table 1'):
        assert title in result.stdout
    for policy in ('static', 'balloon', 'hotplug'):
        assert '  %-8s density' % policy in result.stdout
    assert 'FAILED' not in result.stdout
