"""``openstack memcanal report list``."""

import itertools

from osc_lib.cli import parseractions
from osc_lib.command import command

from memcanal.osc import display

COLUMNS = ('ID', 'Sequence', 'Collected At', 'Memory (MiB)', 'WSS (MiB)',
           'WSS 95 % (MiB)', 'Curves')


class ListReport(command.Lister):
    """List a VM's reports, newest first.

    Each with its WSS by estimator, the 95 % intervals of the sampled
    ones, and the names of its miss-ratio curves (-f json: the raw
    curves). An agent reports every few
    seconds to minutes, so --limit keeps to the latest ones.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instance', metavar='<instance>',
                            help='Instance UUID')
        parser.add_argument('--limit', metavar='<count>', type=int,
                            action=parseractions.NonNegativeAction,
                            help='Only the newest <count> reports '
                                 '(default: every page)')
        return parser

    def take_action(self, parsed_args):
        params = ({'limit': parsed_args.limit}
                  if parsed_args.limit is not None else None)
        reports = itertools.islice(
            self.app.client_manager.memcanal.iterate(
                '/instances/%s/reports' % parsed_args.instance, 'reports',
                params), parsed_args.limit)
        return COLUMNS, [
            (r['id'], r['sequence'], r['collected_at'],
             display.mib(r['allocated_bytes']),
             display.SizesColumn(display.mib_by_key(r['wss'])),
             display.IntervalsColumn({
                 name: display.interval_mib(bounds)
                 for name, bounds in r.get('wss_bounds', {}).items()}),
             CurvesColumn(r['mrc'])) for r in reports]


class CurvesColumn(display.CurveColumn):
    """In a list, a chart per row is too much: the methods' names."""

    def human_readable(self):
        return ', '.join(sorted(self._value or ()))
