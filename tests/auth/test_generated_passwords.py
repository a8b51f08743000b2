"""Passwords Stepwise makes for people (batches of users, the demo) are read and typed by hand."""

from __future__ import annotations

import math
import re

from app.auth.security import PASSWORD_ALPHABET, new_password


def test_a_made_password_has_no_look_alikes_and_enough_entropy() -> None:
    shape = re.compile(rf"^[{PASSWORD_ALPHABET}]{{5}}(-[{PASSWORD_ALPHABET}]{{5}}){{2}}$")
    made = [new_password() for _ in range(500)]
    assert all(shape.match(password) for password in made), made[:3]
    assert not set("".join(made)) & set("0oO1lIi_ ")
    assert len(set(made)) == len(made)
    assert 15 * math.log2(len(PASSWORD_ALPHABET)) >= 72
    # Every letter of the alphabet turns up: the choice is not narrower than it says.
    assert set("".join(made).replace("-", "")) == set(PASSWORD_ALPHABET)
