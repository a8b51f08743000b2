"""Running `stepwise` in this process against a given DATABASE_URL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from app.config import get_settings
from app.rounds.config import get_worker_settings
from tests.imports.test_cli import fresh_database  # noqa: F401  (a fixture: an empty database per backend)


@pytest.fixture
def stepwise(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    def run(database_url: str, *args: object, input: str | None = None) -> Result:
        monkeypatch.setenv("DATABASE_URL", database_url)
        get_settings.cache_clear()
        get_worker_settings.cache_clear()
        try:
            return CliRunner().invoke(cli, [str(a) for a in args], input=input)
        finally:
            get_settings.cache_clear()
        get_worker_settings.cache_clear()

    return run


def refused(result: Result, *words: str, status: int = 1) -> None:
    """Exit status 1 (2: bad arguments or bad lines) with a message whose first line starts
    "Error: ", holding `words`, and no traceback."""
    assert isinstance(result.exception, SystemExit) and result.exit_code == status, result.output
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.output, result.output
    for word in words:
        assert word in result.stderr, result.stderr
