"""Policy of /memory_servers: which hosts lend memory to which VMs is
infrastructure, for the admin."""

from oslo_policy import policy

from memcanal.api.policies import base

LIST = 'memcanal:memory_servers:list'
UPDATE = 'memcanal:memory_servers:update'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN,
        description='List the memory servers, the memory each lends and '
                    'to which VMs of which hosts.',
        operations=[{'method': 'GET', 'path': '/memory_servers'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=UPDATE,
        check_str=base.ADMIN,
        description='Enable a memory server, so that memory pooling lends '
                    'from it, or disable it. A host\'s agent registers its '
                    'server disabled: only an operator says which servers '
                    'the cloud\'s VMs may page to.',
        operations=[{'method': 'PATCH',
                     'path': '/memory_servers/{uuid}'}],
        scope_types=base.SCOPE_TYPES),
]


def list_rules():
    return rules
