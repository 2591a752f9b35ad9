"""Policies of /hosts: compute hosts are infrastructure, for the admin
and for nova's scheduler (the service role)."""

from oslo_policy import policy

from memcanal.api.policies import base

PREFIX = 'memcanal:hosts:%s'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN_OR_SERVICE,
        description='List the compute hosts running a memcanal agent, with '
                    'their memory, state and report counters.',
        operations=[{'method': 'GET', 'path': '/hosts'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN_OR_SERVICE,
        description='Show one compute host.',
        operations=[{'method': 'GET', 'path': '/hosts/{uuid}'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=UPDATE,
        check_str=base.ADMIN,
        description='Admit a host to memory pooling, so that its VMs may '
                    'borrow memory and its memory server may lend, or stop '
                    'it. A host registers on first use with a key of its '
                    'own: only an operator says which hosts are the '
                    'cloud\'s own.',
        operations=[{'method': 'PATCH', 'path': '/hosts/{uuid}'}],
        scope_types=base.SCOPE_TYPES),
]


def list_rules():
    return rules
