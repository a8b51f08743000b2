"""labels imported with a blank labeler name nobody

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29

A PRM800K record's blank `labeler` ("", white space, a zero-width space) was stored as the
labeler's id, and agreement and labeler accuracy took every such label for one person's. An
import stores none now and keeps the string in the label's `extra` for the export
(app.imports.prm800k.label_extra); this does the same to the labels imported before. Their
content hashes do not read the column.

The downgrade leaves them so: the earlier code exports them as written from `extra` too, and
leaves them out of agreement, as a label naming nobody.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from active_learning.data import is_blank

revision: str = '0028'
down_revision: str | None = '0027'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LABELS = sa.table(
    'labels', sa.column('id', sa.Integer), sa.column('foreign_labeler', sa.String), sa.column('extra', sa.JSON)
)


def upgrade() -> None:
    bind = op.get_bind()
    # A project has a few labeler ids, however many labels: only theirs are looked at.
    names = bind.execute(sa.select(LABELS.c.foreign_labeler).where(LABELS.c.foreign_labeler.is_not(None)).distinct())
    for name in [name for (name,) in names if is_blank(name)]:
        rows = bind.execute(sa.select(LABELS.c.id, LABELS.c.extra).where(LABELS.c.foreign_labeler == name)).all()
        for label_id, extra in rows:
            extra = dict(extra or {})
            extra['record'] = {**extra.get('record', {}), 'labeler': name}
            bind.execute(LABELS.update().where(LABELS.c.id == label_id).values(foreign_labeler=None, extra=extra))


def downgrade() -> None:
    pass
