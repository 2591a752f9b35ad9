"""memcanal-manage: operator commands on memcanal's database.

    memcanal-manage [--config-file ...] db sync [--revision REV]
    memcanal-manage [--config-file ...] db version

The database is ``[database] connection`` of the configuration, as the
service and API use it. Exit status 0 on success, 1 on a database error
or an unknown revision (the message says why), 2 on a usage error.
"""

import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc
import sqlalchemy as sa

from memcanal.cmd import common
from memcanal.db import migration

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
    except alembic_util.CommandError as err:
        # E.g. a --revision this code does not know.
        print('memcanal-manage: %s' % err, file=sys.stderr)
        return 1
    return 0
