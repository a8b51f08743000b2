"""Readiness and who may read the metrics."""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from app.config import Settings
from app.migrate import heads, known_revision


def driver_reason(exc: SQLAlchemyError) -> str:
    """The driver's first line: it names the cause (refused, unknown host, bad password, not a
    database) and never the URL's password."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return first[0] if first else type(exc).__name__


def not_ready_reason(engine: Engine) -> str | None:
    """Why the server cannot serve yet, or None when the database answers at head."""
    try:
        problem = schema_reason(engine)
    except SQLAlchemyError as exc:
        return f"the database does not answer: {driver_reason(exc)}"
    return None if problem is None else str(problem)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why the database's schema cannot serve this code. What is wrong and what to run are for
    anyone who meets it; the revisions, which tell which version of the code runs here, are for
    operators and the log."""

    what: str
    remedy: str
    revisions: str = ""

    def __str__(self) -> str:
        where = f" ({self.revisions})" if self.revisions else ""
        return f"{self.what}{where}: {self.remedy}"

    @property
    def public(self) -> str:
        return f"{self.what}: {self.remedy}"


def schema_reason(engine: Engine) -> SchemaProblem | None:
    """Why the database's schema cannot serve this code (none yet, behind its migrations, or
    migrated by newer code), or None when it is at head; SQLAlchemyError when the database does not answer."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        current = frozenset(MigrationContext.configure(connection).get_current_heads())
    if not current:
        return SchemaProblem("the database has no schema", "run `stepwise db upgrade`")
    if current != heads():
        revisions = f"database at {', '.join(sorted(current))}, code at {', '.join(sorted(heads()))}"
        if not all(known_revision(revision) for revision in current):
            # Newer code migrated it (a rolling deploy, or a rollback of this code): upgrading
            # from here cannot help.
            return SchemaProblem("the database is at a revision this code does not know",
                                 "run the code that migrated it, or `stepwise db downgrade` with that code", revisions)
        return SchemaProblem("migrations are not at head", "run `stepwise db upgrade`", revisions)
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
