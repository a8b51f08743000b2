"""routed round picks say why in words; round settings may accept agreeing machine labels

`round_picks.detail` holds the reason a solution was routed to humans ("rollout and PRM
disagree on step 3"); `round_settings.accept_agreeing_machine_labels` is off for existing
projects, so only human labels train until a researcher turns it on.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_REASONS = ('convincing_wrong', 'top_scored', 'random_control', 'qc', 'no_model')
NEW_REASONS = OLD_REASONS + ('machine_disagreement', 'machine_uncertain', 'machine_unchecked')


def upgrade() -> None:
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('detail', sa.String(length=200), nullable=True))
        batch_op.alter_column(
            'reason',
            existing_type=sa.Enum(*OLD_REASONS, name='pickreason', native_enum=False, length=24),
            type_=sa.Enum(*NEW_REASONS, name='pickreason', native_enum=False, length=24),
            existing_nullable=False,
        )
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            'accept_agreeing_machine_labels', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_column('accept_agreeing_machine_labels')
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.drop_column('detail')
