"""Leases that end, on the service's side (issue #36): tokens issued for
[pooling] lease_lifetime and renewed while the lease lives; a lease that
ends (its pages came back, its VM was deleted) revoked on its lender
until its tokens would have expired, then forgotten."""

import datetime
import time
from unittest import mock

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from memcanal.agent import paging
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal.service import lease_tokens
from memcanal.service import lease_upkeep
from memcanal.tests import keys
from memcanal.tests.unit.db import test_api as stored
from memcanal.tests.unit.db import test_cross_host_decisions as cross
from memcanal.tests.unit.db import test_decisions as flow
from memcanal.tests.unit.db import test_pooling as pooled

ctx = flow.ctx
host = flow.host
lender = pooled.lender
GIB = flow.GIB


@pytest.fixture
def upkeep(conf):
    api = mock.Mock()
    api.can_end_leases = True
    return lease_upkeep.LeaseUpkeep(conf, keys.SERVICE_KEY, lambda _: api)


def agent(upkeep):
    return upkeep.agent_api(None)


def lent(ctx, lender):
    decision = pooled.page(ctx, lender)
    cross.answer(ctx, decision)
    return decision['actions'][0]


def test_a_live_lease_gets_tokens_before_its_old_ones_expire(
        ctx, host, lender, upkeep, conf):
    action = lent(ctx, lender)
    assert upkeep.renew(ctx) == 1
    [(_ctx, borrower, [renewal], public_key)] = [
        c.args for c in agent(upkeep).renew_leases.call_args_list]
    assert (borrower, renewal['instance_uuid'], public_key) == (
        'compute-1', stored.VM_1,
        db_api.host_identity(ctx, 'compute-1')['public_key'])
    token = lease_tokens.verify(
        keys.SERVICE_KEY.public_key(), lease_tokens.decode(
            renewal['lease_tokens']['tls:' + pooled.ADDRESS]))
    # The lease's own uuid: the server keeps its account and pages.
    assert (token.lease_uuid, token.owner, token.quota_pages,
            token.lifetime) == (
        action['uuid'], paging.owner_of(stored.VM_1), 6 * GIB // 4096,
        conf.pooling.lease_lifetime)
    assert abs(token.issued_at - time.time()) < 600
    assert upkeep.renewal_interval() == conf.pooling.lease_lifetime // 3


def test_a_borrower_that_is_down_is_not_renewed_its_tokens_expire(
        ctx, host, lender, upkeep):
    lent(ctx, lender)
    with db_api.context_manager.writer.using(ctx):
        ctx.session.execute(sa.update(models.Host).where(
            models.Host.name == 'compute-1').values(
            last_heartbeat_at=timeutils.utcnow() - datetime.timedelta(
                days=1)))
    assert upkeep.renew(ctx) == 0
    agent(upkeep).renew_leases.assert_not_called()


def test_a_lease_whose_pages_came_back_is_revoked_on_its_lender(
        ctx, host, lender, upkeep):
    lent(ctx, lender)
    back = decisions_db.create_pooling_decision(
        ctx, stored.VM_1, 8 * GIB, None, 0, 'pooling', 'auto', {}, {})
    cross.answer(ctx, back)
    assert upkeep.revoke(ctx) == 1
    [(_ctx, lender_name, [revoked])] = [
        c.args for c in agent(upkeep).revoke_leases.call_args_list]
    assert (lender_name, revoked['instance_uuid']) == ('host-2', stored.VM_1)
    assert abs(revoked['revoked_at'] - time.time()) < 600
    # Sent again each run until its tokens would have expired anyway.
    assert upkeep.revoke(ctx) == 1


def test_a_gone_vms_lease_is_revoked_then_forgotten_once_expired(
        ctx, host, lender, upkeep, conf):
    lent(ctx, lender)
    with db_api.context_manager.writer.using(ctx):
        ctx.session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == stored.VM_1).values(
            deleted_at=timeutils.utcnow()))
    assert pooling_db.end_leases_of_gone(ctx) == 1
    assert upkeep.revoke(ctx) == 1
    later = timeutils.utcnow() + datetime.timedelta(
        seconds=conf.pooling.lease_lifetime + lease_upkeep.CLOCK_SKEW + 1)
    with mock.patch.object(timeutils, 'utcnow', return_value=later):
        assert upkeep.revoke(ctx) == 0


def test_a_lease_lent_anew_by_the_same_server_is_not_revoked(
        ctx, host, lender, upkeep):
    lent(ctx, lender)
    more = decisions_db.create_pooling_decision(
        ctx, stored.VM_1, GIB, lender, 7 * GIB, 'pooling', 'auto', {}, {})
    cross.answer(ctx, more)
    assert upkeep.revoke(ctx) == 0


def test_agents_capped_below_1_4_get_no_revocation_tokens_expire(
        ctx, host, lender, upkeep):
    lent(ctx, lender)
    agent(upkeep).can_end_leases = False
    assert upkeep.renew(ctx) == 0
    agent(upkeep).renew_leases.assert_not_called()
