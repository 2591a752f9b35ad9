"""Memory pooling in the database: memory servers registered by reports,
pooling decisions locking both hosts, leases following applied actions,
rollback, and what hosts and instances show."""

import pytest
import sqlalchemy as sa

from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal.db import transitions
from memcanal import exception
from memcanal.rpc import reports
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_cross_host_decisions as cross
from memcanal.tests.unit.db import test_decisions as flow

ctx = flow.ctx
host = flow.host
GIB = flow.GIB
ADDRESS = '10.0.0.2:7400'


def lender_report(host_uuid, sequence, capacity=16 * GIB, used=0):
    return reports.validate_report({
        'host_uuid': host_uuid, 'sequence': sequence,
        'collected_at': '2026-11-24T09:00:%02dZ' % sequence,
        'instances': [],
        'memserver': {'address': ADDRESS, 'capacity_bytes': capacity,
                      'used_bytes': used}}, max_mrc_points=256,
        max_instances=10)


def enable_servers(ctx):
    for server in pooling_db.list_memory_servers(ctx):
        pooling_db.set_enabled(ctx, server['uuid'], True)


def admit_hosts(ctx, *host_uuids, admitted=True):
    """An operator admits the hosts to pooling (or stops them)."""
    for uuid in host_uuids:
        pooling_db.set_admitted(ctx, uuid, admitted)


@pytest.fixture
def lender(ctx):
    """host-2, whose memory server an operator enabled, and which an
    operator admitted to pooling, as every host registered before it."""
    uuid = db_api.register_host(ctx, 'host-2', 64 * GIB, 0, 60.0)['uuid']
    db_api.store_report(ctx, lender_report(uuid, 1))
    enable_servers(ctx)
    admit_hosts(ctx, *[h['uuid'] for h in db_api.list_hosts(ctx)])
    return uuid


def page(ctx, lender, resident=2 * GIB, lent=6 * GIB, mode='auto',
         instance=stored.VM_1):
    return decisions_db.create_pooling_decision(
        ctx, instance, resident, lender, lent, 'pooling', mode, {}, {})


def test_a_new_memory_server_lends_nothing_until_enabled(ctx, host):
    lender = db_api.register_host(ctx, 'host-2', 64 * GIB, 0, 60.0)['uuid']
    db_api.store_report(ctx, lender_report(lender, 1))
    [server] = pooling_db.list_memory_servers(ctx)
    assert (server['host_name'], server['address'], server['capacity_bytes'],
            server['enabled'], server['lent_bytes'], server['free_bytes'],
            server['leases']) == (
        'host-2', ADDRESS, 16 * GIB, False, 0, 0, [])
    assert page(ctx, lender) is None
    enabled = pooling_db.set_enabled(ctx, server['uuid'], True)
    assert (enabled['uuid'], enabled['enabled'], enabled['free_bytes']) == (
        server['uuid'], True, 16 * GIB)
    # Enabled, its host still has to be admitted, as the borrower.
    assert page(ctx, lender) is None
    admit_hosts(ctx, host, lender)
    assert page(ctx, lender) is not None
    with pytest.raises(exception.MemoryServerNotFound):
        pooling_db.set_enabled(ctx, stored.VM_1, True)


def test_reports_update_the_memory_server_a_new_address_disables(ctx,
                                                                 lender):
    db_api.store_report(ctx, lender_report(lender, 2, 8 * GIB, GIB))
    [server] = pooling_db.list_memory_servers(ctx)
    assert (server['capacity_bytes'], server['used_bytes'],
            server['enabled']) == (8 * GIB, GIB, True)
    moved = lender_report(lender, 3)
    moved['memserver']['address'] = '10.0.0.9:7400'
    db_api.store_report(ctx, moved)
    [server] = pooling_db.list_memory_servers(ctx)
    assert (server['address'], server['enabled'], server['free_bytes']) == (
        '10.0.0.9:7400', False, 0)


def test_disabling_stops_lending_and_keeps_leases(ctx, host, lender):
    cross.answer(ctx, page(ctx, lender))
    [server] = pooling_db.list_memory_servers(ctx)
    disabled = pooling_db.set_enabled(ctx, server['uuid'], False)
    assert (disabled['enabled'], disabled['lent_bytes'],
            disabled['free_bytes'], len(disabled['leases'])) == (
        False, 6 * GIB, 0, 1)
    assert page(ctx, lender, resident=GIB, lent=7 * GIB) is None


def test_a_report_without_a_memory_server_keeps_it(ctx, lender):
    db_api.store_report(ctx, stored.report(lender, 2))
    assert len(pooling_db.list_memory_servers(ctx)) == 1


def test_paging_locks_both_hosts_and_lends_once_applied(ctx, host, lender):
    decision = page(ctx, lender)
    assert (decision['kind'], decision['state'], decision['peer_host_uuid']
            ) == ('pooling', 'approved', lender)
    assert decisions_db.host_busy(ctx, host)
    assert decisions_db.host_busy(ctx, lender)
    [batch] = action_delivery.actions_to_send(ctx)
    [action] = batch['actions']
    assert (batch['host'], action['target_bytes'], action['mechanism'],
            action['stores'], action['lent_bytes']) == (
        'compute-1', 2 * GIB, 'paging', ['tls:' + ADDRESS], 6 * GIB)
    # Nothing is lent before the agent says the pages went out.
    assert pooling_db.list_memory_servers(ctx)[0]['lent_bytes'] == 0
    assert cross.answer(ctx, decision)['state'] == 'applied'
    [server] = pooling_db.list_memory_servers(ctx)
    [lease] = server['leases']
    assert (server['lent_bytes'], lease['instance_uuid'],
            lease['borrower_host_uuid'], lease['decision_uuid']) == (
        6 * GIB, stored.VM_1, host, decision['uuid'])
    instance = db_api.get_instance(ctx, stored.VM_1)
    assert instance['resident_target_bytes'] == 2 * GIB
    hosts = {h['name']: h for h in db_api.list_hosts(ctx)}
    assert (hosts['compute-1']['resident_bytes'],
            hosts['compute-1']['borrowed_bytes'],
            hosts['host-2']['lent_bytes']) == (10 * GIB, 6 * GIB, 6 * GIB)
    assert db_api.get_host(ctx, lender)['lent_bytes'] == 6 * GIB


def test_a_failed_paging_lends_nothing(ctx, host, lender):
    decision = page(ctx, lender)
    cross.answer(ctx, decision, 'failed')
    assert pooling_db.list_memory_servers(ctx)[0]['leases'] == []
    assert db_api.get_instance(
        ctx, stored.VM_1)['resident_target_bytes'] is None


def test_no_paging_past_the_servers_capacity(ctx, host, lender):
    assert page(ctx, lender, lent=17 * GIB) is None
    cross.answer(ctx, page(ctx, lender, lent=10 * GIB))
    assert page(ctx, lender, lent=7 * GIB, instance=stored.VM_2) is None
    # The VM's own lease on the server counts as free for it.
    assert page(ctx, lender, resident=GIB, lent=7 * GIB) is not None


def test_no_paging_while_either_host_is_busy(ctx, host, lender):
    flow.decide(ctx, host, mode='auto')
    with pytest.raises(exception.HostBusy):
        page(ctx, lender)


def test_same_state_or_unknown_lender_records_nothing(ctx, host, lender):
    cross.answer(ctx, page(ctx, lender))
    assert page(ctx, lender) is None
    assert decisions_db.create_pooling_decision(
        ctx, stored.VM_1, 8 * GIB, None, 0, 'pooling', 'auto', {},
        {}) is not None
    with pytest.raises(exception.HostNotFound):
        page(ctx, '99999999-0000-4000-8000-000000000098')


def test_taking_a_vm_back_ends_its_lease(ctx, host, lender):
    cross.answer(ctx, page(ctx, lender))
    back = decisions_db.create_pooling_decision(
        ctx, stored.VM_1, 8 * GIB, None, 0, 'pooling', 'auto', {}, {})
    [action] = back['actions']
    assert (action['target_bytes'], action['stores']) == (8 * GIB, [])
    cross.answer(ctx, back)
    assert pooling_db.list_memory_servers(ctx)[0]['leases'] == []
    assert db_api.get_instance(
        ctx, stored.VM_1)['resident_target_bytes'] is None


def test_rollback_pages_back_in_and_ends_the_lease(ctx, host, lender):
    decision = page(ctx, lender)
    cross.answer(ctx, decision)
    rolling = transitions.request_transition(
        flow.operator(), decision['uuid'], 'rollback')
    [restore] = [a for a in rolling['actions'] if a['kind'] == 'restore']
    assert (restore['target_bytes'], restore['stores'],
            restore['lent_bytes']) == (8 * GIB, [], 0)
    assert cross.answer(ctx, rolling)['state'] == 'rolled_back'
    assert pooling_db.list_memory_servers(ctx)[0]['leases'] == []
    assert db_api.get_instance(
        ctx, stored.VM_1)['resident_target_bytes'] is None


def test_a_gone_vms_lease_ends(ctx, host, lender):
    cross.answer(ctx, page(ctx, lender))
    with db_api.context_manager.writer.using(ctx):
        instance = ctx.session.execute(
            sa.select(models.Instance).where(
                models.Instance.uuid == stored.VM_1)).scalar_one()
        instance.deleted_at = instance.created_at
    assert pooling_db.end_leases_of_gone(ctx) == 1
    assert pooling_db.list_memory_servers(ctx)[0]['lent_bytes'] == 0


def test_reported_paging_is_what_the_instance_shows(ctx, host):
    db_api.store_report(ctx, stored.report(host, 2, dict(
        stored.sample(stored.VM_1, 2), paging={
            'resident_bytes': 3 * GIB, 'paged_bytes': 5 * GIB,
            'faults': 10, 'swapped_out': 100})))
    instance = db_api.get_instance(ctx, stored.VM_1)
    assert (instance['resident_bytes'], instance['paged_bytes'],
            instance['resident_target_bytes']) == (3 * GIB, 5 * GIB, None)
