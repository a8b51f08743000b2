"""an import batch keeps the step separator its solutions' text was cut at

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28

The same file cut at another separator gives other steps, so it is another import, not the
same one again. Batches imported before this revision have no separator on record (null): a file
matching one of them is still taken as imported.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0023'
down_revision: str | None = '0022'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('import_batches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('separator', sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('import_batches', schema=None) as batch_op:
        batch_op.drop_column('separator')
