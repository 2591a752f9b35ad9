"""What agents observe apart from what memcanal decides; instances that
left; host state derived from each host's own report interval

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    # Reports wrote the agent's view into target_bytes; it is the
    # agent's observation, so it moves to its own column and targets
    # are left to decisions.
    op.add_column('instances', sa.Column('observed_bytes', sa.BigInteger(),
                                         nullable=True))
    op.execute('UPDATE instances SET observed_bytes = target_bytes')
    op.add_column('instances', sa.Column('last_reported_at', sa.DateTime(),
                                         nullable=True))
    op.add_column('instances', sa.Column('deleted_at', sa.DateTime(),
                                         nullable=True))
    op.create_index('instances_deleted_at_idx', 'instances', ['deleted_at'])
    op.add_column('hosts', sa.Column('report_interval', sa.Float(),
                                     nullable=True))
    # A host's state is derived from its last heartbeat and interval.
    with op.batch_alter_table('hosts') as batch:
        batch.drop_column('state')
