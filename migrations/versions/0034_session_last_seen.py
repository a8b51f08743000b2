"""a browser session records when it was last used, and ends after a while unused

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29

Sessions open at the upgrade count as used at the upgrade: dated from when they began, every
session older than the idle limit would end under someone at work.
"""

from collections.abc import Sequence

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision: str = '0034'
down_revision: str | None = '0033'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('auth_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=True))
    # A typed column, so that each database stores the moment as app.models.base.UTCDateTime does
    # (SQLite drops the offset of a UTC time).
    sessions = sa.table('auth_sessions', sa.column('last_seen_at', sa.DateTime(timezone=True)))
    op.execute(sessions.update().values(last_seen_at=datetime.now(timezone.utc)))
    with op.batch_alter_table('auth_sessions', schema=None) as batch_op:
        batch_op.alter_column('last_seen_at', existing_type=sa.DateTime(timezone=True), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('auth_sessions', schema=None) as batch_op:
        batch_op.drop_column('last_seen_at')
