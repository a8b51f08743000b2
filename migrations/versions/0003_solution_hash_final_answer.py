"""solutions are known by their final answer: rehash those stored with no answer given

A solution's content hash used to take the answer as given; it now takes the final answer (given,
or else extracted from the steps), so that a candidate imported without an answer and the same
solution coming back from a PRM800K export, which spells the answer out, are one row. Rows whose
hash proves they were stored with no answer given, and that have an extracted final answer, get
the new hash; a row whose new hash another row of its project already holds keeps its old one.

The digest is written out here rather than imported, so that this step stays what it was if the
application's hashing changes later.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2000


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def upgrade() -> None:
    connection = op.get_bind()
    last_id = 0
    taken: set[tuple[int, str]] = set()
    while True:
        rows = connection.execute(
            sa.text(
                "SELECT s.id, s.project_id, s.content_hash, s.steps, s.final_answer,"
                " s.verifier_score, p.content_hash AS problem_hash"
                " FROM solutions s JOIN problems p ON p.id = s.problem_id"
                " WHERE s.id > :last AND s.final_answer IS NOT NULL ORDER BY s.id LIMIT :n"
            ),
            {"last": last_id, "n": BATCH},
        ).all()
        if not rows:
            return
        last_id = rows[-1].id
        changes = []
        for row in rows:
            steps = orjson.loads(row.steps) if isinstance(row.steps, str | bytes) else row.steps
            stored_without_answer = _digest([row.problem_hash, steps, None, row.verifier_score])
            if row.content_hash != stored_without_answer:
                continue
            new = _digest([row.problem_hash, steps, row.final_answer, row.verifier_score])
            changes.append({"id": row.id, "project_id": row.project_id, "hash": new})
        if not changes:
            continue
        existing = {
            (r.project_id, r.content_hash)
            for r in connection.execute(
                sa.text("SELECT project_id, content_hash FROM solutions WHERE content_hash IN :hashes").bindparams(
                    sa.bindparam("hashes", expanding=True)
                ),
                {"hashes": [c["hash"] for c in changes]},
            )
        }
        updates = []
        for change in changes:
            key = (change["project_id"], change["hash"])
            if key in existing or key in taken:
                continue
            taken.add(key)
            updates.append({"id": change["id"], "hash": change["hash"]})
        if updates:
            connection.execute(sa.text("UPDATE solutions SET content_hash = :hash WHERE id = :id"), updates)


def downgrade() -> None:
    # Nothing to undo: the old hash cannot tell an answer given from one extracted, so the rows
    # keep the new one. After a downgrade, re-importing such a solution adds it once more.
    pass
