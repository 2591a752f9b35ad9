"""``/instances`` and their reports: list, pages, show, settings."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from memcanal_tempest_plugin.services import memcanal_client
from memcanal_tempest_plugin.tests import base

UNKNOWN = '99999999-0000-4000-8000-000000000099'
GIB = 2 ** 30


def all_pages(list_page, key, **params):
    """Every item of a paginated list, page after page; and the pages'
    sizes."""
    items, sizes = [], []
    while params is not None:
        page = list_page(**params)
        items.extend(page[key])
        sizes.append(len(page[key]))
        params = memcanal_client.next_page_params(page)
    return items, sizes


class InstancesTest(base.BaseMemcanalTest):

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.instance = cls.any_instance()

    @decorators.idempotent_id('3c727770-5c3d-4885-9de0-145d27cb1ed5')
    def test_pages_of_one_make_the_whole_list(self):
        listed = self.admin_client.list_instances()['instances']
        paged, sizes = all_pages(self.admin_client.list_instances,
                                 'instances', limit=1)
        uuids = [instance['uuid'] for instance in listed]
        self.assertEqual(sorted(uuids), uuids)
        self.assertEqual(uuids, [instance['uuid'] for instance in paged])
        self.assertEqual({1}, set(sizes[:-1]))

    @decorators.idempotent_id('5d1ee537-2bc2-41f2-bab9-62cef79034b1')
    def test_host_filter(self):
        host = self.instance['host_uuid']
        listed = self.admin_client.list_instances(host=host)['instances']
        self.assertIn(self.instance['uuid'], [i['uuid'] for i in listed])
        self.assertEqual({host}, {i['host_uuid'] for i in listed})

    @decorators.idempotent_id('b9331c03-004d-4913-ad83-dc7ff67d474f')
    def test_show_has_the_latest_report(self):
        shown = self.admin_client.show_instance(self.instance['uuid'])
        for field in ('uuid', 'host_uuid', 'project_id', 'created_at'):
            self.assertEqual(self.instance[field], shown[field], field)
        report = shown['latest_report']
        if report is None:
            raise self.skipException('the instance has not reported yet')
        for size in report['wss'].values():
            self.assertGreaterEqual(size, 0)
        for points in report['mrc'].values():
            sizes = [size for size, _ratio in points]
            self.assertEqual(sorted(set(sizes)), sizes)
            for _size, ratio in points:
                self.assertTrue(0.0 <= ratio <= 1.0, points)

    @decorators.idempotent_id('8e093650-f4fd-43df-933f-23ecbdb54675')
    def test_reports_newest_first_in_pages(self):
        uuid = self.instance['uuid']
        reports, sizes = all_pages(
            lambda **params: self.admin_client.list_instance_reports(
                uuid, **params), 'reports', limit=1)
        self.assertNotEqual([], reports)
        sequences = [report['sequence'] for report in reports]
        self.assertEqual(sorted(sequences, reverse=True), sequences)
        latest = self.admin_client.show_instance(uuid)['latest_report']
        self.assertEqual(latest['id'], reports[0]['id'])
        self.assertEqual({1}, set(sizes[:-1]))

    @decorators.idempotent_id('28fb29b3-a52c-4b59-a048-9ede8b3b1750')
    def test_unknown_instance_is_404(self):
        for uuid in (UNKNOWN, 'not-a-uuid'):
            self.assert_error(lib_exc.NotFound,
                              'memcanal.instance.not_found',
                              self.admin_client.show_instance, uuid)
        self.assert_error(lib_exc.NotFound, 'memcanal.marker.not_found',
                          self.admin_client.list_instances, marker=UNKNOWN)

    @decorators.idempotent_id('d46c1611-af66-4a71-9a27-55b0557a23e2')
    def test_bad_query_is_400(self):
        for params in ({'limit': 0}, {'limit': 'abc'},
                       {'marker': 'not-a-uuid'}, {'colour': 'blue'}):
            self.assert_error(lib_exc.BadRequest, 'memcanal.query.invalid',
                              self.admin_client.list_instances, **params)
        self.assert_error(lib_exc.BadRequest, 'memcanal.query.invalid',
                          self.admin_client.list_instance_reports,
                          self.instance['uuid'], marker='abc')


class InstanceSettingsTest(base.BaseMemcanalTest):
    """PATCH /instances/{uuid} (1.1): the operator's bounds on a VM. The
    settings changed are put back when the test ends; refused changes
    change nothing, so those tests run on any cloud."""

    min_microversion = '1.1'
    SETTINGS = ('opt_out', 'floor_bytes', 'ceiling_bytes', 'mechanism')

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.instance = cls.admin_client.show_instance(
            cls.any_instance()['uuid'])

    def restore_settings(self):
        self.admin_client.update_instance(
            self.instance['uuid'],
            **{name: self.instance[name] for name in self.SETTINGS})

    @decorators.idempotent_id('3363679d-c114-46de-acfe-b0b9026d05da')
    def test_update_settings(self):
        self.require_changing_existing()
        self.addCleanup(self.restore_settings)
        wanted = {'opt_out': not self.instance['opt_out'],
                  'floor_bytes': GIB, 'ceiling_bytes': 2 * GIB,
                  'mechanism': 'hotplug'}
        updated = self.admin_client.update_instance(self.instance['uuid'],
                                                    **wanted)
        shown = self.admin_client.show_instance(self.instance['uuid'])
        for name, value in wanted.items():
            self.assertEqual(value, updated[name], name)
            self.assertEqual(value, shown[name], name)
        # A partial update keeps the other settings.
        self.admin_client.update_instance(self.instance['uuid'],
                                          mechanism=None)
        shown = self.admin_client.show_instance(self.instance['uuid'])
        self.assertIsNone(shown['mechanism'])
        self.assertEqual(2 * GIB, shown['ceiling_bytes'])

    @decorators.idempotent_id('7d2019dd-b8e6-4080-89b1-ae1afeed784f')
    def test_bad_settings_are_400(self):
        for settings in ({'floor_bytes': 2 * GIB, 'ceiling_bytes': GIB},
                         {'colour': 'blue'}, {'opt_out': 'yes'},
                         {'mechanism': 'teleport'}, {'floor_bytes': -1},
                         {}):
            self.assert_error(lib_exc.BadRequest, 'memcanal.body.invalid',
                              self.admin_client.update_instance,
                              self.instance['uuid'], **settings)
        shown = self.admin_client.show_instance(self.instance['uuid'])
        for name in self.SETTINGS:
            self.assertEqual(self.instance[name], shown[name], name)

    @decorators.idempotent_id('e7afb89d-b18d-4534-807e-d5c53cc3be75')
    def test_update_unknown_instance_is_404(self):
        self.assert_error(lib_exc.NotFound, 'memcanal.instance.not_found',
                          self.admin_client.update_instance, UNKNOWN,
                          opt_out=True)
