"""MemCanalFilter and MemCanalWeigher on nova's FakeHostState, with the
snapshot memcanal's API would give (no API: memcanal/tests/unit/nova
tests the client, test_scheduler.py the whole)."""

import types
from unittest import mock

from nova.scheduler import weights as nova_weights
from nova import test
from nova.tests.unit.scheduler import fakes

from memcanal.nova import client
from memcanal.nova import filters
from memcanal.nova import weighers

GIB = 2 ** 30


def host(name, capacity, demand, state='up'):
    return {'name': name, 'state': state, 'capacity_bytes': capacity,
            'demand_bytes': demand}


SNAPSHOT = client.Snapshot(
    hosts={h['name']: h for h in (host('idle', 10 * GIB, 1 * GIB),
                                  host('busy', 10 * GIB, 7 * GIB),
                                  host('big', 40 * GIB, 20 * GIB),
                                  host('down', 10 * GIB, 0, 'down'))},
    flavor_ratios={'measured': 0.25}, project_ratios={})


def spec(memory_mb=2048, flavor='m1', project='p'):
    return types.SimpleNamespace(
        flavor=types.SimpleNamespace(name=flavor, memory_mb=memory_mb),
        project_id=project)


class PluginTestCase(test.NoDBTestCase):
    def setUp(self):
        super().setUp()
        self.snapshot = SNAPSHOT
        patcher = mock.patch.object(client.Client, 'snapshot',
                                    lambda _: self.snapshot)
        patcher.start()
        self.addCleanup(patcher.stop)

    def passes(self, name, spec_obj):
        state = fakes.FakeHostState(name, name, {})
        return filters.MemCanalFilter().host_passes(state, spec_obj)


class TestFilter(PluginTestCase):
    def test_host_passes_when_measured_demand_leaves_room(self):
        # idle: 10 - 1.1 >= 2 and 3/10 <= 0.9; busy: 10 - 7.7 >= 2 but
        # 9/10 is at the threshold, and 2.5 GiB more is over it.
        self.assertTrue(self.passes('idle', spec(2048)))
        self.assertTrue(self.passes('busy', spec(2048)))
        self.assertFalse(self.passes('busy', spec(2560)))

    def test_flavor_ratio_scales_the_new_vm(self):
        # 8 GiB of flavor, a quarter of it measured.
        self.assertFalse(self.passes('busy', spec(8192)))
        self.assertTrue(self.passes('busy', spec(8192, 'measured')))

    def test_unknown_and_down_hosts_follow_pass_unknown_hosts(self):
        self.assertTrue(self.passes('nowhere', spec(2048)))
        self.assertTrue(self.passes('down', spec(2048)))
        self.flags(pass_unknown_hosts=False, group='memcanal')
        self.assertFalse(self.passes('nowhere', spec(2048)))
        self.assertFalse(self.passes('down', spec(2048)))

    def test_margin_and_threshold_come_from_config(self):
        self.flags(threshold=0.5, group='memcanal')
        self.assertFalse(self.passes('idle', spec(5120)))
        self.flags(threshold=0.9, margin=9.0, group='memcanal')
        self.assertFalse(self.passes('idle', spec(2048)))

    def test_every_host_passes_while_memcanal_is_unreachable(self):
        self.snapshot = None
        self.flags(pass_unknown_hosts=False, group='memcanal')
        self.assertTrue(self.passes('busy', spec(100 * 1024)))


class TestWeigher(PluginTestCase):
    def weigh(self, names, spec_obj=None):
        states = [fakes.FakeHostState(n, n, {}) for n in names]
        weighed = nova_weights.HostWeightHandler().get_weighed_objects(
            [weighers.MemCanalWeigher()], states, spec_obj or spec())
        return {w.obj.host: w.weight for w in weighed}

    def test_more_headroom_and_less_utilization_weigh_more(self):
        weights = self.weigh(['idle', 'busy', 'big', 'nowhere'])
        # Headroom after 2 GiB: idle 7, busy 1, big 18 GiB (normalized
        # 6/17, 0, 1); utilization after: 0.3, 0.9, 0.55.
        self.assertAlmostEqual((6 / 17 + 0.7) / 2, weights['idle'])
        self.assertAlmostEqual((0 + 0.1) / 2, weights['busy'])
        self.assertAlmostEqual((1 + 0.45) / 2, weights['big'])
        self.assertEqual(0.0, weights['nowhere'])

    def test_multiplier_from_config(self):
        self.flags(weight_multiplier=-2.0, group='memcanal')
        weights = self.weigh(['idle', 'busy'])
        self.assertLess(weights['idle'], weights['busy'])
        self.assertAlmostEqual(-2.0 * (1 + 0.7) / 2, weights['idle'])

    def test_unreachable_memcanal_weighs_nothing(self):
        self.snapshot = None
        self.assertEqual({'idle': 0.0, 'busy': 0.0},
                         self.weigh(['idle', 'busy']))
