"""Each host speaks for itself alone: its key pinned at its first
registration, everything else refused, counted and recorded."""

from unittest import mock

import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import claims
from memcanal.db import decisions as decisions_db
from memcanal.service import manager
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions
from memcanal.tests.unit.rpc import test_reports

COMPUTE_1 = keys.Agent('compute-1')
# Whoever holds the broker's credentials, with a key of their own.
IMPOSTOR = keys.Agent('compute-1')


@pytest.fixture
def service(conf, database):
    return manager.ServiceManager(conf)


@pytest.fixture
def ctx():
    return memcanal_context.get_admin_context()


def refusals(ctx, host_uuid=None):
    return db_api.count_rejections(ctx, host_uuid)


def report_of(host_uuid, sequence=1, *samples):
    report = test_reports.good_report()
    report.update(host_uuid=host_uuid, sequence=sequence)
    if samples:
        report['instances'] = list(samples)
    return report


def test_the_first_registration_pins_the_hosts_key(service, ctx):
    first = COMPUTE_1.register(service, ctx, 2 ** 34)
    assert first == {'uuid': first['uuid'], 'last_sequence': 0,
                     'service_version': '1.10'}
    # The key holder registers again; nobody else does.
    assert COMPUTE_1.register(service, ctx, 2 ** 35) == first
    with pytest.raises(messaging.ExpectedException):
        IMPOSTOR.register(service, ctx, 2 ** 40)
    host = db_api.get_host(ctx, first['uuid'])
    assert host['memory_total_bytes'] == 2 ** 35
    assert service.counters['refused'] == 1
    assert refusals(ctx, first['uuid']) == 1
    # A name nobody registered is a new host.
    other = keys.Agent('compute-2').register(service, ctx)
    assert other['uuid'] != first['uuid']


@pytest.mark.parametrize('forge', [
    # Unsigned: an agent before RPC 1.5.
    lambda args: {k: v for k, v in args.items()
                  if k not in ('signature', 'host')},
    # Signed by another key than it carries.
    lambda args: dict(args, public_key=keys.signing.public_text(
        IMPOSTOR.key)),
    # For another host than the one it names.
    lambda args: dict(args, name='compute-2'),
])
def test_a_registration_not_signed_by_the_key_it_carries_is_refused(
        service, ctx, forge):
    args = COMPUTE_1.args(
        'register_host', name='compute-1', memory_total_bytes=1,
        memory_reserved_bytes=0, report_interval=60.0,
        public_key=keys.signing.public_text(COMPUTE_1.key))
    with pytest.raises(messaging.ExpectedException):
        service.register_host(ctx, **forge(args))
    assert db_api.list_hosts(ctx) == []
    assert service.counters['refused'] == 1


def test_forgetting_the_key_lets_a_rebuilt_host_register(service, ctx):
    first = COMPUTE_1.register(service, ctx)
    rebuilt = keys.Agent('compute-1')
    with pytest.raises(messaging.ExpectedException):
        rebuilt.register(service, ctx)
    assert db_api.forget_host_key(ctx, 'compute-1') == (
        keys.signing.public_text(COMPUTE_1.key))
    assert rebuilt.register(service, ctx)['uuid'] == first['uuid']
    # The old key is now the stranger.
    with pytest.raises(messaging.ExpectedException):
        COMPUTE_1.register(service, ctx)


def test_reports_not_signed_by_the_hosts_pinned_key_store_nothing(
        service, ctx):
    host = COMPUTE_1.register(service, ctx)['uuid']
    report = report_of(host)
    IMPOSTOR.report(service, ctx, report)
    service.report(ctx, report)                       # unsigned
    service.report(ctx, **dict(COMPUTE_1.args('report', report=report),
                               report=report_of(host, 2)))  # altered
    keys.Agent('nobody').report(service, ctx, report)  # never registered
    assert db_api.count_reports(ctx)['host_reports'] == 0
    assert service.counters['refused'] == 4
    assert refusals(ctx, host) == 4
    COMPUTE_1.report(service, ctx, report)
    assert db_api.count_reports(ctx)['host_reports'] == 1


def test_a_host_reports_and_asks_about_itself_alone(service, ctx):
    victim = COMPUTE_1.register(service, ctx)
    COMPUTE_1.report(service, ctx, report_of(victim['uuid'], 5))
    attacker = keys.Agent('compute-9')
    attacker.register(service, ctx)
    attacker.report(service, ctx, report_of(victim['uuid'], 6))
    with pytest.raises(messaging.ExpectedException):
        attacker.call(service, ctx, 'stored_reports',
                      host_uuid=victim['uuid'], sequences=[5])
    assert db_api.get_host(ctx, victim['uuid'])['last_sequence'] == 5
    assert service.counters['refused'] == 2


def test_a_report_leaves_out_the_vms_of_other_hosts(service, ctx):
    owner = COMPUTE_1.register(service, ctx)['uuid']
    vm = test_reports.good_report()['instances'][0]
    COMPUTE_1.report(service, ctx, report_of(owner, 1, vm))
    thief = keys.Agent('compute-2')
    other = thief.register(service, ctx)['uuid']
    thief.report(service, ctx, report_of(other, 1, dict(
        vm, project_id='theirs', allocated_bytes=1)))
    instance = db_api.get_instance(ctx, vm['uuid'])
    assert (instance['host_uuid'], instance['project_id'],
            instance['allocated_bytes']) == (owner, vm['project_id'],
                                             vm['allocated_bytes'])
    assert (service.counters['stored'], service.counters['left_out']) == (
        2, 1)


def test_nova_says_where_a_vm_another_host_still_lists_runs(service, ctx):
    owner = COMPUTE_1.register(service, ctx)['uuid']
    vm = test_reports.good_report()['instances'][0]
    COMPUTE_1.report(service, ctx, report_of(owner, 1, vm))
    destination = keys.Agent('compute-2')
    other = destination.register(service, ctx)['uuid']
    service.whereabouts = mock.Mock()
    service.whereabouts.host_of.return_value = 'compute-1'
    destination.report(service, ctx, report_of(other, 1, vm))
    assert db_api.get_instance(ctx, vm['uuid'])['host_uuid'] == owner
    service.whereabouts.host_of.return_value = 'compute-2'
    destination.report(service, ctx, report_of(other, 2, vm))
    assert db_api.get_instance(ctx, vm['uuid'])['host_uuid'] == other
    service.whereabouts.host_of.assert_called_with(vm['uuid'])
    assert service.counters['left_out'] == 1


def test_only_the_agent_a_decision_went_to_answers_for_it(service, ctx,
                                                          conf):
    host = stored.register(ctx, 'compute-1')
    COMPUTE_1.register(service, ctx)
    db_api.store_report(ctx, stored.report(host, 1, stored.sample(
        stored.VM_1, 1), stored.sample(stored.VM_2, 1)))
    decision = test_decisions.decide(ctx, host, mode='auto')
    results = test_decisions.results(decision, 'applied', 'applied')
    intruder = keys.Agent('compute-2')
    intruder.register(service, ctx)
    intruder.call(service, ctx, 'actions_done',
                  decision_uuid=decision['uuid'], results=results)
    assert decisions_db.get_decision(ctx, decision['uuid'])[
        'state'] == 'approved'
    assert service.counters['refused'] == 1
    COMPUTE_1.call(service, ctx, 'actions_done',
                   decision_uuid=decision['uuid'], results=results)
    assert decisions_db.get_decision(ctx, decision['uuid'])[
        'state'] == 'applied'


def test_left_out_codes_are_stable():
    assert (claims.ELSEWHERE, claims.PROJECT_CHANGED) == (
        'report.instance_elsewhere', 'report.project_changed')
    assert (manager.UNSIGNED, manager.UNKNOWN_HOST, manager.BAD_SIGNATURE,
            manager.KEY_MISMATCH, manager.WRONG_HOST) == (
        'rpc.unsigned', 'rpc.unknown_host', 'rpc.bad_signature',
        'rpc.key_mismatch', 'rpc.wrong_host')


def test_a_host_rekeyed_through_another_process_is_known_at_once(conf,
                                                                 database,
                                                                 ctx):
    one, other = manager.ServiceManager(conf), manager.ServiceManager(conf)
    host = COMPUTE_1.register(one, ctx)['uuid']
    COMPUTE_1.report(one, ctx, report_of(host, 1))
    db_api.forget_host_key(ctx, 'compute-1')
    rebuilt = keys.Agent('compute-1')
    rebuilt.register(other, ctx)
    rebuilt.report(one, ctx, report_of(host, 2))
    assert db_api.get_host(ctx, host)['last_sequence'] == 2
    COMPUTE_1.report(one, ctx, report_of(host, 3))
    assert db_api.get_host(ctx, host)['last_sequence'] == 2
    assert one.counters['refused'] == 1


def test_a_forgotten_key_is_refused_once_no_longer_remembered(service,
                                                              ctx):
    host = COMPUTE_1.register(service, ctx)['uuid']
    COMPUTE_1.report(service, ctx, report_of(host, 1))
    db_api.forget_host_key(ctx, 'compute-1')
    later = manager.time.monotonic() + manager.IDENTITY_SECONDS + 1
    with mock.patch.object(manager.time, 'monotonic', return_value=later):
        COMPUTE_1.report(service, ctx, report_of(host, 2))
    assert db_api.get_host(ctx, host)['last_sequence'] == 1
    assert service.counters['refused'] == 1
