"""rounds pick with a fixed selector or a retrained one

The paper's gain came from a selector trained once and kept fixed; retraining it every round
is the variant its authors could not make work. A project chooses: `fixed` pins one model
version as the selector (the first served one unless a researcher names another), `retrain`
picks with whichever model is served. Existing projects keep picking as they did (retrain).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('selector_mode', sa.Enum('fixed', 'retrain', name='selectormode',
                                                               native_enum=False, length=16),
                                      nullable=False, server_default='retrain'))
        batch_op.add_column(sa.Column('selector_version_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_round_settings_selector_version_id_model_versions',
                                    'model_versions', ['selector_version_id'], ['id'],
                                    ondelete='SET NULL')


def downgrade() -> None:
    with op.batch_alter_table('round_settings', schema=None) as batch_op:
        batch_op.drop_constraint('fk_round_settings_selector_version_id_model_versions',
                                 type_='foreignkey')
        batch_op.drop_column('selector_version_id')
        batch_op.drop_column('selector_mode')
