"""a labeler may skip a solution: it is served to them no more

Revision ID: 0039
Revises: 0038
Create Date: 2026-11-30

A new table: nobody has skipped anything before this revision, so it starts empty.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0039'
down_revision: str | None = '0038'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'skips',
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('solution_id', sa.Integer(), nullable=False),
        sa.Column('project_id', sa.Integer(), nullable=False),
        sa.Column('skipped_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('user_id', 'solution_id'),
    )
    with op.batch_alter_table('skips', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_skips_project_id'), ['project_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_skips_solution_id'), ['solution_id'], unique=False)


def downgrade() -> None:
    op.drop_table('skips')
