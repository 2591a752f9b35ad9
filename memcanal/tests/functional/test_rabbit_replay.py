"""Replays over real RabbitMQ (issue #36): a report and an
``apply_decision`` cast, captured as they crossed the broker and sent
again byte for byte, are refused by the service and the agent processes
(memcanal.rpc.freshness), with ``[rpc] replay_window`` at 10 s."""

import os
import time
import uuid

from oslo_utils import timeutils
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import metrics as db_metrics
from memcanal.rpc import agent_api
from memcanal.rpc import freshness
from memcanal.rpc import signing
from memcanal.tests import captured
from memcanal.tests.functional import services
from memcanal.tests.functional.test_rabbit import cloud  # noqa: F401
from memcanal.tests.functional.test_rabbit import rabbit  # noqa: F401
from memcanal.tests.functional.test_rabbit import register
from memcanal.tests.functional.test_rabbit import stored_host_reports
from memcanal.tests.functional.test_rabbit import victim
from memcanal.tests import keys
from memcanal.tests.unit.rpc import test_reports

WINDOW = 10
MIB = 2 ** 20


@pytest.fixture
def extra_config():
    return '[rpc]\nreplay_window = %d\n' % WINDOW


def rejections():
    """{code: count} as GET /metrics shows memcanal_report_rejections."""
    return dict(db_metrics.scrape(memcanal_context.get_admin_context(),
                                  per_instance=False)['rejections'])


def after_the_window(wire):
    """Sleep until the captured message's sent_at is more than the
    window ago."""
    sent = freshness.sent_at(wire['sent_at'])
    time.sleep(max(0.0, WINDOW + 1 - (
        timeutils.utcnow() - sent).total_seconds()))


def send_again(api, method, kwargs, **target):
    """Put a captured message's arguments on the broker again, as sent:
    a cast at the client's version (its stamp's)."""
    api.client.prepare(version=api.version_cap, **target).cast(
        memcanal_context.get_admin_context(), method, **kwargs)


def test_a_report_captured_on_the_broker_and_replayed_is_refused(
        cloud, rabbit):  # noqa: F811
    cloud['start']('service')
    client = rabbit('compute-direct', keys.Agent('compute-direct').key)
    host = register(client)
    report = dict(test_reports.good_report(), host_uuid=host['uuid'],
                  sequence=1)
    wire = captured.sent(client, 'report', report)
    send_again(client, 'report', wire)
    services.wait_for(lambda: stored_host_reports(), what='the report')
    # At once: the service process saw its nonce.
    send_again(client, 'report', wire)
    services.wait_for(lambda: rejections().get('rpc.replayed'),
                      what='the replay refused')
    # Once the window has passed: stale, whatever the service holds.
    after_the_window(wire)
    send_again(client, 'report', wire)
    services.wait_for(lambda: rejections().get('rpc.stale'),
                      what='the stale replay refused')
    assert [s for _i, s in stored_host_reports()] == [1]
    ctx = memcanal_context.get_admin_context()
    assert db_api.get_host(ctx, host['uuid'])['reports_rejected'] >= 2


def test_a_cast_captured_on_the_broker_is_refused_once_the_journal_forgot(
        cloud, rabbit):  # noqa: F811
    """The audit's cast: applied, forgotten by the agent's journal, and
    sent again after the window: the agent refuses it."""
    cloud['start']('service')
    cloud['start']('agent')
    _host, vms = victim()
    service_key = signing.load_private_key(
        str(cloud['tmp_path'] / 'service.key'))
    api = agent_api.AgentAPI(service_key)
    action = {'uuid': str(uuid.uuid4()), 'instance_uuid': vms[0]['uuid'],
              'target_bytes': vms[0]['allocated_bytes'] - 64 * MIB,
              'mechanism': 'balloon'}
    wire = captured.sent(api, 'apply_decision', 'compute-test',
                         str(uuid.uuid4()), [action])
    log = cloud['tmp_path'] / 'agent.log'
    send_again(api, 'apply_decision', wire, server='compute-test')
    services.wait_for(lambda: 'Applied action %s' % action['uuid']
                      in log.read_text(), what='the action applied')
    # Newer actions pushed it out of the journal (as 4,096 did in the
    # audit): the agent restarts without it.
    cloud['kill']('agent')
    os.remove(cloud['tmp_path'] / 'agent-compute-test.actions' / (
        action['uuid'] + '.json'))
    registered = log.read_text().count('Registered compute-test')
    cloud['start']('agent')
    services.wait_for(lambda: log.read_text().count(
        'Registered compute-test') > registered, what='the agent again')
    after_the_window(wire)
    send_again(api, 'apply_decision', wire, server='compute-test')
    services.wait_for(lambda: 'Refused decision %s' % wire['decision_uuid']
                      in log.read_text(), what='the replayed cast refused')
    text = log.read_text()
    assert text.count('Applied action %s' % action['uuid']) == 1
    assert 'outside the %d s window' % WINDOW in text
