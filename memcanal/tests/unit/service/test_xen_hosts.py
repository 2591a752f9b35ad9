"""Xen hosts in the service: registered as such by their agents, resized
by balloon through the usual decisions, passed by (not refused) by the
steps nova carries out: placement's ratio and migrations."""

import logging
from unittest import mock

import oslo_messaging as messaging
import pytest

from memcanal.db import api as db_api
from memcanal import hypervisors
from memcanal.policy import guardrails
from memcanal.service import manager
from memcanal.service import migrations
from memcanal.service import overcommit
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions
from memcanal.tests.unit.service import test_cross_host

XEN = keys.Agent('xen-1')
GIB = 2 ** 30


@pytest.fixture
def service(conf, database):
    return manager.ServiceManager(conf)


# compute-1 with two VMs reported, as the decision tests have it.
ctx = test_decisions.ctx
host = test_decisions.host


@pytest.fixture
def other(ctx):
    return db_api.register_host(ctx, 'host-2', 64 * GIB, 0, 60.0)['uuid']


def register(service, ctx, agent, hypervisor_type):
    return agent.call(service, ctx, 'register_host', name=agent.name,
                      memory_total_bytes=64 * GIB, memory_reserved_bytes=0,
                      report_interval=60.0,
                      public_key=keys.signing.public_text(agent.key),
                      hypervisor_type=hypervisor_type)


def test_an_agent_registers_its_hypervisor_type(service, ctx):
    host = register(service, ctx, XEN, 'xen')['uuid']
    stored_host = db_api.get_host(ctx, host)
    assert (stored_host['hypervisor_type'],
            stored_host['nova_managed']) == ('xen', False)
    # An agent from before 1.6 says nothing: the type stays.
    XEN.register(service, ctx)
    assert db_api.get_host(ctx, host)['hypervisor_type'] == 'xen'


@pytest.mark.parametrize('bad', ['Xen', 'x' * 33, '', 'xen;drop', 7])
def test_a_type_that_is_not_a_name_is_refused(service, ctx, bad):
    with pytest.raises(messaging.ExpectedException):
        register(service, ctx, XEN, bad)
    assert db_api.list_hosts(ctx) == []


def test_nova_manages_every_type_but_xen():
    assert not hypervisors.nova_managed('xen')
    assert all(hypervisors.nova_managed(kind)
               for kind in ('qemu', 'simulated', None))


def xen_hot_cloud(ctx, host, other):
    test_cross_host.hot_cloud(ctx, host, other)
    db_api.register_host(ctx, 'compute-1', 64 * GIB, GIB, 60.0,
                         hypervisor_type='xen')


def test_the_migration_planner_passes_xen_hosts_by(conf, ctx, host, other,
                                                   caplog):
    xen_hot_cloud(ctx, host, other)
    conf.set_override('enabled', True, 'migration')
    conf.set_override('hold_seconds', 0, 'migration')
    planner = migrations.MigrationPlanner(conf, guardrails.Rails())
    with caplog.at_level(logging.INFO):
        assert planner.run(ctx) == []
        assert planner.run(ctx) == []
    told = [r.getMessage() for r in caplog.records
            if 'passes compute-1 by' in r.getMessage()]
    assert len(told) == 1 and 'a xen host' in told[0]


def test_the_ratio_step_passes_xen_hosts_by(conf, ctx, host):
    db_api.register_host(ctx, 'compute-1', 64 * GIB, GIB, 60.0,
                         hypervisor_type='xen')
    conf.set_override('enabled', True, 'placement')
    updater = mock.Mock()
    assert overcommit.RatioPlanner(conf, guardrails.Rails(),
                                   updater).run(ctx) == []
    updater.proposal.assert_not_called()


def test_a_xen_hosts_vms_are_resized_by_their_xen_working_set(conf, ctx,
                                                              host):
    """The optimizer takes xen_logdirty as the working set (after PRL,
    the sampler and PML) and the write curve as the last curve."""
    db_api.register_host(ctx, 'compute-1', 64 * GIB, GIB, 60.0,
                         hypervisor_type='xen')
    assert guardrails.preferred_wss({'xen_logdirty': 5, 'esx': 9}) == 5
    assert guardrails.preferred_wss({'xen_logdirty': 5, 'pml': 7}) == 7
    sample = dict(stored.sample(stored.VM_1, 2),
                  wss={'xen_logdirty': GIB})
    db_api.store_report(ctx, stored.report(host, 2, sample))
    [instance] = [i for i in db_api.host_policy_inputs(ctx, host)
                  if i['uuid'] == stored.VM_1]
    assert instance['wss_bytes'] == GIB
