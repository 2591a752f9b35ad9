"""What GET /metrics reads: the cloud's memory and decisions, in one
transaction.

Everything comes from the database, so any number of API processes, on
any number of controllers, answer a scrape with the same numbers: no
process keeps counts of its own. Counts that only grow (decisions that
entered a state, reports rejected) are counted from the rows that record
them, and shrink only when retention purges those rows.
"""

import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models


def _latest_reports(session, instance_ids):
    """{instance id: (wss, wss_bounds, mrc)} of each instance's newest
    report; one query, reading instance_reports_instance_id_idx."""
    if not instance_ids:
        return {}
    newest = (sa.select(sa.func.max(models.InstanceReport.id))
              .where(models.InstanceReport.instance_id.in_(instance_ids))
              .group_by(models.InstanceReport.instance_id))
    return {row.instance_id: (row.wss or {}, row.wss_bounds or {},
                              row.mrc or {})
            for row in session.execute(
                sa.select(models.InstanceReport.instance_id,
                          models.InstanceReport.wss,
                          models.InstanceReport.wss_bounds,
                          models.InstanceReport.mrc)
                .where(models.InstanceReport.id.in_(newest)))}


def _live_instances(session):
    """Every live instance (not marked deleted) with its host's name,
    the memory it has and its measured demand (as its host's demand
    counts them), and its newest report's working sets, their 95 %
    intervals (sampled estimators only) and curves."""
    rows = session.execute(
        sa.select(models.Instance, models.Host.name)
        .join(models.Host, models.Instance.host_id == models.Host.id)
        .where(models.Instance.deleted_at.is_(None))
        .order_by(models.Instance.uuid)).all()
    latest = _latest_reports(session, [row.id for row, _name in rows])
    instances = []
    for row, host_name in rows:
        wss, wss_bounds, mrc = latest.get(row.id, ({}, {}, {}))
        memory, need, _low = db_api.demands_of(row)
        instances.append({
            'uuid': row.uuid, 'host': host_name,
            'project_id': row.project_id,
            'allocated_bytes': row.allocated_bytes,
            'target_bytes': row.target_bytes,
            'resident_bytes': row.resident_bytes,
            'paged_bytes': row.paged_bytes,
            'memory_bytes': memory, 'demand_bytes': need,
            'wss': wss, 'wss_bounds': wss_bounds,
            'mrc': db_api.stored_curves(mrc)})
    return instances


def _counts(session, *columns):
    """[(column values..., count)] of the rows, grouped by ``columns``."""
    return [tuple(row) for row in session.execute(
        sa.select(*columns, sa.func.count()).group_by(*columns)
        .order_by(*columns))]


@db_api.context_manager.reader
def scrape(context, per_instance=True):
    """Hosts (as db_api.list_hosts), live instances (unless not
    ``per_instance``), and counts: decisions by (kind, state) now,
    decisions that ever entered a state by (kind, state), report
    rejections by code."""
    session = context.session
    return {
        'hosts': db_api.list_hosts(context),
        'instances': _live_instances(session) if per_instance else [],
        'decisions': _counts(session, models.Decision.kind,
                             models.Decision.state),
        'transitions': [tuple(row) for row in session.execute(
            sa.select(models.Decision.kind, models.DecisionEvent.to_state,
                      sa.func.count())
            .join(models.Decision,
                  models.Decision.id == models.DecisionEvent.decision_id)
            .group_by(models.Decision.kind, models.DecisionEvent.to_state)
            .order_by(models.Decision.kind, models.DecisionEvent.to_state))],
        'rejections': _counts(session, models.ReportRejection.code),
    }
