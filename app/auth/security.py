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
