"""who changed accounts, roles, projects and members, and removed imports

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29

A new table: the audit trail an admin reads under Users → Activity. Nothing before this revision
was recorded, so it starts empty.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0030'
down_revision: str | None = '0029'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'audit_events',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor_id', sa.Integer(), nullable=True),
        sa.Column('actor', sa.String(length=64), nullable=True),
        sa.Column('action', sa.String(length=40), nullable=False),
        sa.Column('target', sa.String(length=200), nullable=False),
        sa.Column('details', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
        sa.ForeignKeyConstraint(['actor_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        # As every table since 0027: a deleted row's id is never given again.
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table('audit_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_events_actor_id'), ['actor_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_events_action'), ['action'], unique=False)


def downgrade() -> None:
    op.drop_table('audit_events')
