"""Agent identity and operator-enabled memory servers: the public key
each host's agent registered with, and memory servers with a uuid of
their own and an ``enabled`` flag

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from alembic import op
from oslo_utils import uuidutils
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade():
    # Pinned at a host's next registration: hosts from before keys have
    # none yet.
    op.add_column('hosts', sa.Column('public_key', sa.String(length=64),
                                     nullable=True))
    # Every server registered so far is disabled: anyone holding the
    # broker's credentials could register one before, so an operator
    # enables those it knows.
    with op.batch_alter_table('memory_servers') as batch:
        batch.add_column(sa.Column('uuid', sa.String(length=36),
                                   nullable=True))
        batch.add_column(sa.Column('enabled', sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    servers = sa.table('memory_servers', sa.column('id', sa.Integer),
                       sa.column('uuid', sa.String))
    connection = op.get_bind()
    for (server_id,) in connection.execute(sa.select(servers.c.id)).all():
        connection.execute(servers.update().where(
            servers.c.id == server_id).values(
                uuid=uuidutils.generate_uuid()))
    # The models set both on insert; the server default only served the
    # rows already there.
    with op.batch_alter_table('memory_servers') as batch:
        batch.alter_column('uuid', existing_type=sa.String(length=36),
                           nullable=False)
        batch.alter_column('enabled', existing_type=sa.Boolean(),
                           existing_nullable=False, server_default=None)
        batch.create_unique_constraint('uniq_memory_servers0uuid', ['uuid'])
