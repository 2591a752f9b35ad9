"""CI runs the benchmarks that check the papers' bars, at reduced size."""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

from memcanal.estimation import guest
from memcanal.estimation import hcache
from memcanal.policy import demand
from memcanal.policy import migration

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


# benchmarks/watcher_replay.py and watcher_compare.py's pure parts (Watcher
# itself lives in .venv-watcher, not here).

MB = 2 ** 20
UNIT = 4 * MB


def _bench(monkeypatch, name):
    """A module of benchmarks/ (a directory of scripts, not a package)."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, 'benchmarks'))
    return importlib.import_module(name)


def _vm(replay, name, kind, pages, guest_pages, seconds=4.0, seed=0):
    load = replay.workload(kind, pages, np.random.default_rng(seed), UNIT)
    return replay.VM.running(name, replay.KERNEL_BYTES + guest_pages * UNIT,
                             kind, load, seconds)


def _guest_misses(blocks, writes, pages, counted):
    """Misses of memcanal.estimation.guest's page cache of ``pages``
    pages over ``blocks``, among the references ``counted``."""
    cache = guest.GuestPageCache(pages, hcache.DirectIo(hcache.Storage()))
    missed = 0
    for block, write, count in zip(blocks.tolist(), writes.tolist(),
                                   counted.tolist()):
        missed += count and not cache.access(block, write)
        if not count:
            cache.access(block, write)
    return missed


@pytest.mark.parametrize('kind', ['loop', 'class', 'zipf'])
def test_replay_guest_misses_are_the_guest_page_caches(monkeypatch, kind):
    replay = _bench(monkeypatch, 'watcher_replay')
    vm = _vm(replay, 'a', kind, pages=60, guest_pages=45)
    window = (10 ** 9, 3 * 10 ** 9)
    counted = vm.within(window)
    writes = np.zeros(vm.pages.size, bool)
    assert _guest_misses(vm.pages, writes, 45, counted) == \
        np.count_nonzero(~vm.guest_hits(UNIT)[counted])
    # Alone on a host with room for it, it misses as its guest does.
    misses, references = replay.host_misses(
        [vm], vm.flavor_bytes + 10 * UNIT, window, UNIT)
    assert references[0] == np.count_nonzero(counted)
    assert misses[0] == np.count_nonzero(~vm.guest_hits(UNIT)[counted])
    assert misses[0] > 0


def test_replay_host_is_one_lru_over_its_vms_pages(monkeypatch):
    replay = _bench(monkeypatch, 'watcher_replay')
    vms = [_vm(replay, 'a', 'zipf', 40, 64, seed=1),
           _vm(replay, 'b', 'loop', 25, 64, seed=2)]
    window = (10 ** 9, 4 * 10 ** 9)
    host_pages = 50
    capacity = 2 * replay.KERNEL_BYTES + host_pages * UNIT
    misses, _ = replay.host_misses(vms, capacity, window, UNIT)
    # The same host as one page cache over both VMs' references, merged
    # in time (the loop's, made later, after the file server's on a tie).
    times = np.concatenate([np.arange(vm.pages.size) * vm.reference_ns
                            for vm in vms])
    owner = np.repeat([0, 1], [vm.pages.size for vm in vms])
    blocks = np.concatenate([vm.pages for vm in vms]) + owner * 1000
    order = np.argsort(times, kind='stable')
    counted = (times >= window[0]) & (times < window[1])
    for k in range(2):
        mine = counted & (owner == k)
        assert misses[k] == _guest_misses(
            blocks[order], np.zeros(blocks.size, bool), host_pages,
            mine[order])
    # Together they do not fit 50 pages; each alone does.
    alone = [replay.host_misses([vm], capacity, window, UNIT)[0][0]
             for vm in vms]
    assert misses.sum() > sum(alone)


def _host(migration, name, capacity_gb, flavors_gb):
    return migration.Host(name, capacity_gb * 2 ** 30, tuple(
        migration.Instance('%s-vm%d' % (name, i), gb * 2 ** 30, gb * 2 ** 29,
                           gb * 2 ** 30) for i, gb in enumerate(flavors_gb)))


def test_replay_placement_refuses_moves_past_the_allocation_ratio(
        monkeypatch):
    replay = _bench(monkeypatch, 'watcher_replay')
    hosts = [_host(migration, 'a', 10, [8, 4]), _host(migration, 'b', 10,
                                                      [8])]
    moves = [('a-vm0', 'a', 'b'), ('a-vm1', 'a', 'b'), ('b-vm0', 'b', 'a')]
    # At 1.5 a host takes 15 GB of flavors: b cannot take 8 GB more, then
    # can take 4; a, still holding the 8 GB VM that was refused, cannot
    # take b's.
    admitted, refused = replay.placement(hosts, moves, 1.5)
    assert refused == [moves[0], moves[2]]
    assert admitted == [moves[1]]
    assert replay.placement(hosts, moves, 2.0) == (moves, [])


def test_replay_placed_applies_moves_in_order(monkeypatch):
    replay = _bench(monkeypatch, 'watcher_replay')
    hosts = [_host(migration, 'a', 10, [2, 2]), _host(migration, 'b', 10,
                                                      [2])]
    where = replay.placed(hosts, [('a-vm0', 'a', 'b'), ('a-vm0', 'b', 'a'),
                                  ('b-vm0', 'b', 'a')])
    assert sorted(where['a']) == ['a-vm0', 'a-vm1', 'b-vm0']
    assert where['b'] == []
    with pytest.raises(ValueError):
        replay.placed(hosts, [('a-vm0', 'b', 'a')])


def test_replay_grades_a_plan_by_what_the_vms_do(monkeypatch):
    replay = _bench(monkeypatch, 'watcher_replay')
    cloud = replay.build(3, 4, hot=0.34, seed=3, warm=1.0, window=1.0,
                         points=32)
    assert len(cloud.vms) == 12
    for host in cloud.hosts:
        for vm in host.instances:
            # The planners get what the VM did alone in the planning
            # window.
            running = cloud.vms[vm.name]
            assert vm.demand_bytes == demand.vm_demand(
                vm.flavor_bytes, running.working_set_bytes(cloud.planning,
                                                           UNIT))
            assert vm.curve.miss_ratios[0] == 1.0
            assert np.all(np.diff(vm.curve.miss_ratios) <= 0)
    before = replay.replay(cloud, [])
    # Everything on one host: it is short of memory and its VMs miss
    # more than alone.
    crowded = [(vm.name, host.name, 'h0000') for host in cloud.hosts[1:]
               for vm in host.instances]
    after = replay.replay(cloud, crowded)
    assert after.hosts_short == ('h0000',)
    assert after.short_bytes > 0
    assert len(after.past_bound) > len(before.past_bound)
    assert after.miss_ratio > before.miss_ratio
    # A VM alone on a host with room for it is never past its bound.
    spread = [(vm.name, 'h0000', 'h0001') for vm in
              cloud.hosts[0].instances[1:]]
    alone = replay.replay(cloud, spread)
    assert cloud.hosts[0].instances[0].name not in alone.past_bound


def test_watcher_compare_first_moves_of_audits(monkeypatch):
    compare = _bench(monkeypatch, 'watcher_compare')
    audits = [([1], 0.5), ([2, 3], 1.0), ([4], 2.0)]
    assert compare.first(audits, 1) == ([1], 0.5)
    assert compare.first(audits, 2) == ([1, 2], 1.5)
    assert compare.first(audits, 3) == ([1, 2, 3], 1.5)
    assert compare.first(audits, 10) == ([1, 2, 3, 4], 3.5)
    assert compare.first([], 5) == ([], 0.0)


def test_watcher_compare_table_gives_each_seed_in_a_cell(monkeypatch):
    compare = _bench(monkeypatch, 'watcher_compare')
    row = (3, 12.0, 0.0125, 0, 0, 0, 1, 0, 0, 8, 0, 0.781)
    lines = compare.table([('memcanal', [row, row])]).splitlines()
    assert len(lines) == 3
    assert lines[0].count('|') == len(compare.COLUMNS) + 2
    assert lines[2].startswith('| memcanal | 3 / 3 | 12 / 12 | 0.013 / ')
    assert lines[2].endswith('| 0.78 / 0.78 |')
