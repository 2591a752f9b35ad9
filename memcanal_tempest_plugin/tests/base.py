"""What every memcanal API test class shares: clients, microversion
selection and the check of the API's error format.

Tests run against a real cloud whose contents they do not choose: they
read what the cloud's agents reported. Those that change the cloud's own
resources (an instance's settings, restored afterwards; decisions, acted
on where the cloud offers one in the right state) run only where
tempest.conf allows it; elsewhere, like a test lacking what it needs,
they skip, saying why.
"""

from tempest.lib.common import api_version_utils
from tempest import config
from tempest import test

CONF = config.CONF


class BaseMemcanalTest(api_version_utils.BaseMicroversionTest,
                       test.BaseTestCase):
    """A client for the admin at ``request_microversion``: the class's
    ``min_microversion`` or the deployment's minimum, the newer.

    Classes ask for the admin only, unless they test what others may do:
    each credential is a keystone user and project made for the class.
    """

    credentials = ['admin']
    min_microversion = '1.0'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.memcanal:
            raise cls.skipException('memcanal is not available')
        api_version_utils.check_skip_with_microversion(
            cls.min_microversion, cls.max_microversion,
            CONF.memcanal.min_microversion, CONF.memcanal.max_microversion)

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.request_microversion = (
            api_version_utils.select_request_microversion(
                cls.min_microversion, CONF.memcanal.min_microversion))
        cls.admin_client = cls.client_at(cls.os_admin,
                                         cls.request_microversion)

    @staticmethod
    def client_at(credentials, microversion):
        return credentials.memcanal.MemcanalClient(microversion=microversion)

    def client_since(self, credentials, microversion):
        """A client at ``microversion``, for one test of a class that
        otherwise needs less; skips the test if the deployment is older."""
        api_version_utils.check_skip_with_microversion(
            microversion, api_version_utils.LATEST_MICROVERSION,
            CONF.memcanal.min_microversion, CONF.memcanal.max_microversion)
        return self.client_at(credentials, microversion)

    def require_changing_existing(self):
        """Skip unless tempest.conf lets tests change the cloud's own
        resources ([memcanal] change_existing_resources)."""
        if not CONF.memcanal.change_existing_resources:
            raise self.skipException(
                'changes resources of the cloud; set [memcanal] '
                'change_existing_resources = True to run it')

    def assert_error(self, exception, code, call, *args, **kwargs):
        """``call`` fails with ``exception`` and the API's error body
        naming the stable ``code``; returns that error."""
        raised = self.assertRaises(exception, call, *args, **kwargs)
        # RestClient unwraps the single top-level key, "errors".
        [error] = raised.resp_body
        self.assertEqual(code, error['code'], error)
        self.assertEqual(raised.resp.status, error['status'])
        self.assertEqual(raised.resp['x-openstack-request-id'],
                         error['request_id'])
        return error

    @classmethod
    def any_instance(cls):
        """An instance the cloud's agents reported, or skip: without one
        there is nothing to show."""
        instances = cls.admin_client.list_instances(limit=1)['instances']
        if not instances:
            raise cls.skipException('the cloud reports no instances')
        return instances[0]
