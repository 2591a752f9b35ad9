"""Measured demand (1.4): each host's capacity, demand and headroom, and
``GET /demand_ratios``, what VMs need over their flavor memory. nova's
scheduler reads both."""

from tempest.lib import decorators

from memcanal_tempest_plugin.tests import base


class DemandTest(base.BaseMemcanalTest):

    min_microversion = '1.4'

    @decorators.idempotent_id('f5f9dba7-0728-4a5f-ae7a-202856e71476')
    def test_hosts_capacity_demand_and_headroom_agree(self):
        hosts = self.admin_client.list_hosts()['hosts']
        if not hosts:
            raise self.skipException('the cloud has no memcanal agent')
        for host in hosts:
            self.assertEqual(host['memory_total_bytes']
                             - host['memory_reserved_bytes'],
                             host['capacity_bytes'])
            self.assertEqual(host['capacity_bytes'] - host['demand_bytes'],
                             host['headroom_bytes'])
            self.assertGreaterEqual(host['demand_bytes'], 0)

    @decorators.idempotent_id('5e75da90-ce5e-41c8-90cb-e0df4c78a3fd')
    def test_ratios_per_flavor_and_project(self):
        ratios = self.admin_client.show_demand_ratios()
        self.assertTrue(0 < ratios['percentile'] <= 100)
        measured = [i for i in self.admin_client.list_instances()[
            'instances'] if i['wss_bytes'] is not None]
        if not measured:
            raise self.skipException('no instance has a working set yet')
        self.assertEqual({i['project_id'] for i in measured},
                         set(ratios['projects']))
        self.assertEqual(len(measured), sum(
            ratio['instances'] for ratio in ratios['projects'].values()))
        # VMs whose hypervisor does not name their flavor have no ratio.
        self.assertEqual(
            len([i for i in measured if i['flavor'] is not None]),
            sum(ratio['instances'] for ratio in ratios['flavors'].values()))
        for by in ('flavors', 'projects'):
            for ratio in ratios[by].values():
                self.assertGreater(ratio['ratio'], 0)
