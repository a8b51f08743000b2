"""a solution score says whether a step went unscored, so that the rule ranks it below whole reads

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

A step longer than the model's window has a null step score, and the solution's score lacks its
factor. Scores stored before this revision are marked from their step scores: their numbers are
floats or null, so a null anywhere in the JSON text is an unscored step.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0022'
down_revision: str | None = '0021'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('solution_scores', schema=None) as batch_op:
        batch_op.add_column(sa.Column('truncated', sa.Boolean(), server_default=sa.false(), nullable=False))
    scores = sa.table('solution_scores', sa.column('step_scores', sa.JSON()), sa.column('truncated', sa.Boolean()))
    op.execute(
        scores.update()
        .where(sa.cast(scores.c.step_scores, sa.Text()).like('%null%'))
        .values(truncated=True)
    )


def downgrade() -> None:
    with op.batch_alter_table('solution_scores', schema=None) as batch_op:
        batch_op.drop_column('truncated')
