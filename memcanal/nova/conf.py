"""nova.conf's ``[memcanal]`` group: how the scheduler reaches memcanal's
API and how it reads it.

The keystoneauth session, auth and adapter options are keystoneauth's
own (as nova's ``[placement]`` group has them), with service type
``memcanal``: an operator points them at the catalog or sets
``endpoint_override``.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from memcanal.policy import demand

GROUP = 'memcanal'
SERVICE_TYPE = 'memcanal'
# A scheduler thread holds the cache's lock while it fetches; a hung
# memcanal must not hold every scheduling request for long.
DEFAULT_TIMEOUT = 10

memcanal_group = cfg.OptGroup(
    GROUP, title='memcanal',
    help='How nova\'s scheduler reads measured memory demand from '
         'memcanal (MemCanalFilter, MemCanalWeigher).')

memcanal_opts = [
    cfg.IntOpt('cache_seconds', default=30, min=0,
               help='How long a scheduler process reuses what it read '
                    'from memcanal (hosts and demand ratios) before it '
                    'reads again; one read per period, whatever the '
                    'number of scheduler threads. A failed read is not '
                    'retried before the period is over either.'),
    cfg.BoolOpt('pass_unknown_hosts', default=True,
                help='Whether MemCanalFilter passes a host memcanal does '
                     'not know or reports down (no agent, or its agent '
                     'stopped reporting). Hosts always pass while '
                     'memcanal\'s API cannot be reached.'),
    cfg.FloatOpt('margin', default=demand.DEFAULT_MARGIN, min=0.0,
                 help='Safety margin on a host\'s measured demand: a host '
                      'takes a VM when its capacity less (1 + margin) '
                      'times its demand fits the VM\'s expected demand.'),
    cfg.FloatOpt('threshold', default=demand.DEFAULT_THRESHOLD,
                 min=0.0, max=1.0,
                 help='Highest measured utilization (demand over '
                      'capacity) a host may reach with the new VM.'),
    cfg.FloatOpt('weight_multiplier', default=1.0,
                 help='Multiplier of MemCanalWeigher\'s weight; negative '
                      'stacks VMs on the hosts with the least measured '
                      'headroom instead. Overridden per aggregate by the '
                      'metadata key memcanal_weight_multiplier.'),
]


def _ksa_opts():
    return (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + ks_loading.get_adapter_conf_options(include_deprecated=False))


def register_opts(conf):
    """Register the group on ``conf`` (nova's CONF); safe to repeat."""
    conf.register_group(memcanal_group)
    conf.register_opts(memcanal_opts, group=memcanal_group)
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP,
                                             include_deprecated=False)
    conf.set_default('service_type', SERVICE_TYPE, group=GROUP)
    conf.set_default('timeout', DEFAULT_TIMEOUT, group=GROUP)


def list_opts():
    """For oslo-config-generator: [(group, opts)]."""
    return [(memcanal_group, memcanal_opts + _ksa_opts())]
