"""rounds may start by labeling pool solutions with rollouts

Rounds gain a first stage, `autolabel`, and round settings say which generator it samples
from (null for every existing project: the stage does nothing until a researcher names one),
how many rollouts per step, the method and how many solutions a round labels at most.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0016'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STAGES = ('snapshot', 'train', 'evaluate', 'promote', 'score', 'select', 'enqueue', 'done')
NEW_STAGES = ('autolabel',) + OLD_STAGES


def _stage(values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name='roundstage', native_enum=False, length=16)


def upgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.alter_column('stage', existing_type=_stage(OLD_STAGES), type_=_stage(NEW_STAGES),
                              existing_nullable=False)
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('autolabel_generator', sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column('autolabel_rollouts', sa.Integer(), nullable=False, server_default='8'))
        batch_op.add_column(sa.Column('autolabel_method', sa.String(length=16), nullable=False,
                                      server_default='mc'))
        batch_op.add_column(sa.Column('autolabel_limit', sa.Integer(), nullable=False, server_default='200'))


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_column('autolabel_limit')
        batch_op.drop_column('autolabel_method')
        batch_op.drop_column('autolabel_rollouts')
        batch_op.drop_column('autolabel_generator')
    op.execute("UPDATE rounds SET stage = 'snapshot' WHERE stage = 'autolabel'")
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.alter_column('stage', existing_type=_stage(NEW_STAGES), type_=_stage(OLD_STAGES),
                              existing_nullable=False)
