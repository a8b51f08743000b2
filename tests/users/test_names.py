"""A user named in any case is found, but never a guess between two names a database holds from
before names had to differ by more than case."""

from __future__ import annotations

import pytest

from app.db import session_scope
from app.errors import Conflict, NotFound
from app.models import Role, User
from app.users.service import get_user_by_name


def test_a_name_in_another_case_finds_the_one_user_and_an_exact_name_wins(session_factory) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        # Written directly: create_user refuses names that differ only in case.
        session.add_all([User(username=name, role=role, password_hash="x") for name, role in
                         (("Bob", Role.admin), ("bob", Role.labeler), ("Mia", Role.labeler))])
    with session_scope(session_factory) as session:
        assert get_user_by_name(session, "mia").username == "Mia"
        assert (get_user_by_name(session, "bob").role, get_user_by_name(session, "Bob").role) == (Role.labeler, Role.admin)
        with pytest.raises(Conflict, match="several users are named 'BOB' in different cases"):
            get_user_by_name(session, "BOB")
        with pytest.raises(NotFound):
            get_user_by_name(session, "nobody")
