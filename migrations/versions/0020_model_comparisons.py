"""two model versions compared on the same held-out labels

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.models.base

revision: str = '0020'
down_revision: str | None = '0019'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'model_comparisons',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('project_id', sa.Integer(), nullable=False),
        sa.Column('version_a_id', sa.Integer(), nullable=False),
        sa.Column('version_b_id', sa.Integer(), nullable=False),
        sa.Column('snapshot_label_id', sa.Integer(), nullable=False),
        sa.Column('heldout_labels', sa.Integer(), nullable=False),
        sa.Column('results', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
        sa.Column('created_at', app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_model_comparisons_project_id_projects'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['version_a_id'], ['model_versions.id'], name=op.f('fk_model_comparisons_version_a_id_model_versions'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['version_b_id'], ['model_versions.id'], name=op.f('fk_model_comparisons_version_b_id_model_versions'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_model_comparisons')),
    )
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_comparisons_project_id'), ['project_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_comparisons_project_id'))
    op.drop_table('model_comparisons')
