"""openstack memcanal plan --host on a VM with a sampled curve: its
working set and touch rate go with its curve, so memcanal-plan bounds
its faults as the service does."""

import pytest

from memcanal.cmd import plan as plan_cli
from memcanal.osc.v1 import plan

MIB = 2 ** 20
POINTS = [[1024, 0.05], [1100, 0.01], [1200, 0.002], [1300, 0.0008],
          [1400, 0.0003], [1600, 0.0001], [1800, 0.00002]]


def instance(mrc, wss_bytes=1024 * MIB, touches=26214.4):
    return {'uuid': 'vm', 'allocated_bytes': 4096 * MIB,
            'wss_bytes': wss_bytes,
            'latest_report': {'mrc': mrc, 'guest_stats': {
                'sampled_touches_per_s': touches}}}


def test_a_sampled_curve_comes_with_its_fault_rate():
    sampled = {'sampled': [[size * MIB, ratio] for size, ratio in POINTS]}
    entry = plan._vm(instance(sampled))
    assert entry['fault_rate'] == {'wss_mb': 1024, 'touches_per_s': 26214.4}
    # Isolated sharing takes it down to where its faults meet the bound,
    # 1400 MiB, not to the 1300 of a curve of misses per access.
    planned = plan_cli.plan({'vms': [entry], 'total_mb': 1400})
    assert planned['policies']['isolated_sharing_exact']['targets_mb'] == {
        'vm': 1400}
    with pytest.raises(ValueError, match='no allocation'):
        plan_cli.plan({'vms': [entry], 'total_mb': 1396})
    del entry['fault_rate']
    assert plan_cli.plan({'vms': [entry], 'total_mb': 1300})
    # Without the touch rate it is read as any other curve.
    assert 'fault_rate' not in plan._vm(instance(sampled, touches=None))
    hcache = {'hcache': sampled['sampled']}
    assert 'fault_rate' not in plan._vm(instance(hcache))
