"""Per-interval PRL and PML log statistics of instance reports

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    # Nullable: reports stored before, and those of older agents, have
    # none.
    op.add_column('instance_reports',
                  sa.Column('log_stats', sa.JSON(), nullable=True))
