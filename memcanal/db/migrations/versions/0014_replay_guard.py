"""What the service remembers of each host's messages so that none is
taken twice (memcanal.rpc.freshness, doc/pooling.md): the highest report
sequence retention folded away (a report at or below it is refused,
though its row is gone), the agent's time of the host's newest
registration (an older one is refused), and whether its agent stamps its
messages fresh (from then on, one without is refused). Expand only: an
older service writes hosts without them, which default to what a host
from before has (nothing folded, no stamped registration, unstamped).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('hosts', sa.Column('folded_sequence', sa.BigInteger(),
                                     nullable=False, server_default='0'))
    op.add_column('hosts', sa.Column('registered_sent_at', sa.DateTime(),
                                     nullable=True))
    op.add_column('hosts', sa.Column('stamped', sa.Boolean(),
                                     nullable=False,
                                     server_default='0'))
