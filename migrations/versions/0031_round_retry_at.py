"""a round retried after an error waits before it is claimed again

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29

Rounds queued for a retry before this revision have none (null) and are claimed at once, as
they were.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0031'
down_revision: str | None = '0030'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('retry_at')
