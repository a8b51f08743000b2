"""a wrong password's event has no actor: whoever typed it is not known

Revision ID: 0038
Revises: 0037
Create Date: 2026-11-30

It named the user whose name was typed, so that filtering the trail by a user listed what was
tried against them as if they had done it. The name stays in the target ("user NAME").
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0038'
down_revision: str | None = '0037'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EVENTS = sa.table('audit_events', sa.column('actor', sa.String(64)), sa.column('action', sa.String(40)),
                   sa.column('target', sa.String(200)))


def upgrade() -> None:
    op.execute(_EVENTS.update().where(_EVENTS.c.action == 'login.failed').values(actor=None))


def downgrade() -> None:
    # The name typed, as the target holds it after "user ".
    op.execute(_EVENTS.update().where(_EVENTS.c.action == 'login.failed')
               .values(actor=sa.func.substr(_EVENTS.c.target, 6, 64)))
