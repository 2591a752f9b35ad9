"""``[upgrade_levels] ... = auto``: caps from the versions the other
side's processes report (memcanal.db.rpc_versions), against endpoints
of this release and of the previous ones over oslo.messaging's
in-process transport, as test_upgrade_levels.py does for set caps."""

import datetime
from unittest import mock

import oslo_messaging as messaging
from oslo_utils import timeutils
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import rpc_versions
from memcanal import rpc
from memcanal.rpc import service_api
from memcanal.service import actions
from memcanal.service import manager
from memcanal.tests import keys
from memcanal.tests.unit.db import test_decisions
from memcanal.tests.unit.db.test_decisions import ctx  # noqa: F401
from memcanal.tests.unit.db.test_decisions import host  # noqa: F401
from memcanal.tests.unit.rpc import test_apis
from memcanal.tests.unit.rpc.test_apis import transport  # noqa: F401
from memcanal.tests.unit.rpc import test_upgrade_levels as levels

SAMPLE = {'uuid': 'vm-1', 'wss': {'shards': 4096},
          'wss_bounds': {'shards': [1024, 8192]}}


class ServiceAt19(test_apis.Recorder):
    """A service of this release whose oldest running process serves
    ``oldest``."""

    def __init__(self, oldest):
        super().__init__()
        self.oldest = oldest

    @messaging.expose
    def register_host(self, context, **kwargs):
        self.calls.append(('register_host', context, kwargs))
        return {'uuid': 'u', 'last_sequence': 0,
                'service_version': self.oldest}


def registered_then_reported(endpoint):
    """What an agent under ``auto`` sent ``endpoint``: the versions it
    prepared, the registrations and reports that arrived, and its cap."""
    server = test_apis.serve(rpc.SERVICE_TOPIC, 'central', endpoint)
    context = memcanal_context.get_admin_context()
    api = service_api.ServiceAPI('h1', test_apis.HOST_KEY,
                                 version_cap='auto')
    try:
        with mock.patch.object(rpc, 'get_client',
                               wraps=rpc.get_client) as get_client:
            api.register_host(context, 10, 1, 60.0, timeout=5,
                              hypervisor_type='xen', agent_version='1.2')
            with levels.sent_versions(api) as prepare:
                api.report(context, {'sequence': 1, 'instances': [SAMPLE]})
                assert endpoint.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    caps = [call.kwargs['version_cap'] for call in get_client.call_args_list]
    return caps, levels.versions(prepare), endpoint.calls, api.version_cap


def test_an_auto_agent_caps_at_the_oldest_service_its_service_answers(
        transport):  # noqa: F811
    caps, sent, calls, cap = registered_then_reported(ServiceAt19('1.6'))
    assert caps == ['1.10', '1.6'] and cap == '1.6'
    [(_, _, registered), (_, _, reported)] = calls
    assert registered['agent_version'] == '1.2'
    assert registered['hypervisor_type'] == 'xen'
    # Below 1.7: the report goes at 1.5, without its intervals.
    assert sent == ['1.5']
    assert 'wss_bounds' not in reported['report']['instances'][0]


def test_an_auto_agent_sends_all_a_new_service_reads(
        transport):  # noqa: F811
    caps, sent, calls, cap = registered_then_reported(ServiceAt19('1.9'))
    assert cap == '1.9' and sent == ['1.7']
    assert calls[1][2]['report']['instances'][0] == SAMPLE


def test_an_auto_agent_takes_a_service_that_cannot_say_for_the_oldest(
        transport):  # noqa: F811
    """A service before 1.9 refuses the registration at 1.10 and 1.9;
    the agent registers again at 1.5 (signed: the oldest version the
    service reads), and caps there."""
    caps, sent, calls, cap = registered_then_reported(levels.ServiceAt15())
    assert cap == '1.5' and caps[-1] == '1.5' and sent == ['1.5']
    assert [name for name, _c, _k in calls] == ['register_host', 'report']


def test_the_oldest_version_reads_versions_as_numbers():
    assert rpc_versions.oldest(['1.10', '1.9'], unknown='1.2') == '1.9'
    assert rpc_versions.oldest(['1.9', None], unknown='1.2') == '1.2'
    assert rpc_versions.oldest([], unknown='1.2') is None


def test_an_auto_service_casts_at_the_oldest_agents_version(
        transport, conf, ctx, host):  # noqa: F811
    conf.set_override('agent', 'auto', 'upgrade_levels')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    # One host whose agent says 1.2, and the fixture's, which says none.
    db_api.register_host(ctx, 'h-new', 2 ** 34, 0, agent_version='1.2')
    assert rpc_versions.agent_versions(ctx) == {'1.2', None}
    assert dispatcher.agent_api(ctx).version_cap == '1.2'
    old_agent = test_apis.Recorder()
    old_agent.target = messaging.Target(version='1.2')
    server = test_apis.serve(rpc.AGENT_TOPIC, 'compute-1', old_agent)
    test_decisions.decide(ctx, host, mode='auto')
    try:
        assert dispatcher.send_pending(ctx) == 1
        assert old_agent.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    [(name, _c, _k)] = old_agent.calls
    assert name == 'apply_decision'


def test_an_auto_cap_is_read_again_after_a_while(conf, ctx, monkeypatch):
    conf.set_override('agent', 'auto', 'upgrade_levels')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    read = []
    monkeypatch.setattr(rpc_versions, 'agent_versions',
                        lambda context: read.append(1) or {'1.1'})
    monkeypatch.setattr(actions.agent_api, 'AgentAPI', mock.Mock())
    clock = iter([0.0, 30.0, 61.0])
    monkeypatch.setattr(actions.time, 'monotonic', lambda: next(clock))
    for _ in range(3):
        dispatcher.agent_api(ctx)
    assert len(read) == 2


def test_the_service_answers_the_oldest_running_service_version(
        conf, ctx):  # noqa: F811
    service = manager.ServiceManager(conf)
    # A process that stopped ten minutes ago counts no more.
    timeutils.set_time_override(timeutils.utcnow() - datetime.timedelta(
        minutes=10))
    try:
        rpc_versions.record_service(ctx, 'controller-gone', '1.6')
    finally:
        timeutils.clear_time_override()
    rpc_versions.record_service(ctx, 'controller-2', '1.8')
    service.record_service()
    agent = keys.Agent('compute-1')
    registered = agent.register(service, ctx, agent_version='1.2')
    assert registered['service_version'] == '1.8'
    assert rpc_versions.agent_versions(ctx) == {'1.2'}
    # Refreshed, the stopped one is running again.
    rpc_versions.record_service(ctx, 'controller-gone', '1.6')
    assert agent.register(service, ctx)['service_version'] == '1.6'
    # An agent of a release before 1.9 says nothing: its version is
    # forgotten, it counts as the oldest.
    assert rpc_versions.agent_versions(ctx) == {None}


def test_a_registration_with_a_bad_agent_version_is_refused(conf, ctx):
    service = manager.ServiceManager(conf)
    # Refused as every refusal is (an expected exception over RPC).
    with pytest.raises(messaging.ExpectedException):
        keys.Agent('compute-1').register(service, ctx, agent_version='x')


def test_an_auto_agent_falls_back_to_1_9_unstamped_no_replay_window(
        transport):  # noqa: F811
    """A service of the release before (1.9) refuses the registration at
    1.10 (stamped); the agent registers again at 1.9, learns the
    service's version and sends what 1.9 reads: no freshness, which
    such a service would refuse (memcanal.rpc.freshness)."""
    old = ServiceAt19('1.9')
    old.target = messaging.Target(version='1.9')
    caps, sent, calls, cap = registered_then_reported(old)
    assert caps == ['1.10', '1.9', '1.9'] and cap == '1.9'
    assert sent == ['1.7']
    [(_, _, registered), (_, _, reported)] = calls
    assert registered['agent_version'] == '1.2'
    assert 'sent_at' not in registered and 'nonce' not in reported
