"""a round counts its failed attempts apart from its claims

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-30

`attempts` counts claims, a worker killed mid-round included; retries were judged by it, so
two deploys during a round and one error failed the round for good. Rounds from before count
no failure: their errors cannot be told from their workers' deaths.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0036'
down_revision: str | None = '0035'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('failures', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('failures')
