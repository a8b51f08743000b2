"""Password hashing and opaque tokens."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """Verifying against this when the user does not exist keeps login time the same either
    way, so response times do not reveal which usernames exist. Made on first use, not at
    import: an argon2 hash costs every new server worker half a CPU-second before it serves."""
    return _hasher.hash("not a real password")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _dummy_hash(), password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


# zxcvbn (Dropbox's estimator) rather than a list of our own: it knows common passwords, words,
# names, keyboard runs, dates and repeats, and the account's own name when given. Its scores run
# 0-4; below 2 a password falls within about a million guesses.
GUESSABLE_SCORE = 2
# zxcvbn refuses longer input: a longer password is judged by its start.
_ZXCVBN_MAX = 72


def guessable(password: str, *, user_inputs: tuple[str, ...] = ()) -> str | None:
    """Why `password` is too easy to guess, in words for a field's error, or None."""
    # Imported here: its word lists take a tenth of a second and 12 MB, which a server worker
    # that is never asked to judge a password need not pay.
    from zxcvbn import zxcvbn

    result = zxcvbn(password[:_ZXCVBN_MAX], user_inputs=list(user_inputs))
    if result["score"] >= GUESSABLE_SCORE:
        return None
    warning = result["feedback"]["warning"].strip().rstrip(".")
    why = f" ({warning[:1].lower()}{warning[1:]})" if warning else ""
    return f"is too easy to guess{why}: use a few words that do not belong together, or a generated password"


def new_token() -> str:
    return secrets.token_urlsafe(32)


# Lower-case letters and digits without the look-alikes (0 o, 1 l i): a password read off a
# screen or a printed sheet and typed, on a phone too, should not be mistyped.
PASSWORD_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"


def new_password() -> str:
    """A password for an account made for someone: three groups of five, 74 bits, as
    `kx7rm-p2wqe-9hbtn`."""
    groups = ("".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(5)) for _ in range(3))
    return "-".join(groups)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_token(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
