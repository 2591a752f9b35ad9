"""Data lifecycle: the downsampled report history, shadow tables of
archived decisions and instances, reports picked by age

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def _id():
    # Shadow rows keep their production id: no autoincrement.
    return sa.Column('id', sa.Integer(), autoincrement=False,
                     nullable=False)


def upgrade():
    op.create_index('instance_reports_collected_at_idx', 'instance_reports',
                    ['collected_at'])
    op.create_index('host_reports_collected_at_idx', 'host_reports',
                    ['collected_at'])
    op.create_table(
        'instance_report_history',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('instance_uuid', sa.String(length=36), nullable=False),
        sa.Column('period_start', sa.DateTime(), nullable=False),
        sa.Column('period_seconds', sa.Integer(), nullable=False),
        sa.Column('report_count', sa.Integer(), nullable=False),
        sa.Column('first_collected_at', sa.DateTime(), nullable=False),
        sa.Column('last_collected_at', sa.DateTime(), nullable=False),
        sa.Column('stats', sa.JSON(), nullable=False),
        sa.Column('mrc', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'instance_uuid', 'period_start',
            name='uniq_instance_report_history0instance_uuid0period_start'))
    op.create_index('instance_report_history_period_start_idx',
                    'instance_report_history', ['period_start'])
    op.create_table(
        'shadow_instances',
        _id(),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('project_id', sa.String(length=255), nullable=False),
        sa.Column('allocated_bytes', sa.BigInteger(), nullable=False),
        sa.Column('target_bytes', sa.BigInteger(), nullable=True),
        sa.Column('observed_bytes', sa.BigInteger(), nullable=True),
        sa.Column('floor_bytes', sa.BigInteger(), nullable=True),
        sa.Column('ceiling_bytes', sa.BigInteger(), nullable=True),
        sa.Column('opt_out', sa.Boolean(), nullable=False),
        sa.Column('mechanism', sa.String(length=16), nullable=True),
        sa.Column('target_changed_at', sa.DateTime(), nullable=True),
        sa.Column('last_reported_at', sa.DateTime(), nullable=True),
        sa.Column('deleted_at', sa.DateTime(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('id'))
    op.create_table(
        'shadow_decisions',
        _id(),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('policy', sa.String(length=64), nullable=False),
        sa.Column('inputs', sa.JSON(), nullable=False),
        sa.Column('outputs', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('mode', sa.String(length=16), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('id'))
    op.create_table(
        'shadow_actions',
        _id(),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('decision_id', sa.Integer(), nullable=True),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('instance_id', sa.Integer(), nullable=True),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('params', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('id'))
    op.create_index('shadow_actions_decision_id_idx', 'shadow_actions',
                    ['decision_id'])
    op.create_table(
        'shadow_decision_events',
        _id(),
        sa.Column('decision_id', sa.Integer(), nullable=False),
        sa.Column('from_state', sa.String(length=16), nullable=True),
        sa.Column('to_state', sa.String(length=16), nullable=False),
        sa.Column('user_id', sa.String(length=255), nullable=True),
        sa.Column('project_id', sa.String(length=255), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'))
    op.create_index('shadow_decision_events_decision_id_idx',
                    'shadow_decision_events', ['decision_id'])
