"""The central service's RPC endpoint and periodic tasks.

Agents call ``register_host`` and cast ``report``; the manager validates
every report before it stores any of it, stores each (host, sequence) once,
and marks down the hosts that stop reporting. Periodically it runs the
optimizer (memcanal.service.optimizer), sends approved decisions to the
agents (memcanal.service.actions) and records what they did
(``actions_done``).
"""

import threading

import oslo_messaging as messaging
from oslo_log import log as logging

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import retention
from memcanal import exception
from memcanal.rpc import reports
from memcanal.service import actions
from memcanal.service import ingest
from memcanal.service import migrations
from memcanal.service import optimizer
from memcanal.service import overcommit
from memcanal.service import pooling

LOG = logging.getLogger(__name__)


class ServiceManager:
    """Endpoint for memcanal.rpc.service_api.ServiceAPI (version 1.x)."""

    target = messaging.Target(version='1.4')

    def __init__(self, conf):
        self.conf = conf
        self.optimizer = optimizer.Optimizer(conf)
        # nova knows the server groups; simulated VMs are in none.
        self.migrations = migrations.MigrationPlanner(
            conf, self.optimizer.rails, server_groups=(
                (lambda: self.dispatcher.migrator.server_groups())
                if conf.migration.executor == actions.NOVA else None))
        self.ratios = overcommit.RatioPlanner(conf, self.optimizer.rails)
        self.pooling = pooling.PoolingPlanner(conf, self.optimizer.rails)
        self.dispatcher = actions.ActionDispatcher(conf)
        # Outcomes since start; the rejections are also stored, per host.
        self.counters = {'stored': 0, 'duplicate': 0, 'rejected': 0,
                         'failed': 0}
        self._counters_lock = threading.Lock()
        self._writer = ingest.ReportWriter(conf.service.report_batch_size)

    def _count(self, outcome):
        with self._counters_lock:
            self.counters[outcome] += 1

    def register_host(self, context, name, memory_total_bytes,
                      memory_reserved_bytes, report_interval=None):
        host = db_api.register_host(context, name, memory_total_bytes,
                                    memory_reserved_bytes, report_interval)
        LOG.info('Host %s registered as %s (last sequence %d)', name,
                 host['uuid'], host['last_sequence'])
        return host

    def report(self, context, report):
        """Store one agent report, or reject it whole; never raise.

        A cast has nobody to answer, so a bad report is logged, counted and
        recorded with its reason instead. Returns once the report is
        committed, in one transaction with those other threads store
        meanwhile (memcanal.service.ingest).
        """
        host_uuid = report.get('host_uuid') if isinstance(report,
                                                          dict) else None
        sequence = report.get('sequence') if isinstance(report,
                                                        dict) else None
        try:
            valid = reports.validate_report(
                report, self.conf.service.max_mrc_points,
                self.conf.service.max_instances_per_report)
            stored = self._writer.store(valid)
        except exception.InvalidReport as err:
            self._reject(context, host_uuid, sequence, err.code, str(err))
            return
        except exception.HostNotFound as err:
            self._reject(context, host_uuid, sequence, 'report.host_unknown',
                         str(err))
            return
        except Exception:
            # A valid report the database would not take even after
            # retries; nothing of it was stored, and a cast has nobody
            # to raise to.
            self._count('failed')
            LOG.exception('Could not store report %s of host %s', sequence,
                          host_uuid)
            return
        self._count('stored' if stored else 'duplicate')
        if not stored:
            LOG.debug('Report %s of host %s was already stored', sequence,
                      host_uuid)

    def stored_reports(self, context, host_uuid, sequences):
        """RPC 1.3: which of a host's report sequences are stored or
        rejected, from the database: what the service took off the queue
        but has not committed is neither, so the agent sends it again."""
        if not isinstance(host_uuid, str) or not isinstance(
                sequences, list) or not all(
                    isinstance(s, int) and not isinstance(s, bool)
                    for s in sequences):
            raise ValueError('stored_reports takes a host uuid and a list '
                             'of report sequences')
        return db_api.stored_sequences(context, host_uuid, sequences)

    def _reject(self, context, host_uuid, sequence, code, detail):
        self._count('rejected')
        LOG.warning('Rejected report %s of host %s: %s (%s)', sequence,
                    host_uuid, detail, code)
        db_api.record_rejection(
            context, str(host_uuid)[:255] if host_uuid is not None else None,
            sequence if isinstance(sequence, int) else None, code,
            detail[:4000])

    def mark_gone_instances(self):
        """Periodic: instances their host stopped reporting are deleted."""
        gone = db_api.mark_gone_instances(
            memcanal_context.get_admin_context(),
            self.conf.service.instance_gone_after)
        for uuid in gone:
            LOG.info('Instance %s left its host\'s reports; marked deleted',
                     uuid)
        return gone

    def actions_done(self, context, decision_uuid, results):
        """Record what an agent did with a decision's actions."""
        try:
            decision = decisions_db.record_results(context, decision_uuid,
                                                   results)
        except exception.DecisionNotFound:
            LOG.warning('Results for unknown decision %s ignored',
                        decision_uuid)
            return
        LOG.info('Decision %s is %s', decision_uuid, decision['state'])

    def optimize(self):
        """Periodic: migrations off hot hosts first (the hosts they
        concern are then busy, and their VMs are not resized meanwhile),
        then memory pooling (a paged VM is not resized until it is taken
        back), a decision for every host whose VMs should change, and the
        allocation ratios in placement."""
        context = memcanal_context.get_admin_context()
        return (self.migrations.run(context) + self.pooling.run(context)
                + self.optimizer.run(context) + self.ratios.run(context))

    def carry_out_decisions(self):
        """Periodic: send approved actions, fail those never answered."""
        context = memcanal_context.get_admin_context()
        self.dispatcher.fail_unanswered(context)
        return self.dispatcher.send(context)

    def run_retention(self):
        """Periodic: fold old reports into the history, expire it, archive
        finished decisions and deleted instances ([retention])."""
        counts = retention.run(memcanal_context.get_admin_context(),
                               self.conf.retention)
        if counts:
            LOG.info('Retention: %s', ', '.join(
                '%s %d' % item for item in sorted(counts.items())))
        return counts

    def retention_jobs(self):
        """The retention job, unless [retention] run_interval is 0."""
        interval = self.conf.retention.run_interval
        return [(interval, self.run_retention)] if interval else []

    def periodic_jobs(self):
        """(interval, callable) pairs the service runs."""
        jobs = [(self.conf.service.periodic_interval,
                 self.mark_gone_instances),
                (self.conf.service.periodic_interval,
                 self.carry_out_decisions)]
        if self.conf.optimizer.optimize_interval > 0:
            jobs.append((self.conf.optimizer.optimize_interval,
                         self.optimize))
        jobs.extend(self.retention_jobs())
        return jobs
