"""Initial schema: hosts, instances, reports, decisions, actions

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'hosts',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('memory_total_bytes', sa.BigInteger(), nullable=False),
        sa.Column('memory_reserved_bytes', sa.BigInteger(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('last_heartbeat_at', sa.DateTime(), nullable=True),
        sa.Column('last_sequence', sa.BigInteger(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name', name='uniq_hosts0name'),
        sa.UniqueConstraint('uuid', name='uniq_hosts0uuid'))
    op.create_table(
        'report_rejections',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('host_uuid', sa.String(length=255), nullable=True),
        sa.Column('sequence', sa.BigInteger(), nullable=True),
        sa.Column('code', sa.String(length=64), nullable=False),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'))
    op.create_index(
        'report_rejections_host_uuid_idx', 'report_rejections', ['host_uuid'])
    op.create_table(
        'decisions',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('policy', sa.String(length=64), nullable=False),
        sa.Column('inputs', sa.JSON(), nullable=False),
        sa.Column('outputs', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['host_id'], ['hosts.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('uuid', name='uniq_decisions0uuid'))
    op.create_table(
        'host_reports',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('host_id', sa.Integer(), nullable=False),
        sa.Column('sequence', sa.BigInteger(), nullable=False),
        sa.Column('collected_at', sa.DateTime(), nullable=False),
        sa.Column('received_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['host_id'], ['hosts.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'host_id', 'sequence',
            name='uniq_host_reports0host_id0sequence'))
    op.create_table(
        'instances',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('project_id', sa.String(length=255), nullable=False),
        sa.Column('allocated_bytes', sa.BigInteger(), nullable=False),
        sa.Column('target_bytes', sa.BigInteger(), nullable=True),
        sa.Column('floor_bytes', sa.BigInteger(), nullable=True),
        sa.Column('ceiling_bytes', sa.BigInteger(), nullable=True),
        sa.Column('opt_out', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['host_id'], ['hosts.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('uuid', name='uniq_instances0uuid'))
    op.create_index(
        'instances_host_id_idx', 'instances', ['host_id'])
    op.create_index(
        'instances_project_id_idx', 'instances', ['project_id'])
    op.create_table(
        'actions',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('uuid', sa.String(length=36), nullable=False),
        sa.Column('decision_id', sa.Integer(), nullable=True),
        sa.Column('host_id', sa.Integer(), nullable=True),
        sa.Column('instance_id', sa.Integer(), nullable=True),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('params', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['decision_id'], ['decisions.id']),
        sa.ForeignKeyConstraint(['host_id'], ['hosts.id']),
        sa.ForeignKeyConstraint(['instance_id'], ['instances.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('uuid', name='uniq_actions0uuid'))
    op.create_index(
        'actions_state_idx', 'actions', ['state'])
    op.create_table(
        'instance_reports',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('host_report_id', sa.Integer(), nullable=False),
        sa.Column('instance_id', sa.Integer(), nullable=False),
        sa.Column('sequence', sa.BigInteger(), nullable=False),
        sa.Column('collected_at', sa.DateTime(), nullable=False),
        sa.Column('allocated_bytes', sa.BigInteger(), nullable=False),
        sa.Column('guest_stats', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['host_report_id'], ['host_reports.id']),
        sa.ForeignKeyConstraint(['instance_id'], ['instances.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'host_report_id', 'instance_id',
            name='uniq_instance_reports0host_report_id0instance_id'))
    op.create_index(
        'instance_reports_instance_id_idx', 'instance_reports',
        ['instance_id', 'id'])
    op.create_table(
        'mrc_curves',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('instance_report_id', sa.Integer(), nullable=False),
        sa.Column('method', sa.String(length=32), nullable=False),
        sa.Column('points', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['instance_report_id'],
                                ['instance_reports.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'instance_report_id', 'method',
            name='uniq_mrc_curves0instance_report_id0method'))
    op.create_table(
        'wss_estimates',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('instance_report_id', sa.Integer(), nullable=False),
        sa.Column('estimator', sa.String(length=32), nullable=False),
        sa.Column('wss_bytes', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['instance_report_id'],
                                ['instance_reports.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'instance_report_id', 'estimator',
            name='uniq_wss_estimates0instance_report_id0estimator'))
