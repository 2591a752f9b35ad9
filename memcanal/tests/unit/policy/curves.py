"""Hand-built VMs for the policy tests, sizes in MiB."""

import numpy as np

from memcanal.policy import base

MB = base.MB


def vm(name, points, baseline=512, **kwargs):
    return base.VM(name, baseline * MB, base.curve_from_points(
        [[size * MB, ratio] for size, ratio in points]), **kwargs)


def table2():
    """Curves shaped after Hcache Table 2: a web server that loses a
    little with less memory, an index search that gains much with more,
    and a decision-support VM with no misses above 336 MB."""
    return [
        vm('web', [(64, 0.9), (256, 0.5), (280, 0.496), (452, 0.42),
                   (512, 0.4), (768, 0.35), (1024, 0.3)]),
        vm('search', [(64, 1.0), (512, 0.5), (748, 0.32), (920, 0.03),
                      (1024, 0.02)]),
        vm('tpch', [(64, 1.0), (300, 0.6), (336, 0.001), (512, 0.001)]),
    ]


def random_vm(rng, name, baseline=512, points=12):
    sizes = np.unique(rng.integers(8, 1400, points))
    ratios = np.sort(rng.random(sizes.size))[::-1]
    return vm(name, list(zip(sizes.tolist(), ratios.tolist())),
              baseline=baseline)


# A sampled curve: the fraction of a VM's first-touch events that fault at
# each size (MiB). Its 1 GiB working set is touched once per 10 s
# interval, so 0.2 % of it per minute is a ratio of 0.002 * 10 / 60:
# met from 1400 MiB on; 1300 MiB (0.0008) is under the 0.001 floor of
# curves of misses per access, but faults 2.4 times the bound.
SAMPLED = [(1024, 0.05), (1100, 0.01), (1200, 0.002), (1300, 0.0008),
           (1400, 0.0003), (1600, 0.0001), (1800, 0.00002)]
SAMPLED_WSS = 1024 * MB
SAMPLED_STATS = {'sampled_touches_per_s': SAMPLED_WSS / base.PAGE_BYTES / 10,
                 'sampling_rate': 0.01, 'sampling_interval_s': 10.0}
SAMPLED_BOUND_MB = 1400


def sampled_vm(name='sampled', baseline=4096, bound=0.002, delta=0.05,
               points=SAMPLED, **kwargs):
    """A VM with a sampled curve (SAMPLED's), read as the service reads
    it, its faults held to ``bound``."""
    faults = base.fault_bound('sampled', SAMPLED_WSS, SAMPLED_STATS, bound)
    curve = base.fault_curve(base.curve_from_points(
        [[size * MB, ratio] for size, ratio in points]), baseline * MB)
    return base.VM(name, baseline * MB, curve, faults=faults,
                   miss_floor=base.miss_floor(faults, delta), **kwargs)
