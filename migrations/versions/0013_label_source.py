"""labels record their source (human, rollout, judge, prm) and, for machine labels, what made them;
round settings weigh sources in training

Every existing label is a human one (`source` defaults to 'human'); `source_detail` holds a
machine label's generator, sampling parameters and per-step measurements. `source_weights` on
round settings is null (human labels only) for existing projects.

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0013'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            'source', sa.Enum('human', 'rollout', 'judge', 'prm', name='labelsource', native_enum=False,
                              length=16), nullable=False, server_default='human'))
        batch_op.add_column(sa.Column('source_detail', sa.JSON(), nullable=True))
        batch_op.create_index('ix_labels_project_source', ['project_id', 'source'], unique=False)
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source_weights', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_column('source_weights')
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index('ix_labels_project_source')
        batch_op.drop_column('source_detail')
        batch_op.drop_column('source')
