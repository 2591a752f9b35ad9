"""memcanal's PlacementUpdater lowers a compute node's MEMORY_MB
allocation_ratio in the real placement, and nova's own scheduler (no
memcanal filter or weigher) sends the next boot elsewhere; nova-compute's
periodic resource update keeps the ratio and owns ``reserved``.

Hosts of 8 GiB, 512 MiB reserved, overcommitted 2:1 (15 GiB each in
placement). host2 and host3 run a 1 GiB VM, host1 none: nova's RAM
weigher prefers host1 for an 8 GiB VM. At ratio 1.0 host1 offers 7.5
GiB, too little, and the VM lands on host2 or host3.
"""

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from memcanal.service import placement
from memcanal.tests.nova_functional import base


class TestAllocationRatio(base.MemCanalNovaTestCase):

    def updater(self):
        """A PlacementUpdater over a keystoneauth1 Adapter on the
        in-process placement (wsgi-intercept), with the token its
        noauth2 middleware takes for an admin."""
        fixture = self.placement.fixture
        auth = token_endpoint.Token(fixture.endpoint, fixture.token)
        adapter = ks_adapter.Adapter(ks_session.Session(auth=auth),
                                     service_type='placement')
        return placement.PlacementUpdater(placement.PlacementClient(adapter))

    def memory(self, host):
        return self._get_provider_inventory(
            self._get_provider_uuid_by_host(host))['MEMORY_MB']

    def test_lowered_ratio_steers_boot_and_survives_periodics(self):
        # nova's own filters and weighers only.
        self.addCleanup(self.scheduler_without_memcanal())
        small, host_size = self.flavor('small', 1024), self.flavor(
            'host-size', base.HOST_MEMORY_MB)
        self.boot(small, host='host2')
        self.boot(small, host='host3')
        before = self.memory('host1')
        self.assertEqual(2.0, before['allocation_ratio'])
        self.assertEqual(base.RESERVED_MB, before['reserved'])

        # (a) At 2.0 the 8 GiB VM goes to the emptiest host, host1.
        probe = self.boot(host_size)
        self.assertEqual('host1', self.host_of(probe))
        self._delete_server(probe)

        # (b) memcanal lowers host1 to 1.0: 7.5 GiB offered, too little.
        result = self.updater().apply('host1', 1.0)
        self.assertEqual((2.0, 1.0, True),
                         (result['previous_ratio'],
                          result['allocation_ratio'], result['changed']))
        self.assertEqual(dict(before, allocation_ratio=1.0),
                         self.memory('host1'))
        server = self.boot(host_size)
        self.assertIn(self.host_of(server), ('host2', 'host3'))

        # nova-compute's periodic update keeps memcanal's ratio...
        self._run_periodics(raise_on_error=True)
        self.assertEqual(dict(before, allocation_ratio=1.0),
                         self.memory('host1'))
        # ...also when it writes the inventory itself: its reserved, and
        # memcanal's ratio.
        self.flags(reserved_host_memory_mb=1024)
        self._run_periodics(raise_on_error=True)
        self.assertEqual(dict(before, allocation_ratio=1.0, reserved=1024),
                         self.memory('host1'))
