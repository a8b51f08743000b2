"""Who a labeler filter names, the same wherever one is taken: the Labels tab and its API, the
export, and the Reports and Skipped tabs and theirs.

A labeler is named by their username or their labeler UUID (what exports write as `labeler`),
both in any case, as usernames are one name whatever their case (app.users.service); an imported
label's labeler by the id its file gave, exactly as filed. A name that names nobody is refused,
naming it: an empty answer would not tell a mistyped name from a labeler with nothing to show.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from app.errors import BadInput
from app.models import Label, User


def users_named(names: Collection[str]) -> ColumnElement[bool]:
    """On users: the ones `names` name."""
    folded = [name.lower() for name in names]
    return or_(func.lower(User.username).in_(folded), func.lower(User.labeler_uuid).in_(folded))


def labels_by(names: Collection[str]) -> ColumnElement[bool]:
    """On labels outer-joined with their users: the ones by the labelers `names` name."""
    return or_(Label.foreign_labeler.in_(list(names)), users_named(names))


def not_labeling_here(session: Session, project_id: int, names: Collection[str]) -> list[str]:
    """Those of `names` that no label of the project is by, superseded ones included."""
    wanted = set(names)
    if not wanted:
        return []
    found = set(session.scalars(
        select(Label.foreign_labeler).where(Label.project_id == project_id, Label.foreign_labeler.in_(wanted))
        .distinct()
    ))
    users = session.execute(
        select(User.username, User.labeler_uuid).join(Label, Label.user_id == User.id)
        .where(Label.project_id == project_id, users_named(wanted))
        .distinct()
    )
    return _unknown(wanted - found, users)


def check_labeling_here(session: Session, project_id: int, names: Collection[str]) -> None:
    """BadInput naming each of `names` that no label of the project is by."""
    unknown = not_labeling_here(session, project_id, names)
    if unknown:
        raise BadInput(
            f"no label in this project is by {_listed(unknown)}: give a username, a labeler UUID "
            "or an imported labeler id, as the project's Labels tab lists them",
            [{"field": "labeler", "message": f"no labels by {name!r} here"} for name in unknown],
        )


def check_users(session: Session, names: Collection[str]) -> None:
    """BadInput naming each of `names` that names no user. For skips, which only users make: a
    labeler whose skips were all given back, and who labeled nothing, is still one to ask about."""
    wanted = set(names)
    if not wanted:
        return
    unknown = _unknown(wanted, session.execute(select(User.username, User.labeler_uuid).where(users_named(wanted))))
    if unknown:
        raise BadInput(
            f"no user is named {_listed(unknown)}: give a username or a labeler UUID",
            [{"field": "labeler", "message": f"no user named {name!r}"} for name in unknown],
        )


def _unknown(wanted: set[str], users: Iterable[tuple[str, str]]) -> list[str]:
    known = {name.lower() for row in users for name in row}
    return sorted(name for name in wanted if name.lower() not in known)


def _listed(names: list[str]) -> str:
    return ", ".join(map(repr, names))
