"""The audit trail: who changed an account, a role, a project, its settings or members, imported
or removed a file, retired or restored a problem, dismissed a report, made a label gold or took
it off, admitted or retired a labeler, changed round settings or started or cancelled a round,
who logged in and from where, which name a wrong password was tried for and from where, and who
downloaded a project's labels, and when. Each service that makes such a change records it in
the same transaction, so that a change and its record stand or fall together."""

from __future__ import annotations

import enum
import os
import pwd
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from app.errors import BadInput
from app.models import AuditEvent, Project, User


class Category(enum.StrEnum):
    """The part of the platform an action concerns, which the activity page filters by."""

    users = "users"
    tokens = "tokens"
    projects = "projects"
    members = "members"
    imports = "imports"
    reports = "reports"
    quality = "quality"
    rounds = "rounds"
    logins = "logins"
    exports = "exports"


ACTIONS: dict[str, Category] = {
    "user.created": Category.users,
    "user.role_changed": Category.users,
    "user.deactivated": Category.users,
    "user.reactivated": Category.users,
    "user.password_set": Category.users,
    "user.password_changed": Category.users,
    "user.password_change_asked": Category.users,
    "user.password_change_waived": Category.users,
    "user.unlocked": Category.users,
    "token.created": Category.tokens,
    "token.revoked": Category.tokens,
    "project.created": Category.projects,
    "project.settings_changed": Category.projects,
    "project.deleted": Category.projects,
    "member.added": Category.members,
    "member.removed": Category.members,
    "import.added": Category.imports,
    "import.removed": Category.imports,
    "problem.retired": Category.reports,
    "problem.restored": Category.reports,
    "report.dismissed": Category.reports,
    "skip.given_back": Category.reports,
    "label.made_gold": Category.quality,
    "label.gold_removed": Category.quality,
    "labeler.admitted": Category.quality,
    "labeler.retired": Category.quality,
    "round.settings_changed": Category.rounds,
    "round.started": Category.rounds,
    "round.cancelled": Category.rounds,
    "login.succeeded": Category.logins,
    "login.failed": Category.logins,
    "address.unlocked": Category.logins,
    "export.downloaded": Category.exports,
}
# Whoever tried a wrong password is not known: such an event has no actor, as the command
# line's has none, but it is not the command line's.
ANONYMOUS_ACTIONS = ("login.failed",)
PAGE_SIZE = 50


def record(session: Session, by: User | None, action: str, target: str, **details: Any) -> None:
    """Note `action` on `target` by `by` (None: the command line, run on the server, which is
    named by the operating-system account that ran it: on a shared host, who it was)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    if by is None:
        details = {**details, "os_user": _os_user()}
    session.add(AuditEvent(actor_id=by.id if by else None, actor=by.username if by else None,
                           action=action, target=target[:200], details=details))


def _os_user() -> str:
    """The account the process runs as, by its user id (not $USER, which anyone sets), and who
    ran sudo to become it, as sudo says: a hint on a shared host, not a proof."""
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        # A container run with a user id that has no name (docker run --user 1234).
        name = f"uid {uid}"
    by = os.environ.get("SUDO_USER", "")
    said = f"{name} via sudo by {by}" if by and by != name else name
    # Printed in tab-separated lines (stepwise audit): no tab or line break of its own.
    return " ".join(said.split())[:64]


def who(event: AuditEvent) -> str:
    """Who made the change, as the page and the CLI say it."""
    if event.actor:
        return event.actor
    if event.action in ANONYMOUS_ACTIONS:
        # In parentheses, as "(blank)" is: no username has them.
        return "(unknown)"
    os_user = (event.details or {}).get("os_user")
    return f"command line ({os_user})" if os_user else "command line"


def record_wrong_password(session: Session, username: str, purpose: str, address: str | None) -> None:
    """A password that did not match, for a login or a check of a logged-in user's password
    (`purpose`), against the name typed, whether or not such a user exists: what an admin asks
    of these is whose account was tried, and from where. Who typed it is not known (anyone can
    type any name), so it has no actor: filtering by a user lists what they did, not what was
    tried against them. The login throttle bounds how many an address can add."""
    name = username.strip()[:64] or "(blank)"
    session.add(AuditEvent(actor_id=None, actor=None, action="login.failed", target=f"user {name}",
                           details={"purpose": purpose, "address": address}))


def user_target(user: User) -> str:
    return f"user {user.username}"


def project_target(project: Project) -> str:
    return f"project {project.name} (id {project.id})"


@dataclass(frozen=True)
class EventPage:
    events: list[AuditEvent]
    total: int


def list_events(session: Session, *, category: Category | None = None, actor: str | None = None,
                limit: int = PAGE_SIZE, offset: int = 0) -> EventPage:
    """Newest first; `actor` matches a username in any case, or "command line"; BadInput for a
    name no user has and no event keeps."""
    where = []
    if category is not None:
        where.append(AuditEvent.action.in_([a for a, c in ACTIONS.items() if c == category]))
    if actor:
        where.append(and_(AuditEvent.actor.is_(None), AuditEvent.action.not_in(ANONYMOUS_ACTIONS))
                     if actor.strip().lower() == "command line"
                     else func.lower(AuditEvent.actor) == actor.strip().lower())
    total = session.scalar(select(func.count()).select_from(AuditEvent).where(*where)) or 0
    if not total and actor and actor.strip().lower() != "command line":
        _refuse_unknown_actor(session, actor.strip())
    events = session.scalars(select(AuditEvent).where(*where).order_by(AuditEvent.id.desc())
                             .offset(offset).limit(limit))
    return EventPage(events=list(events), total=total)


def _refuse_unknown_actor(session: Session, actor: str) -> None:
    """BadInput for a name neither a user has nor an event keeps (a deleted user's events keep
    their name): an empty list for a typo read as "they did nothing", as other commands say "no
    user named" for a name nobody has. A user who did nothing in these categories is no error."""
    name = actor.lower()
    if session.scalar(select(User.id).where(func.lower(User.username) == name).limit(1)) is not None:
        return
    if session.scalar(select(AuditEvent.id).where(func.lower(AuditEvent.actor) == name).limit(1)) is not None:
        return
    raise BadInput(f"no user named {actor!r}, now or in the audit trail", field="actor")


def describe(event: AuditEvent) -> str:
    """The event in a sentence, after its target: what the page, the API and the CLI say."""
    # Who, not what: the command line's account is said where the actor is (see who).
    d = {key: value for key, value in (event.details or {}).items() if key != "os_user"}
    match event.action:
        case "user.created":
            first = ", to choose their own password at their first login" if d.get("must_change_password") else ""
            return f"created as {d.get('role')}{first}"
        case "user.role_changed":
            return f"role changed from {d.get('from')} to {d.get('to')}"
        case "user.deactivated":
            return "deactivated: their logins and tokens ended"
        case "user.reactivated":
            return "reactivated"
        case "user.password_set":
            then = ", to replace at their next login" if d.get("must_change_password") else ""
            return f"given a new password{then}: their logins ended"
        case "user.password_changed":
            return "changed their own password"
        case "user.password_change_asked":
            return "asked to choose a new password before doing anything else"
        case "user.password_change_waived":
            return "no longer asked to choose a new password"
        case "user.unlocked":
            return "unlocked: the failed logins against their name were forgotten"
        case "token.created":
            until = f", until {d['expires_at'][:10]}" if d.get("expires_at") else ""
            access = " (read-only)" if d.get("read_only") else ""
            return f"given API token {d.get('token')} “{d.get('name')}”{access}{until}"
        case "token.revoked":
            return f"API token {d.get('token')} “{d.get('name')}” revoked"
        case "project.created":
            return f"created ({d.get('labeling_mode')}, overlap {d.get('overlap')})"
        case "project.settings_changed":
            return "settings changed: " + "; ".join(_change(field, value) for field, value in sorted(d.items()))
        case "project.deleted":
            return (f"deleted with its {_n(d.get('problems', 0), 'problem')}, {_n(d.get('solutions', 0), 'solution')} "
                    f"and {_n(d.get('labels', 0), 'label')}")
        case "member.added":
            return f"added to project {d.get('project')}"
        case "member.removed":
            return f"taken out of project {d.get('project')}"
        case "import.added":
            added = d.get("added", {})
            skipped = f"; {_n(d['duplicates'], 'duplicate')} already there" if d.get("duplicates") else ""
            return (f"imported into project {d.get('project')} as {d.get('format')}: "
                    f"{_n(added.get('problems', 0), 'problem')}, {_n(added.get('solutions', 0), 'solution')} "
                    f"and {_n(added.get('labels', 0), 'label')} added{skipped}")
        case "import.removed":
            return f"removed from project {d.get('project')}: {d.get('summary')}"
        case "problem.retired":
            dismissed = (f", {_n(d['reports_dismissed'], 'bad-problem report')} dismissed"
                         if d.get("reports_dismissed") else "")
            return (f"retired in project {d.get('project')}: {_n(d.get('slots_removed', 0), 'waiting queue slot')} "
                    f"removed{dismissed}")
        case "problem.restored":
            return (f"restored to labeling in project {d.get('project')}: "
                    f"{_n(d.get('slots_added', 0), 'queue slot')} added")
        case "report.dismissed":
            if d.get("count"):
                shown = ", ".join(f"{name} {value}" for name, value in sorted((d.get("filters") or {}).items()))
                return (f"dismissed at once in project {d.get('project')}, every open one "
                        f"{'with ' + shown if shown else 'of any kind'}{' up to report ' + str(d['through']) if d.get('through') else ''}")
            whose = f"{d['labeler']}'s" if d.get("labeler") else "a deleted user's"
            return f"dismissed in project {d.get('project')}: {whose} {d.get('about')}"
        case "skip.given_back":
            if d.get("count"):
                return f"{_n(d['count'], 'skipped solution')} given back to them in project {d.get('project')}"
            return f"given back to {d.get('labeler')} in project {d.get('project')}: their skip is taken back"
        case "label.made_gold":
            screening = ", as a screening item" if d.get("screening") else ""
            return f"made gold in project {d.get('project')}{screening}"
        case "label.gold_removed":
            return f"no longer gold in project {d.get('project')}"
        case "labeler.admitted":
            return f"admitted in project {d.get('project')}: labels there regardless of screening and QC"
        case "labeler.retired":
            handed = f"; {_n(d['leases'], 'lease')} handed back" if d.get("leases") else ""
            return f"retired in project {d.get('project')}: given no more tasks there{handed}"
        case "round.settings_changed":
            return "round settings changed: " + "; ".join(_change(field, value) for field, value in sorted(d.items()))
        case "round.started":
            trigger = d.get("trigger")
            why = "" if trigger == "manual" else f", as its {trigger} trigger said"
            return f"round {d.get('round')} queued{why}"
        case "round.cancelled":
            return f"round {d.get('round')} cancelled while {d.get('status')}"
        case "login.succeeded":
            return f"logged in{_from(d)}"
        case "login.failed":
            return f"wrong password ({d.get('purpose')}){_from(d)}"
        case "address.unlocked":
            return "unlocked: the failed logins from it were forgotten"
        case "export.downloaded":
            filters = ", ".join(f"{name}={value}" for name, value in d.get("filters", []))
            count = f": {d['count']:,} written" if d.get("count") is not None else ""
            return f"labels exported as {d.get('format')}" + (f" ({filters})" if filters else "") + count
    return event.action


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun if count == 1 else noun + 's'}"


def _from(details: dict[str, Any]) -> str:
    return f" from {details['address']}" if details.get("address") else ""


def _change(field: str, value: Any) -> str:
    if isinstance(value, list) and len(value) == 2:
        # A round setting that is off (a trigger, say) is null: said as a word, not as Python's None.
        was, now = ("none" if v is None else v for v in value)
        return f"{field} {was} → {now}"
    return f"{field} {value}"
