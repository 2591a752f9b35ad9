"""The optimizer's benefit threshold and hysteresis ([optimizer]
min_benefit, min_change_percent) on isolated sharing."""

from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models
from memcanal.service import optimizer
from memcanal.tests.unit.service.test_optimizer import ctx  # noqa: F401
from memcanal.tests.unit.service.test_optimizer import host  # noqa: F401
from memcanal.tests.unit.service.test_optimizer import MIB
from memcanal.tests.unit.service.test_optimizer import SEARCH


def test_a_decision_predicting_less_than_min_benefit_is_not_made(
        conf, ctx, host):  # noqa: F811
    """Hcache Table 2's VMs: the search VM's misses fall from 0.5 to
    0.03 at the policy's targets, the web server's (at 280 MiB) rise
    from 0.4 to 0.5: 0.37 less in all."""
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    conf.set_override('min_benefit', 0.4, 'optimizer')
    assert optimizer.Optimizer(conf).run(ctx) == []
    conf.set_override('min_benefit', 0.3, 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert SEARCH in {a['instance_uuid'] for a in decision['actions']}


def test_changes_under_min_change_percent_are_not_made(
        conf, ctx, host):  # noqa: F811
    """A step is 5 % of 512 MiB: 25.6 MiB, under 6 % of it."""
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    conf.set_override('min_change_percent', 6.0, 'optimizer')
    assert optimizer.Optimizer(conf).rails.min_change_fraction == 0.06
    assert optimizer.Optimizer(conf).run(ctx) == []
    conf.set_override('min_change_percent', 4.0, 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert all(abs(a['target_bytes'] - 512 * MIB) >= 0.04 * 512 * MIB
               for a in decision['actions'])


def test_a_vm_the_guardrails_hold_lends_a_decision_none_of_its_gain(
        conf, ctx, host):  # noqa: F811
    """The search VM, resized a moment ago, is held: the web server and
    TPC-H would only shrink, for a gain that would not be made."""
    conf.set_override('delta', 0.25, 'optimizer')
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert SEARCH in {a['instance_uuid'] for a in decision['actions']}
    with db_api.context_manager.writer.using(ctx) as session:
        session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == SEARCH).values(
                target_changed_at=timeutils.utcnow()))
    assert optimizer.Optimizer(conf).run(ctx) == []
