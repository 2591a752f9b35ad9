"""Memory pooling across hosts: the cloud as the agents measured it,
through the planner (memcanal.policy.pooling), into pooling decisions.

Each run reads every host that is up with what its live VMs hold
resident, their measured demand and latest miss-ratio curves, and every
registered memory server of a host that is up with what it can still
lend: its capacity less its leases, and no more than keeps its own
host's VMs and leases under [pooling] release of its capacity. A
decision locks the VM's host and the lender's and is refused while
either takes part in another (HostBusy): it is planned again next run.

Only hosts an operator admitted (memcanal.db.pooling.set_admitted)
take part: a host that is not borrows nothing (the plan holds it, "not
admitted") and its server lends nothing (``not_admitted`` names it, in
the log and in the inputs of the run's decisions); the decision checks
both again under the hosts' locks.
"""

from oslo_log import log as logging

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal import exception
from memcanal.policy import demand
from memcanal.policy import pooling
from memcanal.service import optimizer as optimizer_service

LOG = logging.getLogger(__name__)
MIB = 2 ** 20
POLICY = 'pooling'


class PoolingPlanner:
    def __init__(self, conf, rails):
        self.conf = conf
        self.rails = rails
        # VM -> the PolicyCurve the last cloud() read: decisions name it.
        self._curves = {}
        # The last run's plan, and the hosts whose memory servers it
        # left out as not admitted.
        self.last_plan = None
        self.not_admitted = []

    def options(self, busy):
        options = self.conf.pooling
        return pooling.Options(
            threshold=options.threshold, target=options.target,
            release=options.release, delta=options.delta,
            min_page_bytes=options.min_page_mb * MIB,
            busy_hosts=frozenset(busy))

    def _instance(self, instance, lenders_of):
        memory = optimizer_service.memory_of(instance)
        curve = optimizer_service.policy_curve(
            instance['reports'][0] if instance['reports'] else None,
            instance['wss_bytes'], instance['allocated_bytes'],
            self.conf.optimizer.fault_rate_bound)
        self._curves[instance['uuid']] = curve
        return pooling.Instance(
            name=instance['uuid'], memory_bytes=memory,
            resident_bytes=db_api.resident_of(
                memory, instance['resident_target_bytes']),
            floor_bytes=demand.vm_demand(
                memory, instance['demand_wss_bytes'], self.rails),
            flavor_bytes=instance['allocated_bytes'], curve=curve.curve,
            lender=lenders_of.get(instance['uuid']),
            miss_floor=curve.miss_floor(self.conf.pooling.delta))

    def cloud(self, context, listed):
        """(Hosts, Lenders) of the planner: the ``listed`` hosts that are
        up, and their memory servers."""
        admitted = {host['name'] for host in listed
                    if host['pooling_admitted']}
        servers = [s for s in pooling_db.list_memory_servers(context)
                   if s['host_state'] == 'up']
        self.not_admitted = sorted(s['host_name'] for s in servers
                                   if s['host_name'] not in admitted)
        servers = [s for s in servers if s['host_name'] in admitted]
        lenders_of = {lease['instance_uuid']: server['host_name']
                      for server in servers for lease in server['leases']}
        hosts, spare = [], {}
        self._curves = {}
        for host in listed:
            if host['state'] != 'up':
                continue
            instances = db_api.host_policy_inputs(context, host['uuid'])
            hosts.append(pooling.Host(
                name=host['name'], capacity_bytes=host['capacity_bytes'],
                instances=tuple(self._instance(i, lenders_of)
                                for i in instances),
                admitted=host['pooling_admitted']))
            spare[host['name']] = int(
                self.conf.pooling.release * host['capacity_bytes']
                - host['resident_bytes'] - host['lent_bytes'])
        lenders = [
            pooling.Lender(name=server['host_name'], host=server['host_name'],
                           free_bytes=max(0, min(server['free_bytes'],
                                                 spare[server['host_name']])))
            for server in servers if server['host_name'] in spare]
        return hosts, lenders

    def run(self, context):
        """Plan and record pooling decisions; returns those made."""
        if not self.conf.pooling.enabled:
            return []
        pooling_db.end_leases_of_gone(context)
        listed = db_api.list_hosts(context)
        names = {host['uuid']: host['name'] for host in listed}
        uuids = {name: uuid for uuid, name in names.items()}
        busy = [names[uuid] for uuid in decisions_db.busy_hosts(context)]
        hosts, lenders = self.cloud(context, listed)
        plan = pooling.plan(hosts, lenders, self.options(busy))
        self.last_plan = plan
        if self.not_admitted:
            LOG.info('Memory servers of hosts not admitted to pooling lend '
                     'nothing: %s', ', '.join(self.not_admitted))
        for name, held in sorted(plan.held.items()):
            LOG.info('Host %s stays over the pooling threshold (%.0f %%): '
                     '%s', name, 100 * held['utilization'], held['reason'])
        made = []
        for paging in plan.pagings:
            decision = self._record(context, paging, uuids, plan)
            if decision is not None:
                made.append(decision)
        return made

    def _record(self, context, paging, uuids, plan):
        try:
            decision = decisions_db.create_pooling_decision(
                context, paging.vm, paging.resident_bytes,
                uuids[paging.lender] if paging.lender else None,
                paging.lent_bytes, POLICY, self.conf.optimizer.mode,
                {'held': plan.held, 'not_admitted': self.not_admitted},
                {'paging': dict(
                    vars(paging), **self._curves[paging.vm].details(
                        paging.resident_bytes))})
        except exception.HostBusy as busy:
            LOG.info('Paging of %s deferred: %s', paging.vm, busy)
            return None
        if decision is not None:
            LOG.info('Decision %s: %s keeps %d MiB resident, %d MiB lent '
                     'by %s (%s)', decision['uuid'], paging.vm,
                     paging.resident_bytes // MIB, paging.lent_bytes // MIB,
                     paging.lender or 'nobody', decision['state'])
        return decision
