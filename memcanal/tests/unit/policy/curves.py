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
