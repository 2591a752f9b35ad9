"""Allocation ratios in placement from measured demand: a decision per
host whose MEMORY_MB ratio should move (memcanal.policy.overcommit).

The ratio placement holds now is read from placement itself (nova or an
operator may have changed it); the new one goes through the decision
flow like any other, in [optimizer] mode, and the dispatcher sets it
(memcanal.service.actions).
"""

from keystoneauth1 import exceptions as ks_exceptions
from oslo_log import log as logging

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal import exception
from memcanal import hypervisors
from memcanal.service import placement

LOG = logging.getLogger(__name__)
POLICY = 'overcommit'


class RatioPlanner:
    def __init__(self, conf, rails, updater=None):
        self.conf = conf
        self.rails = rails
        self._updater = updater
        self._passed_by = hypervisors.PassedBy('The allocation ratio step')

    @property
    def updater(self):
        if self._updater is None:
            self._updater = placement.PlacementUpdater.from_conf(
                self.conf, self.rails)
        return self._updater

    def run(self, context):
        """A ratio decision for every host that is up and whose ratio
        should move; returns the decisions made."""
        if not self.conf.placement.enabled:
            return []
        made = []
        for host in db_api.list_hosts(context):
            if host['state'] != 'up' or self._passed_by(host):
                continue
            decision = self.decide(context, host)
            if decision is not None:
                made.append(decision)
        return made

    def decide(self, context, host):
        instances = db_api.list_instances(context, host_uuid=host['uuid'])
        try:
            proposal = self.updater.proposal(
                host['name'], placement.guests_of(instances))
        except (placement.PlacementError, exception.NotFound,
                ks_exceptions.ClientException) as error:
            LOG.warning('No allocation ratio for %s: %s', host['name'],
                        error)
            return None
        if proposal.ratio is None:
            return None
        try:
            decision = decisions_db.create_ratio_decision(
                context, host['uuid'], proposal.ratio, POLICY,
                self.conf.optimizer.mode, {'proposal': proposal.as_json()},
                {'allocation_ratio': proposal.ratio})
        except exception.HostBusy as busy:
            LOG.info('No allocation ratio for %s now: %s', host['name'],
                     busy)
            return None
        if decision is not None:
            LOG.info('Decision %s: %s MEMORY_MB allocation ratio -> %s (%s)',
                     decision['uuid'], host['name'], proposal.ratio,
                     decision['state'])
        return decision
