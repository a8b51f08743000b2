"""imported machine labels hashed as the machine labels service hashes them; round errors without tracebacks

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28

A machine label that came in through a PRM800K import was hashed from its content, so importing
the same file again (or the project's own export) added it a second time. It now carries the
hash app.machine_labels.service gives a generator's label of a solution, written out here so
that this migration keeps its meaning if that code changes. A label whose new hash another label
of its project already holds is a copy from before: it keeps its hash, so that nothing is lost.

Round errors held tracebacks, with the server's paths, which the pages and the API showed; each
keeps its last line, the exception. Neither change can be undone: downgrade leaves both.
"""

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0021'
down_revision: str | None = '0020'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _generator_key(extra_text: str | None) -> str | None:
    try:
        record = (json.loads(extra_text or "{}") or {}).get("record") or {}
    except ValueError:
        return None
    detail = record.get("source_detail") if isinstance(record, dict) else None
    key = detail.get("key") if isinstance(detail, dict) else None
    return key if isinstance(key, str) else None


def upgrade() -> None:
    connection = op.get_bind()
    imported = connection.execute(sa.text(
        "SELECT id, project_id, solution_id, CAST(extra AS TEXT) FROM labels"
        " WHERE source <> 'human' AND import_batch_id IS NOT NULL ORDER BY id"
    )).all()
    for label_id, project_id, solution_id, extra in imported:
        key = _generator_key(extra)
        if key is None:
            continue
        new_hash = hashlib.sha256(f"machine:{key}:{solution_id}".encode()).hexdigest()
        taken = connection.execute(sa.text(
            "SELECT 1 FROM labels WHERE project_id = :p AND content_hash = :h"
        ), {"p": project_id, "h": new_hash}).first()
        if taken is None:
            connection.execute(sa.text("UPDATE labels SET content_hash = :h WHERE id = :id"),
                               {"h": new_hash, "id": label_id})
    failed = connection.execute(sa.text(
        "SELECT id, error FROM rounds WHERE error LIKE 'Traceback (most recent call last)%'"
    )).all()
    for round_id, error in failed:
        last = next((line.strip() for line in reversed(error.splitlines()) if line.strip()), "")
        connection.execute(sa.text("UPDATE rounds SET error = :e WHERE id = :id"), {"e": last, "id": round_id})


def downgrade() -> None:
    pass
