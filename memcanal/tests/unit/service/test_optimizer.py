"""The optimizer on stored reports, and sending decisions to agents."""

from unittest import mock

import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal.rpc import reports
from memcanal.service import actions
from memcanal.service import manager
from memcanal.service import optimizer
from memcanal.tests import keys

MIB = 2 ** 20
WEB = '10000000-0000-4000-8000-000000000001'
SEARCH = '20000000-0000-4000-8000-000000000002'
TPCH = '30000000-0000-4000-8000-000000000003'
# Hcache Table 2's shapes, as hcache curves in bytes.
CURVES = {
    WEB: [(64, 0.9), (256, 0.5), (452, 0.42), (512, 0.4), (1024, 0.3)],
    SEARCH: [(64, 1.0), (512, 0.5), (748, 0.32), (920, 0.03)],
    TPCH: [(64, 1.0), (300, 0.6), (336, 0.001), (512, 0.001)],
}


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


def sample(uuid, used_mb=100, project='p1'):
    return {'uuid': uuid, 'project_id': project,
            'allocated_bytes': 512 * MIB, 'target_bytes': None,
            'wss': {'prl': 32 * MIB},
            'mrc': {'hcache': [[size * MIB, ratio]
                               for size, ratio in CURVES[uuid]],
                    'shards': [[4096, 1.0], [512 * MIB, 0.9]]},
            'guest_stats': {'used_bytes': used_mb * MIB, 'swap_bytes': 0.0,
                            'committed_bytes': 64.0 * MIB}}


def store(ctx, host, sequence, used=None):
    used = used or {}
    db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': sequence,
        'collected_at': '2026-11-23T09:00:%02dZ' % sequence,
        'instances': [sample(uuid, used.get(uuid, 100))
                      for uuid in CURVES]},
        max_mrc_points=256, max_instances=10))


@pytest.fixture
def host(ctx):
    uuid = db_api.register_host(ctx, 'compute-1', 4096 * MIB, 2048 * MIB)[
        'uuid']
    store(ctx, uuid, 1)
    return uuid


def test_isolated_sharing_decision_with_predictions(conf, ctx, host):
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert (decision['policy'], decision['state']) == ('isolated_sharing',
                                                       'recommended')
    outputs = decision['outputs']
    assert outputs['policy']['targets'][SEARCH] >= 920 * MIB
    assert outputs['policy']['targets'][TPCH] == 336 * MIB
    # The guardrails allow 5 % of 512 MiB per step.
    step = int(0.05 * 512 * MIB)
    targets = {a['instance_uuid']: a['target_bytes']
               for a in decision['actions']}
    assert targets == {WEB: 512 * MIB - step, SEARCH: 512 * MIB + step,
                       TPCH: 512 * MIB - step}
    search = outputs['instances'][SEARCH]
    assert search['curve'] == 'hcache'
    assert search['guardrails'] == ['step']
    assert search['predicted_miss_ratio'] == pytest.approx(0.5)
    assert decision['inputs']['instances'][WEB]['wss_bytes'] == 32 * MIB
    # While a decision waits, a run (of this process or another) that
    # would recommend the same change records nothing: the operator's
    # approval meets the decision they saw.
    assert optimizer.Optimizer(conf).run(ctx) == []
    # One recommending another change supersedes it.
    conf.set_override('max_step_fraction', 0.1, 'optimizer')
    [again] = optimizer.Optimizer(conf).run(ctx)
    assert decisions_db.get_decision(ctx, decision['uuid'])['state'] == (
        'superseded')
    # While one is carried out, the host gets none.
    transitions.request_transition(ctx, again['uuid'], 'approve')
    assert optimizer.Optimizer(conf).run(ctx) == []


def test_policy_by_aggregate_and_none(conf, ctx, host):
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    conf.set_override('host_aggregates', {'compute-1': 'batch'},
                      'optimizer')
    conf.set_override('aggregate_policies', {'batch': 'esx'}, 'optimizer')
    the_optimizer = optimizer.Optimizer(conf)
    assert the_optimizer.policy_of('compute-1') == 'esx'
    assert the_optimizer.policy_of('compute-2') == 'isolated_sharing'
    [decision] = the_optimizer.run(ctx)
    assert decision['policy'] == 'esx'
    conf.set_override('aggregate_policies', {'batch': 'none'}, 'optimizer')
    assert optimizer.Optimizer(conf).run(ctx) == []


def test_opted_out_vms_and_projects_are_left_alone(conf, ctx, host):
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    db_api.update_instance_settings(ctx, TPCH, {'opt_out': True})
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert TPCH not in {a['instance_uuid'] for a in decision['actions']}
    assert decision['inputs']['instances'][TPCH]['opt_out']
    conf.set_override('opt_out_projects', ['p1'], 'optimizer')
    assert optimizer.Optimizer(conf).run(ctx) == []


def test_hotplug_vms_may_grow_past_boot_memory(conf, ctx, host):
    conf.set_override('delta', 0.25, 'optimizer')
    # By balloon, no VM grows past its boot memory, so there is no
    # memory to move that would lower anyone's misses.
    assert optimizer.Optimizer(conf).run(ctx) == []
    db_api.update_instance_settings(ctx, SEARCH, {'mechanism': 'hotplug'})
    hotplug = optimizer.Optimizer(conf).run(ctx)[0]
    [grow] = [a for a in hotplug['actions'] if a['instance_uuid'] == SEARCH]
    assert (grow['mechanism'], grow['target_bytes'] > 512 * MIB) == (
        'hotplug', True)


def test_utube_uses_guest_statistics(conf, ctx, host):
    conf.set_override('policy', 'utube', 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    store(ctx, host, 2, used={WEB: 500})
    [decision] = optimizer.Optimizer(conf).run(ctx)
    details = decision['outputs']['policy']['details']
    assert details['under_allocated'] == [WEB]
    grows = {a['instance_uuid']: a['target_bytes'] > a['previous_bytes']
             for a in decision['actions']}
    assert grows[WEB]


def test_dispatch_sends_approved_actions_once(conf, ctx, host):
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    conf.set_override('mode', 'auto', 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    dispatcher._agent_api = mock.Mock()
    dispatcher._agent_api.apply_decision.side_effect = [
        messaging.MessagingTimeout(), None]
    # A broker failure leaves the actions to send next time.
    assert dispatcher.send(ctx) == 0
    assert dispatcher.send(ctx) == 1
    assert dispatcher.send(ctx) == 0
    call = dispatcher._agent_api.apply_decision.call_args
    assert call.args[1:3] == ('compute-1', decision['uuid'])
    assert len(call.args[3]) == len(decision['actions'])


def test_results_arrive_through_the_manager(conf, ctx, host):
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    conf.set_override('mode', 'auto', 'optimizer')
    service_manager = manager.ServiceManager(conf)
    agent = keys.Agent('compute-1')
    agent.register(service_manager, ctx, 4096 * MIB, 2048 * MIB)
    [decision] = service_manager.optimize()
    agent.call(service_manager, ctx, 'actions_done',
               decision_uuid=decision['uuid'], results=[
                   {'uuid': a['uuid'], 'state': 'applied', 'error': None,
                    'result': {'seconds': 0.01}}
                   for a in decision['actions']])
    assert decisions_db.get_decision(ctx, decision['uuid'])['state'] == (
        'applied')
    # Unknown decisions are logged, not raised.
    agent.call(service_manager, ctx, 'actions_done', decision_uuid=WEB,
               results=[])
    jobs = [job.__name__ for _, job in service_manager.periodic_jobs()]
    assert jobs == ['record_service', 'mark_gone_instances',
                    'send_actions', 'fail_unanswered_actions',
                    'follow_up_actions', 'watch_hosts', 'optimize',
                    'run_retention']


def test_a_vm_is_counted_at_what_its_guest_reached():
    """A guest that lagged its 512 MiB target at 600 MiB holds 600 of
    its host's memory; an API instance before 1.9 has no reached size."""
    lagging = {'target_bytes': 512 * MIB, 'allocated_bytes': 1024 * MIB,
               'reached_bytes': 600 * MIB}
    assert optimizer.memory_of(lagging) == 600 * MIB
    assert optimizer.memory_of(dict(lagging, reached_bytes=None)) == (
        512 * MIB)
    assert optimizer.memory_of({'target_bytes': None,
                                'allocated_bytes': 1024 * MIB}) == 1024 * MIB
