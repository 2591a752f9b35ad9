"""``openstack memcanal report list``."""

from osc_lib.cli import format_columns
from osc_lib.command import command

from memcanal.osc import display

COLUMNS = ('ID', 'Sequence', 'Collected At', 'Memory (MiB)', 'WSS (MiB)',
           'Curves')


class ListReport(command.Lister):
    """List a VM's reports, newest first.

    Each with its WSS by estimator and the names of its miss-ratio
    curves (-f json: the raw curves).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instance', metavar='<instance>',
                            help='Instance UUID')
        return parser

    def take_action(self, parsed_args):
        reports = self.app.client_manager.memcanal.list_all(
            '/instances/%s/reports' % parsed_args.instance, 'reports')
        return COLUMNS, [
            (r['id'], r['sequence'], r['collected_at'],
             display.mib(r['allocated_bytes']),
             format_columns.DictColumn(display.mib_by_key(r['wss'])),
             CurvesColumn(r['mrc'])) for r in reports]


class CurvesColumn(display.CurveColumn):
    """In a list, a chart per row is too much: the methods' names."""

    def human_readable(self):
        return ', '.join(sorted(self._value or ()))
