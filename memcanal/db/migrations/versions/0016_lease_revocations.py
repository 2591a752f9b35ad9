"""Leases that end (issue #36): the leases the service ended, which the
lender's agent is told to revoke on its memory server (its pages go, its
tokens are refused) until every token issued before has expired. Expand
only: a new table an older service never reads.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'lease_revocations',
        sa.Column('id', sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column('lender_host_id', sa.Integer(),
                  sa.ForeignKey('hosts.id'), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('revoked_at', sa.DateTime(), nullable=False),
        sa.Index('lease_revocations_revoked_at_idx', 'revoked_at'),
    )
