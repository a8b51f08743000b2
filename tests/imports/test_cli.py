"""The `stepwise` command end to end on a fresh database: upgrade, project, import, export."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pyarrow.parquet as pq
import pytest

from app.demo.service import MATH500
from app.migrate import heads
from tests.conftest import POSTGRES_ADMIN_URL
from tests.imports.conftest import SAMPLE, sample_records

STEPWISE = Path(sys.executable).parent / "stepwise"


@pytest.fixture
def fresh_database(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'cli.db'}"
        return
    name = f"stepwise_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(database_url: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [str(STEPWISE), *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


def _ok(database_url: str, *args: str | Path) -> str:
    done = _run(database_url, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_upgrade_create_import_export_and_failures(fresh_database: str, tmp_path: Path) -> None:
    url = fresh_database
    assert f"database at {max(heads())}" in _ok(url, "db", "upgrade")
    assert "created project cli" in _ok(url, "projects", "create", "cli", "--overlap", "2")

    problems = _ok(url, "import", "--project", "cli", "--format", "math", MATH500)
    assert "added 500 problems" in problems
    labels = _ok(url, "import", "--project", "cli", "--format", "prm800k", SAMPLE)
    assert "9 labels" in labels and "7 queue slots" in labels
    assert "already imported" in _ok(url, "import", "--project", "cli", "--format", "prm800k", SAMPLE)

    candidates = tmp_path / "candidates.jsonl"
    first_problem = orjson.loads(MATH500.read_bytes().splitlines()[0])["problem"]
    candidates.write_bytes(orjson.dumps({"problem": first_problem, "text": "One.\nTwo.\nThe answer is 3."}))
    made = _ok(url, "import", "--project", "cli", "--format", "solutions", "--separator", "\\n", candidates)
    assert "1 solutions" in made and "2 queue slots" in made

    prm = tmp_path / "out.jsonl"
    assert "exported 9 labels" in _ok(url, "export", "--project", "cli", "--format", "prm800k", "--output", prm)
    exported = [orjson.loads(line) for line in prm.read_bytes().splitlines()]
    assert exported[1] == sample_records()[1]
    assert not prm.with_name("out.jsonl.partial").exists()

    trl = tmp_path / "trl.jsonl"
    _ok(url, "export", "--project", "cli", "--format", "trl", "--output", trl, "--generation", "9", "--neutral", "negative", "--qc", "exclude")
    assert [orjson.loads(line)["labels"] for line in trl.read_bytes().splitlines()] == [[False, False, False], [True, False, False]]

    parquet = tmp_path / "labels.parquet"
    out = _ok(url, "export", "--project", "cli", "--format", "parquet", "--output", parquet, "--since", "2023-01-01", "--labeler", "8b2e4c1a-9f0d-4e5b-a1c2-3d4e5f6a7b8c")
    assert "exported 2 labels" in out
    assert pq.read_table(io.BytesIO(parquet.read_bytes())).num_rows == 2
    every = tmp_path / "every.parquet"
    out = _ok(url, "export", "--project", "cli", "--format", "parquet", "--output", every, "--completions", "all")
    table = pq.read_table(io.BytesIO(every.read_bytes()))
    assert f"exported {table.num_rows} records" in out and table.num_rows > 9
    assert "human_written" in table.column_names

    # Failures are one clear message and exit status 1 (2 for bad lines), and leave nothing behind.
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"problem": "a", "answer": "1"}\n{"problem": "b", "level": "hard"}\n')
    done = _run(url, "import", "--project", "cli", "--format", "math", bad)
    assert done.returncode == 2
    assert "Error: 1 bad line in bad.jsonl: nothing was imported" in done.stderr
    assert "bad.jsonl:2 level: must be an integer or 'Level N'" in done.stderr
    assert "Traceback" not in done.stderr
    after = _ok(url, "export", "--project", "cli", "--format", "prm800k", "--output", tmp_path / "again.jsonl")
    assert "exported 9 labels" in after
    backwards = _run(url, "export", "--project", "cli", "--format", "trl", "--output", tmp_path / "x", "--since", "2023-02-01", "--until", "2023-01-01")
    assert backwards.returncode == 2 and "since (labeled on or after) must be before until" in backwards.stderr
    nobody = _run(url, "export", "--project", "cli", "--format", "trl", "--output", tmp_path / "y", "--labeler", "nobody")
    assert nobody.returncode == 1 and "no label in this project is by 'nobody'" in nobody.stderr
    assert not (tmp_path / "y").exists()
    missing = _run(url, "import", "--project", "nope", "--format", "math", bad)
    assert missing.returncode == 1 and "no project named 'nope'" in missing.stderr
