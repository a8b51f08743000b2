"""steps, a label's extra and a solution's origin are json, not jsonb, on PostgreSQL

They are written in bulk and read whole, never queried inside: json keeps the text as given,
where jsonb builds a tree of it on every insert (see app.models.base.JSONDocument). SQLite has
one JSON type: nothing changes there.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DOCUMENTS = {'solutions': ('steps', 'origin'), 'labels': ('steps', 'extra')}


def _retype(name: str) -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    for table, columns in DOCUMENTS.items():
        # One ALTER TABLE a table: PostgreSQL rewrites it once for all its columns.
        changes = ', '.join(f'ALTER COLUMN {c} TYPE {name} USING {c}::{name}' for c in columns)
        op.execute(f'ALTER TABLE {table} {changes}')


def upgrade() -> None:
    _retype('json')


def downgrade() -> None:
    _retype('jsonb')
