"""The RPC versions the running processes speak, for ``[upgrade_levels]
... = auto`` (doc/upgrades.md), as nova computes its caps from its
services' versions: the service caps what it sends agents at the oldest
agent API version of the registered hosts, and an agent what it sends
the service at the oldest service API version of the service processes
running.

Every registered host counts, up or down: a host down during an upgrade
comes back with the agent it had. Service processes count while they
refresh their row (every [service] periodic_interval): a process that
stopped consumes nothing, so only the running ones need to read what
agents send.
"""

import datetime

from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal.db import api as db_api
from memcanal.db import models


def oldest(versions, unknown):
    """The oldest of ``versions`` ('1.9' strings); a None among them (a
    process too old to say) is ``unknown``; None when there are none."""
    known = [unknown if version is None else version
             for version in versions]
    return min(known, key=lambda version: tuple(
        int(part) for part in version.split('.')), default=None)


@db_api.context_manager.reader
def agent_versions(context):
    """The agent API versions of the registered hosts' agents, None for
    those that did not say (agents before service RPC 1.9)."""
    return set(context.session.execute(
        sa.select(models.Host.agent_version).distinct()).scalars())


@db_api.retry_on_conflict
@db_api.context_manager.writer
def record_service(context, name, rpc_version):
    """Record (or refresh) that the service process ``name`` runs and
    serves ``rpc_version``."""
    service = context.session.execute(
        sa.select(models.Service).where(models.Service.name == name)
        .with_for_update()).scalar_one_or_none()
    if service is None:
        context.session.add(models.Service(name=name,
                                           rpc_version=rpc_version))
    else:
        service.rpc_version = rpc_version
        # Refreshed even when nothing else changes.
        service.updated_at = timeutils.utcnow()


@db_api.context_manager.reader
def service_versions(context, live_seconds):
    """The service API versions of the service processes that recorded
    themselves within ``live_seconds``."""
    since = timeutils.utcnow() - datetime.timedelta(seconds=live_seconds)
    return set(context.session.execute(
        sa.select(models.Service.rpc_version).distinct().where(
            sa.func.coalesce(models.Service.updated_at,
                             models.Service.created_at) >= since)
    ).scalars())
