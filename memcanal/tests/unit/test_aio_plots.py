"""memcanal.cmd.aio_plots: the PNGs of a run, from a Run built here."""

import matplotlib.image

from memcanal.cmd import aio_history
from memcanal.cmd import aio_plots
from memcanal.tests.unit import test_aio_history as history

MIB = history.MIB
CURVE = [[100 * MIB, 0.4], [600 * MIB, 0.2], [1100 * MIB, 0.1]]


def resize(applied):
    """vm-b grown from 1024 to 1075 MiB, predicted at 0.1."""
    return history.decision(
        'memory_targets', applied,
        {'instances': {'vm-b': {'predicted_miss_ratio': 0.1,
                                'curve': 'hcache'}}},
        actions=[{'kind': 'set_target', 'instance_uuid': 'vm-b',
                  'previous_bytes': 1024 * MIB,
                  'target_bytes': 1075 * MIB}],
        inputs={'instances': {'vm-b': {'curve': 'hcache', 'mrc': CURVE}}})


def full_run():
    run = history.run_with_moves()
    run.decisions.append(resize(4.5))
    return run


def test_changed_vms_are_those_resized_or_paged():
    changed = aio_plots.changed_vms(full_run())
    # vm-b was paged, then resized: its last change is shown.
    assert list(changed) == ['vm-b']
    decision, method, points, before, after, predicted = changed['vm-b']
    assert decision['kind'] == 'memory_targets'
    assert (method, points, before, after, predicted) == (
        'hcache', CURVE, 1024 * MIB, 1075 * MIB, 0.1)


def test_paged_vm_curve_is_its_last_report_before_the_decision():
    run = history.run_with_moves()
    shards = [[0, 1.0], [16 * MIB, 0.01]]
    run.instances[1]['reports'][0]['mrc'] = {'shards': shards}
    changed = aio_plots.changed_vms(run)
    decision, method, points, before, after, predicted = changed['vm-b']
    assert decision['kind'] == 'pooling'
    assert (method, points, before, after, predicted) == (
        'shards', shards, 1024 * MIB, 64 * MIB, 0.01)


def test_write_plots_draws_valid_pngs(tmp_path):
    paths = aio_plots.write_plots(full_run(), str(tmp_path), history.RAILS)
    assert [p.split('/')[-1] for p in paths] == [
        'hosts.png', 'vms.png', 'curves.png']
    for path in paths:
        with open(path, 'rb') as png:
            assert png.read(8) == b'\x89PNG\r\n\x1a\n'
        height, width, _ = matplotlib.image.imread(path).shape
        assert height > 200 and width > 300


def test_no_curves_without_changes(tmp_path):
    run = aio_history.Run(history.START, history.HOSTS, [
        history.instance('vm-a', 'h1', [history.report(1, 1)])], [])
    paths = aio_plots.write_plots(run, str(tmp_path), history.RAILS)
    assert [p.split('/')[-1] for p in paths] == ['hosts.png', 'vms.png']
    assert not (tmp_path / 'curves.png').exists()


def test_nothing_reported_draws_nothing(tmp_path):
    run = aio_history.Run(history.START, history.HOSTS, [], [])
    assert aio_plots.write_plots(run, str(tmp_path), history.RAILS) == []


def test_a_changed_vm_s_sampled_curve_is_the_one_before_the_decision(
        tmp_path):
    run = full_run()
    vm_b = run.instances[1]
    sampled = [[20 * MIB, 0.3], [80 * MIB, 0.0]]
    vm_b['reports'][0]['mrc'] = {'sampled': sampled}
    vm_b['reports'][1]['wss'] = {'prl': 16 * MIB, 'sampled': 20 * MIB}
    vm_b['reports'][2]['mrc'] = {'sampled': [[1 * MIB, 1.0]]}
    # Resized at 4.5 s, decided at 3.5 s: the report of 3 s has none.
    assert aio_plots.sampled_curve(vm_b, run.decisions[-1]) is None
    # Paged at 2 s, decided at 1 s: the report of 1 s has it.
    assert aio_plots.sampled_curve(vm_b, run.decisions[0]) == sampled
    paths = aio_plots.write_plots(run, str(tmp_path), history.RAILS)
    assert len(paths) == 3
