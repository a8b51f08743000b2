"""rounds draw uniformly until the selector ranks well on held-out labels

Every way of choosing measured so far taught a PRM that is still learning the task less than
uniform picks (docs/prm.md). A round now ranks the pool only with a selector whose held-out step
AUROC, the lower end of its 95% interval, reaches selector_min_step_auroc; null keeps the old
behaviour. Existing projects get the default.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0017'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


REASONS = ('convincing_wrong', 'top_scored', 'random_control', 'qc', 'no_model',
           'machine_disagreement', 'machine_uncertain', 'machine_unchecked')


def _reasons(batch_op, old: tuple[str, ...], new: tuple[str, ...]) -> None:
    batch_op.alter_column('reason', existing_type=sa.Enum(*old, name='pickreason', native_enum=False, length=24),
                          type_=sa.Enum(*new, name='pickreason', native_enum=False, length=24),
                          existing_nullable=False)


def upgrade() -> None:
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        _reasons(batch_op, REASONS, REASONS + ('selector_warmup',))
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('selector_min_step_auroc', sa.Float(), nullable=True))
        batch_op.create_check_constraint(
            op.f('ck_round_settings_selector_min_range'),
            'selector_min_step_auroc IS NULL OR (selector_min_step_auroc >= 0 AND selector_min_step_auroc <= 1)')
    op.execute("UPDATE round_settings SET selector_min_step_auroc = 0.9")


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_round_settings_selector_min_range'), type_='check')
        batch_op.drop_column('selector_min_step_auroc')
    op.execute("UPDATE round_picks SET reason = 'no_model' WHERE reason = 'selector_warmup'")
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        _reasons(batch_op, REASONS + ('selector_warmup',), REASONS)
