"""memcanal.db.api on in-memory SQLite: what it stores and reads back."""

import datetime
from unittest import mock

from oslo_db import exception as db_exc
from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.estimation import packed_curve
from memcanal import exception
from memcanal.rpc import reports

MIB = 2 ** 20
GIB = 2 ** 30
VM_1 = '10000000-0000-4000-8000-000000000001'
VM_2 = '20000000-0000-4000-8000-000000000002'


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


def sample(uuid, sequence, project='p1'):
    return {'uuid': uuid, 'project_id': project,
            # Above 2**32: sizes must not be truncated to 32 bits.
            'allocated_bytes': 8 * GIB, 'observed_bytes': None,
            'wss': {'distinct': sequence * 2 ** 20, 'prl': 2 ** 21},
            'mrc': {'exact': [[4096, 1.0], [2 ** 20, 0.125],
                              [8 * GIB, 0.0]]},
            'guest_stats': {'major_faults': 2.5}}


def report(host_uuid, sequence, *samples):
    return reports.validate_report({
        'host_uuid': host_uuid, 'sequence': sequence,
        'collected_at': '2026-11-22T09:00:%02dZ' % sequence,
        'instances': list(samples) or [sample(VM_1, sequence)],
    }, max_mrc_points=256, max_instances=10)


def register(ctx, name='compute-1'):
    return db_api.register_host(ctx, name, 64 * GIB, GIB)['uuid']


def test_register_creates_then_refreshes(ctx):
    first = db_api.register_host(ctx, 'compute-1', 64 * GIB, GIB)
    assert first['last_sequence'] == 0
    db_api.store_report(ctx, report(first['uuid'], 7))
    again = db_api.register_host(ctx, 'compute-1', 32 * GIB, 0)
    assert again == {'uuid': first['uuid'], 'last_sequence': 7,
                     'pinned': False}
    host = db_api.get_host(ctx, first['uuid'])
    assert (host['memory_total_bytes'], host['memory_reserved_bytes'],
            host['state']) == (32 * GIB, 0, 'up')


def test_report_round_trips_whole(ctx):
    host = register(ctx)
    assert db_api.store_report(ctx, report(host, 1)) is True
    instance = db_api.get_instance(ctx, VM_1)
    assert instance['host_uuid'] == host
    assert instance['allocated_bytes'] == 8 * GIB
    latest = instance['latest_report']
    assert latest['sequence'] == 1
    assert latest['collected_at'] == datetime.datetime(2026, 11, 22, 9, 0, 1)
    assert latest['wss'] == {'distinct': 2 ** 20, 'prl': 2 ** 21}
    assert latest['mrc'] == sample(VM_1, 1)['mrc']
    assert latest['guest_stats'] == {'major_faults': 2.5}


def test_packed_curves_are_stored_packed_and_read_back_as_points(ctx):
    host = register(ctx)
    points = sample(VM_1, 1)['mrc']['exact']
    db_api.store_report(ctx, report(host, 1, dict(
        sample(VM_1, 1), mrc={'exact': packed_curve.pack(points),
                              'aet': [[4096, 0.5]]})))
    # Stored as the report carried it: no list built to store it.
    with db_api.context_manager.reader.using(ctx):
        stored = ctx.session.execute(sa.select(
            models.InstanceReport.mrc)).scalar_one()
    assert stored['exact'] == packed_curve.pack(points)
    expected = {'exact': points, 'aet': [[4096, 0.5]]}
    assert db_api.get_instance(ctx, VM_1)['latest_report']['mrc'] == expected
    assert db_api.list_instance_reports(ctx, VM_1)[0]['mrc'] == expected
    assert db_api.host_policy_inputs(
        ctx, host)[0]['reports'][0]['mrc'] == expected


def test_log_stats_round_trip_and_are_null_without_logs(ctx):
    host = register(ctx)
    logs = {'prl': {'events': 120, 'logged': 61440, 'missed': 3,
                    'handler_ns': 250000, 'vm_cpu_ns': 0},
            'pml': {'events': 0}}
    db_api.store_report(ctx, report(host, 1, dict(sample(VM_1, 1), logs=logs),
                                    sample(VM_2, 1)))
    assert db_api.get_instance(ctx, VM_1)['latest_report']['log_stats'] == \
        logs
    assert [r['log_stats'] for r in db_api.list_instance_reports(
        ctx, VM_1)] == [logs]
    assert [i['reports'][0]['log_stats'] for i in db_api.host_policy_inputs(
        ctx, host)] == [logs, None]
    # An older agent's report is stored with SQL NULL, not JSON 'null'.
    with db_api.context_manager.reader.using(ctx):
        assert ctx.session.execute(
            sa.select(models.InstanceReport.log_stats.is_(None))
            .order_by(models.InstanceReport.id)).scalars().all() == [
                False, True]


def test_same_sequence_is_stored_once(ctx):
    host = register(ctx)
    assert db_api.store_report(ctx, report(host, 1))
    assert db_api.store_report(ctx, report(host, 1)) is False
    assert db_api.count_reports(ctx) == {'host_reports': 1,
                                         'instance_reports': 1}


def test_unknown_host_is_refused(ctx):
    with pytest.raises(exception.HostNotFound):
        db_api.store_report(ctx, report(VM_2, 1))
    assert db_api.count_reports(ctx)['host_reports'] == 0


def check_failing_report_stores_nothing(ctx):
    """A report failing in the database leaves what was stored as it was.

    Shared with the functional tests, which run it on MariaDB and
    PostgreSQL.
    """
    host = register(ctx)
    db_api.store_report(ctx, report(host, 1))
    second = report(host, 2, sample(VM_1, 2), sample(VM_2, 2))
    # Validation forbids this, so only a bug could send it; the database
    # refuses the NULL after the host report's and instances' rows were
    # written.
    second['instances'][1]['guest_stats'] = None
    with pytest.raises(db_exc.DBError):
        db_api.store_report(ctx, second)
    assert db_api.count_reports(ctx) == {'host_reports': 1,
                                         'instance_reports': 1}
    assert db_api.get_host(ctx, host)['last_sequence'] == 1
    assert [i['uuid'] for i in db_api.list_instances(ctx)] == [VM_1]
    assert db_api.get_instance(ctx, VM_1)['latest_report']['sequence'] == 1


def test_failing_report_stores_nothing(ctx):
    check_failing_report_stores_nothing(ctx)


def test_instance_moves_with_its_reports_once_its_host_lets_it_go(ctx):
    host_1, host_2 = register(ctx, 'compute-1'), register(ctx, 'compute-2')
    db_api.store_report(ctx, report(host_1, 1))
    db_api.store_report(ctx, report(host_1, 2, sample(VM_2, 2)))
    assert db_api.store_report(ctx, report(host_2, 1)) is True
    assert db_api.get_instance(ctx, VM_1)['host_uuid'] == host_2
    assert [h['instance_count'] for h in db_api.list_hosts(ctx)] == [1, 1]


def test_list_instances_filters_and_pages(ctx):
    host = register(ctx)
    db_api.store_report(ctx, report(host, 1, sample(VM_2, 1, 'p2'),
                                    sample(VM_1, 1, 'p1')))
    listed = db_api.list_instances(ctx)
    assert [i['uuid'] for i in listed] == [VM_1, VM_2]
    assert [i['uuid'] for i in db_api.list_instances(
        ctx, project_id='p2')] == [VM_2]
    assert [i['uuid'] for i in db_api.list_instances(
        ctx, limit=1, marker=VM_1)] == [VM_2]
    assert db_api.list_instances(ctx, host_uuid=VM_2) == []


def test_reports_newest_first_after_marker(ctx):
    host = register(ctx)
    for sequence in (1, 2, 3):
        db_api.store_report(ctx, report(host, sequence))
    history = db_api.list_instance_reports(ctx, VM_1)
    assert [r['sequence'] for r in history] == [3, 2, 1]
    older = db_api.list_instance_reports(ctx, VM_1, limit=1,
                                         marker=history[0]['id'])
    assert [r['sequence'] for r in older] == [2]
    with pytest.raises(exception.InstanceNotFound):
        db_api.list_instance_reports(ctx, VM_2)


def test_host_state_follows_the_hosts_own_interval(ctx):
    """Down once missed_heartbeats (3) of its intervals and the grace
    (10 s) have passed, whatever any periodic job did; up again with
    its next report."""
    fast = db_api.register_host(ctx, 'fast', 2 ** 34, 0, 1.0)['uuid']
    slow = db_api.register_host(ctx, 'slow', 2 ** 34, 0, 60.0)['uuid']
    now = timeutils.utcnow()
    later = now + datetime.timedelta(seconds=14)
    with mock.patch.object(timeutils, 'utcnow', return_value=later):
        states = {h['name']: h['state'] for h in db_api.list_hosts(ctx)}
    assert states == {'fast': 'down', 'slow': 'up'}
    with mock.patch.object(timeutils, 'utcnow', return_value=later):
        db_api.store_report(ctx, report(fast, 1))
        assert db_api.get_host(ctx, fast)['state'] == 'up'
    much_later = now + datetime.timedelta(seconds=191)
    with mock.patch.object(timeutils, 'utcnow', return_value=much_later):
        assert db_api.get_host(ctx, slow)['state'] == 'down'
    assert db_api.get_host(ctx, slow)['report_interval'] == 60.0


def test_rejections_are_counted_per_host(ctx):
    host = register(ctx)
    db_api.record_rejection(ctx, host, 4, 'report.not_finite', 'NaN')
    db_api.record_rejection(ctx, None, None, 'report.malformed', 'junk')
    assert db_api.count_rejections(ctx) == 2
    assert db_api.count_rejections(ctx, host) == 1
    assert db_api.get_host(ctx, host)['reports_rejected'] == 1


def test_unknown_host_lookup(ctx):
    with pytest.raises(exception.HostNotFound):
        db_api.get_host(ctx, VM_1)


def test_a_report_sets_what_was_observed_never_the_target(ctx):
    """A report collected before a resize and stored after it must not
    undo the target the decision set."""
    host = register(ctx)
    db_api.store_report(ctx, report(host, 1))
    with db_api.context_manager.writer.using(ctx):
        ctx.session.execute(sa.update(models.Instance).values(
            target_bytes=4 * GIB))
    stale = dict(sample(VM_1, 2), observed_bytes=6 * GIB)
    db_api.store_report(ctx, report(host, 2, stale))
    instance = db_api.get_instance(ctx, VM_1)
    assert (instance['target_bytes'], instance['observed_bytes']) == (
        4 * GIB, 6 * GIB)


def test_a_report_sets_flavor_working_set_and_zone(ctx):
    host = register(ctx)
    measured = dict(sample(VM_1, 1), flavor='m1.small',
                    wss={'esx': 300 * MIB, 'pml': 200 * MIB})
    db_api.store_report(ctx, dict(report(host, 1, measured),
                                  availability_zone='az1'))
    instance = db_api.get_instance(ctx, VM_1)
    # PML before ESX sampling: the more exact estimator's.
    assert (instance['flavor'], instance['wss_bytes']) == (
        'm1.small', 200 * MIB)
    assert db_api.get_host(ctx, host)['availability_zone'] == 'az1'
    # A report without a zone (an older agent's) keeps the host's.
    db_api.store_report(ctx, report(host, 2, sample(VM_1, 2)))
    assert db_api.get_host(ctx, host)['availability_zone'] == 'az1'


def test_instances_left_out_of_their_hosts_reports_are_deleted(ctx):
    host = register(ctx)
    db_api.store_report(ctx, report(host, 1, sample(VM_1, 1),
                                    sample(VM_2, 1)))
    later = timeutils.utcnow() + datetime.timedelta(seconds=30)
    with mock.patch.object(timeutils, 'utcnow', return_value=later):
        db_api.store_report(ctx, report(host, 2, sample(VM_1, 2)))
    assert db_api.mark_gone_instances(ctx, gone_after=60) == []
    assert db_api.mark_gone_instances(ctx, gone_after=20) == [VM_2]
    assert db_api.mark_gone_instances(ctx, gone_after=20) == []
    assert [i['uuid'] for i in db_api.list_instances(ctx)] == [VM_1]
    assert [i['uuid'] for i in db_api.list_instances(ctx, deleted=True)] \
        == [VM_2]
    assert [i['uuid'] for i in db_api.host_policy_inputs(ctx, host)] == [
        VM_1]
    assert db_api.get_host(ctx, host)['instance_count'] == 1
    assert db_api.get_instance(ctx, VM_2)['deleted_at'] is not None
    # Listed again by its host (it came back), it is no longer deleted.
    db_api.store_report(ctx, report(host, 3, sample(VM_1, 3),
                                    sample(VM_2, 3)))
    assert db_api.get_instance(ctx, VM_2)['deleted_at'] is None


def test_a_silent_hosts_instances_are_not_deleted(ctx):
    """Only the host's own reports tell that a VM left: when the agent
    stops, its VMs are kept however long it stays silent."""
    host = register(ctx)
    db_api.store_report(ctx, report(host, 1))
    much_later = timeutils.utcnow() + datetime.timedelta(days=1)
    with mock.patch.object(timeutils, 'utcnow', return_value=much_later):
        assert db_api.mark_gone_instances(ctx, gone_after=60) == []
