"""Hosts' hypervisor type, as their agents register it ('qemu', 'xen',
'simulated': memcanal.hypervisors); hosts from before have none until
their agent's next registration, and are taken as nova's meanwhile

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('hosts', sa.Column('hypervisor_type', sa.String(length=32),
                                     nullable=True))
