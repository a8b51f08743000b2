"""labelers correct their labels: a correction supersedes a label, projects set the window

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('projects') as batch:
        batch.add_column(
            sa.Column('correction_window_hours', sa.Integer(), nullable=False, server_default='24')
        )
        batch.create_check_constraint(
            'correction_window_range',
            'correction_window_hours >= 0 AND correction_window_hours <= 720',
        )
    with op.batch_alter_table('labels') as batch:
        batch.add_column(sa.Column('supersedes_id', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('superseded_at', sa.DateTime(timezone=True), nullable=True))
        batch.create_foreign_key(
            'fk_labels_supersedes_id_labels', 'labels', ['supersedes_id'], ['id'], ondelete='SET NULL'
        )
        batch.create_unique_constraint('uq_labels_supersedes_id', ['supersedes_id'])


def downgrade() -> None:
    with op.batch_alter_table('labels') as batch:
        batch.drop_constraint('uq_labels_supersedes_id', type_='unique')
        batch.drop_constraint('fk_labels_supersedes_id_labels', type_='foreignkey')
        batch.drop_column('superseded_at')
        batch.drop_column('supersedes_id')
    with op.batch_alter_table('projects') as batch:
        batch.drop_constraint('correction_window_range', type_='check')
        batch.drop_column('correction_window_hours')
