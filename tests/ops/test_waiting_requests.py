"""A request waiting for the database waits alone: the server goes on answering the others.

A page's login lookup once ran on the event loop. Waiting there for SQLite's write lock, it stopped
every request, the lock's holder included (its commit needs the loop), until SQLite gave up after
30 seconds: two browser tabs and a poll were enough. On PostgreSQL a lock wait stopped the server
as long as the lock was held.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import Engine, text

from tests.conftest import browser_login, make_user

# Bounds on waits for something that should happen at once; reached only when it does not.
ANSWER_BOUND_S = 10


def _hold_the_login_lock(engine: Engine):  # type: ignore[no-untyped-def]
    """A connection in a transaction that a page's login lookup must wait for."""
    connection = engine.connect()
    if engine.dialect.name == "postgresql":
        connection.execute(text("LOCK TABLE auth_sessions IN ACCESS EXCLUSIVE MODE"))
    else:
        # Every SQLite transaction of the app's engines starts with BEGIN IMMEDIATE (app.db):
        # this one holds the write lock, which the page's own transaction waits for.
        connection.execute(text("SELECT 1"))
    return connection


def _until_waiting(engine: Engine, connection) -> None:  # type: ignore[no-untyped-def]
    """Until the page's request waits on the lock: PostgreSQL says when; SQLite cannot say, so a
    second is given (should it not reach the lock in that time, the test passes without showing
    anything, rather than failing)."""
    if engine.dialect.name != "postgresql":
        time.sleep(1)
        return
    deadline = time.monotonic() + ANSWER_BOUND_S
    while time.monotonic() < deadline:
        waiting = connection.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )).scalar_one()
        if waiting:
            return
        time.sleep(0.05)
    raise AssertionError("the page's request never waited on the lock")


def test_a_page_waiting_for_the_database_leaves_the_server_answering(client, engine, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    browser_login(client, "boss")
    answers: dict[str, int] = {}

    def get(path: str) -> None:
        answers[path] = client.get(path, follow_redirects=False).status_code

    holder = _hold_the_login_lock(engine)
    try:
        page = threading.Thread(target=get, args=("/account",))
        page.start()
        _until_waiting(engine, holder)
        probe = threading.Thread(target=get, args=("/healthz",))
        probe.start()
        probe.join(ANSWER_BOUND_S)
        answered_while_waiting = "/healthz" in answers
        assert "/account" not in answers, "the page did not wait for the lock"
    finally:
        holder.rollback()
        holder.close()
    page.join(ANSWER_BOUND_S * 4)
    probe.join(ANSWER_BOUND_S)
    assert answered_while_waiting, "the server stood still while one page waited for the database"
    assert answers == {"/account": 200, "/healthz": 200}
