"""The task id a labeler sees: a keyed permutation of the queue slot's row id.

Slot ids are sequential, and a check item's slot is made when it is leased (app.quality.gate),
after the pre-made slots around it, so its row id would be the newest a labeler had seen: enough
to tell gold items apart. The API therefore names a task by a permutation of its row id under
the database's own key (in `instance_secrets`, made on first use): the same slot always has
the same handle, in every server process and after a restore, and handles carry no order.

The permutation is a four-round Feistel network on 32 bits whose round function is BLAKE2b keyed
with the secret (a keyed hash from the standard library; no maintained format-preserving cipher
covers a 31-bit domain), narrowed to row ids by cycle-walking: a value outside 1..INT32_MAX is
permuted again until it falls inside, which keeps the mapping a bijection of that range. Handles
are then valid row ids by type, so the API's shape does not change.
"""

from __future__ import annotations

import hashlib
import secrets
import weakref

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.models import INT32_MAX, InstanceSecret

SECRET_NAME = "task_handles"
_HALF = 16
_MASK = (1 << _HALF) - 1
_ROUNDS = 4

# One read per engine: the key never changes under a running database, and tests that make a
# database each get an engine (and a key) of their own.
_keys: weakref.WeakKeyDictionary[Engine, bytes] = weakref.WeakKeyDictionary()


def _key(session: Session) -> bytes:
    engine = session.get_bind()
    if engine in _keys:
        return _keys[engine]
    read = select(InstanceSecret.value).where(InstanceSecret.name == SECRET_NAME)
    value = session.execute(read).scalar_one_or_none()
    if value is not None:
        key = _keys[engine] = bytes.fromhex(value)
        return key
    # The first use: make it in this transaction. Two processes may do so at once; the second's
    # insert does nothing (on PostgreSQL it waits for the first to commit or roll back) and both
    # read the same row. Not cached until read back committed: were this transaction to roll
    # back, another process could store another key.
    dialect_insert = postgresql_insert if engine.dialect.name == "postgresql" else sqlite_insert
    session.execute(
        dialect_insert(InstanceSecret)
        .values(name=SECRET_NAME, value=secrets.token_hex(32))
        .on_conflict_do_nothing(index_elements=["name"])
    )
    return bytes.fromhex(session.execute(read).scalar_one())


def _round(key: bytes, index: int, half: int) -> int:
    digest = hashlib.blake2b(bytes((index,)) + half.to_bytes(2, "big"), key=key, digest_size=2).digest()
    return int.from_bytes(digest, "big")


def _forward(key: bytes, value: int) -> int:
    left, right = value >> _HALF, value & _MASK
    for index in range(_ROUNDS):
        left, right = right, left ^ _round(key, index, right)
    return (left << _HALF) | right


def _backward(key: bytes, value: int) -> int:
    left, right = value >> _HALF, value & _MASK
    for index in reversed(range(_ROUNDS)):
        left, right = right ^ _round(key, index, left), left
    return (left << _HALF) | right


def _walk(step, key: bytes, value: int) -> int:
    if not 1 <= value <= INT32_MAX:
        raise ValueError(f"{value} is not a row id")
    value = step(key, value)
    while not 1 <= value <= INT32_MAX:
        value = step(key, value)
    return value


def permute(key: bytes, row_id: int) -> int:
    return _walk(_forward, key, row_id)


def unpermute(key: bytes, handle: int) -> int:
    return _walk(_backward, key, handle)


def handle_of(session: Session, assignment_id: int) -> int:
    """The id labelers see for the slot `assignment_id`."""
    return permute(_key(session), assignment_id)


def assignment_of(session: Session, handle: int) -> int:
    """The slot a labeler's task id names; any id in range names some slot id, held or not."""
    return unpermute(_key(session), handle)
