"""Policy in code: every rule memcanal's API checks, with its default.

``list_rules`` is the ``oslo.policy.policies`` entry point, which
oslopolicy-sample-generator reads to write policy.yaml.sample.
"""

import itertools

from memcanal.api.policies import base
from memcanal.api.policies import decisions
from memcanal.api.policies import demand
from memcanal.api.policies import hosts
from memcanal.api.policies import instances
from memcanal.api.policies import memory_servers


def list_rules():
    return list(itertools.chain(
        base.list_rules(),
        decisions.list_rules(),
        demand.list_rules(),
        hosts.list_rules(),
        instances.list_rules(),
        memory_servers.list_rules(),
    ))
