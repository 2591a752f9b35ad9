"""Memory pooling takes part only hosts an operator admitted, and owner ids
name one VM (issue 36, doc/pooling.md "Who borrows and lends").

``hosts.pooling_admitted``: a host registered from now on is not
admitted. A host that already takes part in pooling when the database is
upgraded is admitted by this migration, so that a running pool goes on
as before: one whose memory server an operator enabled (that was the
operator's word that it lends), or one whose VMs borrow now (a lease).
Every other host, an operator admits (``openstack memcanal host set
--admit``) before it borrows.

``instances.owner_id``: memcanal.owners.owner_of of the uuid, for every
VM stored so far, indexed, so that a report naming a new VM whose owner
id another VM holds is refused (memcanal.db.claims). Two VMs stored
before this migration that already share one keep it, and neither is
paged to a memory server from then on (memcanal.db.decisions).

Expand only: an older service, still running, inserts hosts with
``pooling_admitted`` null (not admitted, as the service reads it) and
instances without an owner id (the next report stored by a new service
sets it).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

from memcanal import owners

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

# Instances whose owner id one UPDATE sets.
BATCH = 1000


def upgrade():
    op.add_column('hosts', sa.Column('pooling_admitted', sa.Boolean(),
                                     nullable=True))
    # Archived instances (memcanal-manage db archive) keep theirs; those
    # archived before are left without.
    for table in ('instances', 'shadow_instances'):
        op.add_column(table, sa.Column('owner_id', sa.BigInteger(),
                                       nullable=True))
    op.create_index('instances_owner_id_idx', 'instances', ['owner_id'])
    connection = op.get_bind()
    hosts = sa.table('hosts', sa.column('id'),
                     sa.column('pooling_admitted'))
    servers = sa.table('memory_servers', sa.column('host_id'),
                       sa.column('enabled'))
    leases = sa.table('memory_leases', sa.column('borrower_host_id'))
    connection.execute(
        sa.update(hosts).where(sa.or_(
            hosts.c.id.in_(sa.select(servers.c.host_id).where(
                servers.c.enabled == sa.true())),
            hosts.c.id.in_(sa.select(leases.c.borrower_host_id))))
        .values(pooling_admitted=True))
    connection.execute(sa.update(hosts).where(
        hosts.c.pooling_admitted.is_(None)).values(pooling_admitted=False))
    instances = sa.table('instances', sa.column('id'), sa.column('uuid'),
                         sa.column('owner_id'))
    rows = connection.execute(
        sa.select(instances.c.id, instances.c.uuid)).all()
    update = sa.update(instances).where(
        instances.c.id == sa.bindparam('row_id')).values(
        owner_id=sa.bindparam('owner'))
    values = [{'row_id': row.id, 'owner': _owner(row.uuid)}
              for row in rows]
    for start in range(0, len(values), BATCH):
        connection.execute(update, values[start:start + BATCH])


def _owner(uuid):
    """The owner id; None for a uuid reports never let through."""
    try:
        return owners.owner_of(uuid)
    except ValueError:
        return None
