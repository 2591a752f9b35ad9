"""Carrying decisions out: each action to what executes it, and failing
the ones nothing answers.

The API only changes a decision's state; this periodic job is what
carries out the actions of approved (or rolling-back) decisions:

- memory targets and pooling's paging: cast to the host's agent, one
  message per decision, signed with [service] signing_key (a paging
  action with a lease token for each memory server it stores to);
- migrations: nova's API live-migrates the VM ([migration] executor
  nova), followed on every run until nova says where it ended; or, on
  simulated hosts (executor agent), cast to the agent of the host the VM
  is on, which moves it;
- allocation ratios: set in placement by the service itself, at once.

An action is claimed (marked sent) before its cast or request goes out,
so that of several service processes only one sends it, and unclaimed
when the cast failed, so a broker outage delays it rather than losing
it. A cast that went
out may still be lost (a broker restarted before the agent took it, an
agent killed in the middle of it, an answer lost): actions no agent
answered within [optimizer] action_resend_interval are sent again, every
such interval, until [optimizer] action_timeout fails them. The agent's
journal (memcanal.agent.journal) applies each once; nova is asked to
migrate a VM only when it is neither there nor migrating; placement is
given a ratio it may already hold.
"""

import datetime
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from memcanal.conf import upgrade_levels
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import rpc_versions
from memcanal.rpc import agent_api
from memcanal.service import lease_upkeep
from memcanal.service import nova_migration
from memcanal.service import placement

LOG = logging.getLogger(__name__)
AGENT, NOVA, PLACEMENT = 'agent', 'nova', 'placement'
# Seconds [upgrade_levels] agent = auto keeps the agents' oldest version
# before it reads them again: an agent of an older release that
# registers meanwhile may miss what it cannot read for that long.
AUTO_CAP_SECONDS = 60.0
NO_SIGNING_KEY = ('The service has no [service] signing_key: it cannot '
                  'sign actions, and agents apply no other.')


class ActionDispatcher:
    """Sends what approved decisions do to what carries it out.

    ``signing_key`` (an Ed25519PrivateKey, [service] signing_key) signs
    the casts to agents and the lease tokens of page actions; without
    it, actions meant for agents fail at once.
    """

    def __init__(self, conf, migrator=None, updater=None, signing_key=None):
        self.conf = conf
        self.signing_key = signing_key
        self._agent_api = None
        # ``auto``'s cap and when it was read (time.monotonic()).
        self._auto = None
        self._migrator = migrator
        self._updater = updater
        # When this service last sent each unanswered action again
        # (time.monotonic()); a restarted service sends them at once.
        self._resent_at = {}

    def agent_api(self, context):
        """The client to the agents, capped at [upgrade_levels] agent
        (``auto``: self._auto_cap). Made on first use, once the
        service's transport exists."""
        cap = self.conf.upgrade_levels.agent
        if cap == upgrade_levels.AUTO:
            cap = self._auto_cap(context)
            if self._agent_api is not None and (
                    self._agent_api.version_cap != cap):
                LOG.info('Agent RPC version cap now %s', cap)
                self._agent_api = None
        if self._agent_api is None:
            self._agent_api = agent_api.AgentAPI(self.signing_key, cap)
        return self._agent_api

    def _auto_cap(self, context):
        """The oldest agent API version the registered hosts' agents
        serve (memcanal.db.rpc_versions), read again every
        AUTO_CAP_SECONDS; the newest without hosts."""
        now = time.monotonic()
        if self._auto is None or now - self._auto[1] >= AUTO_CAP_SECONDS:
            self._auto = (rpc_versions.oldest(
                rpc_versions.agent_versions(context),
                unknown=agent_api.AgentAPI.OLDEST)
                or agent_api.AgentAPI.VERSION, now)
        return self._auto[0]

    @property
    def migrator(self):
        if self._migrator is None:
            self._migrator = nova_migration.NovaMigrator.from_conf(self.conf)
        return self._migrator

    @property
    def updater(self):
        if self._updater is None:
            self._updater = placement.PlacementUpdater.from_conf(self.conf)
        return self._updater

    def executor_of(self, batch):
        """Who carries out a batch's actions: AGENT, NOVA or PLACEMENT."""
        if batch['kind'] == 'allocation_ratio':
            return PLACEMENT
        if batch['kind'] == 'migration':
            return self.conf.migration.executor
        return AGENT

    @staticmethod
    def _agent_host(batch):
        """The agent to cast to: a migration's goes to the host the VM
        is on (its source, or its destination when rolling back)."""
        if batch['kind'] == 'migration':
            return batch['actions'][0]['source_host']
        return batch['host']

    def _with_lease_tokens(self, host, action):
        """A page action with a lease token (memcanal.service.lease_tokens)
        for each of its ``tls:`` stores, by store: the lease is the
        action's, for the VM's pages, as many as it lends, to ``host``
        (the borrower) on that server, for [pooling] lease_lifetime
        (memcanal.service.lease_upkeep renews it while the lease
        lives)."""
        if not action.get('stores'):
            return action
        return dict(action, lease_tokens=lease_upkeep.sign_tokens(
            self.signing_key, self.conf.pooling.lease_lifetime,
            action['uuid'], action['instance_uuid'], action['lent_bytes'],
            host, action['stores']))

    @staticmethod
    def _public_key(context, host, actions):
        """The host key lease tokens are sealed to (agent RPC 1.4), if
        an action carries any."""
        if not any(action.get('lease_tokens') for action in actions):
            return None
        identity = db_api.host_identity(context, host)
        return identity['public_key'] if identity else None

    def _fail(self, context, batch, error):
        LOG.error('Decision %s fails: %s', batch['decision_uuid'], error)
        action_delivery.record_results(
            context, batch['decision_uuid'],
            [_outcome(action, 'failed', error) for action in batch['actions']])

    def _cast(self, context, batch):
        host = self._agent_host(batch)
        if self.signing_key is None:
            self._fail(context, batch, NO_SIGNING_KEY)
            return False
        try:
            actions = [self._with_lease_tokens(host, action)
                       for action in batch['actions']]
        except ValueError as error:
            self._fail(context, batch, 'No lease token: %s' % error)
            return False
        try:
            self.agent_api(context).apply_decision(
                context, host, batch['decision_uuid'], actions,
                host_public_key=self._public_key(context, host, actions))
        except ValueError as error:
            self._fail(context, batch, 'No lease token: %s' % error)
            return False
        except messaging.RPCVersionCapError as error:
            self._fail(context, batch, '[upgrade_levels] agent is below '
                       'what decisions need: %s' % error)
            return False
        except messaging.MessagingException:
            LOG.exception('Could not send decision %s to %s; will retry',
                          batch['decision_uuid'], host)
            return False
        return True

    def _start_migrations(self, context, batch):
        """Ask nova to migrate; a refusal fails the action."""
        refused = []
        for action in batch['actions']:
            try:
                self.migrator.start(action['instance_uuid'],
                                    action['destination_host'])
            except Exception as exc:
                LOG.warning('nova refused to migrate %s to %s: %s',
                            action['instance_uuid'],
                            action['destination_host'], exc)
                refused.append(_outcome(action, 'failed', str(exc)))
        if refused:
            action_delivery.record_results(
                context, batch['decision_uuid'], refused)
        return len(refused) < len(batch['actions'])

    def _set_ratios(self, context, batch):
        """Set each ratio in placement and record the outcome at once."""
        outcomes = []
        for action in batch['actions']:
            try:
                result = self.updater.apply(batch['host'],
                                            action['allocation_ratio'])
                outcomes.append(_outcome(action, 'applied', result=result))
            except Exception as exc:
                LOG.warning('Could not set the allocation ratio of %s: %s',
                            batch['host'], exc)
                outcomes.append(_outcome(action, 'failed', str(exc)))
        action_delivery.record_results(context, batch['decision_uuid'],
                                       outcomes)
        return True

    def send(self, context):
        """Everything a single service process does with actions: send
        the pending ones, then follow up (follow_up); returns how many
        decisions were sent."""
        return self.send_pending(context) + self.follow_up(context)

    def send_pending(self, context):
        """Carry out every decision's pending actions, each claimed first
        (action_delivery.claim): of several service processes sending at
        once, each action goes out from one. Returns how many decisions
        were sent."""
        sent = 0
        for batch in action_delivery.actions_to_send(context):
            claimed = action_delivery.claim(
                context, [a['uuid'] for a in batch['actions']])
            if not claimed:
                continue
            batch = dict(batch, actions=[a for a in batch['actions']
                                         if a['uuid'] in claimed])
            executor = self.executor_of(batch)
            if executor == PLACEMENT:
                sent += self._set_ratios(context, batch)
            elif executor == NOVA:
                sent += self._start_migrations(context, batch)
            elif self._cast(context, batch):
                sent += 1
            else:
                action_delivery.unclaim(context, claimed)
        return sent

    def follow_up(self, context, served=list):
        """Follow nova's migrations and send again what no agent
        answered, of the decisions ``served(batches)`` keeps: each
        service process those of the hosts it serves
        (memcanal.service.coordination); returns how many decisions were
        sent again."""
        self.follow_migrations(context, served)
        return self.resend(context, served)

    def follow_migrations(self, context, served=list):
        """Record the migrations nova finished or failed since."""
        for batch in served(action_delivery.unanswered_actions(
                context, timeutils.utcnow())):
            if self.executor_of(batch) != NOVA:
                continue
            outcomes = []
            for action in batch['actions']:
                try:
                    state, error = self.migrator.poll(
                        action['instance_uuid'], action['destination_host'])
                except Exception:
                    LOG.exception('Could not ask nova about %s',
                                  action['instance_uuid'])
                    continue
                if state != nova_migration.IN_PROGRESS:
                    outcomes.append(_outcome(action, state, error))
            if outcomes:
                action_delivery.record_results(
                    context, batch['decision_uuid'], outcomes)

    def resend(self, context, served=list):
        """Cast again the actions sent more than
        [optimizer] action_resend_interval ago that no agent answered, at
        most once per interval; returns how many decisions were sent."""
        interval = self.conf.optimizer.action_resend_interval
        batches = [batch for batch in served(
            action_delivery.unanswered_actions(
                context, timeutils.utcnow() - datetime.timedelta(
                    seconds=interval)))
            if self.executor_of(batch) == AGENT]
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
                     'to %s again', batch['decision_uuid'],
                     self._agent_host(batch))
            if self._cast(context, batch):
                self._resent_at.update(dict.fromkeys(uuids, now))
                sent += 1
        return sent

    def fail_unanswered(self, context):
        """Fail what no agent answered within [optimizer] action_timeout,
        and nova's migrations past [migration] migration_timeout."""
        now = timeutils.utcnow()
        nova_kinds = (('migration',) if self.conf.migration.executor == NOVA
                      else ())
        failed = action_delivery.fail_unanswered(
            context, now - datetime.timedelta(
                seconds=self.conf.optimizer.action_timeout),
            kinds=[kind for kind in decisions_db.FORWARD_ACTIONS
                   if kind not in nova_kinds])
        if nova_kinds:
            failed += action_delivery.fail_unanswered(
                context, now - datetime.timedelta(
                    seconds=self.conf.migration.migration_timeout),
                kinds=nova_kinds)
        for decision_uuid in failed:
            LOG.warning('No answer for decision %s in time', decision_uuid)
        return failed


def _outcome(action, state, error=None, result=None):
    return {'uuid': action['uuid'], 'state': state, 'error': error,
            'result': result}
