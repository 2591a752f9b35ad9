"""The service's side of at-least-once delivery: which reports it has,
and actions sent again until an agent answers."""

import datetime
from unittest import mock

import oslo_messaging as messaging
from oslo_utils import timeutils
import pytest

from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.service import actions
from memcanal.service import manager
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_decisions
# The database and host with two VMs the decision tests use.
from memcanal.tests.unit.db.test_decisions import ctx  # noqa: F401
from memcanal.tests.unit.db.test_decisions import host  # noqa: F401


def test_stored_reports_answers_from_the_database(conf, ctx, host):
    db_api.store_report(ctx, stored.report(host, 2))
    db_api.record_rejection(ctx, host, 3, 'report.malformed', 'bad')
    # Another host's report 4 is not this host's.
    other = stored.register(ctx, 'compute-2')
    db_api.store_report(ctx, stored.report(other, 4))
    service = manager.ServiceManager(conf)
    agent = keys.Agent('compute-1')
    agent.register(service, ctx)

    def ask(host_uuid, sequences):
        return agent.call(service, ctx, 'stored_reports',
                          host_uuid=host_uuid, sequences=sequences)
    assert ask(host, [1, 2, 3, 4, 5]) == {'stored': [1, 2], 'rejected': [3]}
    # A host asks about its own reports only.
    for someone_else in (other, 'unknown'):
        with pytest.raises(messaging.ExpectedException):
            ask(someone_else, [1])
    # More sequences than one statement takes.
    assert db_api.stored_sequences(ctx, host, list(range(5000)))[
        'stored'] == [1, 2]
    with pytest.raises(ValueError):
        ask(host, ['1'])


@pytest.fixture
def clock():
    """Move the wall clock (oslo's utcnow) and the dispatcher's monotonic
    clock together."""
    now = [timeutils.utcnow(), 1000.0]

    def advance(seconds):
        now[0] += datetime.timedelta(seconds=seconds)
        now[1] += seconds
    with mock.patch.object(timeutils, 'utcnow', lambda: now[0]), \
            mock.patch.object(actions.time, 'monotonic', lambda: now[1]):
        yield advance


def test_unanswered_actions_are_sent_again_until_they_time_out(
        conf, ctx, host, clock):
    conf.set_override('action_resend_interval', 60, 'optimizer')
    conf.set_override('action_timeout', 300, 'optimizer')
    decision = test_decisions.decide(ctx, host, mode='auto')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    dispatcher._agent_api = mock.Mock()
    casts = dispatcher._agent_api.apply_decision.call_args_list
    assert dispatcher.send(ctx) == 1
    clock(59)
    assert dispatcher.send(ctx) == 0
    clock(2)
    assert dispatcher.send(ctx) == 1
    # Once per interval, not on every run of the periodic job.
    clock(30)
    assert dispatcher.send(ctx) == 0
    clock(31)
    assert dispatcher.send(ctx) == 1
    assert len(casts) == 3
    assert casts[0] == casts[1] == casts[2]
    assert casts[0].args[2] == decision['uuid']
    # A restarted service sends them at once.
    restarted = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    restarted._agent_api = dispatcher._agent_api
    assert restarted.send(ctx) == 1
    # Still unanswered at action_timeout (from the first send): failed,
    # and sent no more.
    clock(300 - 122 + 1)
    assert decision['uuid'] in dispatcher.fail_unanswered(ctx)
    assert dispatcher.send(ctx) == 0
    assert decisions_db.get_decision(ctx, decision['uuid'])[
        'state'] == 'failed'


def test_answered_actions_are_not_sent_again(conf, ctx, host, clock):
    decision = test_decisions.decide(ctx, host, mode='auto')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    dispatcher._agent_api = mock.Mock()
    dispatcher.send(ctx)
    clock(conf.optimizer.action_resend_interval + 1)
    assert dispatcher.send(ctx) == 1
    action_delivery.record_results(
        ctx, decision['uuid'], test_decisions.results(
            decision, 'applied', 'applied'))
    clock(datetime.timedelta(days=1).total_seconds())
    assert dispatcher.send(ctx) == 0
    assert dispatcher._resent_at == {}


def test_two_processes_sending_at_once_cast_each_action_once(conf, ctx,
                                                             host):
    """Both read the same pending batch; the claim gives it to one."""
    decision = test_decisions.decide(ctx, host, mode='auto')
    first, second = (actions.ActionDispatcher(conf,
                                              signing_key=keys.SERVICE_KEY)
                     for _ in range(2))
    first._agent_api, second._agent_api = mock.Mock(), mock.Mock()
    pending = action_delivery.actions_to_send(ctx)
    with mock.patch.object(action_delivery, 'actions_to_send',
                           lambda context: pending):
        assert first.send_pending(ctx) == 1
        assert second.send_pending(ctx) == 0
    [cast] = first._agent_api.apply_decision.call_args_list
    assert cast.args[2] == decision['uuid']
    assert second._agent_api.apply_decision.call_args_list == []


def test_a_cast_the_broker_refused_is_pending_again(conf, ctx, host):
    test_decisions.decide(ctx, host, mode='auto')
    dispatcher = actions.ActionDispatcher(conf, signing_key=keys.SERVICE_KEY)
    dispatcher._agent_api = mock.Mock()
    dispatcher._agent_api.apply_decision.side_effect = (
        messaging.MessageDeliveryFailure('broker down'))
    assert dispatcher.send_pending(ctx) == 0
    [batch] = action_delivery.actions_to_send(ctx)
    dispatcher._agent_api.apply_decision.side_effect = None
    assert dispatcher.send_pending(ctx) == 1
    assert action_delivery.actions_to_send(ctx) == []
