"""the queue hands out solutions of equal priority in the order they came, a file's in its order

Among waiting slots of equal priority (first slots before later ones) the queue went newest
first: a file's lines came out in reverse, and each new import went ahead of every older one.
Now oldest first; the index still gives the order read backwards, with nothing to sort.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0032'
down_revision: str | None = '0031'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WAITING = sa.text("status = 'waiting'")


def _queue_index(id_order: str) -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ix_assignments_queue', postgresql_where=WAITING, sqlite_where=WAITING)
        batch_op.create_index(
            'ix_assignments_queue',
            ['project_id', 'priority', sa.text('slot DESC'), sa.text(f'id {id_order}')],
            unique=False,
            postgresql_where=WAITING,
            sqlite_where=WAITING,
        )


def upgrade() -> None:
    _queue_index('DESC')


def downgrade() -> None:
    _queue_index('ASC')
