"""two model versions compared on the same held-out labels, by a worker

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
        sa.Column('requested_by', sa.Integer(), nullable=True),
        sa.Column('status', sa.Enum('queued', 'running', 'done', 'failed', name='comparisonstatus', native_enum=False, length=16), nullable=False),
        sa.Column('message', sa.String(length=500), nullable=False),
        sa.Column('snapshot_label_id', sa.Integer(), nullable=True),
        sa.Column('heldout_labels', sa.Integer(), nullable=True),
        sa.Column('results', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
        sa.Column('claimed_at', app.models.base.UTCDateTime(), nullable=True),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('created_at', app.models.base.UTCDateTime(), nullable=False),
        sa.Column('finished_at', app.models.base.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_model_comparisons_project_id_projects'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['version_a_id'], ['model_versions.id'], name=op.f('fk_model_comparisons_version_a_id_model_versions'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['version_b_id'], ['model_versions.id'], name=op.f('fk_model_comparisons_version_b_id_model_versions'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['requested_by'], ['users.id'], name=op.f('fk_model_comparisons_requested_by_users'), ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_model_comparisons')),
    )
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_comparisons_project_id'), ['project_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('model_comparisons', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_comparisons_project_id'))
    op.drop_table('model_comparisons')
