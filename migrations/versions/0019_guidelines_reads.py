"""who has read which version of a project's guidelines, and when the guidelines last changed

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'guidelines_reads',
        sa.Column('project_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('version', sa.String(length=16), nullable=False),
        sa.Column('read_at', app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_guidelines_reads_project_id_projects'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_guidelines_reads_user_id_users'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('project_id', 'user_id', name=op.f('pk_guidelines_reads')),
    )
    with op.batch_alter_table('guidelines_reads', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_guidelines_reads_user_id'), ['user_id'], unique=False)
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('guidelines_updated_at', app.models.base.UTCDateTime(), nullable=True))
    # Guidelines written before this revision date from the project's creation, the earliest
    # they can have been written: an acknowledgement is judged by version, not by this date.
    op.execute("UPDATE projects SET guidelines_updated_at = created_at WHERE guidelines <> ''")


def downgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_column('guidelines_updated_at')
    with op.batch_alter_table('guidelines_reads', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_guidelines_reads_user_id'))
    op.drop_table('guidelines_reads')
