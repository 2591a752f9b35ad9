"""Decision states and their history, action results, per-VM mechanism

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def _add_required(table, column, default):
    """Add a NOT NULL column, filling existing rows with ``default``.

    The server default only serves the rows already there; the models
    set the value on insert, so it is dropped again. Batch mode, because
    SQLite cannot alter a column in place.
    """
    with op.batch_alter_table(table) as batch:
        batch.add_column(sa.Column(column, sa.String(length=16),
                                   nullable=False, server_default=default))
    with op.batch_alter_table(table) as batch:
        batch.alter_column(column, existing_type=sa.String(length=16),
                           existing_nullable=False, server_default=None)


def upgrade():
    _add_required('decisions', 'state', 'recommended')
    _add_required('decisions', 'mode', 'recommend')
    op.create_index('decisions_host_id_state_idx', 'decisions',
                    ['host_id', 'state'])
    op.add_column('actions', sa.Column('result', sa.JSON(), nullable=True))
    op.add_column('instances', sa.Column('mechanism', sa.String(length=16),
                                         nullable=True))
    op.add_column('instances', sa.Column('target_changed_at', sa.DateTime(),
                                         nullable=True))
    op.create_table(
        'decision_events',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('decision_id', sa.Integer(), nullable=False),
        sa.Column('from_state', sa.String(length=16), nullable=True),
        sa.Column('to_state', sa.String(length=16), nullable=False),
        sa.Column('user_id', sa.String(length=255), nullable=True),
        sa.Column('project_id', sa.String(length=255), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['decision_id'], ['decisions.id']),
        sa.PrimaryKeyConstraint('id'))
    op.create_index('decision_events_decision_id_idx', 'decision_events',
                    ['decision_id'])
