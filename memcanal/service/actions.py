"""Carrying decisions out: send their actions to the agents, and fail
the ones no agent answers.

The API only changes a decision's state; this periodic job is what
casts the actions of approved (or rolling-back) decisions to the host's
agent, one message per decision. An action is marked sent only after
its cast went out, so a broker outage delays it rather than losing it.
A cast that went out may still be lost (a broker restarted before the
agent took it, an agent killed in the middle of it, an answer lost):
actions no agent answered within [optimizer] action_resend_interval are
sent again, every such interval, until [optimizer] action_timeout fails
them. The agent's journal (memcanal.agent.journal) applies each once.
"""

import datetime
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from memcanal.db import decisions as decisions_db
from memcanal.rpc import agent_api

LOG = logging.getLogger(__name__)


class ActionDispatcher:
    def __init__(self, conf):
        self.conf = conf
        self._agent_api = None
        # When this service last sent each unanswered action again
        # (time.monotonic()); a restarted service sends them at once.
        self._resent_at = {}

    @property
    def agent_api(self):
        # Made on first use, once the service's transport exists.
        if self._agent_api is None:
            self._agent_api = agent_api.AgentAPI()
        return self._agent_api

    def _cast(self, context, batch):
        try:
            self.agent_api.apply_decision(
                context, batch['host'], batch['decision_uuid'],
                batch['actions'])
        except messaging.MessagingException:
            LOG.exception('Could not send decision %s to %s; will retry',
                          batch['decision_uuid'], batch['host'])
            return False
        return True

    def send(self, context):
        """Cast every decision's pending actions, and again those no
        agent answered; returns how many decisions were sent."""
        sent = 0
        for batch in decisions_db.actions_to_send(context):
            if self._cast(context, batch):
                decisions_db.mark_sent(context,
                                       [a['uuid'] for a in batch['actions']])
                sent += 1
        return sent + self.resend(context)

    def resend(self, context):
        """Cast again the actions sent more than
        [optimizer] action_resend_interval ago that no agent answered, at
        most once per interval; returns how many decisions were sent."""
        interval = self.conf.optimizer.action_resend_interval
        batches = decisions_db.unanswered_actions(
            context, timeutils.utcnow() - datetime.timedelta(
                seconds=interval))
        now = time.monotonic()
        unanswered = {action['uuid'] for batch in batches
                      for action in batch['actions']}
        # Forget the actions answered or failed since.
        self._resent_at = {uuid: at for uuid, at in self._resent_at.items()
                           if uuid in unanswered}
        sent = 0
        for batch in batches:
            uuids = [action['uuid'] for action in batch['actions']]
            if any(uuid in self._resent_at
                   and now - self._resent_at[uuid] < interval
                   for uuid in uuids):
                continue
            LOG.info('No agent answered for decision %s yet; sending it '
                     'to %s again', batch['decision_uuid'], batch['host'])
            if self._cast(context, batch):
                self._resent_at.update(dict.fromkeys(uuids, now))
                sent += 1
        return sent

    def fail_unanswered(self, context):
        cutoff = timeutils.utcnow() - datetime.timedelta(
            seconds=self.conf.optimizer.action_timeout)
        failed = decisions_db.fail_unanswered(context, cutoff)
        for decision_uuid in failed:
            LOG.warning('No agent answered for decision %s in time',
                        decision_uuid)
        return failed
