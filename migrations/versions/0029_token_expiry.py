"""an API token may expire

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29

A token made with an expiry is refused from then on, as a revoked one is; tokens made before
this revision have none (null) and last until revoked, as they did.
"""

from collections.abc import Sequence

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision: str = '0029'
down_revision: str | None = '0028'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Without the column a token made to expire (or one expired already) would last until
    # revoked: it is revoked now instead.
    tokens = sa.table('api_tokens', sa.column('expires_at', sa.DateTime(timezone=True)), sa.column('revoked_at', sa.DateTime(timezone=True)))
    op.execute(tokens.update().where(tokens.c.expires_at.is_not(None), tokens.c.revoked_at.is_(None))
               .values(revoked_at=datetime.now(timezone.utc)))
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
