"""tempest.conf options of the memcanal plugin.

``[service_available] memcanal`` says whether the cloud runs memcanal;
``[memcanal]`` says where its API is in the catalog and which
microversions the deployment speaks, so a test class needing a newer
version than the cloud's is skipped rather than failed.
"""

from oslo_config import cfg

service_available = cfg.BoolOpt(
    'memcanal', default=True,
    help='Whether or not memcanal is expected to be available.')

memcanal_group = cfg.OptGroup(name='memcanal', title='memcanal API options')

MemcanalGroup = [
    cfg.StrOpt('catalog_type', default='memcanal',
               help='Catalog type of the memcanal service.'),
    cfg.StrOpt('endpoint_type', default='public',
               choices=['public', 'admin', 'internal', 'publicURL',
                        'adminURL', 'internalURL'],
               help='The endpoint type to use for the memcanal service.'),
    cfg.StrOpt('region', default='',
               help='The region of the memcanal endpoint; empty: the '
                    'identity region.'),
    cfg.StrOpt('min_microversion', default=None,
               help='The lowest microversion the tests may request; test '
                    'classes needing an older one are skipped. Empty: '
                    'no lower bound.'),
    cfg.StrOpt('max_microversion', default='latest',
               help='The highest microversion the deployment speaks; test '
                    'classes needing a newer one are skipped.'),
    cfg.BoolOpt('change_existing_resources', default=False,
                help='Whether tests may change what they did not create: '
                     'approve, reject and roll back the decisions the '
                     'cloud offers (an approved decision resizes real '
                     'VMs) and change, then restore, an instance\'s '
                     'settings. For test clouds only; when False those '
                     'tests are skipped.'),
]
