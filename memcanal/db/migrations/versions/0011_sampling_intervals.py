"""Sampled estimates' 95 % intervals (RPC 1.7): each instance report keeps
its working sets' bounds and its curves' bands as the agent sent them,
and each instance the bounds of its latest working set, from which its
demand is taken (the upper one). Reports and instances from before have
none: their working set is read as exact.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    for column in ('wss_bounds', 'mrc_bands'):
        op.add_column('instance_reports',
                      sa.Column(column, sa.JSON(), nullable=True))
    for table in ('instances', 'shadow_instances'):
        for column in ('wss_low_bytes', 'wss_high_bytes'):
            op.add_column(table, sa.Column(column, sa.BigInteger(),
                                           nullable=True))
