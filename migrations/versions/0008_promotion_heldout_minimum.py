"""the promotion rule needs a minimum held-out size

A model was promoted after its rule was judged on six held-out labels. Rounds now judge the
lower bound of a bootstrap interval, and refuse to judge below this many held-out labels (or
best-of-N problems). Existing projects get the default.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('promote_min_heldout', sa.Integer(), nullable=False,
                                      server_default='50'))


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_column('promote_min_heldout')
