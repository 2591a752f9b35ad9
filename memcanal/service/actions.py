"""Carrying decisions out: send their actions to the agents, and fail
the ones no agent answers.

The API only changes a decision's state; this periodic job is what
casts the actions of approved (or rolling-back) decisions to the host's
agent, one message per decision. An action is marked sent only after
its cast went out, so a broker outage delays it rather than losing it.
"""

import datetime

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

    @property
    def agent_api(self):
        # Made on first use, once the service's transport exists.
        if self._agent_api is None:
            self._agent_api = agent_api.AgentAPI()
        return self._agent_api

    def send(self, context):
        """Cast every decision's pending actions; returns how many
        decisions were sent."""
        sent = 0
        for batch in decisions_db.actions_to_send(context):
            try:
                self.agent_api.apply_decision(
                    context, batch['host'], batch['decision_uuid'],
                    batch['actions'])
            except messaging.MessagingException:
                LOG.exception('Could not send decision %s to %s; will retry',
                              batch['decision_uuid'], batch['host'])
                continue
            decisions_db.mark_sent(context,
                                   [a['uuid'] for a in batch['actions']])
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
