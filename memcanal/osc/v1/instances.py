"""``openstack memcanal instance list|show|set``."""

import argparse

from osc_lib.command import command
from osc_lib import exceptions

from memcanal.api.schemas import instances as instances_schema
from memcanal.osc import display
from memcanal.osc.v1 import hosts

LIST_COLUMNS = ('UUID', 'Host', 'Project', 'Memory (MiB)', 'Target (MiB)',
                'WSS (MiB)', 'WSS 95 % (MiB)', 'Opt Out')
# What PATCH /instances/{uuid} accepts, null (the service's default)
# spelled "default".
MECHANISMS = tuple(
    mechanism or 'default' for mechanism
    in instances_schema.UPDATE['properties']['mechanism']['enum'])
# latest_report is shown through these instead of as one nested dict.
REPORT_FIELDS = ('latest_report_at', 'latest_report_sequence', 'wss_mib',
                 'wss_95_mib', 'miss_ratio_curve', 'miss_ratio_band')


class ListInstance(command.Lister):
    """List the VMs memcanal measures."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='<host>',
                            help='Only the VMs of this host (name or UUID)')
        parser.add_argument('--project', metavar='<project-id>',
                            help='Only the VMs of this project (ID)')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.memcanal
        params = {}
        if parsed_args.host:
            params['host'] = hosts.host_uuid(client, parsed_args.host)
        if parsed_args.project:
            params['project_id'] = parsed_args.project
        instances = client.list_all('/instances', 'instances', params)
        names = hosts.host_names(client)
        # wss_bytes (1.4) is the latest WSS by the most exact estimator,
        # wss_bounds_bytes (1.8) its 95 % interval when it was sampled.
        return LIST_COLUMNS, [
            (i['uuid'], names.get(i['host_uuid'], i['host_uuid']),
             i['project_id'],
             display.mib(i['allocated_bytes']),
             display.mib(i['target_bytes']), display.mib(i.get('wss_bytes')),
             display.IntervalColumn(display.interval_mib(
                 i.get('wss_bounds_bytes'))),
             i['opt_out']) for i in instances]


def shown(instance):
    """(columns, values) of an instance with its latest report spelled
    out: WSS by estimator in MiB, the 95 % intervals of the sampled ones
    (API 1.8), and the miss-ratio curve with its band."""
    fields = dict(instance)
    report = fields.pop('latest_report', None) or {}
    fields.update({
        'latest_report_at': report.get('collected_at'),
        'latest_report_sequence': report.get('sequence'),
        'wss_mib': display.SizesColumn(
            display.mib_by_key(report.get('wss'))),
        'wss_95_mib': display.IntervalsColumn({
            name: display.interval_mib(bounds)
            for name, bounds in (report.get('wss_bounds') or {}).items()}),
        'miss_ratio_curve': display.CurveColumn(report.get('mrc') or {},
                                                report.get('mrc_bands')),
        'miss_ratio_band': display.BandColumn(report.get('mrc_bands') or {}),
    })
    return tuple(zip(*sorted(fields.items())))


class ShowInstance(command.ShowOne):
    """Show a VM with its latest WSS and miss-ratio curve."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instance', metavar='<instance>',
                            help='Instance UUID')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.memcanal
        return shown(client.get('/instances/%s' % parsed_args.instance))


def _mib_bytes(value):
    """--floor/--ceiling's MiB -> the API's bytes; argparse shows the
    ArgumentTypeError's message as is."""
    try:
        mib = int(value)
    except ValueError:
        mib = -1
    if mib < 0:
        raise argparse.ArgumentTypeError(
            'a whole number of MiB (0 or more) is needed, not %r' % value)
    return mib * display.MIB


class SetInstance(command.ShowOne):
    """Change how memcanal may resize a VM.

    PATCH /instances/{uuid} (API 1.1); shows the VM as ``show`` does.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instance', metavar='<instance>',
                            help='Instance UUID')
        opt = parser.add_mutually_exclusive_group()
        opt.add_argument('--opt-out', dest='opt_out', action='store_true',
                         default=None,
                         help='Keep the VM out of every policy')
        opt.add_argument('--opt-in', dest='opt_out', action='store_false',
                         help='Let the policies resize the VM again')
        for bound, never in (('floor', 'below'), ('ceiling', 'above')):
            group = parser.add_mutually_exclusive_group()
            group.add_argument('--%s' % bound, metavar='<MiB>',
                               type=_mib_bytes, dest='%s_bytes' % bound,
                               help='Never resize the VM %s this' % never)
            group.add_argument('--no-%s' % bound, action='store_true',
                               help='Remove the operator %s' % bound)
        parser.add_argument('--mechanism',
                            choices=MECHANISMS,
                            help='How to resize the VM (default: the '
                                 'service\'s [optimizer] default_mechanism)')
        return parser

    def take_action(self, parsed_args):
        body = {}
        if parsed_args.opt_out is not None:
            body['opt_out'] = parsed_args.opt_out
        for bound in ('floor', 'ceiling'):
            if getattr(parsed_args, 'no_%s' % bound):
                body['%s_bytes' % bound] = None
            elif getattr(parsed_args, '%s_bytes' % bound) is not None:
                body['%s_bytes' % bound] = getattr(parsed_args,
                                                   '%s_bytes' % bound)
        if parsed_args.mechanism:
            body['mechanism'] = (None if parsed_args.mechanism == 'default'
                                 else parsed_args.mechanism)
        if not body:
            raise exceptions.CommandError('Nothing to set: give at least one '
                                          'option.')
        client = self.app.client_manager.memcanal
        client.require('1.1', 'Instance settings')
        return shown(client.patch('/instances/%s' % parsed_args.instance,
                                  body))
