"""a problem names the imported file that added it

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28

Removing an imported file takes away the problems it added, as it does its solutions and
labels. Problems imported before this revision get their file from the import's timestamp: an
import writes its batch and its new problems with one `created_at`.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0026'
down_revision: str | None = '0025'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('problems') as batch:
        batch.add_column(sa.Column('import_batch_id', sa.Integer(), nullable=True))
        batch.create_foreign_key(
            'fk_problems_import_batch_id_import_batches', 'import_batches', ['import_batch_id'], ['id'],
            ondelete='SET NULL',
        )
        batch.create_index('ix_problems_import_batch_id', ['import_batch_id'])
    op.execute(
        "UPDATE problems SET import_batch_id = ("
        " SELECT min(b.id) FROM import_batches b"
        " WHERE b.project_id = problems.project_id AND b.created_at = problems.created_at)"
        " WHERE EXISTS (SELECT 1 FROM import_batches b"
        " WHERE b.project_id = problems.project_id AND b.created_at = problems.created_at)"
    )


def downgrade() -> None:
    with op.batch_alter_table('problems') as batch:
        batch.drop_index('ix_problems_import_batch_id')
        batch.drop_constraint('fk_problems_import_batch_id_import_batches', type_='foreignkey')
        batch.drop_column('import_batch_id')
