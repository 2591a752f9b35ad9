"""CI runs the benchmarks that check the papers' bars, at reduced size."""

import gzip
import json
import importlib
import os
import subprocess
import sys
import threading
from unittest import mock

import numpy as np
import pytest

from memcanal.estimation import guest
from memcanal.estimation import hcache
from memcanal.estimation import mrc
from memcanal.estimation import traces
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
def test_replay_guest_misses_are_the_guest_page_caches(kind):
    replay = benchmark('watcher_replay')
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


def test_replay_host_is_one_lru_over_its_vms_pages():
    replay = benchmark('watcher_replay')
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


def _host(name, capacity_gb, flavors_gb):
    return migration.Host(name, capacity_gb * 2 ** 30, tuple(
        migration.Instance('%s-vm%d' % (name, i), gb * 2 ** 30, gb * 2 ** 29,
                           gb * 2 ** 30) for i, gb in enumerate(flavors_gb)))


def test_replay_placement_refuses_moves_past_the_allocation_ratio():
    replay = benchmark('watcher_replay')
    hosts = [_host('a', 10, [8, 4]), _host('b', 10, [8])]
    moves = [('a-vm0', 'a', 'b'), ('a-vm1', 'a', 'b'), ('b-vm0', 'b', 'a')]
    # At 1.5 a host takes 15 GB of flavors: b cannot take 8 GB more, then
    # can take 4; a, still holding the 8 GB VM that was refused, cannot
    # take b's.
    admitted, refused = replay.placement(hosts, moves, 1.5)
    assert refused == [moves[0], moves[2]]
    assert admitted == [moves[1]]
    assert replay.placement(hosts, moves, 2.0) == (moves, [])


def test_replay_placed_applies_moves_in_order():
    replay = benchmark('watcher_replay')
    hosts = [_host('a', 10, [2, 2]), _host('b', 10, [2])]
    where = replay.placed(hosts, [('a-vm0', 'a', 'b'), ('a-vm0', 'b', 'a'),
                                  ('b-vm0', 'b', 'a')])
    assert sorted(where['a']) == ['a-vm0', 'a-vm1', 'b-vm0']
    assert where['b'] == []
    with pytest.raises(ValueError):
        replay.placed(hosts, [('a-vm0', 'b', 'a')])


def test_replay_grades_a_plan_by_what_the_vms_do():
    replay = benchmark('watcher_replay')
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
                                                           cloud.unit))
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


def test_watcher_compare_first_moves_of_audits():
    compare = benchmark('watcher_compare')
    audits = [([1], 0.5), ([2, 3], 1.0), ([4], 2.0)]
    assert compare.first(audits, 1) == ([1], 0.5)
    assert compare.first(audits, 2) == ([1, 2], 1.5)
    assert compare.first(audits, 3) == ([1, 2, 3], 1.5)
    assert compare.first(audits, 10) == ([1, 2, 3, 4], 3.5)
    assert compare.first([], 5) == ([], 0.0)


def test_watcher_compare_table_gives_each_seed_in_a_cell():
    compare = benchmark('watcher_compare')
    row = (3, 12.0, 0.0125, 0, 0, 0, 1, 0, 0, 8, 0, 0.781)
    lines = compare.table([('memcanal', [row, row])]).splitlines()
    assert len(lines) == 3
    assert lines[0].count('|') == len(compare.COLUMNS) + 2
    assert lines[2].startswith('| memcanal | 3 / 3 | 12 / 12 | 0.013 / ')
    assert lines[2].endswith('| 0.78 / 0.78 |')


def benchmark(name):
    """A benchmark's module, for its pure helpers (the guest benchmarks
    themselves need root and the test guest)."""
    directory = os.path.join(ROOT, 'benchmarks')
    if directory not in sys.path:
        sys.path.insert(0, directory)
    return importlib.import_module(name)


def test_sampling_accuracy_arguments():
    accuracy = benchmark('sampling_accuracy')
    args = accuracy.parse_args(['--guest-command', 'wsswork 64 RWRW 30',
                                '--salt', '0x10', '--curve-intervals', '6'])
    assert (args.rate, args.interval, args.salt, args.settle) == (
        0.01, 1.0, 16, 6)
    assert accuracy.parse_args(['--guest-command', 'x', '--settle', '0',
                                '--rate', '1']).settle == 0
    for wrong in (['--rate', '0'], ['--rate', '1.5'], ['--interval', '0'],
                  ['--tlb-entries', '0']):
        with pytest.raises(SystemExit):
            accuracy.parse_args(['--guest-command', 'x'] + wrong)
    with pytest.raises(SystemExit):
        accuracy.parse_args([])


def test_sampled_guest_pager_ends_intervals_on_tick_only():
    options = benchmark('sampled_guest').pager_options(0.1, 7, 3)
    assert options == ['--sample-rate', '0.1', '--sample-salt', '7',
                       '--sample-interval-ms', '0', '--full-pass-every', '3']


def test_sampled_guest_initrd_runs_the_command(tmp_path):
    guest = benchmark('sampled_guest')
    base = gzip.compress(b'the test guest')
    (tmp_path / 'initramfs.gz').write_bytes(base)
    path = guest.run_initrd({'initramfs.gz': str(tmp_path / 'initramfs.gz')},
                            'sort "/tmp/a b" | md5sum',
                            str(tmp_path / 'out.gz'))
    data = open(path, 'rb').read()
    assert data.startswith(base)
    archive = gzip.decompress(data[len(base):])
    assert b'sampling-command\0' in archive
    assert b'sort "/tmp/a b" | md5sum\n' in archive
    assert guest.START.encode() in archive
    assert b'rdinit' not in archive


def test_lru_stack_is_mrc_exact_interval_by_interval():
    accuracy = benchmark('sampling_accuracy')
    rng = np.random.default_rng(1)
    stream = rng.zipf(1.3, 6000) % 400
    lru = accuracy.LruStack(400, intervals=5)
    chunks = np.array_split(stream, 5)
    distinct = [lru.add(chunk) for chunk in chunks]
    sizes = np.arange(1, 401)
    whole = mrc.exact(stream)
    assert np.array_equal(lru.curve().at(sizes), whole.at(sizes))
    assert lru.curve().references == stream.size
    assert [d.tolist() for d in distinct] == [
        np.unique(chunk).tolist() for chunk in chunks]
    # First touches: each chunk's first reference to each page, with its
    # distance in the whole stream.
    distances = mrc.stack_distances(stream)
    starts = np.cumsum([0] + [chunk.size for chunk in chunks])
    firsts = np.concatenate([
        start + np.unique(chunk, return_index=True)[1]
        for start, chunk in zip(starts, chunks)])
    histogram = np.bincount(distances[firsts], minlength=401)
    expected = 1 - np.cumsum(histogram[1:]) / firsts.size
    assert np.allclose(lru.curve(first_touches=True).at(sizes), expected)


def test_lru_stack_counts_the_last_intervals_with_all_history():
    accuracy = benchmark('sampling_accuracy')
    lru = accuracy.LruStack(10, intervals=1)
    assert lru.curve() is None
    lru.add([0, 1, 2])
    lru.add([3, 0])             # 0 comes back at distance 4
    curve = lru.curve()
    assert curve.references == 2
    assert curve.at([3, 4]).tolist() == [1.0, 0.5]


def interval(touched, seconds=1.0):
    driver = importlib.import_module('memcanal.agent.driver')
    touched = np.asarray(touched, np.int64)
    return driver.AccessInterval(touched=touched, written=touched[:0],
                                 full=False, seconds=seconds)


def test_sampling_accuracy_comparison_of_a_perfect_sampler():
    accuracy = benchmark('sampling_accuracy')
    comparison = accuracy.Comparison(4096, 1.0, window=2, curve_intervals=3,
                                     max_reuse=2)
    for step in range(6):
        pages = np.arange(step * 100, step * 100 + 1000) % 4096
        comparison.add(interval(pages), np.repeat(pages, 3), step + 1.0)
    rows = comparison.rows
    assert [r.exact for r in rows] == [1000] * 6
    assert all(r.sampled == r.exact and r.extra == r.missed == 0
               for r in rows)
    assert [r.exact_window for r in rows] == [1000] + [1100] * 5
    assert all(r.curve_mae == 0 for r in rows)
    result = accuracy.summary(rows, 1.0, settle=3)
    assert result['wss_error'] == result['window_wss_error'] == 0
    assert result['wss_error_median'] == 0
    assert result['curve_mae'] == 0 and result['curve_intervals_counted'] == 3
    assert result['intervals'] == 6 and result['exact_wss_pages'] == 1000


def test_sampling_accuracy_comparison_tells_sampler_from_hash():
    accuracy = benchmark('sampling_accuracy')
    rate = 0.1
    comparison = accuracy.Comparison(8192, rate, window=1)
    truth = np.arange(2000, 6000)
    sample = comparison.sampled.sample(truth)
    # The sampler saw one sampled page memtrace did not, and missed two.
    seen = np.concatenate([sample[2:], comparison.sampled.sample(
        np.arange(8000, 8192))[:1]])
    comparison.add(interval(seen), truth)
    row = comparison.rows[0]
    assert (row.in_sample, row.seen, row.extra, row.missed) == (
        sample.size, sample.size - 1, 1, 2)
    assert row.sampled == pytest.approx((sample.size - 1) / rate)
    result = accuracy.summary(comparison.rows, rate, settle=0)
    assert result['hash_wss_error'] == pytest.approx(
        abs(sample.size / rate - 4000) / 4000)
    assert result['wss_error'] == pytest.approx(
        abs(row.sampled - 4000) / 4000)
    lines = accuracy.interval_table(comparison.rows, rate)
    assert len(lines) == 2 and lines[1].split()[:4] == ['0', '0.0', '0.0',
                                                       '4000']
    assert len(accuracy.curve_table(comparison.curves())) >= 2


def test_sampling_accuracy_summary_skips_empty_intervals():
    accuracy = benchmark('sampling_accuracy')
    row = dict(index=0, end_s=1, seconds=1, zap_ms=1, references=0,
               exact_window=10, sampled_window=10, in_sample=1, seen=1,
               extra=0, missed=0, curve_mae=None, lru_mae=None,
               lru_first_mae=None)
    rows = [accuracy.Row(exact=0, sampled=0, **row),
            accuracy.Row(exact=100, sampled=110, **row)]
    result = accuracy.summary(rows, 0.01, settle=5)
    assert result['wss_error'] == pytest.approx(0.1)
    assert result['wss_error_median'] == pytest.approx(0.1)
    assert result['wss_error_weighted'] == pytest.approx(0.1)
    assert result['curve_mae'] is None
    assert result['curve_intervals_counted'] == 2


def test_sampling_cost_arguments():
    cost = benchmark('sampling_cost')
    args = cost.parse_args([])
    assert (args.rounds, args.phase_seconds, args.short_interval,
            args.full_pass_every, args.order) == (2, 10, 1.0, 1, 'RWRW')
    for wrong in (['--rounds', '0'], ['--short-interval', '0'],
                  ['--order', 'RRRR'], ['--full-pass-every', '0']):
        with pytest.raises(SystemExit):
            cost.parse_args(wrong)


def test_sampling_cost_runs_a_corpus_workload_at_the_adaptive_rate():
    cost = benchmark('sampling_cost')
    args = cost.parse_args(['--workload', 'sort'])
    assert (args.workload, args.rate, args.repeat, args.interval,
            args.vm_fault_budget) == ('sort', 'auto', 2, 10.0, None)
    for wrong in (['--workload', 'nothing'], ['--workload', 'sort',
                                              '--repeat', '0'],
                  ['--workload', 'sort', '--rate', '0.1']):
        with pytest.raises(SystemExit):
            cost.parse_args(wrong)


def test_corpus_cost_figures_compare_each_round_with_its_baseline():
    corpus = benchmark('corpus_cost')
    pairs = [(corpus.Run(False, 100.0, 10.0, 0.1, 0.0, 0, [], 5),
              corpus.Run(True, 101.0, 11.0, 1.01, 0.202, 9, [1.0, 0.5],
                         2020)),
             (corpus.Run(False, 50.0, 0.0, 0.1, 0.0, 0, [], 5),
              corpus.Run(True, 52.0, 1.0, 0.52, 0.052, 4, [0.5], 520))]
    figures = corpus.corpus_figures(pairs)
    assert figures['slowdown']['range'] == pytest.approx(
        [1 - 100 / 101, 1 - 50 / 52])
    assert figures['ready_slowdown']['range'] == pytest.approx(
        [0.0, 1 - 50 / 51])
    assert figures['pager_cpu']['median'] == pytest.approx(0.01)
    assert figures['agent_cpu']['median'] == pytest.approx(0.0015)
    assert figures['agent_ms_per_interval']['range'] == pytest.approx(
        [10.4, 20.2])
    assert figures['faults_per_s']['range'] == pytest.approx([10, 20])
    assert figures['rate_mean']['range'] == pytest.approx([0.5, 0.75])


def test_sampling_cost_schedule_alternates_on_and_off():
    cost = benchmark('sampling_cost')
    pager = cost.Kind('1 %', 0.01)
    assert cost.schedule(cost.Kind('no pager'), (10, 1), 0) == [
        ('none', None)] * 2
    assert cost.schedule(pager, (10, 1), 0) == [
        ('on', 10), ('off', 10), ('off', 1), ('on', 1)]
    assert cost.schedule(pager, (10, 1), 1) == [
        ('off', 10), ('on', 10), ('on', 1), ('off', 1)]
    assert cost.workload(cost.schedule(pager, (10, 1), 0), 64, 'RWRW',
                         10) == ('for i in $(seq 2); do wsswork 64 RWRW 10; '
                                 'done')
    assert [kind.rate for kind in cost.kinds(4)] == [None, 0.01, 0.1, 0.01]
    assert cost.kinds(4)[-1].full_pass_every == 4


def phase(kind, mode, interval, ops, wait=0.0, run=9.0, pager=0.01,
          name='RW'):
    return benchmark('sampling_cost').Phase(
        kind, mode, interval, name, ops=ops, ns=10 ** 10, ticks=1,
        wall=10.0, pager_cpu=pager, vcpu_run=run, vcpu_wait=wait)


def test_sampling_cost_phase_figures():
    busy = phase('1 %', 'on', 10, 10 ** 8, wait=2.0, run=7.5)
    assert busy.ops_per_us == 10
    assert busy.ready_ops_per_us == pytest.approx(12.5)
    assert busy.blocked == pytest.approx(0.05)


def test_sampling_cost_ratios_within_a_boot():
    cost = benchmark('sampling_cost')
    plain = cost.Boot(cost.Kind('no pager'), [
        phase('no pager', 'none', None, 2 * 10 ** 8, name='RR'),
        phase('no pager', 'none', None, 10 ** 8, name='WW')], [], None,
        None)
    stats = {'sampling': {'minor_faults': 10, 'minor_p50_us': 3.0,
                          'minor_p99_us': 20.0, 'zap_p50_us': 500.0,
                          'zap_p99_us': 900.0, 'full_zap_p50_us': None}}
    # Reads run at twice the speed of writes: each is compared with its
    # own kind.
    sampled = cost.Boot(cost.Kind('1 %', 0.01), [
        phase('1 %', 'on', 10.0, 198 * 10 ** 6, run=8.9, pager=0.02,
              name='RR'),
        phase('1 %', 'off', 10.0, 10 ** 8, name='WW'),
        phase('1 %', 'off', 1.0, 2 * 10 ** 8, name='RR'),
        phase('1 %', 'on', 1.0, 9 * 10 ** 7, run=8.0, pager=0.05,
              name='WW')],
        [0.001, 0.003], stats, 2000)
    rounds = [cost.round_figures([plain, sampled], (10.0, 1.0))]
    assert rounds[0]['presence']['ops_per_us'] == 1
    result = cost.summarise(rounds, [[plain, sampled]], (10.0, 1.0))
    short = result['kinds']['1 %']['intervals']['1.0']
    default = result['kinds']['1 %']['intervals']['10.0']
    assert short['slowdown']['median'] == pytest.approx(0.1)
    assert default['slowdown']['median'] == pytest.approx(0.01)
    assert short['extra_blocked']['median'] == pytest.approx(0.1)
    assert short['pager_cpu']['median'] == 0.05
    assert short['agent_cpu'] == pytest.approx(0.002)
    assert default['agent_cpu'] == pytest.approx(0.0002)
    figures = result['kinds']['1 %']
    assert (figures['minor_faults'], figures['zap_p50_ms'],
            figures['full_zap_p50_ms'], figures['pager_rss_kib']) == (
        10, 0.5, None, 2000)
    lines = cost.table(result, 10.0)
    assert any(line.startswith('1 %') and '10.00 (10.00..10.00)' in line
               for line in lines)


def test_sampling_cost_reads_a_process_schedule():
    guest = benchmark('sampled_guest')
    threads = guest.thread_times(os.getpid())
    assert threading.get_native_id() in threads
    run, wait = guest.vcpu_times({1: (1.0, 1.0), 2: (5.0, 0.0)},
                                 {1: (1.5, 3.0), 2: (9.0, 0.5), 3: (9, 9)})
    assert (run, wait) == (4.0, 0.5)
    assert guest.cpu_seconds(os.getpid()) > 0
    assert benchmark('sampling_cost').rss_kib(os.getpid()) > 0


def test_trace_reader_files_hold_the_same_trace(tmp_path):
    """The hex and decimal text files the benchmark times read back as the
    .npy trace, so that their times compare the same work."""
    reader = benchmark('trace_reader')
    trace, files = reader.write_files(str(tmp_path), 3000, 500, seed=1)
    for path in files.values():
        read = traces.read(path)
        assert read.pages.tolist() == trace.pages.tolist()
        assert read.writes.tolist() == trace.writes.tolist()
    assert '# a comment line' in open(files['decimal']).read()


def test_report_intervals_times_validation_with_and_without():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks',
                                      'report_intervals.py'),
         '--vms', '3', '--points', '8', '--number', '2', '--repeat', '1'],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    assert figures['without_intervals_ms'] > 0
    assert figures['with_intervals_ms'] > 0
    assert (figures['vms'], figures['points']) == (3, 8)


def test_metrics_scrape_reduced():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks',
                                      'metrics_scrape.py'), '--reduced'],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # 5 hosts of 4 VMs: the per-VM series are the difference.
    on, off = [int(line.split(', ')[-1].split()[0])
               for line in result.stdout.splitlines()
               if line.startswith('per-VM series')]
    assert on > off > 0


def test_sampling_accuracy_takes_a_workload_and_the_auto_rate():
    accuracy = benchmark('sampling_accuracy')
    corpus = benchmark('guest_corpus')
    args = accuracy.parse_args(['--workload', 'sort', '--rate', 'auto'])
    assert args.auto and args.rate is None
    assert args.guest_command == corpus.WORKLOADS['sort']
    with pytest.raises(SystemExit):
        accuracy.parse_args(['--workload', 'sort', '--guest-command', 'x'])
    with pytest.raises(SystemExit):
        accuracy.parse_args(['--workload', 'sort', '--rate', 'fast'])


def test_the_auto_rate_follows_the_working_set_and_coverage_counts():
    accuracy = benchmark('sampling_accuracy')
    auto = benchmark('sampled_guest').AutoRate(
        1 << 16, 1.0, window_intervals=12, curve_intervals=12, max_reuse=12)
    assert auto.rate == 1.0       # max_rate: the first interval large
    client = mock.Mock()
    pages = np.random.default_rng(0).permutation(1 << 16)[:600]
    sampled = mrc.shards_sample(pages, 0.01)
    driver = importlib.import_module('memcanal.agent.driver')
    auto.step(client, driver.AccessInterval(sampled, sampled[:0], False,
                                            1.0, 0.01, mrc.DEFAULT_SALT))
    line = client.command.call_args.args[0]
    verb, rate, salt = line.split()
    assert verb == 'resample' and float(rate) > 0.5
    comparison = accuracy.Comparison(1 << 16, 1.0, window=1)
    comparison.add(interval(pages), pages)
    row = comparison.rows[0]
    assert row.low == row.high == row.exact == 600
    assert accuracy.summary(comparison.rows, 1.0, 0)['coverage'] == 1.0


def test_the_gap_below_the_interval_curve_s_first_point_is_split_out():
    accuracy = benchmark('sampling_accuracy')
    step = mrc.MissRatioCurve(np.array([10, 20]), np.array([0.0, 0.0]), 1)
    lru = mrc.MissRatioCurve(np.arange(1, 21), np.zeros(20), 1)
    total = accuracy.error(step, lru)
    below = accuracy.below_first_point(step, lru)
    # The step is 1 below size 10, LRU 0: all the gap is there.
    assert below == pytest.approx(total) and below > 0
    assert accuracy.below_first_point(lru, step) == 0


def test_sampling_accuracy_counts_the_extra_pages_that_are_page_tables():
    accuracy = benchmark('sampling_accuracy')
    comparison = accuracy.Comparison(4096, 1.0, window=1)
    truth = np.arange(100, 200)
    # The sampler saw memtrace's pages and three more, two of them page
    # tables (the MMU's walks) and one not (a device's write).
    comparison.add(interval(np.concatenate([truth, [500, 501, 502]])),
                   truth, tables=np.array([150, 500, 501]))
    row = comparison.rows[0]
    assert (row.extra, row.extra_page_tables) == (3, 2)
    result = accuracy.summary(comparison.rows, 1.0, settle=0)
    assert result['extra_page_table_pages'] == 2
    assert result['wss_error_median'] == pytest.approx(3 / 100)
    assert result['wss_error_median_with_page_tables'] == pytest.approx(
        1 / 102)


def test_page_tables_are_told_from_data_by_content(tmp_path):
    tables = benchmark('page_tables')
    ram_pages = 65536
    pte = np.zeros(512, dtype=np.uint64)
    pte[:3] = [(1234 << 12) | 0x67, (1235 << 12) | 0x25,
               (1 << 63) | (60000 << 12) | 0x163]
    text = np.frombuffer((b'the quick brown fox ' * 205)[:4096],
                         dtype=np.uint64)
    pointers = np.full(512, 0xffff888001234560, dtype=np.uint64)
    beyond = pte.copy()
    beyond[1] = (ram_pages << 12) | 0x67        # outside the RAM
    one = np.zeros(512, dtype=np.uint64)
    one[0] = (1234 << 12) | 0x67                 # a single entry
    pages = np.stack([pte, text, pointers, beyond, one,
                      np.zeros(512, dtype=np.uint64)])
    assert tables.look_like_page_tables(pages, ram_pages).tolist() == [
        True, False, False, False, False, False]
    # From a memfd, as QEMU's RAM is read.
    fd = os.memfd_create('ram')
    try:
        os.write(fd, pages.tobytes())
        reader = tables.PageTables.__new__(tables.PageTables)
        reader.fd, reader.ram_pages = fd, ram_pages
        assert reader.among([4, 0, 1, 0]).tolist() == [0]
    finally:
        os.close(fd)
