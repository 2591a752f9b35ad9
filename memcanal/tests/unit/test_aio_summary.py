"""memcanal-aio's progress and summary lines (memcanal.cmd.aio)."""

import pytest

from memcanal.cmd import aio
from memcanal.cmd import aio_history
from memcanal.cmd import aio_summary
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
    # [simulated] seed unless --seed says otherwise.
    assert args.seed is None
    args, _ = aio._arguments(['memcanal-aio', '--seed', '2'])
    assert args.seed == 2


def test_recommend_mode_leaves_an_operator_time_to_approve():
    for mode, reports in (('auto', 1), ('recommend', aio.RECOMMEND_REPORTS)):
        args, _ = aio._arguments(['memcanal-aio', '--policy-mode', mode])
        assert aio.optimize_interval(args) == reports * args.interval


def test_describe_a_resize():
    line = aio_summary.describe_decision(plots.resize(5), NAMES)
    assert line == ('resize on host-1 (memory_targets): vm-b 1024 -> 1075 '
                    'MiB, predicted miss ratio 0.100')


def test_describe_a_migration():
    line = aio_summary.describe_decision(history.migration('vm-a', 4), NAMES)
    assert line.startswith('migrate vm-a from host-1 to host-2: host-1\'s '
                           'measured demand predicted at 50 % of its '
                           'capacity after it, host-2\'s at 10 %')


def test_describe_paging_and_taking_back():
    paged = aio_summary.describe_decision(
        history.paging('vm-b', 2, 64, 960), NAMES)
    assert paged.startswith('page vm-b on host-1 out: it keeps 64 of its '
                            '1024 MiB resident, 960 MiB lent by host-2\'s')
    back = aio_summary.describe_decision(
        history.paging('vm-b', 3, 1024, 0, lender=None), NAMES)
    assert back == 'take vm-b on host-1 back whole (1024 MiB resident)'


def test_memory_column():
    vm = history.instance('vm', 'h1', [])
    assert aio_summary._memory(vm, 1024 * MIB, 1024 * MIB) == '1024'
    assert aio_summary._memory(vm, 1075 * MIB, 1075 * MIB) == '1024->1075'
    assert aio_summary._memory(vm, 1024 * MIB, 64 * MIB) == '1024 r64'


def test_curve_ratio_names_its_curve():
    curves = {'shards': [[0, 1.0], [16 * MIB, 0.01]]}
    assert aio_summary._curve_ratio(curves, 80 * MIB) == '0.010 shards'
    assert aio_summary._curve_ratio({}, 80 * MIB) == '-'


def resized_b(run, *reports):
    """``run``'s vm-b with ``reports`` (seconds, sequence, MiB, misses)
    after its own."""
    vm_b = run.instances[1]
    vm_b['reports'].extend(history.report(seconds, sequence, memory * MIB,
                                          misses=misses)
                           for seconds, sequence, memory, misses in reports)
    return vm_b


def test_measured_covers_the_reports_at_the_new_size():
    """vm-b's resize to 1075 MiB, made at 3.5 s, applied at 4.5 s: the
    report stamped at 5 s was taken at 1024 MiB (the agent measured vm-b
    before the resize and stamped its report after), and the one stamped
    at 11 s at 1075 MiB though a resize to 1100 MiB was applied at
    10.5 s. The measurement takes the reports' sizes, not their times."""
    run = plots.full_run()
    first = run.decisions[-1]
    newest = dict(plots.resize(10.5), uuid='newest', actions=[dict(
        first['actions'][0], previous_bytes=1075 * MIB,
        target_bytes=1100 * MIB)])
    run.decisions.append(newest)
    vm_b = resized_b(run, (7, 4, 1075, 20), (9, 5, 1075, 20),
                     (11, 6, 1075, 50), (13, 7, 1100, 30))
    # vm-b's reports at 1, 3 and 5 s are at 1024 MiB, 10 % misses.
    assert aio_history.measured_after(vm_b['reports'], first['applied_at'],
                                      newest['applied_at']).reports == 3
    assert run.measured_at_size(vm_b, first) == aio_history.Measured(
        0.3, 0.5, 3, 0.3)
    assert run.measured_at_size(vm_b, first, skip=2) == (
        aio_history.Measured(0.5, 0.5, 1, 0.5))
    assert run.measured_at_size(vm_b, newest) == aio_history.Measured(
        0.3, 0.3, 1, 0.3)
    assert aio_summary._measured(run.measured_at_size(vm_b, first)) == (
        'measured 0.300 over 3 reports (latest 0.500)')
    vm_b['reports'].pop()
    assert aio_summary._measured(run.measured_at_size(vm_b, newest)) == (
        'not measured yet')


def test_measured_without_the_tracing_windows_refills():
    """Of vm-b's 30 misses in 100 accesses at 1075 MiB, 20 read again
    what a tracing window's cache held: a curve predicts the 10 others."""
    run = plots.full_run()
    vm_b = resized_b(run, (7, 4, 1075, 30))
    vm_b['reports'][-1]['guest_stats']['tracing_refills'] = 20.0
    measured = run.measured_at_size(vm_b, run.decisions[-1])
    assert measured == aio_history.Measured(0.1, 0.1, 1, 0.3)
    assert aio_summary._measured(measured) == (
        'measured 0.100 over 1 reports (latest 0.100), 0.300 with the '
        'tracing windows\' refills')


def test_a_resize_back_to_an_earlier_size_is_measured_after_it():
    """Resized to 1075 MiB, then back to 1024: the reports at 1024 MiB
    from before the first resize are not the second one's."""
    run = plots.full_run()
    back = dict(plots.resize(8), uuid='back', actions=[dict(
        run.decisions[-1]['actions'][0], previous_bytes=1075 * MIB,
        target_bytes=1024 * MIB)])
    run.decisions.append(back)
    vm_b = resized_b(run, (7, 4, 1075, 20), (9, 5, 1024, 40))
    assert run.measured_at_size(vm_b, back) == aio_history.Measured(
        0.4, 0.4, 1, 0.4)


def test_fidelity_from_the_third_report_at_the_new_size():
    """vm-b predicted at 0.1: its third and fourth reports at 1075 MiB
    measure 0.2 and 0.1, a gap of 0.05; the first two are not counted."""
    run = plots.full_run()
    vm_b = resized_b(run, (7, 4, 1075, 90), (9, 5, 1075, 90),
                     (11, 6, 1075, 20), (13, 7, 1075, 10))
    fidelity = run.fidelity()
    assert fidelity.by_vm() == [('vm-b', pytest.approx(0.05), 1)]
    assert fidelity.overall == pytest.approx(0.05)
    assert aio_summary.fidelity_line(fidelity) == (
        'fidelity: 0.050 mean |predicted - measured| miss ratio over 1 '
        'resizes, measured from the 3rd report at the new size on; by VM: '
        'vm-b 0.050 (1)')
    # Two reports at the new size are not enough.
    del vm_b['reports'][-2:]
    assert run.fidelity().overall is None
    assert aio_summary.fidelity_line(run.fidelity()) == (
        'fidelity: - (no resize held for 3 reports)')


def test_decisions_summary_pairs_predicted_and_measured(capsys):
    run = plots.full_run()
    resized_b(run, (7, 4, 1075, 10))
    aio_summary._decisions_summary(run)
    out = capsys.readouterr().out
    assert 'decisions in this run: 3 (3 applied)' in out
    assert 'migrated: migrate vm-a from host-1 to host-2' in out
    assert ('[  4.5s] vm-b on host-1   1024 ->  1075 MiB  miss ratio '
            'predicted 0.100 (hcache curve), measured 0.100 over 1 reports '
            '(latest 0.100)') in out


SAMPLED = [[10 * MIB, 0.5], [20 * MIB, 0.1]]


def test_sampled_faults_are_the_curve_times_the_touch_rate():
    curves = {'sampled': SAMPLED}
    stats = {'sampled_touches_per_s': 200.0}
    faults = aio_summary._sampled_faults
    assert faults(curves, stats, 15 * MIB) == '0.500 (100/s)'
    assert faults(curves, stats, 25 * MIB) == '0.100 (20/s)'
    # Below the working set of one interval the curve says nothing.
    assert aio_summary._sampled_faults(curves, stats, 5 * MIB) == '-'
    assert aio_summary._sampled_faults(curves, {}, 15 * MIB) == '0.500'
    assert aio_summary._sampled_faults({}, stats, 15 * MIB) == '-'


def test_vms_summary_shows_the_sampled_working_set_and_curve(capsys):
    latest = history.report(1, 1, wss={'prl': 16 * MIB, 'sampled': 20 * MIB},
                            mrc={'sampled': SAMPLED})
    latest['guest_stats']['sampled_touches_per_s'] = 200.0
    run = aio_history.Run(history.START, history.HOSTS, [
        history.instance('vm-a', 'h1', [latest])], [])
    aio_summary._vms_summary(run, history.RAILS)
    row = capsys.readouterr().out.splitlines()[-1]
    # PRL, no PML nor ESX, the sampled working set; the sampled curve at
    # the VM's memory and at its demand (16 MiB and a 64 MiB kernel).
    assert '     16.0        -        -     20.0  ' in row
    assert row.endswith('; 0.100 (20/s), 0.100 (20/s); -')


def test_vms_summary_shows_the_sampled_intervals(capsys):
    """A sampling agent's report (RPC 1.7): the curve's band at both
    sizes, the working set's 95 % interval, and the measured demand from
    its upper bound (24 MiB and the 64 MiB kernel: 88 MiB, where the
    curve's last point, 20 MiB, says 0.100)."""
    latest = history.report(1, 1, wss={'sampled': 20 * MIB},
                            mrc={'sampled': SAMPLED})
    latest['guest_stats']['sampled_touches_per_s'] = 200.0
    latest['wss_bounds'] = {'sampled': [18 * MIB, 24 * MIB]}
    latest['mrc_bands'] = {'sampled': {
        'low': [[10 * MIB, 0.4], [20 * MIB, 0.05]],
        'high': [[10 * MIB, 0.6], [20 * MIB, 0.2]]}}
    run = aio_history.Run(history.START, history.HOSTS, [
        history.instance('vm-a', 'h1', [latest])], [])
    aio_summary._vms_summary(run, history.RAILS)
    row = capsys.readouterr().out.splitlines()[-1]
    assert row.endswith('; 0.100 [0.050..0.200] (20/s), '
                        '0.100 [0.050..0.200] (20/s); 18.0..24.0')
    samples = aio_history.vm_samples(run, run.instances[0], history.RAILS)
    assert samples[0].demand == 88 * MIB


def test_hosts_summary_shows_the_demands_interval(capsys, monkeypatch):
    host = dict(history.HOSTS[0], state='up', capacity_bytes=4096 * MIB,
                allocated_bytes=2048 * MIB, resident_bytes=2048 * MIB,
                demand_bytes=400 * MIB, utilization=0.1, lent_bytes=0,
                borrowed_bytes=0, demand_bounds_bytes=[300 * MIB, 400 * MIB])
    run = aio_history.Run(history.START, [host], [], [])
    monkeypatch.setattr(aio_summary.db_api, 'count_reports', lambda ctx: {
        'host_reports': 1, 'instance_reports': 1})
    monkeypatch.setattr(aio_summary.db_api, 'count_rejections',
                        lambda ctx: 0)
    aio_summary._hosts_summary(run)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith('demand 95 %')
    assert lines[2].endswith('  300.0..400.0')


def test_settled_counts_each_resized_vm_in_the_last_seconds():
    """vm-b resized at 4.5 s, 150 s and 200 s of a run that ended at
    250 s: twice in the last 120 s, not settled; a VM resized only
    before them counts 0."""
    run = plots.full_run()
    run.decisions += [plots.resize(150), plots.resize(200)]
    other = plots.resize(10)
    other['actions'] = [dict(other['actions'][0], instance_uuid='vm-c')]
    run.decisions.append(other)
    assert run.resizes_by_vm(history.at(130)) == {'vm-b': 2, 'vm-c': 0}
    assert aio_summary.settled_line(run, history.at(250)) == (
        'settled: no: resizes in the last 120 s by VM: vm-b 2, vm-c 0')
    assert aio_summary.settled_line(run, history.at(330)) == (
        'settled: yes: resizes in the last 120 s by VM: vm-b 0, vm-c 0')
    run.decisions = run.decisions[:2]
    assert aio_summary.settled_line(run, history.at(250)) == (
        'settled: no resize in the run')
