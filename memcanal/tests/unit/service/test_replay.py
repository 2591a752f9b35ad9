"""An attacker's replays of agents' messages (issue #36): a message read
off the broker and sent again is refused, counted and recorded with its
host's rejections, whatever became of the original
(memcanal.rpc.freshness, memcanal.db.replays)."""

import datetime
from unittest import mock

from cryptography.hazmat.primitives.asymmetric import ed25519
import oslo_messaging as messaging
from oslo_utils import timeutils
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import metrics as db_metrics
from memcanal.db import retention
from memcanal.rpc import service_api
from memcanal.service import manager
from memcanal.tests import captured
from memcanal.tests.unit.rpc import test_reports
from memcanal.tests.unit.rpc.test_apis import transport  # noqa: F401

GIB = 2 ** 30
T0 = datetime.datetime(2026, 12, 2, 9, 0)
VM = test_reports.good_report()['instances'][0]


@pytest.fixture
def clock():
    """Set the clock (timeutils.utcnow) to ``T0 + seconds``."""
    with mock.patch.object(timeutils, 'utcnow') as utcnow:
        def at(seconds):
            utcnow.return_value = T0 + datetime.timedelta(seconds=seconds)
        at(0)
        yield at


@pytest.fixture
def service(conf, database, transport):  # noqa: F811
    return manager.ServiceManager(conf)


@pytest.fixture
def ctx():
    return memcanal_context.get_admin_context()


class Agent:
    """The agent of ``name``, capped at ``cap``: what its ServiceAPI puts
    on the wire, taken off it as anyone with the broker's credentials
    can."""

    def __init__(self, name, cap=None, key=None):
        self.key = key or ed25519.Ed25519PrivateKey.generate()
        self.api = service_api.ServiceAPI(name, self.key, cap)

    def registration(self, memory_total_bytes):
        return captured.sent(self.api, 'register_host', memory_total_bytes,
                             0, 60.0)

    def report(self, host_uuid, sequence, *instances):
        return captured.sent(self.api, 'report', dict(
            test_reports.good_report(), host_uuid=host_uuid,
            sequence=sequence, instances=list(instances)))


def rejections(ctx):
    """{code: count} as GET /metrics shows memcanal_report_rejections."""
    return dict(db_metrics.scrape(ctx, per_instance=False)['rejections'])


@pytest.mark.parametrize('cap', [None, '1.9'])
def test_a_report_replayed_after_retention_folded_it_is_refused(
        service, ctx, conf, clock, cap):
    """The audit's report: sent again once retention had deleted its
    row, it was stored again, undeleting its VM and refreshing the
    host's heartbeat. Refused now, from agents of this release and of
    the one before (unstamped) alike: the host row keeps the highest
    sequence retention folded."""
    conf.set_override('instance_gone_after', 30, 'service')
    agent = Agent('compute-1', cap)
    host = service.register_host(ctx, **agent.registration(64 * GIB))
    first = agent.report(host['uuid'], 1, VM)
    service.report(ctx, **first)
    clock(60)
    service.report(ctx, **agent.report(host['uuid'], 2, VM))
    clock(120)
    service.report(ctx, **agent.report(host['uuid'], 3))
    assert service.mark_gone_instances() == [VM['uuid']]
    retention.fold_reports(ctx, T0 + datetime.timedelta(days=30), 3600,
                           100)
    assert db_api.stored_sequences(ctx, host['uuid'], [1, 2, 3])[
        'stored'] == [2]
    heartbeat = db_api.get_host(ctx, host['uuid'])['last_heartbeat_at']
    clock(180)
    # Another service process, which never saw the report's nonce.
    other = manager.ServiceManager(conf)
    other.report(ctx, **first)
    assert db_api.get_instance(ctx, VM['uuid'])['deleted_at'] is not None
    after = db_api.get_host(ctx, host['uuid'])
    assert after['last_heartbeat_at'] == heartbeat
    assert after['reports_rejected'] == 1
    assert rejections(ctx) == {'report.replayed': 1}
    assert other.counters['rejected'] == 1
    # The agent's outbox, asking, hears it settled.
    assert db_api.stored_sequences(ctx, host['uuid'], [1]) == {
        'stored': [], 'rejected': [1]}


def test_a_replayed_registration_cannot_roll_the_memory_back(
        service, ctx, conf, clock):
    """The audit's registration: 64 GiB, sent again after the host had
    registered 128 GiB. Refused as older than the host's newest (in a
    process that never saw its nonce) and, later, as stale."""
    agent = Agent('compute-1')
    old = agent.registration(64 * GIB)
    host = service.register_host(ctx, **old)
    clock(60)
    service.register_host(ctx, **agent.registration(128 * GIB))
    clock(90)
    other = manager.ServiceManager(conf)
    with pytest.raises(messaging.ExpectedException):
        other.register_host(ctx, **old)
    clock(400)
    with pytest.raises(messaging.ExpectedException):
        service.register_host(ctx, **old)
    after = db_api.get_host(ctx, host['uuid'])
    assert after['memory_total_bytes'] == 128 * GIB
    assert after['reports_rejected'] == 2
    assert rejections(ctx) == {'rpc.replayed': 1, 'rpc.stale': 1}
    assert (service.counters['refused'], other.counters['refused']) == (
        1, 1)


def test_a_report_replayed_after_the_window_is_refused(service, ctx,
                                                       clock):
    agent = Agent('compute-1')
    host = service.register_host(ctx, **agent.registration(64 * GIB))
    first = agent.report(host['uuid'], 1, VM)
    service.report(ctx, **first)
    heartbeat = db_api.get_host(ctx, host['uuid'])['last_heartbeat_at']
    # Within the window, the same process knows its nonce.
    clock(200)
    service.report(ctx, **first)
    clock(301)
    service.report(ctx, **first)
    assert db_api.get_host(ctx, host['uuid'])[
        'last_heartbeat_at'] == heartbeat
    assert rejections(ctx) == {'rpc.stale': 1, 'rpc.replayed': 1}
    assert service.counters['refused'] == 2
    # Refused, not rejected: the sequence is not settled, so an agent
    # whose report waited in the queue too long sends it again, fresh.
    assert db_api.stored_sequences(ctx, host['uuid'], [1]) == {
        'stored': [1], 'rejected': []}


def test_unstamped_messages_are_taken_until_their_host_stamps_no_replay(
        service, ctx, clock):
    """Rolling upgrade: an agent of the release before (RPC 1.9, or
    capped there) sends no freshness, and is taken. Once its host has
    sent a stamped message (its agent upgraded), an unstamped one is a
    message captured before, refused; forget-key forgets it."""
    old = Agent('compute-1', '1.9')
    host = service.register_host(ctx, **old.registration(64 * GIB))
    service.report(ctx, **old.report(host['uuid'], 1, VM))
    captured_before = old.report(host['uuid'], 2, VM)
    upgraded = Agent('compute-1', key=old.key)
    service.register_host(ctx, **upgraded.registration(64 * GIB))
    service.report(ctx, **upgraded.report(host['uuid'], 3, VM))
    assert service.counters['stored'] == 2
    service.report(ctx, **captured_before)
    with pytest.raises(messaging.ExpectedException):
        service.register_host(ctx, **old.registration(32 * GIB))
    assert db_api.stored_sequences(ctx, host['uuid'], [2])['stored'] == []
    assert db_api.get_host(ctx, host['uuid'])['memory_total_bytes'] == (
        64 * GIB)
    assert rejections(ctx) == {'rpc.unstamped': 2}
    db_api.forget_host_key(ctx, 'compute-1')
    assert service.register_host(ctx, **old.registration(32 * GIB))[
        'uuid'] == host['uuid']


def test_a_late_report_the_outbox_sends_again_is_stored_not_a_replay(
        service, ctx, clock):
    """Below the host's highest stored sequence but above what retention
    folded, a report not stored is one the agent's outbox sends again
    after a newer one was stored (a database outage): stored, exactly
    once (doc/delivery.md)."""
    agent = Agent('compute-1')
    host = service.register_host(ctx, **agent.registration(64 * GIB))
    late = agent.report(host['uuid'], 1, VM)
    service.report(ctx, **agent.report(host['uuid'], 2, VM))
    clock(30)
    service.report(ctx, **late)
    assert db_api.stored_sequences(ctx, host['uuid'], [1, 2]) == {
        'stored': [1, 2], 'rejected': []}
    assert rejections(ctx) == {}
