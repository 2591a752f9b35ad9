"""Across hosts: what placement and migration decisions read (flavor,
measured working set, availability zone, the ratio set in placement)
and the second host a migration decision concerns

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    for table in ('instances', 'shadow_instances'):
        # The flavor's name as nova's metadata gives it: the scheduler
        # filter estimates a new VM's demand from VMs of its flavor.
        op.add_column(table, sa.Column('flavor', sa.String(length=255),
                                       nullable=True))
        # The latest report's working set (the most exact estimator's),
        # so a host's measured demand is one SUM, not a scan of reports.
        op.add_column(table, sa.Column('wss_bytes', sa.BigInteger(),
                                       nullable=True))
    op.add_column('hosts', sa.Column('availability_zone',
                                     sa.String(length=255), nullable=True))
    op.add_column('hosts', sa.Column('allocation_ratio', sa.Float(),
                                     nullable=True))
    # A migration's destination: the decision holds both hosts.
    with op.batch_alter_table('decisions') as batch:
        batch.add_column(sa.Column('peer_host_id', sa.Integer(),
                                   nullable=True))
        batch.create_foreign_key('decisions_peer_host_id_fkey', 'hosts',
                                 ['peer_host_id'], ['id'])
        batch.create_index('decisions_peer_host_id_idx', ['peer_host_id'])
    op.add_column('shadow_decisions', sa.Column('peer_host_id', sa.Integer(),
                                                nullable=True))
