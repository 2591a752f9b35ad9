"""What the database remembers of each host's messages so that none is
taken twice, however long ago it was sent (memcanal.rpc.freshness says
what a receiver remembers for its window; this is what outlives it).

- Reports. Each (host, sequence) is stored once, told by its row in
  ``host_reports``; but retention deletes those rows
  (memcanal.db.retention), after which a captured report sent again
  would be stored again: its VMs undeleted, its host's heartbeat
  refreshed. So retention raises ``hosts.folded_sequence`` to the
  highest sequence it deleted, and a report at or below it that is not
  stored is refused (``report.replayed``). A report above it but below
  the host's highest stored sequence (``hosts.last_sequence``) and not
  stored is one the agent's outbox sends again after newer ones were
  stored (a broker or database outage: doc/delivery.md), and is stored.
- Registrations. ``hosts.registered_sent_at`` is the agent's time of the
  host's newest registration (service RPC 1.10); one sent no later is a
  replay (``rpc.replayed``): it would roll the host's memory back.
- Whether the host's agent stamps its messages (``hosts.stamped``): from
  the first stamped message on, one without is refused
  (``rpc.unstamped``), so that a message captured before the agent's
  upgrade cannot be played instead.
"""

import sqlalchemy as sa

from memcanal.db import models
from memcanal import exception
from memcanal.rpc import freshness

# Why a report was refused (stable: recorded with the host's rejections).
REPORT_REPLAYED = 'report.replayed'

_HOSTS = models.Host.__table__
_HOST_REPORTS = models.HostReport.__table__


def check_registration(host, sent_at):
    """Raise StaleMessage for a registration of ``host`` (its row,
    locked) sent at ``sent_at`` (None: unstamped) that is a replay."""
    if sent_at is None:
        if host.stamped:
            raise exception.StaleMessage(
                freshness.UNSTAMPED, 'the registration is not stamped '
                'fresh, and the host\'s agent stamps its messages')
    elif (host.registered_sent_at is not None
            and sent_at <= host.registered_sent_at):
        raise exception.StaleMessage(
            freshness.REPLAYED, 'the registration was sent at %s, not '
            'after the host\'s newest (%s)' % (
                sent_at.isoformat(), host.registered_sent_at.isoformat()))


def replayed_report(host, report):
    """An InvalidReport if ``report`` (not stored) of ``host`` (its row,
    locked: folded_sequence) is at or below what retention folded, else
    None."""
    if report['sequence'] > host.folded_sequence:
        return None
    return exception.InvalidReport(
        REPORT_REPLAYED, 'report %d is at or below the highest sequence '
        'retention folded (%d): a replay, or a report sent too late to '
        'be told from one' % (report['sequence'], host.folded_sequence))


def record_folded(connection, condition):
    """Raise each host's folded_sequence to the highest sequence of its
    host reports matching ``condition``, which the caller is about to
    delete (in the same transaction)."""
    highest = connection.execute(
        sa.select(_HOST_REPORTS.c.host_id,
                  sa.func.max(_HOST_REPORTS.c.sequence))
        .where(condition).group_by(_HOST_REPORTS.c.host_id)
        .order_by(_HOST_REPORTS.c.host_id)).all()
    for host_id, sequence in highest:
        connection.execute(
            sa.update(_HOSTS).where(_HOSTS.c.id == host_id,
                                    _HOSTS.c.folded_sequence < sequence)
            .values(folded_sequence=sequence))
