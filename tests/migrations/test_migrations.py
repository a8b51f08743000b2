"""The one Alembic history runs both ways on both databases and matches the models."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, create_engine, delete, inspect, select, text

from app.config import Settings, normalize_database_url
from app.db import create_db_engine, create_session_factory, session_scope
from app.imports.records import SolutionIn, solution_hash
from app.imports.records import problem_hash as problem_hash_of
from app.migrate import downgrade, upgrade
from app.models import ApiToken, AuthSession, Base, LabelingMode, Problem, Project, Role, User, utcnow
from tests.conftest import _postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        yield from _postgres_database()


def _tables(url: str) -> set[str]:
    engine = create_engine(normalize_database_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(fresh_url: str) -> None:
    upgrade(fresh_url)
    assert _tables(fresh_url) >= {t.name for t in Base.metadata.sorted_tables}
    downgrade(fresh_url, "base")
    assert _tables(fresh_url) == set()
    upgrade(fresh_url)
    assert _tables(fresh_url) >= {"users", "labels", "assignments"}


def test_a_downgrade_revokes_the_tokens_it_would_give_more_than_they_had(fresh_url: str) -> None:
    # Dropped, read_only and expires_at would turn a read-only token into a full one, and bring
    # one back that expired.
    upgrade(fresh_url)
    engine = create_db_engine(Settings(database_url=fresh_url))
    try:
        with session_scope(create_session_factory(engine)) as session:
            ann = User(username="ann", password_hash="x", role=Role.admin)
            session.add(ann)
            session.flush()
            later = utcnow() + timedelta(days=1)
            for name, read_only, expires in (("full", False, None), ("reader", True, None), ("expiring", False, later)):
                session.add(ApiToken(user_id=ann.id, name=name, token_hash=f"h-{name}", read_only=read_only,
                                     expires_at=expires))
        downgrade(fresh_url, "0034")
        with engine.connect() as connection:
            live = connection.execute(text("SELECT name FROM api_tokens WHERE revoked_at IS NULL ORDER BY name")).scalars().all()
        assert live == ["expiring", "full"]
        downgrade(fresh_url, "0028")
        upgrade(fresh_url)
        with engine.connect() as connection:
            live = connection.execute(text("SELECT name FROM api_tokens WHERE revoked_at IS NULL")).scalars().all()
        assert live == ["full"]
    finally:
        engine.dispose()


def test_models_and_migrations_agree(fresh_url: str) -> None:
    upgrade(fresh_url)
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
            if connection.dialect.name == "sqlite":
                # Alembic's SQLite reflection drops an index column's DESC, so the queue's
                # index always looks changed there; SQLite's own account of it is checked instead.
                diff = [d for d in diff if getattr(d[1], "name", None) != "ix_assignments_queue"]
                columns = connection.exec_driver_sql("PRAGMA index_xinfo('ix_assignments_queue')")
                order = {row[2]: row[3] for row in columns if row[5]}
                assert order == {"project_id": 0, "priority": 0, "slot": 1, "id": 1}
    finally:
        engine.dispose()
    assert diff == [], f"models differ from the migrations: {diff}"


def test_solutions_stored_without_an_answer_are_rehashed_with_their_final_answer(fresh_url: str) -> None:
    upgrade(fresh_url, "0002")
    engine = create_engine(normalize_database_url(fresh_url))
    steps = ["$2 + 2 = 4$.", "# Answer\n\n4"]
    problem_hash = problem_hash_of("What is 2 + 2?", "4")
    before = solution_hash(problem_hash, steps, None, None)  # the old rule: the answer as given
    twin = solution_hash(problem_hash, ["Four.", "# Answer\n\n4"], "4", None)
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO projects (id, name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at) VALUES (1, 'p', '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO problems (id, project_id, statement, answer, content_hash, is_demo, created_at) VALUES (1, 1, 'What is 2 + 2?', '4', :h, false, CURRENT_TIMESTAMP)"), {"h": problem_hash})
            insert = text(
                "INSERT INTO solutions (id, project_id, problem_id, steps, steps_source, final_answer, answer_grade, origin, priority, content_hash, is_demo, created_at)"
                " VALUES (:id, 1, 1, :steps, 'given', :answer, 'right', '{}', 0, :h, false, CURRENT_TIMESTAMP)"
            )
            connection.execute(insert, {"id": 1, "steps": orjson.dumps(steps).decode(), "answer": "4", "h": before})
            connection.execute(insert, {"id": 2, "steps": orjson.dumps(["Four.", "# Answer\n\n4"]).decode(), "answer": "4", "h": twin})
        upgrade(fresh_url)
        with engine.connect() as connection:
            hashes = dict(connection.execute(text("SELECT id, content_hash FROM solutions")).all())
    finally:
        engine.dispose()
    # What an import of the same solution now computes, answer given or not.
    assert hashes[1] == SolutionIn(steps, None).hash_for(problem_hash) == SolutionIn(steps, "4").hash_for(problem_hash)
    assert hashes[2] == twin, "a solution stored with its answer given keeps its hash"


def test_documents_keep_their_content_both_ways(fresh_url: str) -> None:
    upgrade(fresh_url, "0004")
    engine = create_engine(normalize_database_url(fresh_url))
    steps = ["$\\frac{1}{2}$ \"quoted\" é", "# Answer\n\n4"]
    origin = {"file": "f.jsonl", "line": 3, "meta": {"b": [1, None], "a": True}}

    def stored() -> tuple[object, object]:
        with engine.connect() as connection:
            row = connection.execute(text("SELECT steps, origin FROM solutions")).one()
        return tuple(v if not isinstance(v, str) else orjson.loads(v) for v in row)

    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO projects (id, name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at) VALUES (1, 'p', '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO problems (id, project_id, statement, answer, content_hash, is_demo, created_at) VALUES (1, 1, 'What is 2 + 2?', '4', 'h', false, CURRENT_TIMESTAMP)"))
            connection.execute(
                text(
                    "INSERT INTO solutions (id, project_id, problem_id, steps, steps_source, final_answer, answer_grade, origin, priority, content_hash, is_demo, created_at)"
                    " VALUES (1, 1, 1, :steps, 'given', '4', 'right', :origin, 0, 'h', false, CURRENT_TIMESTAMP)"
                ),
                {"steps": orjson.dumps(steps).decode(), "origin": orjson.dumps(origin).decode()},
            )
        upgrade(fresh_url)
        assert stored() == (steps, origin)
        downgrade(fresh_url, "0004")
        assert stored() == (steps, origin)
    finally:
        engine.dispose()


def test_guidelines_written_before_their_dates_were_kept_date_from_the_project(fresh_url: str) -> None:
    upgrade(fresh_url, "0018")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            for project_id, guidelines in ((1, "Rate each step."), (2, "")):
                connection.execute(text(
                    "INSERT INTO projects (id, name, description, guidelines, labeling_mode, overlap, lease_minutes, is_demo, created_at)"
                    " VALUES (:id, :name, '', :guidelines, 'first_error', 1, 30, false, '2026-01-02 03:04:05')"),
                    {"id": project_id, "name": f"p{project_id}", "guidelines": guidelines})
        upgrade(fresh_url)
        with engine.connect() as connection:
            dated = dict(connection.execute(text("SELECT id, guidelines_updated_at FROM projects")).all())
    finally:
        engine.dispose()
    assert str(dated[1]).startswith("2026-01-02 03:04:05") and dated[2] is None


def test_imported_machine_labels_take_their_generators_hash_and_round_errors_their_last_line(fresh_url: str) -> None:
    upgrade(fresh_url, "0020")
    engine = create_engine(normalize_database_url(fresh_url))
    extra = orjson.dumps({"record": {"source": "rollout", "source_detail": {"key": "k1", "rollouts": 4}}}).decode()

    def machine(solution_id: int) -> str:
        return hashlib.sha256(f"machine:k1:{solution_id}".encode()).hexdigest()

    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO projects (id, name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at) VALUES (1, 'p', '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO problems (id, project_id, statement, answer, content_hash, is_demo, created_at) VALUES (1, 1, 'What is 2 + 2?', '4', 'ph', false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO import_batches (id, project_id, filename, format, file_sha256, lines, added, created_at) VALUES (1, 1, 'f.jsonl', 'prm800k', 'fh', 3, '{}', CURRENT_TIMESTAMP)"))
            for solution_id in (1, 2):
                connection.execute(text(
                    "INSERT INTO solutions (id, project_id, problem_id, steps, steps_source, answer_grade, origin, priority, content_hash, is_demo, created_at)"
                    " VALUES (:id, 1, 1, '[\"4\"]', 'given', 'right', '{}', 0, :h, false, CURRENT_TIMESTAMP)"), {"id": solution_id, "h": f"sh{solution_id}"})
            label = text(
                "INSERT INTO labels (id, project_id, solution_id, is_quality_control, is_initial_screening, steps, content_hash, import_batch_id, extra, source, created_at)"
                " VALUES (:id, 1, :solution, false, false, '[]', :h, :batch, :extra, 'rollout', CURRENT_TIMESTAMP)")
            # Solution 1: imported only. Solution 2: made here, then imported again (a copy).
            connection.execute(label, {"id": 1, "solution": 1, "h": "content-1", "batch": 1, "extra": extra})
            connection.execute(label, {"id": 2, "solution": 2, "h": machine(2), "batch": None, "extra": "{}"})
            connection.execute(label, {"id": 3, "solution": 2, "h": "content-3", "batch": 1, "extra": extra})
            connection.execute(text(
                "INSERT INTO rounds (id, project_id, number, status, stage, percent, trigger, metrics, error, attempts, message, created_at, updated_at)"
                " VALUES (1, 1, 1, 'failed', 'train', 0, 'manual', '{}', :e, 3, 'failed', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                {"e": 'Traceback (most recent call last):\n  File "/srv/app/rounds/stages.py", line 9, in run\nValueError: no base\n'})
        upgrade(fresh_url)
        with engine.connect() as connection:
            hashes = dict(connection.execute(text("SELECT id, content_hash FROM labels")).all())
            error = connection.execute(text("SELECT error FROM rounds")).scalar()
    finally:
        engine.dispose()
    assert hashes == {1: machine(1), 2: machine(2), 3: "content-3"}
    assert error == "ValueError: no base"


def test_scores_with_an_unscored_step_are_marked_truncated(fresh_url: str) -> None:
    upgrade(fresh_url, "0021")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO projects (id, name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at) VALUES (1, 'p', '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO problems (id, project_id, statement, answer, content_hash, is_demo, created_at) VALUES (1, 1, 'What is 2 + 2?', '4', 'ph', false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO model_versions (id, project_id, path, base, data_hash, train_labels, metrics, is_served, created_at) VALUES (1, 1, '/m', 'tiny', 'd', 3, '{}', false, CURRENT_TIMESTAMP)"))
            for solution_id, steps in [(1, [0.9, None, 0.8]), (2, [0.25, 0.5]), (3, [None])]:
                connection.execute(text(
                    "INSERT INTO solutions (id, project_id, problem_id, steps, steps_source, answer_grade, origin, priority, content_hash, is_demo, created_at)"
                    " VALUES (:id, 1, 1, '[\"4\"]', 'given', 'right', '{}', 0, :h, false, CURRENT_TIMESTAMP)"), {"id": solution_id, "h": f"sh{solution_id}"})
                connection.execute(text(
                    "INSERT INTO solution_scores (model_version_id, solution_id, score, step_scores, created_at)"
                    " VALUES (1, :id, 0.5, :steps, CURRENT_TIMESTAMP)"), {"id": solution_id, "steps": orjson.dumps(steps).decode()})
        upgrade(fresh_url)
        with engine.connect() as connection:
            marked = dict(connection.execute(text("SELECT solution_id, truncated FROM solution_scores")).all())
    finally:
        engine.dispose()
    assert marked == {1: True, 2: False, 3: True}


def test_problems_imported_before_take_their_file_from_the_imports_timestamp(fresh_url: str) -> None:
    upgrade(fresh_url, "0025")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO projects (id, name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at) VALUES (1, 'p', '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"))
            for batch, at in [(1, "2026-11-01 10:00:00"), (2, "2026-11-02 10:00:00")]:
                connection.execute(text(
                    "INSERT INTO import_batches (id, project_id, filename, format, file_sha256, lines, added, created_at)"
                    " VALUES (:id, 1, 'f.jsonl', 'math', 'h', 1, '{}', :at)"), {"id": batch, "at": at})
            # Problem 3 was made otherwise (the demo, an earlier version) at another time.
            for problem, at in [(1, "2026-11-01 10:00:00"), (2, "2026-11-02 10:00:00"), (3, "2026-11-03 10:00:00")]:
                connection.execute(text(
                    "INSERT INTO problems (id, project_id, statement, content_hash, is_demo, created_at)"
                    " VALUES (:id, 1, 'What is 2 + 2?', :h, false, :at)"), {"id": problem, "h": f"ph{problem}", "at": at})
            connection.execute(text(
                "INSERT INTO solutions (id, project_id, problem_id, steps, steps_source, answer_grade, origin, priority, content_hash, is_demo, created_at)"
                " VALUES (1, 1, 1, '[\"4\"]', 'given', 'right', '{}', 0, 'sh', false, CURRENT_TIMESTAMP)"))
        upgrade(fresh_url)
        with engine.connect() as connection:
            batches = dict(connection.execute(text("SELECT id, import_batch_id FROM problems")).all())
            solutions = connection.execute(text("SELECT count(*) FROM solutions")).scalar()
    finally:
        engine.dispose()
    assert batches == {1: 1, 2: 2, 3: None}
    # Rebuilding the problems table on SQLite left the rows that name it.
    assert solutions == 1


def test_a_deleted_rows_id_is_never_given_again(fresh_url: str) -> None:
    upgrade(fresh_url, "0026")
    raw = create_engine(normalize_database_url(fresh_url))
    try:
        with raw.begin() as connection:
            # Ids from the database, so that PostgreSQL's sequences count them.
            for project in (1, 2, 3):
                connection.execute(text(
                    "INSERT INTO projects (name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at)"
                    " VALUES (:name, '', 'first_error', 1, 30, false, CURRENT_TIMESTAMP)"), {"name": f"p{project}"})
                connection.execute(text(
                    "INSERT INTO problems (project_id, statement, content_hash, is_demo, created_at)"
                    " VALUES (:id, 'What is 2 + 2?', :h, false, CURRENT_TIMESTAMP)"), {"id": project, "h": f"ph{project}"})
            connection.execute(text("DELETE FROM problems WHERE project_id = 3"))
            connection.execute(text("DELETE FROM projects WHERE id = 3"))
        upgrade(fresh_url)
    finally:
        raw.dispose()
    engine = create_db_engine(Settings(database_url=fresh_url))
    try:
        with session_scope(create_session_factory(engine)) as session:
            # Ids given before the upgrade stay taken; SQLite forgot project 3, which the
            # upgrade could not know of.
            assert session.scalars(select(Project.id).order_by(Project.id)).all() == [1, 2]
            newest = Project(name="p4", labeling_mode=LabelingMode.first_error)
            session.add(newest)
            session.flush()
            taken = newest.id
            session.delete(newest)
        with session_scope(create_session_factory(engine)) as session:
            again = Project(name="p5", labeling_mode=LabelingMode.first_error)
            session.add(again)
            session.flush()
            assert again.id > taken >= 3
            # The rebuilt tables still cascade: a project's problems go with it.
            session.execute(delete(Project).where(Project.id == 1))
            assert session.scalars(select(Problem.project_id)).all() == [2]
    finally:
        engine.dispose()


def _one_solution(connection: Connection, mode: str, overlap: int) -> None:
    """Project 1, its problem 1 and that problem's solution 1, written as of an old revision."""
    connection.execute(text("INSERT INTO projects (name, description, labeling_mode, overlap, lease_minutes, is_demo, created_at)"
                            " VALUES ('p', '', :mode, :overlap, 30, false, CURRENT_TIMESTAMP)"), {"mode": mode, "overlap": overlap})
    connection.execute(text("INSERT INTO problems (project_id, statement, content_hash, is_demo, created_at) VALUES (1, 'What is 2 + 2?', 'ph', false, CURRENT_TIMESTAMP)"))
    connection.execute(text(
        "INSERT INTO solutions (project_id, problem_id, steps, steps_source, answer_grade, origin, priority, content_hash, is_demo, created_at)"
        " VALUES (1, 1, '[\"4\"]', 'given', 'right', '{}', 0, 'sh', false, CURRENT_TIMESTAMP)"))


def test_labels_imported_with_a_blank_labeler_name_nobody_and_keep_it_for_the_export(fresh_url: str) -> None:
    upgrade(fresh_url, "0027")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            _one_solution(connection, "first_error", 1)
            label = text(
                "INSERT INTO labels (project_id, solution_id, foreign_labeler, is_quality_control, is_initial_screening, steps, content_hash, extra, source, created_at)"
                " VALUES (1, 1, :labeler, false, false, '[]', :h, :extra, 'human', CURRENT_TIMESTAMP)")
            for n, (labeler, extra) in enumerate([("", {"record": {"timestamp": "2023-01-22T04:34:27"}}), ("\u200b ", {}),
                                                  ("ann", {}), (None, {})]):
                connection.execute(label, {"labeler": labeler, "h": f"h{n}", "extra": orjson.dumps(extra).decode()})
        upgrade(fresh_url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT foreign_labeler, extra FROM labels ORDER BY id")).all()
    finally:
        engine.dispose()
    stored = [(labeler, extra if isinstance(extra, dict) else orjson.loads(extra)) for labeler, extra in rows]
    assert stored == [
        (None, {"record": {"timestamp": "2023-01-22T04:34:27", "labeler": ""}}),
        (None, {"record": {"labeler": "\u200b "}}),
        ("ann", {}),
        (None, {}),
    ]


def test_sessions_open_at_the_upgrade_count_as_used_at_the_upgrade(fresh_url: str) -> None:
    upgrade(fresh_url, "0033")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO users (username, password_hash, role, labeler_uuid, is_active, must_change_password, created_at)"
                                    " VALUES ('ann', 'h', 'labeler', 'u1', true, false, CURRENT_TIMESTAMP)"))
            connection.execute(text("INSERT INTO auth_sessions (user_id, token_hash, csrf_token, created_at, expires_at)"
                                    " VALUES (1, 'digest', 'csrf', '2026-11-01 08:00:00', '2099-01-01 00:00:00')"))
        before = utcnow()
        upgrade(fresh_url)
        session_factory = create_session_factory(create_db_engine(Settings(database_url=fresh_url)))
        with session_scope(session_factory) as session:
            last_seen = session.scalar(select(AuthSession.last_seen_at))
            session.get_bind().dispose()
    finally:
        engine.dispose()
    assert before - timedelta(seconds=5) <= last_seen <= utcnow(), "not when the session began: it would end at once"


def test_labels_take_their_leases_mode_and_corrections_their_labels(fresh_url: str) -> None:
    upgrade(fresh_url, "0039")
    engine = create_engine(normalize_database_url(fresh_url))
    try:
        with engine.begin() as connection:
            _one_solution(connection, "full", 2)
            # A lease that kept the mode it was served in, and one from before leases kept any.
            for slot, mode in ((0, "first_error"), (1, None)):
                connection.execute(text("INSERT INTO assignments (project_id, solution_id, slot, priority, status, labeling_mode)"
                                        " VALUES (1, 1, :slot, 0, 'done', :mode)"), {"slot": slot, "mode": mode})
            label = text(
                "INSERT INTO labels (project_id, solution_id, assignment_id, supersedes_id, is_quality_control, is_initial_screening, steps, extra, source, created_at)"
                " VALUES (1, 1, :assignment, :supersedes, false, false, '[]', '{}', 'human', CURRENT_TIMESTAMP)")
            # 1 and 2 made here; 3 corrects 1 and 4 corrects 3; 5 corrects 2; 6 came from a file.
            for assignment, supersedes in ((1, None), (2, None), (None, 1), (None, 3), (None, 2), (None, None)):
                connection.execute(label, {"assignment": assignment, "supersedes": supersedes})
        upgrade(fresh_url)
        with engine.connect() as connection:
            modes = connection.scalars(text("SELECT labeling_mode FROM labels ORDER BY id")).all()
    finally:
        engine.dispose()
    # Unknown stays unknown (read by what the label holds), not the project's mode now.
    assert modes == ["first_error", None, "first_error", "first_error", None, None]
