"""the queue hands out each solution's first slot before its later ones, among equal priorities

Among waiting slots of equal priority the queue went newest first, so a solution's two slots
(overlap 2) came one after the other, and a labeler working alone passed over the sibling slot of
every solution they had labeled on each pick: a pick cost grew with their labels. First slots
now come before later ones; the index gives that order read backwards, with nothing to sort.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WAITING = sa.text("status = 'waiting'")


def upgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ix_assignments_queue', postgresql_where=WAITING, sqlite_where=WAITING)
        batch_op.create_index(
            'ix_assignments_queue',
            ['project_id', 'priority', sa.text('slot DESC'), 'id'],
            unique=False,
            postgresql_where=WAITING,
            sqlite_where=WAITING,
        )


def downgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ix_assignments_queue', postgresql_where=WAITING, sqlite_where=WAITING)
        batch_op.create_index(
            'ix_assignments_queue',
            ['project_id', 'priority', 'id'],
            unique=False,
            postgresql_where=WAITING,
            sqlite_where=WAITING,
        )
