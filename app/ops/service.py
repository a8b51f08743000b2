"""Readiness and who may read the metrics."""

from __future__ import annotations

import hmac
import ipaddress
from functools import lru_cache

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from app.config import Settings
from app.migrate import alembic_config


@lru_cache(maxsize=1)
def _heads() -> frozenset[str]:
    # The revisions this code was written for; the files do not change while it runs.
    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())


def not_ready_reason(engine: Engine) -> str | None:
    """Why the server cannot serve yet, or None when the database answers at head."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            current = frozenset(MigrationContext.configure(connection).get_current_heads())
    except SQLAlchemyError as exc:
        # The driver's first line names the cause (refused, unknown host, bad password) and
        # never the URL's password.
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return f"the database does not answer: {first[0] if first else type(exc).__name__}"
    if not current:
        return "the database has no schema: run `stepwise db upgrade`"
    if current != _heads():
        at = ", ".join(sorted(current))
        return f"migrations are not at head (database at {at}, code at {', '.join(sorted(_heads()))}): run `stepwise db upgrade`"
    return None


def may_read_metrics(settings: Settings, client_host: str | None, authorization: str | None) -> bool:
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    if token and authorization:
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return True
    if client_host is None:
        return False
    try:
        address = ipaddress.ip_address(client_host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in settings.metrics_networks)
