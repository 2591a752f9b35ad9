"""Migrations off hot hosts: the cloud as the agents measured it, through
the planner (memcanal.policy.migration), into migration decisions.

Each run reads every host that is up with its live VMs' measured demand
and latest miss-ratio curves, remembers since when each host has been
hot (this process's memory: a restarted service waits the hold time
again, the safe side), and records a decision per planned move. A
decision locks its two hosts and is refused while either takes part in
another (HostBusy): the move is planned again next run.
"""

import time

from oslo_log import log as logging

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal import exception
from memcanal import hypervisors
from memcanal.policy import demand
from memcanal.policy import migration
from memcanal.service import optimizer as optimizer_service

LOG = logging.getLogger(__name__)
MIB = 2 ** 20
POLICY = 'migration'


class MigrationPlanner:
    """``server_groups``, when given, is a callable answering {group id:
    (policy, member uuids)} (NovaMigrator.server_groups): moves then keep
    every group's (anti-)affinity."""

    def __init__(self, conf, rails, clock=time.time, server_groups=None):
        self.conf = conf
        self.rails = rails
        self.clock = clock
        self.server_groups = server_groups
        # Host name -> when it was first seen hot in a row (clock()).
        self._hot_since = {}
        # VM -> the PolicyCurve the last cloud() read: decisions name it.
        self._curves = {}
        # Hosts nova does not drive (Xen) are neither sources nor
        # destinations: nova cannot live-migrate their VMs.
        self._passed_by = hypervisors.PassedBy('The migration planner')

    def options(self, in_flight, busy):
        """The planner's options: the migrations left under the cap, and
        no move concerning a host another decision is being carried out
        on, nor two concerning one host (a decision locks both its
        hosts until it ends)."""
        options = self.conf.migration
        return migration.Options(
            threshold=options.threshold, hold_seconds=options.hold_seconds,
            min_gain_bytes=options.min_gain_mb * MIB,
            max_concurrent=max(0, options.max_concurrent - in_flight),
            margin=options.margin, delta=options.delta,
            busy_hosts=frozenset(busy), one_per_host=True)

    def _instance(self, instance, groups_of):
        memory = optimizer_service.memory_of(instance)
        curve = optimizer_service.policy_curve(
            instance['reports'][0] if instance['reports'] else None,
            instance['wss_bytes'], instance['allocated_bytes'],
            self.conf.optimizer.fault_rate_bound)
        self._curves[instance['uuid']] = curve
        return migration.Instance(
            name=instance['uuid'], memory_bytes=memory,
            demand_bytes=demand.vm_demand(
                memory, instance['demand_wss_bytes'], self.rails),
            flavor_bytes=instance['allocated_bytes'], curve=curve.curve,
            server_groups=groups_of.get(instance['uuid'], ()),
            movable=instance['resident_target_bytes'] is None,
            miss_floor=curve.miss_floor(self.conf.migration.delta))

    def cloud(self, context, listed, now, groups_of):
        """The planner's Hosts of the ``listed`` hosts (db_api.list_hosts)
        that are up, with since when each has been above the threshold;
        ``groups_of`` maps a VM to the server groups it is in."""
        hosts = []
        self._curves = {}
        threshold = self.conf.migration.threshold
        for host in listed:
            if host['state'] != 'up' or self._passed_by(host):
                self._hot_since.pop(host['name'], None)
                continue
            if host['utilization'] is not None and (
                    host['utilization'] > threshold):
                self._hot_since.setdefault(host['name'], now)
            else:
                self._hot_since.pop(host['name'], None)
            instances = db_api.host_policy_inputs(context, host['uuid'])
            hosts.append(migration.Host(
                name=host['name'], capacity_bytes=host['capacity_bytes'],
                instances=tuple(self._instance(i, groups_of)
                                for i in instances),
                availability_zone=host['availability_zone'],
                over_threshold_since=self._hot_since.get(host['name']),
                # The ratio memcanal set in placement, which admits a
                # destination's flavors up to it (unknown: unchecked).
                allocation_ratio=host['allocation_ratio']))
        return hosts

    def run(self, context):
        """Plan and record migrations; returns the decisions made."""
        if not self.conf.migration.enabled:
            return []
        now = self.clock()
        groups = self.server_groups() if self.server_groups else {}
        groups_of = {}
        for group_id, (_policy, members) in groups.items():
            for member in members:
                groups_of.setdefault(member, []).append(group_id)
        listed = db_api.list_hosts(context)
        hosts = self.cloud(context, listed, now, {
            uuid: tuple(ids) for uuid, ids in groups_of.items()})
        in_flight = decisions_db.count_in_flight(context, 'migration')
        names = {host['uuid']: host['name'] for host in listed}
        busy = [names[uuid] for uuid in decisions_db.busy_hosts(context)]
        plan = migration.plan(
            hosts, now, groups={group_id: policy for group_id, (policy, _m)
                                in groups.items()},
            options=self.options(in_flight, busy))
        for name, held in sorted(plan.held.items()):
            LOG.info('Host %s stays hot (%.0f %%): %s', name,
                     100 * held['utilization'], held['reason'])
        uuids = {name: uuid for uuid, name in names.items()}
        made = []
        for move in plan.moves:
            decision = self._record(context, move, uuids, plan)
            if decision is not None:
                made.append(decision)
        return made

    def _record(self, context, move, uuids, plan):
        try:
            decision = decisions_db.create_migration(
                context, move.vm, uuids[move.destination], POLICY,
                self.conf.optimizer.mode,
                {'plan': plan.details, 'held': plan.held},
                {'move': dict(vars(move), **self._curves[move.vm].details(
                    move.destination_memory_bytes))})
        except exception.HostBusy as busy:
            LOG.info('Migration of %s deferred: %s', move.vm, busy)
            return None
        if decision is not None:
            LOG.info('Decision %s: migrate %s from %s to %s (%s)',
                     decision['uuid'], move.vm, move.source,
                     move.destination, decision['state'])
        return decision
