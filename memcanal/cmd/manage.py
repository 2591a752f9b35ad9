"""memcanal-manage: operator commands on memcanal's database.

    memcanal-manage [--config-file ...] db sync [--revision REV]
    memcanal-manage [--config-file ...] db version
    memcanal-manage [--config-file ...] db retention [--verbose]
    memcanal-manage [--config-file ...] db archive [--max-rows N]
        [--before DATE] [--until-complete] [--verbose]
    memcanal-manage [--config-file ...] db purge (--before DATE | --all)
        [--verbose]
    memcanal-manage service create-key --private PATH --public PATH
    memcanal-manage [--config-file ...] host forget-key NAME

The database is ``[database] connection`` of the configuration, as the
service and API use it. Exit status 0 on success, 1 on a database error,
an unknown revision, a key file that exists or an unknown host (the
message says why), 2 on a usage error (a bad --max-rows or DATE among
them). Unlike nova-manage's
archive_deleted_rows, archive exits 0 whether or not it moved rows:
--until-complete does what looping on its exit status did.
"""

import argparse
import datetime
import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.cmd import common
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import migration
from memcanal.db import retention
from memcanal import exception
from memcanal.rpc import signing

CONF = common.CONF


class DbCommands:
    """``db``: schema migrations."""

    @staticmethod
    def sync(url):
        revision = CONF.command.revision
        before = migration.current_revision(url)
        migration.upgrade(url, revision)
        after = migration.current_revision(url)
        if before == after:
            print('Database already at revision %s.' % after)
        else:
            print('Database upgraded from revision %s to %s.' % (
                before or '(empty)', after))

    @staticmethod
    def version(url):
        print(migration.current_revision(url) or 'None')

    @staticmethod
    def retention(url):
        """What the service's periodic retention job does, now."""
        counts = retention.run(memcanal_context.get_admin_context(),
                               CONF.retention)
        _print_counts(counts, 'Folded, deleted or archived',
                      'Nothing to fold, delete or archive.', 'Rows')

    @staticmethod
    def archive(url):
        options = CONF.retention
        before = CONF.command.before
        if before is None:
            decisions = retention.days_ago(options.decisions_days)
            instances = retention.days_ago(options.deleted_instances_days)
            superseded = retention.days_ago(
                options.superseded_decisions_days)
        else:
            decisions = instances = superseded = before
        run = (retention.archive_until_complete if CONF.command.until_complete
               else retention.archive)
        counts = run(memcanal_context.get_admin_context(), decisions,
                     instances, CONF.command.max_rows,
                     options.history_interval, superseded)
        _print_counts(counts, 'Archived', 'Nothing was archived.',
                      'Number of Rows Archived')

    @staticmethod
    def purge(url):
        counts = retention.purge(memcanal_context.get_admin_context(),
                                 None if CONF.command.all
                                 else CONF.command.before,
                                 CONF.retention.batch_size)
        _print_counts(counts, 'Purged', 'Nothing was purged.',
                      'Number of Rows Purged')


class ServiceCommands:
    """``service``: the service's own key pair."""

    @staticmethod
    def create_key(url):
        """The key pair that signs the service's actions and lease tokens
        ([service] signing_key); its public half goes to every compute
        host ([agent] service_public_key, memcanal-memserver --lease-key).
        An existing file is never replaced."""
        key = signing.create_key_pair(CONF.command.private,
                                      CONF.command.public)
        print('Wrote %s (private, mode 0600: the service alone reads it) '
              'and %s (public); key %s.' % (
                  CONF.command.private, CONF.command.public,
                  signing.fingerprint(signing.public_text(key))))


class HostCommands:
    """``host``: what the service trusts of a host."""

    @staticmethod
    def forget_key(url):
        """Unpin the key a host first registered with, so that a rebuilt
        host (a new key in its agent's state_path) can register again.
        Until it does, the service takes no message for that host."""
        name = CONF.command.host_name
        forgotten = db_api.forget_host_key(
            memcanal_context.get_admin_context(), name)
        if forgotten is None:
            print('Host %s has no key pinned.' % name)
        else:
            print('Forgot key %s of host %s; its next registration pins '
                  'a new one.' % (signing.fingerprint(forgotten), name))


def _print_counts(counts, verb, nothing, heading):
    """A line of the rows done; with --verbose, nova's table of them by
    table."""
    if not counts:
        print(nothing)
        return
    print('%s %d rows.' % (verb, sum(counts.values())))
    if CONF.command.verbose:
        rows = [('Table', heading)] + sorted(
            (name, str(count)) for name, count in counts.items())
        widths = [max(len(row[i]) for row in rows) for i in (0, 1)]
        rule = '+%s+' % '+'.join('-' * (w + 2) for w in widths)
        print(rule)
        for number, row in enumerate(rows):
            print('| %s | %s |' % (row[0].ljust(widths[0]),
                                   row[1].rjust(widths[1]) if number
                                   else row[1].ljust(widths[1])))
            if number == 0:
                print(rule)
        print(rule)


def _date(text):
    """A --before DATE: ISO 8601 (2026-11-01, 2026-11-01 12:00,
    2026-11-01T12:00:00+02:00), read as UTC unless it says otherwise."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            'not an ISO 8601 date: %r (e.g. 2026-11-01 or '
            '2026-11-01T12:00:00)' % text)
    return timeutils.normalize_time(moment)


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('must be a whole number >= 1: %r'
                                         % text)
    return value


def add_command_parsers(subparsers):
    db = subparsers.add_parser('db', help=DbCommands.__doc__)
    actions = db.add_subparsers(dest='action', required=True)
    sync = actions.add_parser(
        'sync', help='upgrade the database schema (to the newest '
                     'revision by default)')
    sync.add_argument('--revision', default='head',
                      help='revision to upgrade to (default: head)')
    sync.set_defaults(func=DbCommands.sync)
    version = actions.add_parser(
        'version', help="print the database schema's current revision")
    version.set_defaults(func=DbCommands.version)
    verbose = {'action': 'store_true',
               'help': 'print a table of the rows by table'}
    retention_parser = actions.add_parser(
        'retention', help='fold old reports into the history, expire it '
                          'and archive as [retention] says: what the '
                          "service's periodic job does, now")
    retention_parser.add_argument('--verbose', **verbose)
    retention_parser.set_defaults(func=DbCommands.retention)
    archive = actions.add_parser(
        'archive', help='move finished decisions (with their actions and '
                        'events) and deleted instances to the shadow '
                        'tables, as nova-manage db archive_deleted_rows')
    archive.add_argument('--max-rows', type=_positive, default=1000,
                         help='rows to move in one transaction (default '
                              '1000); without --until-complete, in all')
    archive.add_argument('--before', type=_date,
                         help='archive what ended before DATE instead of '
                              '[retention] decisions_days, '
                              'superseded_decisions_days and '
                              'deleted_instances_days ago')
    archive.add_argument('--until-complete', action='store_true',
                         help='repeat batches of --max-rows until nothing '
                              'is left to archive')
    archive.add_argument('--verbose', **verbose)
    archive.set_defaults(func=DbCommands.archive)
    purge = actions.add_parser(
        'purge', help='delete archived rows from the shadow tables')
    which = purge.add_mutually_exclusive_group(required=True)
    which.add_argument('--before', type=_date,
                       help='purge decisions whose last change, and '
                            'instances deleted, before DATE')
    which.add_argument('--all', action='store_true',
                       help='purge every archived row')
    purge.add_argument('--verbose', **verbose)
    purge.set_defaults(func=DbCommands.purge)
    service = subparsers.add_parser('service', help=ServiceCommands.__doc__)
    service_actions = service.add_subparsers(dest='action', required=True)
    create_key = service_actions.add_parser(
        'create-key', help='create the key pair that signs what the '
                           'service sends agents and memory servers')
    create_key.add_argument('--private', required=True, metavar='PATH',
                            help='the private key file to create: '
                                 '[service] signing_key')
    create_key.add_argument('--public', required=True, metavar='PATH',
                            help='the public key file to create: [agent] '
                                 'service_public_key on compute hosts')
    create_key.set_defaults(func=ServiceCommands.create_key)
    host = subparsers.add_parser('host', help=HostCommands.__doc__)
    host_actions = host.add_subparsers(dest='action', required=True)
    forget_key = host_actions.add_parser(
        'forget-key', help='let a rebuilt host register with a new key')
    # Not "name": oslo.config's CONF.command.name is the command's.
    forget_key.add_argument('host_name', metavar='NAME',
                            help='the host\'s name, as it registered')
    forget_key.set_defaults(func=HostCommands.forget_key)


COMMAND_OPT = cfg.SubCommandOpt('command', title='Commands',
                                handler=add_command_parsers)


def main(argv=None):
    CONF.register_cli_opt(COMMAND_OPT)
    common.parse_args(argv or sys.argv)
    try:
        CONF.command.func(CONF.database.connection)
    except (db_exc.DBError, sa.exc.SQLAlchemyError) as err:
        print('memcanal-manage: database error: %s' % err, file=sys.stderr)
        return 1
    except (alembic_util.CommandError, exception.HostNotFound) as err:
        # E.g. a --revision this code does not know.
        print('memcanal-manage: %s' % err, file=sys.stderr)
        return 1
    except FileExistsError as err:
        print('memcanal-manage: %s exists; a key is never replaced'
              % err.filename, file=sys.stderr)
        return 1
    return 0
