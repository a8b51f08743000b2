"""a comparison's claim names the worker holding it

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28

A comparison's claim is renewed while it is measured and lasts a round's lease; a worker that
lost it (its renewals held up past the lease, and another worker took it) must neither renew it
nor record its results over the new holder's. Comparisons claimed before this revision have no
holder on record (null) and are taken as any stale claim is.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0024'
down_revision: str | None = '0023'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_by', sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.drop_column('claimed_by')
