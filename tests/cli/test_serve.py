"""`stepwise serve` says at start what a production server should not run with."""

from __future__ import annotations

from click.testing import CliRunner

import app.server
from app.cli import cli
from app.config import get_settings


def test_a_production_server_warns_of_plain_http_cookies_and_sqlite(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(app.server, "serve", lambda *args, **kwargs: 0)
    for name, value in (("STEPWISE_ENV", "production"), ("STEPWISE_COOKIE_SECURE", "false"),
                        ("DATABASE_URL", "sqlite:///./never-opened.db")):
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        warned = CliRunner().invoke(cli, ["serve"])
        monkeypatch.setenv("STEPWISE_COOKIE_SECURE", "true")
        monkeypatch.setenv("DATABASE_URL", "postgresql://stepwise@db/stepwise")
        get_settings.cache_clear()
        quiet = CliRunner().invoke(cli, ["serve"])
        monkeypatch.setenv("STEPWISE_ENV", "development")
        monkeypatch.setenv("STEPWISE_COOKIE_SECURE", "false")
        get_settings.cache_clear()
        developing = CliRunner().invoke(cli, ["serve"])
    finally:
        get_settings.cache_clear()
    assert warned.exit_code == 0, warned.output
    assert "warning: STEPWISE_COOKIE_SECURE is off" in warned.stderr
    assert "warning: the database is a SQLite file" in warned.stderr
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    assert developing.exit_code == 0 and "warning" not in developing.stderr
