"""a manager can pause labeling in a project

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-01

While `paused_at` is set, next-task hands out no new task in the project (a lease in hand can
still be finished and submitted); the pages and the API say since when.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0041'
down_revision: str | None = '0040'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('paused_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_column('paused_at')
