"""a lease keeps the labeling mode its task was served in

Revision ID: 0037
Revises: 0036
Create Date: 2026-11-30

A manager who changed the project's mode refused the labels of every task then under lease,
made as the page showed them. Leases from before have none and follow the project's mode.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0037'
down_revision: str | None = '0036'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('labeling_mode', sa.Enum('first_error', 'full', 'phase1', name='labelingmode',
                                                               native_enum=False, length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_column('labeling_mode')
