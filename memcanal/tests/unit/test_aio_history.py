"""memcanal.cmd.aio_history: a run's story replayed from stored rows."""

import datetime

from memcanal.cmd import aio_history
from memcanal.policy import guardrails

MIB = 2 ** 20
START = datetime.datetime(2026, 1, 1, 12, 0, 0)
RAILS = guardrails.Rails(kernel_bytes=64 * MIB)


def at(seconds):
    return START + datetime.timedelta(seconds=seconds)


def report(seconds, sequence, memory=1024 * MIB, misses=10.0,
           accesses=100.0, wss=None, mrc=None):
    return {'collected_at': at(seconds), 'sequence': sequence,
            'allocated_bytes': 1024 * MIB,
            'guest_stats': {'memory_bytes': float(memory),
                            'misses': misses, 'accesses': accesses},
            'wss': wss if wss is not None else {'prl': 16 * MIB},
            'mrc': mrc or {}}


def decision(kind, applied, outputs, host_uuid='h1', actions=(),
             inputs=None):
    return {'uuid': '%s-%s' % (kind, applied), 'kind': kind,
            'state': 'applied' if applied is not None else 'approved',
            'host_uuid': host_uuid, 'policy': kind, 'outputs': outputs,
            'inputs': inputs or {}, 'actions': list(actions),
            'created_at': at((applied or 0) - 1),
            'applied_at': at(applied) if applied is not None else None,
            'events': []}


def migration(vm, applied):
    return decision('migration', applied, {'move': {
        'vm': vm, 'source': 'host-1', 'destination': 'host-2',
        'source_utilization': 0.5, 'destination_utilization': 0.1}})


def paging(vm, applied, resident, lent, lender='host-2'):
    return decision('pooling', applied, {'paging': {
        'vm': vm, 'host': 'host-1', 'resident_bytes': resident * MIB,
        'previous_resident_bytes': 1024 * MIB, 'lender': lender,
        'lent_bytes': lent * MIB, 'relative_miss_ratio': 1.0}})


def instance(uuid, host_uuid, reports):
    return {'uuid': uuid, 'host_uuid': host_uuid,
            'allocated_bytes': 1024 * MIB, 'target_bytes': None,
            'resident_target_bytes': None, 'project_id': 'p',
            'last_reported_at': reports[-1]['collected_at'] if reports
            else None, 'reports': reports}


HOSTS = [{'uuid': 'h1', 'name': 'host-1', 'capacity_bytes': 652 * MIB,
          'instance_count': 1},
         {'uuid': 'h2', 'name': 'host-2', 'capacity_bytes': 8192 * MIB,
          'instance_count': 1}]


def test_applied_at_is_the_applied_event():
    events = [{'to_state': 'approved', 'created_at': at(1)},
              {'to_state': 'applied', 'created_at': at(3)}]
    assert aio_history.applied_at({'events': events}) == at(3)
    assert aio_history.applied_at({'events': events[:1]}) is None


def test_measured_after_counts_only_later_reports():
    reports = [report(1, 1, misses=50), report(3, 2, misses=20),
               report(5, 3, misses=10), report(7, 4, accesses=0)]
    measured = aio_history.measured_after(reports, at(2))
    assert measured == aio_history.Measured(0.15, 0.1, 2, 0.15)
    assert aio_history.measured_after(reports, at(6)) is None


def test_curve_at_takes_the_first_trusted_curve_that_covers_the_size():
    curves = {'hcache': [[100 * MIB, 0.3], [200 * MIB, 0.1]],
              'shards': [[0, 1.0], [16 * MIB, 0.01]]}
    # The hypervisor cache's curve starts at the memory kept while
    # traced: below, SHARDS' answers.
    assert aio_history.curve_at(curves, 150 * MIB) == (0.3, 'hcache')
    assert aio_history.curve_at(curves, 250 * MIB) == (0.1, 'hcache')
    assert aio_history.curve_at(curves, 80 * MIB) == (0.01, 'shards')
    assert aio_history.curve_at(curves, None) == (None, None)
    assert aio_history.curve_at(curves, 80 * MIB,
                                methods=('paging',)) == (None, None)


def test_reporting_in_run_counts_newest_reports_of_this_run(monkeypatch):
    """a and b report in this run from its hosts; c from another host;
    d's newest report is from an earlier run, whenever it was stored."""
    instances = [instance('a', 'h1', [report(1, 1)]),
                 instance('b', 'h2', [report(-9, 1), report(1, 2)]),
                 instance('c', 'h3', [report(1, 1)]),
                 instance('d', 'h1', [report(-30, 1)]),
                 instance('e', 'h1', [])]
    by_uuid = {i['uuid']: i for i in instances}
    monkeypatch.setattr(aio_history.db_api, 'list_instances',
                        lambda context: instances)
    monkeypatch.setattr(
        aio_history.db_api, 'list_instance_reports',
        lambda context, uuid, limit: by_uuid[uuid]['reports'][::-1][:limit])
    assert aio_history.reporting_in_run(None, {'h1', 'h2'}, START) == 2


def run_with_moves():
    """vm-a on host-1 migrated to host-2 at 4 s; vm-b on host-1 paged
    at 2 s to 64 MiB resident, 960 MiB lent by host-2."""
    vm_a = instance('vm-a', 'h2', [report(1, 1), report(3, 2),
                                   report(5, 3)])
    vm_b = instance('vm-b', 'h1', [report(1, 1), report(3, 2),
                                   report(5, 3)])
    return aio_history.Run(START, HOSTS, [vm_a, vm_b], [
        paging('vm-b', 2, 64, 960), migration('vm-a', 4)])


def test_host_at_replays_migrations():
    run = run_with_moves()
    vm_a = run.instances[0]
    assert aio_history.host_at(run, vm_a, at(3)) == 'host-1'
    assert aio_history.host_at(run, vm_a, at(5)) == 'host-2'


def test_paging_at_is_the_paging_in_force():
    run = run_with_moves()
    assert aio_history.paging_at(run, 'vm-b', at(1)) is None
    assert aio_history.paging_at(run, 'vm-b', at(3))['lent_bytes'] == (
        960 * MIB)


def test_vm_samples_carry_host_resident_and_demand():
    run = run_with_moves()
    samples = aio_history.vm_samples(run, run.instances[1], RAILS)
    assert [s.resident // MIB for s in samples] == [1024, 64, 64]
    assert {s.demand for s in samples} == {80 * MIB}
    assert samples[0].seconds == 1 and samples[0].miss_ratio == 0.1


def test_host_series_sums_the_vms_each_host_reported():
    run = run_with_moves()
    series = aio_history.host_series(run, RAILS)
    host_1 = [(p.seconds, p.memory // MIB, p.resident // MIB,
               p.borrowed // MIB) for p in series['host-1']]
    assert host_1 == [(1, 2048, 2048, 0), (3, 2048, 1088, 960),
                      (5, 1024, 64, 960)]
    host_2 = series['host-2']
    assert [(p.seconds, p.memory // MIB, p.lent // MIB)
            for p in host_2] == [(5, 1024, 960)]


def test_taking_back_ends_the_lending():
    vm = instance('vm-b', 'h1', [report(1, 1), report(5, 2)])
    run = aio_history.Run(START, HOSTS, [vm], [
        paging('vm-b', 2, 64, 960),
        paging('vm-b', 4, 1024, 0, lender=None)])
    series = aio_history.host_series(run, RAILS)
    assert [p.borrowed for p in series['host-1']] == [0, 0]
    assert [p.resident // MIB for p in series['host-1']] == [1024, 1024]


def test_last_report_by_a_moment():
    reports = [report(1, 1), report(3, 2)]
    assert aio_history.last_report_by(reports, at(2)) is reports[0]
    assert aio_history.last_report_by(reports, at(3)) is reports[1]
    assert aio_history.last_report_by(reports, at(0)) is None
