"""The RPC versions the running processes speak, for ``[upgrade_levels]
... = auto`` (doc/upgrades.md): each host's agent API version, as its
agent registers it (none for agents before service RPC 1.9, taken as the
oldest the service still sends to), and a row per service process with
its service API version, refreshed while it runs

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('hosts', sa.Column('agent_version', sa.String(length=16),
                                     nullable=True))
    op.create_table(
        'services',
        sa.Column('id', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('rpc_version', sa.String(length=16), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.UniqueConstraint('name', name='uniq_services0name'),
    )
