"""Memory pooling from the cloud as stored to decisions and the agent:
the planner reads hosts, instances and memory servers, records pooling
decisions, and the dispatcher sends their paging to the VM's agent."""

from unittest import mock

from memcanal.agent import paging as paged_vm
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.policy import guardrails
from memcanal.service import actions
from memcanal.service import lease_tokens
from memcanal.service import optimizer
from memcanal.service import pooling
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_cross_host_decisions as cross
from memcanal.tests.unit.db import test_pooling as pooled

GIB = 2 ** 30


def cloud(conf):
    """A 12 GiB host whose two 8 GiB VMs (1 GiB working sets) hold more
    than it has, and a lender with a 16 GiB memory server."""
    ctx = memcanal_context.get_admin_context()
    small = db_api.register_host(ctx, 'small', 12 * GIB, 0, 60.0)['uuid']
    # No misses from 1 GiB up: the rest of each VM is cold.
    vms = [dict(stored.sample(uuid, 1), wss={'prl': GIB}, mrc={
        'exact': [[4096, 1.0], [GIB, 0.0], [8 * GIB, 0.0]]})
        for uuid in (stored.VM_1, stored.VM_2)]
    db_api.store_report(ctx, stored.report(small, 1, *vms))
    lender = db_api.register_host(ctx, 'host-2', 64 * GIB, 0, 60.0)['uuid']
    db_api.store_report(ctx, pooled.lender_report(lender, 1))
    pooled.enable_servers(ctx)
    pooled.admit_hosts(ctx, small, lender)
    conf.set_override('enabled', True, 'pooling')
    conf.set_override('mode', 'auto', 'optimizer')
    return ctx, small, lender


def planner(conf):
    return pooling.PoolingPlanner(conf, guardrails.Rails(
        kernel_bytes=64 * 2 ** 20))


def test_a_hot_host_pages_out_to_the_lender_and_the_agent_is_told(
        conf, database):
    ctx, small, lender = cloud(conf)
    [decision] = planner(conf).run(ctx)
    assert (decision['kind'], decision['host_uuid'],
            decision['peer_host_uuid']) == ('pooling', small, lender)
    paging = decision['outputs']['paging']
    # 16 GiB resident on 12: 5.8 GiB out of one VM brings it to 85 %.
    assert paging['host_utilization_after'] <= 0.85
    sender = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    sender._agent_api = mock.Mock()
    assert sender.send(ctx) == 1
    host, uuid, [sent] = sender._agent_api.apply_decision.call_args.args[1:]
    store = 'tls:' + pooled.ADDRESS
    assert (host, uuid, sent['mechanism'], sent['stores']) == (
        'small', decision['uuid'], 'paging', [store])
    assert sent['target_bytes'] == paging['resident_bytes']
    # The lease token lets the VM's pager keep what it lends, no more,
    # on that server alone.
    token = lease_tokens.verify(keys.SERVICE_KEY.public_key(),
                                lease_tokens.decode(
                                    sent['lease_tokens'][store]))
    assert (token.lease_uuid, token.owner, token.quota_pages, token.borrower,
            token.server) == (
        sent['uuid'], paged_vm.owner_of(paging['vm']),
        paging['lent_bytes'] // 4096, 'small', pooled.ADDRESS)
    cross.answer(ctx, decision)
    [server] = pooling_db.list_memory_servers(ctx)
    assert server['lent_bytes'] == paging['lent_bytes']
    # The host is at its target now: nothing more to page.
    assert planner(conf).run(ctx) == []


def test_a_paged_vm_is_left_alone_by_memory_targets(conf, database):
    ctx, small, lender = cloud(conf)
    [decision] = planner(conf).run(ctx)
    cross.answer(ctx, decision)
    paged = [i for i in db_api.host_policy_inputs(ctx, small)
             if i['resident_target_bytes'] is not None]
    assert len(paged) == 1
    assert optimizer.Optimizer(conf)._opted_out(paged[0])


def test_nothing_is_lent_from_a_server_no_operator_enabled(conf, database):
    ctx, small, lender = cloud(conf)
    [server] = pooling_db.list_memory_servers(ctx)
    pooling_db.set_enabled(ctx, server['uuid'], False)
    assert planner(conf).run(ctx) == []
    pooling_db.set_enabled(ctx, server['uuid'], True)
    [decision] = planner(conf).run(ctx)
    assert decision['peer_host_uuid'] == lender


def test_disabled_pooling_decides_nothing(conf, database):
    ctx, small, lender = cloud(conf)
    conf.set_override('enabled', False, 'pooling')
    assert planner(conf).run(ctx) == []
    assert decisions_db.list_decisions(ctx) == []


def test_a_lender_without_room_of_its_own_lends_nothing(conf, database):
    ctx, small, lender = cloud(conf)
    # A lender lends only while its own VMs and leases stay under
    # [pooling] release of its memory.
    conf.set_override('release', 0.0, 'pooling')
    assert planner(conf).run(ctx) == []
