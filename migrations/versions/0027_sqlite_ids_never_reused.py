"""SQLite gives no new row a deleted row's id

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29

Without AUTOINCREMENT, SQLite gives a new row the highest id in its table plus one: once the
newest project, file, model version or label is deleted, the next one takes its id, as
PostgreSQL's sequences never do. Ids live on outside foreign keys (a solution's origin names its
file's batch, a checkpoint folder its project, the score endpoint and every page's address a
model version, a round's snapshot its highest label id), and there they came to mean another
row. Each such table is rebuilt with AUTOINCREMENT; its ids so far are kept, and its next one
follows the highest id it holds now.

SQLite only: PostgreSQL has nothing to change. Each table is copied whole: a database of
40,000 labels (85 MB) took 6 s, on a loaded two-core machine.
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0027'
down_revision: str | None = '0026'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table with a surrogate integer id, parents before the tables that name them.
TABLES = (
    'projects',
    'users',
    'api_tokens',
    'auth_sessions',
    'import_batches',
    'rounds',
    'model_versions',
    'problems',
    'model_comparisons',
    'solutions',
    'assignments',
    'round_picks',
    'labels',
    'reports',
)


def upgrade() -> None:
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != 'sqlite':
        return
    for table in TABLES:
        # The indexes are made again from their own SQL: Alembic's rebuild reads them back
        # through reflection, which drops a column's DESC (the queue's index).
        indexes = op.get_bind().exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            (table,),
        ).all()
        with op.batch_alter_table(table, recreate='always', table_kwargs={'sqlite_autoincrement': autoincrement}):
            pass
        for name, sql in indexes:
            op.execute(f'DROP INDEX IF EXISTS "{name}"')
            op.execute(sql)
