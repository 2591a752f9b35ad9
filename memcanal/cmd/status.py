"""memcanal-status: is this deployment ready to run (or keep running) the
installed memcanal?

    memcanal-status [--config-file ...] upgrade check [--json]

Run it after installing new code and ``memcanal-manage db sync``, before
restarting memcanal's services, and again after. Exit status is the
worst result: 0 success, 1 warning (look, the upgrade may be fine), 2
failure (do not start the services yet), 255 the check itself crashed.

As oslo.upgradecheck asks, the checks read the database with plain
SQLAlchemy statements on table and column names, not through memcanal's
database API or models, so they also work on the previous release's
data.
"""

import contextlib
import datetime
import functools
import sys

from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import engines
from oslo_upgradecheck import common_checks
from oslo_upgradecheck import upgradecheck
from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.api import policy
from memcanal import conf as memcanal_conf
from memcanal.db import api as db_api
from memcanal.db import decisions
from memcanal.db import migration

CONF = memcanal_conf.CONF

Code = upgradecheck.Code
Result = upgradecheck.Result

# Typed, so that times are datetimes on every backend (SQLite's are text).
_DECISIONS = sa.table('decisions', sa.column('state'),
                      sa.column('created_at', sa.DateTime),
                      sa.column('updated_at', sa.DateTime))
_MEMORY_SERVERS = sa.table('memory_servers', sa.column('id'),
                           sa.column('host_id'),
                           sa.column('enabled', sa.Boolean))
_HOSTS = sa.table('hosts', sa.column('id'), sa.column('name'),
                  sa.column('pooling_admitted', sa.Boolean),
                  sa.column('last_heartbeat_at', sa.DateTime),
                  sa.column('report_interval', sa.Float))
# Down hosts named in a warning; the API lists them all.
_NAMED_HOSTS = 10


@contextlib.contextmanager
def _connection():
    engine = engines.create_engine(CONF.database.connection,
                                   mysql_sql_mode='TRADITIONAL')
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


class UpgradeCommands(upgradecheck.UpgradeCommands):
    """memcanal's checks, in the order they are printed."""

    @functools.cached_property
    def _schema_problem(self):
        """Why the database cannot be used by this code, or None (read
        once a run: every database check asks)."""
        try:
            current = migration.current_revision(CONF.database.connection)
        except (db_exc.DBError, sa.exc.SQLAlchemyError) as error:
            return 'Cannot read the database: %s' % error
        head = migration.head_revision()
        if current == head:
            return None
        if current is None:
            return ('The database has no memcanal schema. Run '
                    '"memcanal-manage db sync".')
        if current in migration.revisions():
            return ('The database schema is at revision %s, this code '
                    'needs %s. Run "memcanal-manage db sync".'
                    % (current, head))
        return ('The database schema is at revision %s, which this code '
                'does not know (newest: %s): it was upgraded by a newer '
                'memcanal. Install that release here too.' % (current, head))

    def _check_schema(self):
        """The database schema is at the newest revision this code knows.

        The service, API and agents' reports all read and write the
        newest schema: started on an older one they fail on the first
        missing column, and a schema a newer release migrated may have
        dropped what this code still reads.
        """
        problem = self._schema_problem
        return Result(Code.FAILURE, problem) if problem else Result(
            Code.SUCCESS)

    def _unchecked(self):
        """A check that reads the database, on one the schema check
        failed: a warning rather than a second failure for one cause."""
        if self._schema_problem is None:
            return None
        return Result(Code.WARNING, 'Not checked: the database is not at '
                                    'the newest schema (see Database '
                                    'schema).')

    def _check_policy_rules(self):
        """Every rule the policy file overrides is a rule of memcanal.

        oslo.policy ignores a rule it has no default for, so a misspelled
        or removed rule name leaves the default in force while the
        operator believes it overridden. A file that does not parse
        fails: the API could not authorize any request.
        """
        try:
            enforcer = policy.init(CONF)
        except ValueError as error:
            return Result(Code.FAILURE, 'The policy file cannot be read: %s'
                          % error)
        unknown = sorted(set(enforcer.file_rules)
                         - set(enforcer.registered_rules))
        if not unknown:
            return Result(Code.SUCCESS)
        return Result(Code.WARNING, 'The policy file overrides rules '
                                    'memcanal does not have, which have no '
                                    'effect: %s. "oslopolicy-sample-'
                                    'generator --namespace memcanal" lists '
                                    'the rules.' % ', '.join(unknown))

    def _check_pooling_servers(self):
        """With ``[pooling] enabled``, some memory server is registered,
        enabled and on a host admitted to pooling.

        The pooling planner only pages VMs out to memory servers their
        hosts' agents registered ([pooling] memserver_address on the
        compute hosts), an operator enabled, on hosts an operator
        admitted (API 1.10); without any it plans nothing, silently.
        """
        if not CONF.pooling.enabled:
            return Result(Code.SUCCESS, 'Pooling is off.')
        unchecked = self._unchecked()
        if unchecked:
            return unchecked
        with _connection() as connection:
            servers, enabled, admitted = connection.execute(sa.select(
                sa.func.count(), sa.func.count(sa.case(
                    (_MEMORY_SERVERS.c.enabled, 1))),
                sa.func.count(sa.case((sa.and_(
                    _MEMORY_SERVERS.c.enabled, _HOSTS.c.pooling_admitted),
                    1)))).select_from(_MEMORY_SERVERS.join(
                        _HOSTS, _HOSTS.c.id == _MEMORY_SERVERS.c.host_id))
            ).one()
        if admitted:
            return Result(Code.SUCCESS, '%d memory servers registered, %d '
                                        'enabled.' % (servers, enabled))
        if enabled:
            return Result(Code.WARNING, '%d memory servers enabled, none on '
                                        'a host admitted to pooling, so '
                                        'nothing is pooled: admit the hosts '
                                        'you trust (openstack memcanal host '
                                        'set --admit).' % enabled)
        if servers:
            return Result(Code.WARNING, '%d memory servers registered, none '
                                        'enabled, so nothing is pooled: '
                                        'enable those you trust (openstack '
                                        'memcanal memory server set '
                                        '--enable).' % servers)
        return Result(Code.WARNING, '[pooling] enabled is set but no memory '
                                    'server is registered, so nothing is '
                                    'pooled: set [pooling] '
                                    'memserver_address on the compute hosts '
                                    'that lend memory.')

    def _check_hosts_up(self):
        """Every registered compute host's agent is reporting.

        After an upgrade, a host whose agent did not come back is down
        (as ``GET /hosts`` derives it): its VMs are neither measured nor
        resized, and the optimizer leaves it out.
        """
        unchecked = self._unchecked()
        if unchecked:
            return unchecked
        with _connection() as connection:
            hosts = connection.execute(sa.select(_HOSTS).order_by(
                _HOSTS.c.name)).all()
        down = [host.name for host in hosts
                if db_api.host_state(host.last_heartbeat_at,
                                     host.report_interval) == 'down']
        if not down:
            return Result(Code.SUCCESS, '%d hosts up.' % len(hosts))
        named = ', '.join(down[:_NAMED_HOSTS]) + (
            ', ...' if len(down) > _NAMED_HOSTS else '')
        return Result(Code.WARNING, '%d of %d hosts are down (their agents '
                                    'stopped reporting): %s. Start '
                                    'memcanal-agent there, or '
                                    'memcanal-service if every host is '
                                    'down.' % (len(down), len(hosts), named))

    def _check_decisions_in_flight(self):
        """No decision is being carried out, nor stuck half done.

        Restarting the service and agents mid-decision is safe (actions
        are resent and applied once) but it holds the decision's hosts:
        better let it finish first. One in flight longer than
        [optimizer] action_timeout means no memcanal-service is failing
        its unanswered actions: its hosts get no new decision until one
        runs again.
        """
        unchecked = self._unchecked()
        if unchecked:
            return unchecked
        changed_at = sa.func.coalesce(_DECISIONS.c.updated_at,
                                      _DECISIONS.c.created_at)
        stuck_before = timeutils.utcnow() - datetime.timedelta(
            seconds=CONF.optimizer.action_timeout)
        with _connection() as connection:
            in_flight, stuck = connection.execute(
                # COUNT of a CASE, not COUNT(*) FILTER: MariaDB has no
                # FILTER.
                sa.select(sa.func.count(), sa.func.count(
                    sa.case((changed_at < stuck_before, 1))))
                .where(_DECISIONS.c.state.in_(list(decisions.IN_FLIGHT)))
            ).one()
        if stuck:
            return Result(Code.WARNING, '%d decisions have been approved or '
                                        'rolling back for longer than '
                                        '[optimizer] action_timeout: is '
                                        'memcanal-service running? It fails '
                                        'their unanswered actions.' % stuck)
        if in_flight:
            return Result(Code.WARNING, '%d decisions are being carried out; '
                                        'wait for them to end before '
                                        'restarting memcanal.' % in_flight)
        return Result(Code.SUCCESS)

    _upgrade_checks = (
        ('Database schema', _check_schema),
        ('Policy File JSON to YAML Migration',
         (common_checks.check_policy_json, {'conf': CONF})),
        ('Policy rules', _check_policy_rules),
        ('Pooling memory servers', _check_pooling_servers),
        ('Compute hosts up', _check_hosts_up),
        ('Decisions in flight', _check_decisions_in_flight),
    )


def main(argv=None):
    argv = sys.argv if argv is None else argv
    return upgradecheck.main(CONF, 'memcanal', UpgradeCommands(), argv[1:])
