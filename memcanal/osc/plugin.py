"""The OpenStackClient plugin hooks (entry point
``openstack.cli.extension: memcanal``).

``--os-memcanal-api-version`` (or OS_MEMCANAL_API_VERSION) defaults to
``1``: negotiate the newest microversion both this client and the server
speak (memcanal.osc.client). An exact ``1.N`` pins it, lowered to the
server's maximum when the server is older. The endpoint comes from the
catalog (service type ``memcanal``) unless ``memcanal_endpoint_override``
is set (OS_MEMCANAL_ENDPOINT_OVERRIDE or clouds.yaml).

``--os-auth-type none`` is how one talks to an API without keystone
(memcanal-aio's noauth2): keystoneauth's "none" plugin sends the token
``notused``, which noauth2 takes for an ordinary user refused every
operator command, so this plugin sends noauth2's ``admin`` instead. A
keystone-protected API rejects that token like any other.
"""

import logging

from keystoneauth1 import noauth
from osc_lib import exceptions
from osc_lib import utils

from memcanal.osc import client

LOG = logging.getLogger(__name__)

API_NAME = 'memcanal'
API_VERSION_OPTION = 'os_memcanal_api_version'
DEFAULT_API_VERSION = client.NEGOTIATE
# OSC warns about a version outside this list; check_api_version below
# validates instead, so the list is informational.
API_VERSIONS = (client.NEGOTIATE,) + tuple(client.KNOWN_VERSIONS)


def check_api_version(version):
    """Refuse a version this client cannot send; True tells OSC that
    API_VERSIONS need not be checked."""
    if version not in API_VERSIONS:
        raise exceptions.CommandError(
            'memcanal API version %s is not supported; use one of %s' % (
                version, ', '.join(API_VERSIONS)))
    return True


class NoAuthAdmin(noauth.NoAuth):
    """No keystone; noauth2's admin token (see the module docstring)."""

    def get_token(self, session):
        return 'admin'


def make_client(instance):
    """OSC's ClientManager ``instance`` -> a memcanal Client."""
    override = instance.get_configuration().get(
        '%s_endpoint_override' % API_NAME)
    LOG.debug('memcanal client: API version %s, endpoint override %s',
              instance._api_version[API_NAME], override)
    session = instance.session
    auth = (NoAuthAdmin() if isinstance(session.auth, noauth.NoAuth)
            else None)
    return client.Client(
        session, requested_version=instance._api_version[API_NAME],
        endpoint_override=override, interface=instance.interface,
        region_name=instance.region_name, auth=auth)


def build_option_parser(parser):
    parser.add_argument(
        '--os-memcanal-api-version', metavar='<memcanal-api-version>',
        default=utils.env('OS_MEMCANAL_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='memcanal API microversion (default: %s, the newest the '
             'server speaks, up to %s; env OS_MEMCANAL_API_VERSION)' % (
                 DEFAULT_API_VERSION, client.LATEST_KNOWN))
    return parser
