"""Instance reports hold their working-set sizes and miss-ratio curves

Each instance report's rows of wss_estimates and mrc_curves become two
JSON columns of the report ({estimator: bytes}, {method: points}), and
the two tables go: one row per VM and report instead of three or more,
what storing a report cost most of.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

# Instance reports moved per UPDATE statement.
CHUNK = 1000


def _fold(connection, table, name, value, value_type, column):
    """Copy each report's rows of ``table`` into its ``column``, as
    {name: value}, a chunk of reports at a time (no cursor held open
    while updating, which PyMySQL could not do)."""
    rows = sa.table(table, sa.column('instance_report_id', sa.Integer),
                    sa.column(name, sa.String), sa.column(value, value_type))
    reports = sa.table('instance_reports', sa.column('id', sa.Integer),
                       sa.column(column, sa.JSON))
    update = (sa.update(reports)
              .where(reports.c.id == sa.bindparam('report_id'))
              .values({column: sa.bindparam('document', type_=sa.JSON)}))
    last = 0
    while True:
        ids = connection.execute(
            sa.select(rows.c.instance_report_id).distinct()
            .where(rows.c.instance_report_id > last)
            .order_by(rows.c.instance_report_id).limit(CHUNK)
        ).scalars().all()
        if not ids:
            return
        documents = {}
        for report_id, key, item in connection.execute(
                sa.select(rows.c.instance_report_id, rows.c[name],
                          rows.c[value])
                .where(rows.c.instance_report_id.in_(ids))):
            documents.setdefault(report_id, {})[key] = item
        connection.execute(update, [
            {'report_id': report_id, 'document': document}
            for report_id, document in sorted(documents.items())])
        last = ids[-1]


def upgrade():
    # Nullable: a report stored before without estimates or curves has
    # none to fill in.
    op.add_column('instance_reports',
                  sa.Column('wss', sa.JSON(), nullable=True))
    op.add_column('instance_reports',
                  sa.Column('mrc', sa.JSON(), nullable=True))
    connection = op.get_bind()
    _fold(connection, 'wss_estimates', 'estimator', 'wss_bytes',
          sa.BigInteger, 'wss')
    _fold(connection, 'mrc_curves', 'method', 'points', sa.JSON, 'mrc')
    op.drop_table('wss_estimates')
    op.drop_table('mrc_curves')
