"""new projects draw round picks uniformly; a selector must rank well before it chooses

No way of choosing measured so far taught a PRM more than uniform picks (at best, half the labels
chosen by a selector that ranked, it was level; docs/prm.md). New projects get selector mode
`uniform`; in fixed and retrain modes a round ranks the pool only with a selector whose held-out
step AUROC, the lower end of its 95% interval, reaches selector_min_step_auroc. Existing round settings keep their mode and get no
bar, so their rounds pick as before (a project that has none yet gets the new defaults).

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
NEW_REASONS = REASONS + ('uniform', 'selector_warmup')
MODES = ('fixed', 'retrain')
NEW_MODES = ('uniform',) + MODES


def _enum(values: tuple[str, ...], name: str, length: int) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, length=length)


def upgrade() -> None:
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.alter_column('reason', existing_type=_enum(REASONS, 'pickreason', 24),
                              type_=_enum(NEW_REASONS, 'pickreason', 24), existing_nullable=False)
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.alter_column('selector_mode', existing_type=_enum(MODES, 'selectormode', 16),
                              type_=_enum(NEW_MODES, 'selectormode', 16), existing_nullable=False)
        batch_op.add_column(sa.Column('selector_min_step_auroc', sa.Float(), nullable=True))
        batch_op.create_check_constraint(
            op.f('ck_round_settings_selector_min_range'),
            'selector_min_step_auroc IS NULL OR (selector_min_step_auroc >= 0 AND selector_min_step_auroc <= 1)')


def downgrade() -> None:
    op.execute("UPDATE round_settings SET selector_mode = 'fixed' WHERE selector_mode = 'uniform'")
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_round_settings_selector_min_range'), type_='check')
        batch_op.drop_column('selector_min_step_auroc')
        batch_op.alter_column('selector_mode', existing_type=_enum(NEW_MODES, 'selectormode', 16),
                              type_=_enum(MODES, 'selectormode', 16), existing_nullable=False)
    op.execute("UPDATE round_picks SET reason = 'no_model' WHERE reason IN ('uniform', 'selector_warmup')")
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.alter_column('reason', existing_type=_enum(NEW_REASONS, 'pickreason', 24),
                              type_=_enum(REASONS, 'pickreason', 24), existing_nullable=False)
