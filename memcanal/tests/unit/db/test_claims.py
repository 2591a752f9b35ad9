"""A report describes only its own host's VMs (memcanal.db.claims): a VM
on another host moves only once that host lets it go, and no report
changes a VM's project."""

import datetime

from oslo_utils import timeutils
import pytest
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import claims
from memcanal.db import models
from memcanal.tests.unit.db import test_api as stored

VM_1, VM_2 = stored.VM_1, stored.VM_2


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


@pytest.fixture
def hosts(ctx):
    """compute-1, whose report 1 lists VM_1, and compute-2."""
    one, two = stored.register(ctx, 'compute-1'), stored.register(
        ctx, 'compute-2')
    assert db_api.store_report(ctx, stored.report(one, 1)) is True
    return one, two


def where(ctx, uuid):
    instance = db_api.get_instance(ctx, uuid)
    return instance['host_uuid'], instance['project_id']


def test_a_vm_its_host_still_lists_is_left_out_of_anothers_report(ctx,
                                                                  hosts):
    one, two = hosts
    outcome = db_api.store_report(ctx, stored.report(
        two, 1, stored.sample(VM_1, 1), stored.sample(VM_2, 1)))
    assert outcome == {VM_1: claims.ELSEWHERE}
    assert where(ctx, VM_1) == (one, 'p1')
    # The rest of the report is stored, and its host's heartbeat with it.
    assert where(ctx, VM_2) == (two, 'p1')
    assert [r['sequence'] for r in db_api.list_instance_reports(
        ctx, VM_1)] == [1]
    assert db_api.get_host(ctx, two)['last_sequence'] == 1


def test_a_vm_moves_once_its_newest_report_omits_it(ctx, hosts):
    one, two = hosts
    db_api.store_report(ctx, stored.report(one, 2, stored.sample(VM_2, 2)))
    assert db_api.store_report(ctx, stored.report(two, 1)) is True
    assert where(ctx, VM_1) == (two, 'p1')
    # And compute-1 may not take it back while compute-2 lists it.
    assert db_api.store_report(ctx, stored.report(one, 3)) == {
        VM_1: claims.ELSEWHERE}


def test_a_vm_moves_off_a_host_that_is_down(ctx, hosts, conf):
    one, two = hosts
    silent = timeutils.utcnow() - datetime.timedelta(hours=1)
    with db_api.context_manager.writer.using(ctx) as session:
        session.execute(sa.update(models.Host).where(
            models.Host.uuid == one).values(last_heartbeat_at=silent))
    assert db_api.get_host(ctx, one)['state'] == 'down'
    assert db_api.store_report(ctx, stored.report(two, 1)) is True
    assert where(ctx, VM_1) == (two, 'p1')


def test_a_vm_moves_where_nova_says_it_runs(ctx, hosts):
    one, two = hosts
    report = stored.report(two, 1)
    assert db_api.held_elsewhere(ctx, host_id(ctx, two), report) == [VM_1]
    report['moved_here'] = {VM_1}
    assert db_api.store_report(ctx, report) is True
    assert where(ctx, VM_1) == (two, 'p1')


def test_no_report_changes_a_vms_project(ctx, hosts):
    one, two = hosts
    outcome = db_api.store_report(ctx, stored.report(
        one, 2, stored.sample(VM_1, 2, project='p2')))
    assert outcome == {VM_1: claims.PROJECT_CHANGED}
    assert where(ctx, VM_1) == (one, 'p1')
    # Not even once its host let it go, nor for a deleted VM back.
    db_api.store_report(ctx, stored.report(one, 3, stored.sample(VM_2, 3)))
    assert db_api.store_report(ctx, stored.report(
        two, 1, stored.sample(VM_1, 1, project='p2'))) == {
        VM_1: claims.PROJECT_CHANGED}


def test_a_deleted_vm_comes_back_on_the_host_that_reports_it(ctx, hosts):
    one, two = hosts
    with db_api.context_manager.writer.using(ctx) as session:
        session.execute(sa.update(models.Instance).values(
            deleted_at=timeutils.utcnow()))
    assert db_api.store_report(ctx, stored.report(two, 1)) is True
    instance = db_api.get_instance(ctx, VM_1)
    assert (instance['host_uuid'], instance['deleted_at']) == (two, None)


def host_id(ctx, uuid):
    return db_api.get_host(ctx, uuid)['id']


def migrated(ctx, uuid, host, after):
    """What an applied migration records: the VM on ``host``, given to
    it ``after`` from now."""
    with db_api.context_manager.writer.using(ctx) as session:
        [host_id] = session.execute(sa.select(models.Host.id).where(
            models.Host.uuid == host)).scalars()
        session.execute(sa.update(models.Instance).where(
            models.Instance.uuid == uuid).values(
                host_id=host_id, target_changed_at=timeutils.utcnow()
                + after))


def test_a_vm_a_migration_gave_another_host_stays_there_until_it_reports(
        ctx, hosts):
    """memcanal applied a migration of VM_1 to compute-2, which has not
    reported since: compute-1's next report, made before the VM left,
    still lists it and does not take it back; compute-2's report, then
    compute-1's without it, settle it there."""
    one, two = hosts
    db_api.store_report(ctx, stored.report(two, 1))
    migrated(ctx, VM_1, two, datetime.timedelta(seconds=1))
    assert db_api.store_report(ctx, stored.report(one, 2)) == {
        VM_1: claims.ELSEWHERE}
    assert where(ctx, VM_1) == (two, 'p1')
    db_api.store_report(ctx, stored.report(two, 2, stored.sample(VM_1, 2)))
    assert db_api.store_report(ctx, stored.report(one, 3)) == {
        VM_1: claims.ELSEWHERE}
    assert where(ctx, VM_1) == (two, 'p1')


def test_a_migrated_vm_stays_while_its_destination_may_report_from_before(
        ctx, hosts):
    """memcanal applied a migration of VM_1 to compute-2 while compute-2
    was sending a report made before the VM arrived: stored after, it
    omits the VM, and compute-1's report (also made before) does not
    take the VM back; compute-2's next report, made after and still
    without it, lets it go."""
    one, two = hosts
    migrated(ctx, VM_1, two, -datetime.timedelta(seconds=1))
    db_api.store_report(ctx, stored.report(two, 1, stored.sample(VM_2, 1)))
    assert db_api.store_report(ctx, stored.report(one, 2)) == {
        VM_1: claims.ELSEWHERE}
    assert where(ctx, VM_1) == (two, 'p1')
    db_api.store_report(ctx, stored.report(two, 2, stored.sample(VM_2, 2)))
    assert db_api.store_report(ctx, stored.report(one, 3)) is True
    assert where(ctx, VM_1) == (one, 'p1')
