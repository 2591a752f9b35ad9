"""The central service's RPC endpoint and periodic tasks.

Agents call ``register_host`` and cast ``report``; the manager validates
every report before it stores any of it, stores each (host, sequence) once,
and marks down the hosts that stop reporting. Periodically it runs the
optimizer (memcanal.service.optimizer), sends approved decisions to the
agents (memcanal.service.actions) and records what they did
(``actions_done``); of several service processes, one at a time runs
each job that must run once, and each process does the per-host work
of the hosts it serves (memcanal.service.coordination).

Anyone holding the broker's credentials can put any message on the
service's topic, so every message must be signed by the key of the host
it comes from (memcanal.rpc.signing): the key a host first registered
with is pinned to it, and what is not signed by it is refused, logged,
counted and recorded as a rejection of that host, and nothing of it is
stored. A host then speaks for itself alone: its reports, its report
sequences, its decisions' outcomes, and only its own VMs
(memcanal.db.claims).

Nor is a message taken twice (memcanal.rpc.freshness): since RPC 1.10
each is stamped with when it was sent and a nonce, and one sent outside
``[rpc] replay_window`` of this process's clock, or whose nonce this
process saw, is refused; a report retention folded is refused though
its row is gone, and a registration sent before the host's newest
(memcanal.db.replays). An agent's unstamped messages (1.9 and before)
are taken until its host has sent a stamped one.
"""

import re
import time

import oslo_messaging as messaging
from oslo_log import log as logging

from memcanal import context as memcanal_context
from memcanal.db import action_delivery
from memcanal.db import api as db_api
from memcanal.db import retention
from memcanal.db import rpc_versions
from memcanal import exception
from memcanal import hypervisors
from memcanal.rpc import freshness
from memcanal.rpc import reports
from memcanal.notifications import hosts as host_notifications
from memcanal.rpc import signing
from memcanal.service import actions
from memcanal.service import coordination
from memcanal.service import ingest
from memcanal.service import lease_upkeep
from memcanal.service import metrics as service_metrics
from memcanal.service import migrations
from memcanal.service import optimizer
from memcanal.service import overcommit
from memcanal.service import pooling
from memcanal.service import whereabouts

LOG = logging.getLogger(__name__)

# Why a message was refused (stable: they are recorded with the host's
# rejections and counted).
UNSIGNED = 'rpc.unsigned'              # no signature: an agent before 1.5
UNKNOWN_HOST = 'rpc.unknown_host'      # no such host, or it has no key yet
BAD_SIGNATURE = 'rpc.bad_signature'    # not by the host's pinned key
KEY_MISMATCH = 'rpc.key_mismatch'      # a registration by another key
WRONG_HOST = 'rpc.wrong_host'          # about another host
BAD_HYPERVISOR_TYPE = 'rpc.bad_hypervisor_type'  # not a type's name
BAD_AGENT_VERSION = 'rpc.bad_agent_version'      # not an RPC version
# Seconds a process trusts a host's pinned key from memory: a key an
# operator had the service forget (memcanal-manage host forget-key) is
# refused by every service process within this. Reading it for every
# report took a database transaction each, and on SQLite the write lock:
# a third of the service's time per report.
IDENTITY_SECONDS = 60.0
VERSION = re.compile(r'^\d{1,4}\.\d{1,4}$')


def _stamped(args, sent_at, nonce):
    """A message's keyword arguments with its freshness, as signed: an
    older agent's carry none (memcanal.rpc.freshness)."""
    for name, value in ((freshness.SENT_AT, sent_at),
                        (freshness.NONCE, nonce)):
        if value is not None:
            args[name] = value
    return args


def signing_key(conf):
    """[service] signing_key, loaded; None (logged) when unset. A key file
    that cannot be read stops the service (KeyFileError)."""
    if not conf.service.signing_key:
        LOG.error('[service] signing_key is not set: actions for agents '
                  'fail and memory pooling is off. Create a key pair with '
                  'memcanal-manage service create-key.')
        return None
    return signing.load_private_key(conf.service.signing_key)


class ServiceManager:
    """Endpoint for memcanal.rpc.service_api.ServiceAPI (version 1.x)."""

    target = messaging.Target(version='1.10')
    # The service API versions agents may send since every message is
    # signed: what a service process that does not record its version
    # (a release before 1.9) is taken for under [upgrade_levels] service
    # = auto.
    OLDEST = '1.5'

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
        self.dispatcher = actions.ActionDispatcher(
            conf, signing_key=signing_key(conf))
        self.lease_upkeep = lease_upkeep.LeaseUpkeep(
            conf, self.dispatcher.signing_key, self.dispatcher.agent_api)
        self.whereabouts = (whereabouts.NovaWhereabouts(conf)
                            if whereabouts.NovaWhereabouts.configured(conf)
                            else None)
        # Outcomes since start (service_metrics.OUTCOMES), ingest
        # latency, pager faults; the rejections and refusals are also
        # stored, per host.
        self.metrics = service_metrics.ServiceMetrics()
        self.host_watch = host_notifications.HostWatch()
        self._writer = ingest.ReportWriter(conf.service.report_batch_size)
        # Host name -> (db_api.host_identity, when read: time.monotonic()).
        self._identities = {}
        self.leases = coordination.JobLeases.from_conf(conf)
        # The nonces of stamped messages this process took, for [rpc]
        # replay_window.
        self.window = freshness.Window(conf.rpc.replay_window)

    @property
    def counters(self):
        """{outcome: count} since the process started."""
        return self.metrics.outcomes()

    def _count(self, outcome, count=1):
        self.metrics.count(outcome, count)

    def _refuse(self, context, method, host, host_uuid, code, detail):
        """Count, log and record a refused message; returns None."""
        self._count('refused')
        LOG.warning('Refused %s of host %r: %s (%s)', method, host, detail,
                    code)
        db_api.record_rejection(
            context, str(host_uuid)[:255] if host_uuid is not None else None,
            None, code, detail[:4000])

    def _identity(self, context, name, fresh=False):
        """db_api.host_identity of ``name``, from memory when read less
        than IDENTITY_SECONDS ago (and not ``fresh``); None for a host
        without a key, which is not remembered."""
        now = time.monotonic()
        known = self._identities.get(name)
        if fresh or known is None or now - known[1] > IDENTITY_SECONDS:
            identity = db_api.host_identity(context, name)
            if identity is None or identity['public_key'] is None:
                self._identities.pop(name, None)
                return None
            known = self._identities[name] = (identity, now)
        return known[0]

    def _sender(self, context, method, args, claimed_uuid=None):
        """The host (db_api.host_identity) whose pinned key signed
        ``args`` (the message's keyword arguments), or None once the
        message is refused. ``claimed_uuid``: the host uuid the message
        names, recorded with the refusal when its host is unknown."""
        name = args.get('host')
        identity = (self._identity(context, name)
                    if isinstance(name, str) else None)

        def verified():
            return identity is not None and signing.verify(
                identity['public_key'], method, args)
        good = verified()
        if not good and identity is not None:
            # Re-keyed since it was read (forget-key, then a new
            # registration in another service process)?
            identity = self._identity(context, name, fresh=True)
            good = verified()
        if good:
            stale = self._stale(context, identity, args)
            if stale is None:
                return identity
            self._refuse(context, method, name, identity['uuid'], *stale)
            return None
        if args.get(signing.SIGNATURE) is None:
            code, detail = UNSIGNED, 'the message is not signed'
        elif identity is None:
            code, detail = UNKNOWN_HOST, ('no host of that name registered '
                                          'a key')
        else:
            code, detail = BAD_SIGNATURE, 'not signed by the host\'s key'
        self._refuse(context, method, name,
                     identity['uuid'] if identity else claimed_uuid, code,
                     detail)
        return None

    def _stale(self, context, identity, args):
        """None if the message of ``args``, verified as the host's of
        ``identity``, is fresh (memcanal.rpc.freshness); else (code,
        detail). Its first stamped message marks the host as stamping,
        after which an unstamped one is refused."""
        if not freshness.stamped(args):
            if identity['stamped']:
                return freshness.UNSTAMPED, (
                    'the message is not stamped fresh, and the host\'s '
                    'agent stamps its messages')
            return None
        stale = self.window.check(identity['name'], args)
        if stale is None and not identity['stamped']:
            db_api.mark_stamped(context, identity['id'])
            LOG.info('Host %s stamps its messages fresh: from now on its '
                     'unstamped ones are refused', identity['name'])
            identity['stamped'] = True
        return stale

    @messaging.expose
    @messaging.expected_exceptions(exception.MessageRefused)
    def register_host(self, context, name, memory_total_bytes,
                      memory_reserved_bytes, report_interval=None,
                      host=None, public_key=None, signature=None,
                      hypervisor_type=None, agent_version=None,
                      sent_at=None, nonce=None):
        """Register a host, or refresh it; only its own agent can: the
        registration must be signed by the key it carries, which the
        host's first registration pins (trust on first use). Agents
        since RPC 1.6 say their ``hypervisor_type``, since 1.9 the
        ``agent_version`` they serve, and are answered the oldest
        service version running (memcanal.db.rpc_versions). Since 1.10
        a registration is stamped fresh, and one sent no later than the
        host's newest is refused (memcanal.db.replays): it would roll
        the host back."""
        args = _stamped({'name': name,
                         'memory_total_bytes': memory_total_bytes,
                         'memory_reserved_bytes': memory_reserved_bytes,
                         'report_interval': report_interval, 'host': host,
                         'public_key': public_key,
                         signing.SIGNATURE: signature}, sent_at, nonce)
        if hypervisor_type is not None:
            args['hypervisor_type'] = hypervisor_type
        if agent_version is not None:
            args['agent_version'] = agent_version
        if signature is None:
            code, detail = UNSIGNED, 'the registration is not signed'
        elif host != name or not signing.verify(public_key,
                                                'register_host', args):
            code, detail = BAD_SIGNATURE, ('the registration is not signed '
                                           'by the key it carries')
        elif hypervisor_type is not None and not (
                isinstance(hypervisor_type, str)
                and hypervisors.TYPE_PATTERN.match(hypervisor_type)):
            code, detail = BAD_HYPERVISOR_TYPE, (
                'hypervisor type %.40r is not a name' % (hypervisor_type,))
        elif agent_version is not None and not (
                isinstance(agent_version, str)
                and VERSION.match(agent_version)):
            code, detail = BAD_AGENT_VERSION, (
                'agent version %.40r is not a version' % (agent_version,))
        elif freshness.stamped(args) and (stale := self.window.check(
                str(name), args)):
            # Only once its signature is good: a forged copy must not
            # use up the nonce of the registration it copies.
            code, detail = stale
        else:
            try:
                registered = db_api.register_host(
                    context, name, memory_total_bytes,
                    memory_reserved_bytes, report_interval, public_key,
                    hypervisor_type, agent_version,
                    sent_at=freshness.sent_at(sent_at) if sent_at else None)
            except exception.HostKeyMismatch as error:
                code, detail = KEY_MISMATCH, str(error)
            except exception.StaleMessage as error:
                code, detail = error.code, str(error)
            else:
                return self._registered(context, name, public_key,
                                        registered)
        identity = (db_api.host_identity(context, name)
                    if isinstance(name, str) else None)
        self._refuse(context, 'register_host', name,
                     identity['uuid'] if identity else None, code, detail)
        raise exception.MessageRefused(reason=detail)

    def _registered(self, context, name, public_key, registered):
        # Another process may have had the host forget its key.
        self._identities.pop(name, None)
        host_notifications.notify_registered(context, registered['uuid'])
        if registered['pinned']:
            LOG.warning('Host %s registered with key %s, now pinned to it',
                        name, signing.fingerprint(public_key))
        LOG.info('Host %s registered as %s (last sequence %d)', name,
                 registered['uuid'], registered['last_sequence'])
        return {'uuid': registered['uuid'],
                'last_sequence': registered['last_sequence'],
                'service_version': rpc_versions.oldest(
                    rpc_versions.service_versions(
                        context, self._service_live_seconds()),
                    unknown=self.OLDEST) or self.target.version}

    def _service_live_seconds(self):
        """How long a service process counts as running after it last
        recorded itself: a few of its refreshes, and a minute at least
        (controllers' clocks differ a little)."""
        return max(60, 3 * self.conf.service.periodic_interval)

    def record_service(self):
        """Periodic, in every process: record that it runs and the
        service API version it serves (memcanal.db.rpc_versions)."""
        rpc_versions.record_service(memcanal_context.get_admin_context(),
                                    self.conf.host, self.target.version)

    @messaging.expose
    def report(self, context, report, host=None, signature=None,
               sent_at=None, nonce=None):
        """Store one agent report, or reject it whole; never raise.

        A cast has nobody to answer, so a bad report is logged, counted and
        recorded with its reason instead. Returns once the report is
        committed, in one transaction with those other threads store
        meanwhile (memcanal.service.ingest). Entries about VMs its host
        may not describe are left out (memcanal.db.claims), logged and
        counted; the rest is stored.
        """
        arrived = time.monotonic()
        host_uuid = report.get('host_uuid') if isinstance(report,
                                                          dict) else None
        sequence = report.get('sequence') if isinstance(report,
                                                        dict) else None
        sender = self._sender(context, 'report', _stamped({
            'report': report, 'host': host, signing.SIGNATURE: signature},
            sent_at, nonce), claimed_uuid=host_uuid)
        if sender is None:
            return
        if host_uuid != sender['uuid']:
            self._refuse(context, 'report', host, sender['uuid'], WRONG_HOST,
                         'a report of host %s' % str(host_uuid)[:64])
            return
        try:
            valid = reports.validate_report(
                report, self.conf.service.max_mrc_points,
                self.conf.service.max_instances_per_report)
            valid['moved_here'] = self._moved_here(context, sender, valid)
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
        self.metrics.ingest_seconds.observe(time.monotonic() - arrived)
        if stored:
            self.metrics.count_pager_faults(sender['name'], valid)
        if isinstance(stored, dict):
            self._count('left_out', len(stored))
            LOG.warning('Report %s of host %s: left out %s', sequence,
                        sender['name'], ', '.join(
                            '%s (%s)' % item for item in sorted(
                                stored.items())))
        if not stored:
            LOG.debug('Report %s of host %s was already stored', sequence,
                      host_uuid)

    def _moved_here(self, context, sender, report):
        """The report's VMs another host holds that nova says run on the
        sender's host (none without nova): memcanal.db.claims."""
        if self.whereabouts is None:
            return set()
        return {uuid for uuid in db_api.held_elsewhere(context, sender['id'],
                                                       report)
                if self.whereabouts.host_of(uuid) == sender['name']}

    @messaging.expose
    @messaging.expected_exceptions(exception.MessageRefused)
    def stored_reports(self, context, host_uuid, sequences, host=None,
                       signature=None, sent_at=None, nonce=None):
        """RPC 1.3: which of a host's report sequences are stored or
        rejected, from the database: what the service took off the queue
        but has not committed is neither, so the agent sends it again.
        A host asks about its own reports only."""
        sender = self._sender(context, 'stored_reports', _stamped({
            'host_uuid': host_uuid, 'sequences': sequences, 'host': host,
            signing.SIGNATURE: signature}, sent_at, nonce),
            claimed_uuid=host_uuid)
        if sender is None:
            raise exception.MessageRefused(
                reason='not signed by a registered host\'s key, or not '
                       'fresh')
        if host_uuid != sender['uuid']:
            self._refuse(context, 'stored_reports', host, sender['uuid'],
                         WRONG_HOST, 'asked about host %s' % str(
                             host_uuid)[:64])
            raise exception.MessageRefused(reason='a host asks about its '
                                                  'own reports only')
        if not isinstance(sequences, list) or not all(
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

    @messaging.expose
    def actions_done(self, context, decision_uuid, results, host=None,
                     signature=None, sent_at=None, nonce=None):
        """Record what an agent did with a decision's actions: only the
        agent they were sent to."""
        sender = self._sender(context, 'actions_done', _stamped({
            'decision_uuid': decision_uuid, 'results': results, 'host': host,
            signing.SIGNATURE: signature}, sent_at, nonce))
        if sender is None:
            return
        try:
            decision = action_delivery.record_results(
                context, decision_uuid, results, agent=sender['name'])
        except exception.DecisionNotFound:
            LOG.warning('Results for unknown decision %s ignored',
                        decision_uuid)
            return
        except exception.DecisionOfAnotherHost as error:
            self._refuse(context, 'actions_done', host, sender['uuid'],
                         WRONG_HOST, str(error))
            return
        LOG.info('Decision %s is %s', decision_uuid, decision['state'])

    def watch_hosts(self):
        """Periodic, in every process, for the hosts it serves: notify
        those that went down or came back up. Lists every host, so its
        share is logged here when it changes."""
        hosts = self.leases.served(
            db_api.list_hosts(memcanal_context.get_admin_context()),
            key=lambda host: host['name'], log=True)
        return self.host_watch.check(hosts)

    def optimize(self):
        """Periodic: migrations off hot hosts first (the hosts they
        concern are then busy, and their VMs are not resized meanwhile),
        then memory pooling (a paged VM is not resized until it is taken
        back), a decision for every host whose VMs should change, and the
        allocation ratios in placement."""
        context = memcanal_context.get_admin_context()
        cpu = time.thread_time()
        made = self.migrations.run(context)
        # Pooling's actions carry lease tokens the service signs.
        if self.dispatcher.signing_key is not None:
            made += self.pooling.run(context)
        made += self.optimizer.run(context) + self.ratios.run(context)
        # What the job cost, where it ran: of several service
        # processes, one runs it (memcanal.service.coordination).
        LOG.info('Optimizer run: %d decisions, %.3f s CPU', len(made),
                 time.thread_time() - cpu)
        return made

    def send_actions(self):
        """Periodic, in every process: send approved actions, each
        claimed by one process."""
        return self.dispatcher.send_pending(
            memcanal_context.get_admin_context())

    def fail_unanswered_actions(self):
        """Periodic, in one process: fail the actions never answered
        (one statement for all hosts)."""
        return self.dispatcher.fail_unanswered(
            memcanal_context.get_admin_context())

    def follow_up_actions(self):
        """Periodic, in every process, for the decisions of the hosts it
        serves: follow nova's migrations, send again the unanswered
        actions."""
        return self.dispatcher.follow_up(
            memcanal_context.get_admin_context(),
            served=lambda batches: self.leases.served(
                batches, key=lambda batch: batch['host']))

    def renew_leases(self):
        """Periodic, in one process, every third of [pooling]
        lease_lifetime: fresh tokens for the leases whose borrower is up
        (memcanal.service.lease_upkeep)."""
        return self.lease_upkeep.renew(memcanal_context.get_admin_context())

    def revoke_leases(self):
        """Periodic, in one process: tell lenders the leases that
        ended, until their tokens would have expired."""
        return self.lease_upkeep.revoke(memcanal_context.get_admin_context())

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
        jobs = [(self.conf.service.periodic_interval, self.record_service),
                (self.conf.service.periodic_interval,
                 self.mark_gone_instances),
                (self.conf.service.periodic_interval, self.send_actions),
                (self.conf.service.periodic_interval,
                 self.fail_unanswered_actions),
                (self.conf.service.periodic_interval,
                 self.follow_up_actions),
                (self.conf.service.periodic_interval, self.watch_hosts)]
        if self.conf.pooling.enabled:
            jobs += [(self.lease_upkeep.renewal_interval(), self.renew_leases),
                     (self.conf.service.periodic_interval,
                      self.revoke_leases)]
        if self.conf.optimizer.optimize_interval > 0:
            jobs.append((self.conf.optimizer.optimize_interval,
                         self.optimize))
        jobs.extend(self.retention_jobs())
        return jobs

    def timers(self):
        """periodic_jobs as the service's timers run them
        (memcanal.service.coordination): sending in every process, each
        action claimed by one; the per-host jobs in every process, on
        the hosts it serves; the others only in the process that leads
        them."""
        everywhere = (self.record_service, self.send_actions,
                      self.follow_up_actions, self.watch_hosts)
        return [(interval, job if job in everywhere
                 else self.leases.guard(job.__name__, job))
                for interval, job in self.periodic_jobs()]
