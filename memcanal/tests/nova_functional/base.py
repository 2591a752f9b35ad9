"""A whole nova (API, conductor, scheduler, fake-driver computes and
placement, in-process on SQLite) whose scheduler loads memcanal's filter
and weigher by dotted path from its configuration, as an operator's
nova.conf has them, and reads a real memcanal API (memcanal_api)."""

import tempfile

from keystoneauth1 import loading as ks_loading
from nova import conf as nova_conf
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from nova.tests.functional import integrated_helpers

from memcanal.nova import client
from memcanal.nova import filters
from memcanal.nova import weighers
from memcanal.tests.nova_functional import memcanal_api

CONF = nova_conf.CONF
MIB = 2 ** 20
GIB = 2 ** 30
# fake.MediumFakeDriver's memory and nova-compute's default reserve.
HOST_MEMORY_MB = 8192
RESERVED_MB = 512
HOSTS = ('host1', 'host2', 'host3')


def _dotted(cls):
    return '%s.%s' % (cls.__module__, cls.__name__)


class MemCanalNovaTestCase(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        directory = tempfile.TemporaryDirectory(prefix='mc-nova-')
        self.addCleanup(directory.cleanup)
        # Its database too: memcanal_service opens it.
        self.memcanal_directory = directory.name
        self.memcanal = memcanal_api.MemcanalAPI(directory.name)
        self.addCleanup(self.memcanal.close)
        # The scheduler's client (and its adapter) is per process: one
        # for this test's memcanal.
        client.reset()
        self.addCleanup(client.reset)
        self.flags(available_filters=[_dotted(nova_filters.all_filters),
                                      _dotted(filters.MemCanalFilter)],
                   enabled_filters=(CONF.filter_scheduler.enabled_filters
                                    + ['MemCanalFilter']),
                   weight_classes=[_dotted(nova_weights.all_weighers),
                                   _dotted(weighers.MemCanalWeigher)],
                   group='filter_scheduler')
        # Overcommitted by flavor memory, as a cloud that measures demand
        # can afford: placement offers twice each host's memory.
        self.flags(initial_ram_allocation_ratio=2.0)
        super().setUp()
        # Read per scheduling request: set once memcanal serves (it
        # started while nova did). admin_token: memcanal's noauth2 takes
        # the token "admin" as an admin; its options are those
        # keystoneauth registers when it loads the plugin.
        CONF.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='memcanal')
        self.flags(auth_type='admin_token', endpoint=self.memcanal.url,
                   token='admin', endpoint_override=self.memcanal.url,
                   # Every scheduling request reads what the test stored.
                   cache_seconds=0, group='memcanal')
        for host in HOSTS:
            self._start_compute(host)
            self.memcanal.register(host, HOST_MEMORY_MB * MIB,
                                   RESERVED_MB * MIB)

    def flavor(self, name, memory_mb):
        return self._create_flavor(name=name, memory_mb=memory_mb, vcpu=1,
                                   disk=1, ephemeral=0)

    def boot(self, flavor_id, host=None):
        """A server of ``flavor_id``, on ``host`` when given (requested,
        not forced: the scheduler's filters still pass it)."""
        return self._create_server(flavor_id=flavor_id, host=host,
                                   networks='none')

    def host_of(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']

    def scheduler_without_memcanal(self):
        """Take memcanal's classes out of the running scheduler until
        the returned callable puts them back: nova's choice alone."""
        manager = self.scheduler_service.manager.host_manager
        saved = manager.enabled_filters, manager.weighers
        manager.enabled_filters = [
            f for f in manager.enabled_filters
            if not isinstance(f, filters.MemCanalFilter)]
        manager.weighers = [w for w in manager.weighers
                            if not isinstance(w, weighers.MemCanalWeigher)]
        assert len(manager.enabled_filters) == len(saved[0]) - 1
        assert len(manager.weighers) == len(saved[1]) - 1

        def restore():
            manager.enabled_filters, manager.weighers = saved
        return restore
