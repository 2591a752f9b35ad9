"""memcanal-plan: what each policy would do with these VMs, without
touching one.

Reads a JSON description of VMs (their baseline memory and miss-ratio
curve, sizes in MiB) from a file or stdin, runs isolated sharing (exact,
greedy and, for up to three VMs, exhaustive search) and the ESX
emulation on them, and prints each policy's targets, predicted relative
miss ratios and their geometric mean as JSON. A VM with a fault-rate
curve (the sampler's) says so with its working set and touch rate: its
faults are then held to ``fault_rate_bound``, as the service holds them.
See doc/policies.md.
"""

import argparse
import json
import sys

import jsonschema

from memcanal.policy import base
from memcanal.policy import esx
from memcanal.policy import isolated

MIB = 2 ** 20
_NUMBER = {'type': 'number', 'minimum': 0}
SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'required': ['vms'],
    'additionalProperties': False,
    'properties': {
        'total_mb': {'type': 'number', 'exclusiveMinimum': 0},
        'unit_mb': {'type': 'number', 'exclusiveMinimum': 0},
        'delta': _NUMBER,
        'tax_rate': {'type': 'number', 'minimum': 0, 'exclusiveMaximum': 1},
        'fault_rate_bound': {'type': 'number', 'exclusiveMinimum': 0,
                             'maximum': 1},
        'vms': {
            'type': 'array', 'minItems': 1,
            'items': {
                'type': 'object',
                'required': ['name', 'baseline_mb', 'mrc'],
                'additionalProperties': False,
                'properties': {
                    'name': {'type': 'string', 'minLength': 1},
                    'baseline_mb': {'type': 'number', 'exclusiveMinimum': 0},
                    'mrc': {'type': 'array', 'minItems': 1, 'items': {
                        'type': 'array', 'minItems': 2, 'maxItems': 2,
                        'prefixItems': [_NUMBER, {
                            'type': 'number', 'minimum': 0,
                            'maximum': 1}]}},
                    'min_mb': _NUMBER,
                    'max_mb': {'type': ['number', 'null'], 'minimum': 0},
                    'shares': {'type': 'number', 'exclusiveMinimum': 0},
                    # The curve's ratios are the fraction of first-touch
                    # events that fault (base.FAULT_RATE_CURVES).
                    'fault_rate': {
                        'type': 'object',
                        'required': ['wss_mb', 'touches_per_s'],
                        'additionalProperties': False,
                        'properties': {
                            'wss_mb': {'type': 'number',
                                       'exclusiveMinimum': 0},
                            'touches_per_s': _NUMBER,
                        },
                    },
                },
            },
        },
    },
}


def _bytes(mib):
    return int(round(mib * MIB))


def _vm(entry, delta, bound):
    baseline = _bytes(entry['baseline_mb'])
    curve = base.curve_from_points(
        [[_bytes(size), ratio] for size, ratio in entry['mrc']])
    faults = None
    if 'fault_rate' in entry:
        faults = base.FaultBound(entry['fault_rate']['touches_per_s'],
                                 _bytes(entry['fault_rate']['wss_mb']), bound)
        curve = base.fault_curve(curve, baseline)
    return base.VM(
        name=entry['name'], baseline_bytes=baseline, curve=curve,
        min_bytes=_bytes(entry.get('min_mb', 0)),
        max_bytes=(None if entry.get('max_mb') is None
                   else _bytes(entry['max_mb'])),
        shares=entry.get('shares', 1.0), faults=faults,
        miss_floor=base.miss_floor(faults, delta))


def _shown(allocation, vms, total):
    """An allocation in MiB; memory no VM would use is unallocated."""
    shown = {
        'targets_mb': {name: size / MIB
                       for name, size in allocation.targets.items()},
        'predicted_miss_ratio': allocation.predicted,
        'geometric_mean': allocation.geometric_mean,
        'unallocated_mb': (total - sum(allocation.targets.values())) / MIB,
        'unit_mb': allocation.details['unit_bytes'] / MIB,
    }
    if 'active_bytes' in allocation.details:
        shown['active_mb'] = {
            name: size / MIB
            for name, size in allocation.details['active_bytes'].items()}
    rates = {vm.name: float(vm.faults.per_minute(
        vm.miss_ratio(allocation.targets[vm.name])))
             for vm in vms if vm.faults is not None}
    if rates:
        shown['predicted_fault_rate_per_min'] = rates
    return shown


def plan(description):
    """Every policy's allocation of the described VMs."""
    jsonschema.validate(description, SCHEMA)
    delta = description.get('delta', 0.05)
    bound = description.get('fault_rate_bound',
                            base.DEFAULT_FAULT_RATE_BOUND)
    vms = [_vm(entry, delta, bound) for entry in description['vms']]
    if len({vm.name for vm in vms}) != len(vms):
        raise ValueError('VM names must be unique')
    total = _bytes(description.get('total_mb', sum(
        entry['baseline_mb'] for entry in description['vms'])))
    unit = _bytes(description.get('unit_mb', 4))
    methods = [m for m in isolated.METHODS if m != 'exhaustive'
               or len(vms) <= isolated.EXHAUSTIVE_MAX_VMS]
    policies = {
        'isolated_sharing_%s' % method: _shown(isolated.isolated_sharing(
            vms, total, delta, unit_bytes=unit, method=method), vms, total)
        for method in methods}
    policies['esx'] = _shown(esx.esx_emulation(
        vms, total, tax_rate=description.get('tax_rate',
                                             esx.DEFAULT_TAX_RATE),
        unit_bytes=unit), vms, total)
    result = {'total_mb': total / MIB, 'delta': delta, 'policies': policies}
    if any(vm.faults is not None for vm in vms):
        result['fault_rate_bound'] = bound
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='memcanal-plan', description=__doc__.splitlines()[0])
    parser.add_argument('file', nargs='?', default='-',
                        help='the JSON description (default: stdin)')
    args = parser.parse_args(argv)
    try:
        if args.file == '-':
            description = json.load(sys.stdin)
        else:
            with open(args.file) as source:
                description = json.load(source)
        result = plan(description)
    except jsonschema.ValidationError as err:
        where = '/'.join(str(part) for part in err.absolute_path)
        print('memcanal-plan: invalid input%s: %s' % (
            ' at %s' % where if where else '', err.message), file=sys.stderr)
        return 2
    except (OSError, ValueError) as err:
        print('memcanal-plan: %s' % err, file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
