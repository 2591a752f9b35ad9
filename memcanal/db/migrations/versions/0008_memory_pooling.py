"""Memory pooling: memory servers, the memory they lend, and how much of
each VM stays resident while the rest is paged out

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    for table in ('instances', 'shadow_instances'):
        for column in ('resident_bytes', 'paged_bytes',
                       'resident_target_bytes'):
            op.add_column(table, sa.Column(column, sa.BigInteger(),
                                           nullable=True))
    op.create_table(
        'memory_servers',
        sa.Column('id', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('host_id', sa.Integer(), sa.ForeignKey('hosts.id'),
                  nullable=False),
        sa.Column('address', sa.String(length=255), nullable=False),
        sa.Column('capacity_bytes', sa.BigInteger(), nullable=False),
        sa.Column('used_bytes', sa.BigInteger(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.UniqueConstraint('host_id', name='uniq_memory_servers0host_id'),
    )
    op.create_table(
        'memory_leases',
        sa.Column('id', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('memory_server_id', sa.Integer(),
                  sa.ForeignKey('memory_servers.id'), nullable=False),
        sa.Column('borrower_host_id', sa.Integer(),
                  sa.ForeignKey('hosts.id'), nullable=False),
        sa.Column('instance_uuid', sa.String(length=36), nullable=False),
        sa.Column('decision_uuid', sa.String(length=36), nullable=False),
        sa.Column('lent_bytes', sa.BigInteger(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.UniqueConstraint('instance_uuid',
                            name='uniq_memory_leases0instance_uuid'),
        sa.Index('memory_leases_memory_server_id_idx', 'memory_server_id'),
    )
