"""memcanal-aio's progress and summary lines (memcanal.cmd.aio)."""

from memcanal.cmd import aio
from memcanal.cmd import aio_history
from memcanal.tests.unit import test_aio_history as history
from memcanal.tests.unit import test_aio_plots as plots

MIB = history.MIB
NAMES = {'h1': 'host-1', 'h2': 'host-2'}


def test_arguments_default_to_the_demonstration():
    args, oslo_args = aio._arguments(['memcanal-aio', '--duration', '60',
                                      '--debug'])
    assert (args.policy_mode, args.hot_host_memory_mb, args.interval) == (
        'auto', aio.HOT_HOST_MEMORY_MB, 2.5)
    assert oslo_args == ['--debug']
    args, _ = aio._arguments(['memcanal-aio', '--hot-host-memory-mb', '0',
                              '--policy-mode', 'recommend'])
    assert (args.policy_mode, args.hot_host_memory_mb) == ('recommend', 0)


def test_describe_a_resize():
    line = aio.describe_decision(plots.resize(5), NAMES)
    assert line == ('resize on host-1 (memory_targets): vm-b 1024 -> 1075 '
                    'MiB, predicted miss ratio 0.100')


def test_describe_a_migration():
    line = aio.describe_decision(history.migration('vm-a', 4), NAMES)
    assert line.startswith('migrate vm-a from host-1 to host-2: host-1\'s '
                           'measured demand predicted at 50 % of its '
                           'capacity after it, host-2\'s at 10 %')


def test_describe_paging_and_taking_back():
    paged = aio.describe_decision(history.paging('vm-b', 2, 64, 960), NAMES)
    assert paged.startswith('page vm-b on host-1 out: it keeps 64 of its '
                            '1024 MiB resident, 960 MiB lent by host-2\'s')
    back = aio.describe_decision(
        history.paging('vm-b', 3, 1024, 0, lender=None), NAMES)
    assert back == 'take vm-b on host-1 back whole (1024 MiB resident)'


def test_memory_column():
    vm = history.instance('vm', 'h1', [])
    assert aio._memory(vm, 1024 * MIB, 1024 * MIB) == '1024'
    assert aio._memory(vm, 1075 * MIB, 1075 * MIB) == '1024->1075'
    assert aio._memory(vm, 1024 * MIB, 64 * MIB) == '1024 r64'


def test_curve_ratio_names_its_curve():
    curves = {'shards': [[0, 1.0], [16 * MIB, 0.01]]}
    assert aio._curve_ratio(curves, 80 * MIB) == '0.010 shards'
    assert aio._curve_ratio({}, 80 * MIB) == '-'


def test_measured_resize_is_preferred_to_a_newer_unmeasured_one():
    run = plots.full_run()
    measured = run.decisions[-1]
    newest = plots.resize(6)
    newest['uuid'] = 'newest'
    run.decisions.append(newest)
    reports = {i['uuid']: i['reports'] for i in run.instances}
    # vm-b's last report was collected at 5 s: after the resize applied
    # at 4.5 s, before the one applied at 6 s.
    assert aio._measured_resizes(run, reports) == [measured]
    assert aio._measured(aio_history.measured_after(
        reports['vm-b'], measured['applied_at'])) == (
        'measured 0.100 over the 1 reports since (latest 0.100)')
    assert aio._measured(None) == 'not measured yet'
