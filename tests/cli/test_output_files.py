"""Where `export --output` and `db backup FILE` write: a symlink's target, never a FIFO, a device
or standard output, and a missing directory is named before any work."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import refused
from tests.conftest import make_project


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    return make_project(session_factory, "P1")


def _export(stepwise, database_url: str, output: object, fmt: str = "prm800k"):  # type: ignore[no-untyped-def]
    return stepwise(database_url, "export", "--project", "P1", "--format", fmt, "--output", output)


def _backup(stepwise, database_url: str, output: object):  # type: ignore[no-untyped-def]
    return stepwise(database_url, "db", "backup", output)


@pytest.mark.parametrize("write", [_export, _backup])
def test_a_symlink_is_followed(stepwise, database_url, project, tmp_path: Path, write) -> None:  # type: ignore[no-untyped-def]
    if write is _backup and not database_url.startswith("sqlite") and shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed here")
    real = tmp_path / "real"
    real.write_bytes(b"old")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert write(stepwise, database_url, link).exit_code == 0
    assert link.is_symlink() and real.read_bytes() != b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


@pytest.mark.parametrize("write", [_export, _backup])
def test_a_fifo_is_refused(stepwise, database_url, project, tmp_path: Path, write) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refused(write(stepwise, database_url, fifo), "not a regular file")
    assert fifo.is_fifo() and [p.name for p in tmp_path.iterdir()] == ["fifo"]


@pytest.mark.parametrize("write", [_export, _backup])
def test_standard_output_is_refused(stepwise, database_url, project, tmp_path: Path, monkeypatch, write) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    refused(write(stepwise, database_url, "-"), "standard output is not supported")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("write", [_export, _backup])
def test_a_missing_directory_is_named(stepwise, database_url, project, tmp_path: Path, write) -> None:  # type: ignore[no-untyped-def]
    refused(write(stepwise, database_url, tmp_path / "no" / "a.jsonl"), f"no directory {tmp_path / 'no'}")
    assert list(tmp_path.iterdir()) == []


def test_an_hf_export_into_a_missing_directory_is_named(stepwise, database_url, project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("datasets")
    refused(_export(stepwise, database_url, tmp_path / "no" / "set", "hf"), f"no directory {tmp_path / 'no'}")


@pytest.mark.parametrize("write", [_export, _backup])
def test_a_name_too_long_to_write_beside_is_refused_before_any_work(stepwise, database_url, project, tmp_path: Path, write) -> None:  # type: ignore[no-untyped-def]
    # 252 bytes is a legal name, but not with ".partial" after it, under which the file is written first.
    refused(write(stepwise, database_url, tmp_path / ("c" * 246 + ".jsonl")), "its name is 252 bytes long; at most 247")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("output", "message"), [
    ("-", "standard output is not supported"),
    ("missing/results.json", "cannot write missing/results.json: no directory"),
])
def test_simulate_checks_its_output_before_it_runs(stepwise, database_url, tmp_path: Path, monkeypatch, output, message) -> None:  # type: ignore[no-untyped-def]
    # It wrote files named "-" and "-.svg", or made the folder, after minutes of work.
    monkeypatch.chdir(tmp_path)
    refused(stepwise(database_url, "simulate", "--quick", "--output", output), message)
    assert list(tmp_path.iterdir()) == []
