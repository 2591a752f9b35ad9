"""What each VM's guest reached at memcanal's last memory target, as its
agent read it back: none for VMs from before, counted at their target

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    for table in ('instances', 'shadow_instances'):
        op.add_column(table, sa.Column('reached_bytes', sa.BigInteger(),
                                       nullable=True))
