"""Rolling upgrades: clients capped by [upgrade_levels] send at most the
cap's version, and so still reach processes of the previous release
(oslo.messaging's in-process transport; the old processes are endpoints
at their release's version)."""

from unittest import mock

import oslo_messaging as messaging
import pytest

from memcanal import context as memcanal_context
from memcanal.db import decisions as decisions_db
from memcanal import rpc
from memcanal.rpc import agent_api
from memcanal.rpc import service_api
from memcanal.service import actions
from memcanal.tests import keys
from memcanal.tests.unit.db import test_decisions
from memcanal.tests.unit.db.test_decisions import ctx  # noqa: F401
from memcanal.tests.unit.db.test_decisions import host  # noqa: F401
from memcanal.tests.unit.rpc import test_apis


@pytest.fixture
def transport(conf):
    rpc.init(conf, url='fake://')
    yield
    rpc.cleanup()


class ServiceAt15(test_apis.Recorder):
    """A service of the release before 1.6: register_host takes no
    hypervisor type."""

    target = messaging.Target(version='1.5')

    @messaging.expose
    def register_host(self, context, name, memory_total_bytes,
                      memory_reserved_bytes, report_interval=None,
                      host=None, public_key=None, signature=None):
        self.calls.append(('register_host', context, {'name': name}))
        return {'uuid': 'u', 'last_sequence': 0}


def sent_versions(api):
    """A mock of ``api``'s client's prepare (wrapping it): what it was
    called with."""
    return mock.patch.object(api.client, 'prepare', wraps=api.client.prepare)


def versions(prepare):
    """The versions messages were prepared at (every message passes
    ``retry``; can_send_version prepares without)."""
    return [call.kwargs['version'] for call in prepare.call_args_list
            if 'retry' in call.kwargs]


def test_an_agent_capped_at_1_5_talks_to_a_1_5_service(transport):
    old_service = ServiceAt15()
    server = test_apis.serve(rpc.SERVICE_TOPIC, 'central', old_service)
    context = memcanal_context.get_admin_context()
    try:
        capped = service_api.ServiceAPI('h1', test_apis.HOST_KEY,
                                        version_cap='1.5')
        with sent_versions(capped) as prepare:
            assert capped.register_host(
                context, 10, 1, 60.0, timeout=10,
                hypervisor_type='xen')['uuid'] == 'u'
            capped.report(context, {'sequence': 1})
            assert old_service.arrived.wait(10)
        assert versions(prepare) == ['1.5', '1.5']
        # Uncapped, the registration with a hypervisor type is 1.6,
        # which the old service refuses (unanswered).
        newest = service_api.ServiceAPI('h1', test_apis.HOST_KEY)
        with pytest.raises((messaging.UnsupportedVersion,
                            messaging.RemoteError,
                            messaging.MessagingTimeout)):
            newest.register_host(context, 10, 1, 60.0, timeout=2,
                                 hypervisor_type='xen')
    finally:
        server.stop()
        server.wait()
    assert [name for name, _c, _k in old_service.calls] == [
        'register_host', 'report']


def test_an_uncapped_agent_tells_a_new_service_its_hypervisor(transport):
    new_service = test_apis.Recorder()
    server = test_apis.serve(rpc.SERVICE_TOPIC, 'central', new_service)
    api = service_api.ServiceAPI('h1', test_apis.HOST_KEY)
    try:
        with sent_versions(api) as prepare:
            api.register_host(memcanal_context.get_admin_context(), 10, 1,
                              60.0, timeout=10, hypervisor_type='xen')
    finally:
        server.stop()
        server.wait()
    # 1.10: stamped fresh (memcanal.rpc.freshness), with the type.
    assert versions(prepare) == ['1.10']
    [(_name, _context, registered)] = new_service.calls
    assert registered['hypervisor_type'] == 'xen'


def test_a_service_capped_at_1_2_casts_to_a_1_2_agent(transport):
    old_agent = test_apis.Recorder()
    old_agent.target = messaging.Target(version='1.2')
    server = test_apis.serve(rpc.AGENT_TOPIC, 'h1', old_agent)
    try:
        capped = agent_api.AgentAPI(keys.SERVICE_KEY, version_cap='1.2')
        with sent_versions(capped) as prepare:
            capped.apply_decision(memcanal_context.get_admin_context(),
                                  'h1', 'decision-1', [])
            assert old_agent.arrived.wait(10)
    finally:
        server.stop()
        server.wait()
    assert prepare.call_args.kwargs['version'] == '1.2'
    assert capped.client.can_send_version('1.2')
    assert not capped.client.can_send_version('1.3')


def test_a_cap_below_signed_decisions_fails_them(transport, conf, ctx,
                                                 host):  # noqa: F811
    conf.set_override('agent', '1.1', 'upgrade_levels')
    decision = test_decisions.decide(ctx, host, mode='auto')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    assert dispatcher.send_pending(ctx) == 0
    failed = decisions_db.get_decision(ctx, decision['uuid'])
    assert failed['state'] == 'failed'
    assert all('[upgrade_levels] agent' in action['error']
               for action in failed['actions'])


def test_a_cap_must_be_a_version_or_auto(conf):
    with pytest.raises(ValueError):
        conf.set_override('service', 'latest', 'upgrade_levels')
    conf.set_override('service', 'auto', 'upgrade_levels')


def test_a_capped_agent_leaves_the_intervals_out_of_its_reports(transport):
    service = test_apis.Recorder()
    server = test_apis.serve(rpc.SERVICE_TOPIC, 'central', service)
    sample = {'uuid': 'vm-1', 'wss': {'shards': 4096},
              'wss_bounds': {'shards': [1024, 8192]}}
    context = memcanal_context.get_admin_context()
    try:
        for cap in ('1.6', None):
            service.arrived.clear()
            api = service_api.ServiceAPI('h1', test_apis.HOST_KEY,
                                         version_cap=cap)
            with sent_versions(api) as prepare:
                api.report(context, {'sequence': 1, 'instances': [sample]})
                assert service.arrived.wait(10)
            assert versions(prepare) == ['1.5' if cap else '1.10']
    finally:
        server.stop()
        server.wait()
    capped, newest = [kwargs['report']['instances'][0]
                      for _name, _c, kwargs in service.calls]
    assert 'wss_bounds' not in capped and capped['wss'] == sample['wss']
    assert newest == sample


def test_actions_done_goes_at_1_8_unless_capped_below(transport):
    """A result's reached size is 1.8's: sent at 1.8 to a service that
    takes it, at 1.5 (signed, as before) to one capped below."""
    context = memcanal_context.get_admin_context()
    for cap, expected in ((None, '1.10'), ('1.9', '1.8'), ('1.7', '1.5')):
        api = service_api.ServiceAPI('h1', test_apis.HOST_KEY,
                                     version_cap=cap)
        with sent_versions(api) as prepare, mock.patch.object(
                messaging.RPCClient, 'cast'):
            api.actions_done(context, 'd1', [])
        assert versions(prepare) == [expected]
