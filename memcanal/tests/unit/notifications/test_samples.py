"""What memcanal emits, against doc/notification_samples/ (as nova's
test_notification_samples does): a real decision flow on SQLite, each
notification it sends compared with the sample of its event type, the
uuids and times the run made replaced by the sample's."""

import json
import pathlib
import re

import pytest
import sqlalchemy as sa

from memcanal import context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal.db import transitions
from memcanal.notifications import decisions as decision_notifications
from memcanal.notifications import hosts as host_notifications
from memcanal.notifications import objects
from memcanal.tests.unit.api import data

SAMPLES = (pathlib.Path(__file__).parents[4] / 'doc'
           / 'notification_samples')
# Values a run makes afresh, by payload field.
GENERATED = ('uuid', 'host_uuid', 'peer_host_uuid', 'last_heartbeat_at',
             'lender_host_uuid', 'borrower_host_uuid')
UUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  r'[0-9a-f]{12}$')
DATA = 'memcanal_object.data'


def sample_name(event_type):
    """memcanal.decision.apply.end -> decision-apply-end.json"""
    return '%s.json' % event_type[len('memcanal.'):].replace('.', '-')


def comparable(message, sample):
    """``message`` as a sample: its four keys, with the generated values
    of its payload (checked for their form) replaced by the sample's."""
    found = {key: message[key] for key in ('priority', 'event_type',
                                           'publisher_id', 'payload')}
    found['payload'] = dict(found['payload'])
    values = found['payload'][DATA] = dict(found['payload'][DATA])
    for key in GENERATED:
        if values.get(key) is None:
            continue
        assert key == 'last_heartbeat_at' or UUID.match(values[key]), (
            key, values[key])
        values[key] = sample['payload'][DATA][key]
    return found


def check_against_samples(messages):
    """The first message of each event type is its sample; returns the
    samples' names."""
    checked = set()
    for message in messages:
        name = sample_name(message['event_type'])
        if name in checked:
            continue
        sample = json.loads((SAMPLES / name).read_text())
        assert comparable(message, sample) == sample, name
        checked.add(name)
    return checked


def new_decision(ctx, host, uuids=(data.A1,), mode='recommend',
                 target_bytes=3 * data.GIB):
    return decisions_db.create_decision(
        ctx, host, 'memory_targets', 'isolated_sharing', mode,
        {'free_bytes': 0}, {}, [{
            'instance_uuid': uuid, 'target_bytes': target_bytes,
            'previous_bytes': 4 * data.GIB, 'mechanism': 'balloon'}
            for uuid in uuids])


def answer(ctx, decision_uuid, *states, kind='set_target'):
    """The decision's open actions of ``kind`` end in ``states``, one
    each, in the order of their instances."""
    actions = [action for action in decisions_db.get_decision(
        ctx, decision_uuid)['actions'] if action['kind'] == kind
        and action['state'] in ('pending', 'sent')]
    action_delivery.record_results(ctx, decision_uuid, [
        {'uuid': action['uuid'], 'state': state,
         'error': 'the balloon did not move' if state == 'failed' else None,
         'result': None}
        for action, state in zip(actions, states, strict=True)])


def send(ctx, decision_uuid):
    """Claim the decision's pending actions, as the dispatcher does
    before it casts them."""
    return action_delivery.claim(ctx, [
        action['uuid'] for action in decisions_db.get_decision(
            ctx, decision_uuid)['actions'] if action['state'] == 'pending'])


@pytest.fixture
def hosts(database):
    return data.seed()


def test_decision_flow_matches_samples(notified, hosts):
    ctx = context.get_admin_context()
    operator = context.RequestContext(user_id='operator',
                                      project_id='admin-project',
                                      roles=['admin'])
    rejected = new_decision(ctx, hosts['host-a'])
    transitions.request_transition(operator, rejected['uuid'], 'reject',
                                   reason='Not now.')
    # Another change (an identical one would not be recorded)...
    new_decision(ctx, hosts['host-a'], target_bytes=2 * data.GIB)
    # ...and a newer one of the host supersedes it.
    applied = new_decision(ctx, hosts['host-a'])
    transitions.request_transition(operator, applied['uuid'], 'approve')
    send(ctx, applied['uuid'])
    answer(ctx, applied['uuid'], 'applied')
    transitions.request_transition(operator, applied['uuid'], 'rollback')
    # Sending the restores starts no apply.
    send(ctx, applied['uuid'])
    answer(ctx, applied['uuid'], 'applied', kind='restore')
    # One VM of two resized: failed, and rolling that one back fails.
    failed = new_decision(ctx, hosts['host-b'], data.HOST_B_INSTANCES,
                          mode='auto')
    send(ctx, failed['uuid'])
    answer(ctx, failed['uuid'], 'applied', 'failed')
    transitions.request_transition(operator, failed['uuid'], 'rollback')
    answer(ctx, failed['uuid'], 'failed', kind='restore')

    assert [m['event_type'] for m in notified()] == [
        'memcanal.decision.create', 'memcanal.decision.reject',
        'memcanal.decision.create',
        'memcanal.decision.supersede', 'memcanal.decision.create',
        'memcanal.decision.approve', 'memcanal.decision.apply.start',
        'memcanal.decision.apply.end',
        'memcanal.decision.rollback.start',
        'memcanal.decision.rollback.end',
        'memcanal.decision.create', 'memcanal.decision.approve',
        'memcanal.decision.apply.start', 'memcanal.decision.apply.error',
        'memcanal.decision.rollback.start',
        'memcanal.decision.rollback.error']
    checked = check_against_samples(notified())
    # Every event type has its sample, and the flow made each.
    assert checked == {sample_name(objects.EventType(
        object='decision', action=action, phase=phase).to_event_type())
        for action, phase, _ in list(decision_notifications.EVENTS.values())
        + [decision_notifications.STARTED]}


def test_apply_start_once_per_decision(notified, hosts):
    """Of a decision's actions claimed in two sends, the first claim
    notifies its start; a claim that finds nothing pending, none."""
    ctx = context.get_admin_context()
    decision = new_decision(ctx, hosts['host-b'], data.HOST_B_INSTANCES,
                            mode='auto')
    first, second = [action['uuid'] for action in decisions_db.get_decision(
        ctx, decision['uuid'])['actions']]
    assert action_delivery.claim(ctx, [first]) == {first}
    assert action_delivery.claim(ctx, [second]) == {second}
    assert action_delivery.claim(ctx, [first, second]) == set()
    started = [m for m in notified()
               if m['event_type'] == 'memcanal.decision.apply.start']
    assert len(started) == 1
    assert started[0]['payload'][DATA]['uuid'] == decision['uuid']
    assert started[0]['payload'][DATA]['state'] == 'approved'


def test_apply_start_again_after_an_unsent_claim(notified, hosts):
    """Actions claimed and unclaimed (the broker was down) start their
    decision again when next claimed."""
    ctx = context.get_admin_context()
    decision = new_decision(ctx, hosts['host-a'], mode='auto')
    uuids = send(ctx, decision['uuid'])
    action_delivery.unclaim(ctx, uuids)
    assert send(ctx, decision['uuid']) == uuids
    assert [m['event_type'] for m in notified()].count(
        'memcanal.decision.apply.start') == 2


def test_rolled_back_changes_are_not_notified(notified, hosts,
                                             monkeypatch):
    ctx = context.get_admin_context()

    def fail(*args, **kwargs):
        raise RuntimeError('the transaction fails after its flushes')
    with monkeypatch.context() as patched:
        patched.setattr(decisions_db, 'decision_dict', fail)
        with pytest.raises(RuntimeError):
            new_decision(ctx, hosts['host-a'], mode='auto')
    assert notified() == []
    assert decisions_db.list_decisions(ctx) == []
    new_decision(ctx, hosts['host-a'])
    assert [m['event_type'] for m in notified()] == [
        'memcanal.decision.create']


def test_host_register_and_update_match_samples(notified, hosts,
                                                monkeypatch):
    ctx = context.get_admin_context()
    host_notifications.notify_registered(ctx, hosts['host-a'])
    watch = host_notifications.HostWatch()
    assert watch.check(db_api.list_hosts(ctx)) == []       # the first read only learns
    monkeypatch.setattr(db_api, 'host_state', lambda *args: 'down')
    assert [host['name'] for host in watch.check(db_api.list_hosts(ctx))] == ['host-a',
                                                            'host-b']
    assert watch.check(db_api.list_hosts(ctx)) == []
    assert [m['event_type'] for m in notified()] == [
        'memcanal.host.register'] + ['memcanal.host.update'] * 2
    assert {m['priority'] for m in notified()[1:]} == {'WARN'}
    assert check_against_samples(notified()) == {'host-register.json',
                                               'host-update.json'}


def test_a_notification_that_cannot_be_made_fails_no_change(
        notified, hosts, monkeypatch):
    monkeypatch.setitem(decision_notifications.EVENTS, 'recommended',
                        None)
    ctx = context.get_admin_context()
    made = new_decision(ctx, hosts['host-a'], mode='auto')
    assert decisions_db.get_decision(ctx, made['uuid'])['state'] == (
        'approved')
    assert [m['event_type'] for m in notified()] == [
        'memcanal.decision.approve']


def test_lease_create_and_end_match_samples(notified, hosts):
    ctx = context.get_admin_context()
    decision_uuid = '6f1c0ad2-3b8e-4c59-9f47-2d5a8e0b7c14'

    def lend(lent_bytes):
        with db_api.context_manager.writer.using(ctx) as session:
            server = session.execute(sa.select(models.MemoryServer)).scalar()
            if server is None:
                server = models.MemoryServer(
                    uuid='0c6f3e9a-8d21-4b7f-a5e4-93d2c1f0b8a6',
                    host_id=session.execute(sa.select(models.Host.id).where(
                        models.Host.uuid == hosts['host-b'])).scalar_one(),
                    address='203.0.113.7:7643', capacity_bytes=16 * data.GIB,
                    enabled=True)
                session.add(server)
                session.flush()
            instance = session.execute(sa.select(models.Instance).where(
                models.Instance.uuid == data.A1)).scalar_one()
            pooling_db.set_lease(session, instance, server.id, lent_bytes,
                                 decision_uuid)
    lend(3 * data.GIB)
    lend(2 * data.GIB)      # replaced: an end, then a create
    lend(0)
    assert [(m['event_type'], m['payload'][DATA]['lent_bytes'])
            for m in notified()] == [
        ('memcanal.lease.create', 3 * data.GIB),
        ('memcanal.lease.end', 3 * data.GIB),
        ('memcanal.lease.create', 2 * data.GIB),
        ('memcanal.lease.end', 2 * data.GIB)]
    assert check_against_samples(notified()) == {'lease-create.json',
                                               'lease-end.json'}
