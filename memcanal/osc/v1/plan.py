"""``openstack memcanal plan``: memcanal-plan's what-if, on a file or on
a live host.

The policies run in this process (memcanal.cmd.plan.plan), nothing is
recorded. With ``--host`` the input is built from the API: each VM's
allocated memory is its baseline, its latest report's curve (hcache's,
else SHARDS') its MRC, its floor and ceiling its bounds; VMs that opted
out or never reported a curve are left out, as the optimizer leaves them.
A fault-rate curve (the sampler's) comes with the VM's working set and
touch rate, so that its faults are bounded as the service bounds them
(memcanal-plan's default bound, the service's default).
"""

import json
import sys

import jsonschema
from osc_lib.command import command
from osc_lib import exceptions

from memcanal.cmd import plan
from memcanal.osc import display
from memcanal.osc.v1 import hosts
from memcanal.policy import base

# Miss ratios relative to each VM's at its baseline (memcanal-plan's);
# four digits, as the curves carry no more.
COLUMNS = ('Policy', 'VM', 'Target (MiB)', 'Relative Miss Ratio',
           'Geometric Mean', 'Unallocated (MiB)')


def _vm(instance):
    """memcanal-plan's description of a VM, or None without a curve."""
    report = instance.get('latest_report') or {}
    method, points = display.preferred_curve(report.get('mrc'))
    if not points:
        return None
    entry = {'name': instance['uuid'],
             'baseline_mb': instance['allocated_bytes'] / display.MIB,
             'mrc': [[size / display.MIB, ratio] for size, ratio in points]}
    faults = base.fault_bound(
        method, instance.get('wss_bytes'), report.get('guest_stats'),
        base.DEFAULT_FAULT_RATE_BOUND)
    if faults is not None:
        entry['fault_rate'] = {'wss_mb': faults.wss_bytes / display.MIB,
                               'touches_per_s': faults.touches_per_s}
    if instance.get('floor_bytes') is not None:
        entry['min_mb'] = instance['floor_bytes'] / display.MIB
    if instance.get('ceiling_bytes') is not None:
        entry['max_mb'] = instance['ceiling_bytes'] / display.MIB
    return entry


def host_description(client, host):
    """memcanal-plan's input for the VMs of ``host`` (name or UUID)."""
    listed = client.list_all('/instances', 'instances',
                             {'host': hosts.host_uuid(client, host)})
    vms = [_vm(client.get('/instances/%s' % i['uuid'])) for i in listed
           if not i['opt_out']]
    vms = [vm for vm in vms if vm is not None]
    if not vms:
        raise exceptions.CommandError(
            'Host %s has no VM with a miss-ratio curve to plan for.' % host)
    return {'vms': vms}


class Plan(command.Lister):
    """What each memory policy would give each VM, changing nothing.

    memcanal-plan on a JSON file (- for stdin) or on a live host's VMs.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument('file', metavar='<file>', nargs='?',
                            help='memcanal-plan\'s JSON input (doc/'
                                 'policies.md), - for stdin')
        source.add_argument('--host', metavar='<host>',
                            help='Plan for this host\'s VMs as the API '
                                 'reports them (name or UUID)')
        parser.add_argument('--total', metavar='<MiB>', type=float,
                            dest='total_mb',
                            help='The memory to share out (default: the '
                                 'input\'s total_mb, else the VMs\' '
                                 'baselines together)')
        return parser

    def _input(self, parsed_args):
        if parsed_args.host:
            return host_description(self.app.client_manager.memcanal,
                                    parsed_args.host)
        try:
            if parsed_args.file == '-':
                return json.load(sys.stdin)
            with open(parsed_args.file) as source:
                return json.load(source)
        except (OSError, ValueError) as err:
            raise exceptions.CommandError(str(err))

    def take_action(self, parsed_args):
        description = self._input(parsed_args)
        if parsed_args.total_mb is not None:
            description['total_mb'] = parsed_args.total_mb
        try:
            result = plan.plan(description)
        except jsonschema.ValidationError as err:
            raise exceptions.CommandError('Invalid plan input at %s: %s' % (
                '/'.join(str(p) for p in err.absolute_path) or '(top)',
                err.message))
        except ValueError as err:
            raise exceptions.CommandError(str(err))
        # A row per policy and VM: tables stay narrow, and -f json
        # consumers group by Policy.
        return COLUMNS, [
            (name, vm, target, round(policy['predicted_miss_ratio'][vm], 4),
             round(policy['geometric_mean'], 4), policy['unallocated_mb'])
            for name, policy in sorted(result['policies'].items())
            for vm, target in sorted(policy['targets_mb'].items())]
