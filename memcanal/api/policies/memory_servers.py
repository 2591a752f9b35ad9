"""Policy of /memory_servers: which hosts lend memory to which VMs is
infrastructure, for the admin."""

from oslo_policy import policy

from memcanal.api.policies import base

LIST = 'memcanal:memory_servers:list'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN,
        description='List the memory servers, the memory each lends and '
                    'to which VMs of which hosts.',
        operations=[{'method': 'GET', 'path': '/memory_servers'}],
        scope_types=base.SCOPE_TYPES),
]


def list_rules():
    return rules
