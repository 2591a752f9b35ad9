"""Policy of /demand_ratios: what VMs measurably need per flavor and
project, for the admin and for nova's scheduler (the service role)."""

from oslo_policy import policy

from memcanal.api.policies import base

SHOW = 'memcanal:demand_ratios:show'

rules = [
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN_OR_SERVICE,
        description='Show the measured demand over flavor memory of the '
                    'VMs of each flavor and of each project.',
        operations=[{'method': 'GET', 'path': '/demand_ratios'}],
        scope_types=base.SCOPE_TYPES),
]


def list_rules():
    return rules
