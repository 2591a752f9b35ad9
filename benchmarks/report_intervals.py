"""What RPC 1.7's 95 % intervals add to validating a report.

The service validates every report before storing it
(memcanal.rpc.reports.validate_report). A sampled VM's band is two more
packed curves at its curve's sizes, each inflated and checked; this
times a report of ``--vms`` (100) VMs, each with one ``--points``
(256) point packed curve, without intervals (an agent at RPC 1.6) and
with a working set's bounds and a curve's band per VM, the best of
``--repeat`` (5) runs of ``--number`` (50) validations each:

    python benchmarks/report_intervals.py [--vms 100] [--points 256]

It prints the milliseconds per report both ways and their ratio, then
one JSON line of the same.
"""

import argparse
import json
import timeit

from memcanal.estimation import packed_curve
from memcanal.rpc import reports

HOST = '4f1c2a2e-6b1f-4f5e-9a43-2b9f0e4d1c11'
MIB = 2 ** 20


def packed(points, shift=0.0):
    return packed_curve.pack([[size, min(1.0, max(0.0, ratio + shift))]
                              for size, ratio in points])


def report(vms, points, intervals):
    curve = [[(index + 1) * 4 * MIB, 1.0 - index / points]
             for index in range(points)]
    instances = []
    for number in range(vms):
        sample = {'uuid': '%08d-0000-4000-8000-000000000000' % number,
                  'project_id': 'p', 'allocated_bytes': 4096 * MIB,
                  'wss': {'sampled': 512 * MIB},
                  'mrc': {'sampled': packed(curve)},
                  'guest_stats': {'sampled_touches_per_s': 100.0}}
        if intervals:
            sample['wss_bounds'] = {'sampled': [480 * MIB, 544 * MIB]}
            sample['mrc_bands'] = {'sampled': {
                'low': packed(curve, -0.05), 'high': packed(curve, 0.05)}}
        instances.append(sample)
    return {'host_uuid': HOST, 'sequence': 1,
            'collected_at': '2026-12-02T08:00:00Z', 'instances': instances}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--vms', type=int, default=100)
    parser.add_argument('--points', type=int, default=256)
    parser.add_argument('--number', type=int, default=50)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    result = {}
    for name, intervals in (('without', False), ('with', True)):
        built = report(args.vms, args.points, intervals)
        seconds = min(timeit.repeat(
            lambda: reports.validate_report(built, args.points, args.vms),
            number=args.number, repeat=args.repeat)) / args.number
        result['%s_intervals_ms' % name] = round(seconds * 1e3, 2)
        print('%s intervals: %.2f ms per report of %d VMs' % (
            name, seconds * 1e3, args.vms))
    result['ratio'] = round(result['with_intervals_ms']
                            / result['without_intervals_ms'], 2)
    print('ratio: %.2f' % result['ratio'])
    print(json.dumps(dict(result, vms=args.vms, points=args.points)))


if __name__ == '__main__':
    main()
