"""an API token may be read-only: it reads (GET) and changes nothing

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-29

Tokens made before this revision keep full access, as they had.
"""

from collections.abc import Sequence

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision: str = '0035'
down_revision: str | None = '0034'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('read_only', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    # Without the column a read-only token would be a full one: it is revoked instead, as one
    # that can be made again, read-only, once upgraded.
    tokens = sa.table('api_tokens', sa.column('read_only', sa.Boolean()), sa.column('revoked_at', sa.DateTime(timezone=True)))
    op.execute(tokens.update().where(tokens.c.read_only.is_(True), tokens.c.revoked_at.is_(None))
               .values(revoked_at=datetime.now(timezone.utc)))
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('read_only')
