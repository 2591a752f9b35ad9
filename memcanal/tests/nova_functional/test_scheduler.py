"""nova's scheduler with MemCanalFilter and MemCanalWeigher places and
live-migrates by measured demand, where flavor sizes say otherwise.

Hosts of 8 GiB, 512 MiB reserved (memcanal's capacity: 7.5 GiB), the
flavors overcommitted 2:1 in placement:

    host  VM (flavor)  measured demand  nova's free RAM
    host1 A  6 GiB     1 GiB (idle)     1.5 GiB
    host2 B  4 GiB     4 GiB            3.5 GiB
    host3 C  6 GiB     6 GiB            1.5 GiB

A new 3 GiB VM (no measured ratio yet: all of it expected): nova's RAM
weigher sends it to host2; memcanal's filter refuses host2 (7 of 7.5
GiB, over the 90 % threshold) and host3 (no headroom) and it lands on
host1. B then live-migrates without a target: nova would take host3
(1.5 GiB free against host1's -1.5 GiB); memcanal refuses host3, and B
goes to host1, whose VMs measurably need 1.6 GiB.
"""

from memcanal.tests.nova_functional import base

GIB = base.GIB


class TestMeasuredDemandPlacement(base.MemCanalNovaTestCase):

    def sample(self, server, flavor_mb, wss_bytes):
        """What an agent reports of ``server``."""
        return {'uuid': server['id'], 'project_id': server['tenant_id'],
                'allocated_bytes': flavor_mb * base.MIB,
                'flavor': server['flavor']['original_name'],
                'wss': {'prl': wss_bytes}}

    def test_boot_and_live_migration_follow_measured_demand(self):
        large, medium = self.flavor('large', 6144), self.flavor('medium', 4096)
        a = self.boot(large, host='host1')
        b = self.boot(medium, host='host2')
        c = self.boot(large, host='host3')
        # The kernel (64 MiB) counts towards demand: A's is 1 GiB.
        kernel = 64 * base.MIB
        self.memcanal.report('host1', [self.sample(a, 6144, GIB - kernel)])
        self.memcanal.report('host2', [self.sample(b, 4096, 4 * GIB)])
        self.memcanal.report('host3', [self.sample(c, 6144, 6 * GIB)])
        new = self.flavor('new', 3072)

        # (a) nova alone picks host2, by flavor memory.
        restore = self.scheduler_without_memcanal()
        probe = self.boot(new)
        self.assertEqual('host2', self.host_of(probe))
        self._delete_server(probe)
        restore()
        # With memcanal, host1.
        n = self.boot(new)
        self.assertEqual('host1', self.host_of(n))
        self.memcanal.report('host1', [
            self.sample(a, 6144, GIB - kernel),
            self.sample(n, 3072, GIB // 2)])

        # (b) B live-migrates where memcanal says: host1, not host3.
        self._live_migrate(b)
        self.assertEqual('host1', self.host_of(b))
