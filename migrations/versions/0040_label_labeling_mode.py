"""a label keeps the labeling mode it was made in

Revision ID: 0040
Revises: 0039
Create Date: 2026-11-30

A correction was checked against the rules its content suggested, or the project's mode now: a
first-error label of a project switched to full mode took a correction that rated past its first
-1. Labels made here take their lease's mode where the lease kept one (migration 0037), and a
correction its label's; the rest stay without one, read by what their steps hold, as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0040'
down_revision: str | None = '0039'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.add_column(sa.Column('labeling_mode', sa.Enum('first_error', 'full', 'phase1', name='labelingmode',
                                                               native_enum=False, length=16), nullable=True))
    labels = sa.table('labels', sa.column('id', sa.Integer), sa.column('assignment_id', sa.Integer),
                      sa.column('supersedes_id', sa.Integer), sa.column('labeling_mode', sa.String))
    assignments = sa.table('assignments', sa.column('id', sa.Integer), sa.column('labeling_mode', sa.String))
    served = (sa.select(assignments.c.labeling_mode).where(assignments.c.id == labels.c.assignment_id)
              .scalar_subquery())
    op.execute(labels.update().where(labels.c.assignment_id.is_not(None)).values(labeling_mode=served))
    # A correction names no lease: it takes its label's mode, a chain of them one link a pass.
    corrected = labels.alias('corrected')
    of_corrected = (sa.select(corrected.c.labeling_mode).where(corrected.c.id == labels.c.supersedes_id)
                    .scalar_subquery())
    connection = op.get_bind()
    while connection.execute(
        labels.update()
        .where(labels.c.labeling_mode.is_(None), labels.c.supersedes_id.is_not(None), of_corrected.is_not(None))
        .values(labeling_mode=of_corrected)
    ).rowcount:
        pass


def downgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_column('labeling_mode')
