"""The `stepwise` command. Parses arguments, then calls the same services the API uses."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import click
from pydantic import BaseModel, ValidationError
from sqlalchemy import make_url
from sqlalchemy.exc import DatabaseError, OperationalError, SQLAlchemyError

from active_learning.cli import FloatRange, IntRange, prm, quiet_transformers
from app.audit.service import Category as AuditCategory
from app.auth.schemas import MAX_TOKEN_DAYS
from app.config import Settings, get_settings
from app.db import create_db_engine, create_session_factory, session_scope
from app.errors import BadInput, BadLines, Conflict, ServiceError, field_error
from app.models import INT32_MAX, Role
from app.validation import AS_TEXT
from app.ops.service import driver_reason, not_ready_reason


class _Context:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._factory = None

    def session(self):  # type: ignore[no-untyped-def]
        return session_scope(self.factory())

    def factory(self):  # type: ignore[no-untyped-def]
        """The session factory, for services that open their own transactions as they go."""
        if self._factory is None:
            url = make_url(self.settings.database_url)
            # SQLite would create the file it is asked to open, and leave it behind empty.
            if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).is_file():
                raise BadInput(f"no database at {url.database}: run `stepwise db upgrade` to create it")
            try:
                engine = create_db_engine(self.settings)
            except (ImportError, SQLAlchemyError) as exc:
                # A driver that is not installed (postgresql+psycopg2://, say) or a bad option.
                raise BadInput(f"cannot open DATABASE_URL: {exc}") from None
            # Looked at once here, as the server's /readyz does: no command gets as far as "no
            # such table" or "no such column" on a database that is not at this code's head.
            reason = not_ready_reason(engine)
            if reason is not None:
                raise BadInput(f"cannot use the database at {_shown_url(self.settings)}: {reason}")
            self._factory = create_session_factory(engine)
        return self._factory


pass_ctx = click.make_pass_decorator(_Context)


class _BadArguments(BadInput):
    """Arguments Stepwise's own checks refuse (see _validated): exit status 2, as those click
    refuses are, so that a script tells a command it got wrong from a command that failed."""


class _Group(click.Group):
    """Service errors become a one-line message and exit status 1, not a traceback; a file with
    bad lines exits 2, as bad arguments do, so that a script can tell bad data from a failure."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except ServiceError as exc:
            click.echo(f"Error: {exc.message}", err=True)
            details = exc.details if isinstance(exc.details, list) else []
            for detail in details[:50]:
                click.echo(f"  {_format_detail(detail)}", err=True)
            if len(details) > 50:
                click.echo(f"  … and {len(details) - 50} more", err=True)
            ctx.exit(2 if isinstance(exc, (BadLines, _BadArguments)) else 1)
        except (OperationalError, DatabaseError) as exc:
            # The database down, unreachable or gone mid-command, or a file that is no database:
            # nothing a traceback would help with. Its subclasses (a constraint, a bad value) are
            # another matter.
            if type(exc) is not DatabaseError and not isinstance(exc, OperationalError):
                raise
            where = ctx.find_object(_Context)
            shown = f" at {_shown_url(where.settings)}" if where else ""
            click.echo(f"Error: cannot use the database{shown}: {driver_reason(exc)}", err=True)
            ctx.exit(1)


def _shown_url(settings: Settings) -> str:
    return make_url(settings.database_url).render_as_string(hide_password=True)


def _refuse_unused(fmt: str, **formats: tuple[str, ...]) -> None:
    """Refuse an option given for a format that does not read it: silently ignored, it would
    leave the user believing it took effect."""
    ctx = click.get_current_context()
    for name, applies in formats.items():
        if fmt not in applies and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} applies to --format {' or '.join(applies)}, not {fmt}")


def _format_detail(detail: object) -> str:
    if isinstance(detail, dict):
        where = ":".join(str(detail[k]) for k in ("file", "line") if detail.get(k) is not None)
        field = detail.get("field")
        return f"{where}{' ' if where else ''}{field + ': ' if field else ''}{detail.get('message', '')}"
    return str(detail)


@click.group(cls=_Group)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Stepwise: step-level labels for math solutions. Honours DATABASE_URL."""
    from app.rounds.config import WorkerSettings, get_worker_settings

    # Named as the environment spells them: DATABASE_URL, STEPWISE_DB_POOL_SIZE (the web
    # settings' aliases), STEPWISE_WORKER_POLL_S (the workers' prefix and field).
    try:
        ctx.obj = _Context(get_settings())
    except ValidationError as exc:
        raise BadInput("bad setting in the environment", _details(exc, str.upper)) from None
    try:
        # Read now, so that a bad round setting is named here, not met as a worker's traceback.
        get_worker_settings()
    except ValidationError as exc:
        prefix = WorkerSettings.model_config.get("env_prefix", "")
        raise BadInput("bad setting in the environment", _details(exc, lambda name: (prefix + name).upper())) from None


@cli.group(cls=_Group)
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True)
@pass_ctx
def db_upgrade(ctx: _Context, revision: str) -> None:
    """Apply migrations."""
    from app.migrate import upgrade

    upgrade(ctx.settings.database_url, revision)
    _say_revision(ctx)


# The migrations whose downgrade revokes tokens (read-only ones, expiring ones).
TOKEN_REVOKING_REVISIONS = {"0029", "0035"}


# ignore_unknown_options: a relative revision such as -1 is an argument, not an option.
@db.command("downgrade", context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Revert without asking (scripts).")
@pass_ctx
def db_downgrade(ctx: _Context, revision: str, yes: bool) -> None:
    """Revert migrations down to REVISION ('base' empties the database; -1 reverts one). What
    each reverted migration added is dropped with its data; asks first unless --yes."""
    from app.migrate import downgrade, reverted_by

    reverted = reverted_by(ctx.settings.database_url, revision)
    if not reverted:
        click.echo("nothing to revert")
        _say_revision(ctx)
        return
    if not yes:
        click.echo("Reverting drops what each of these migrations added, with its data:")
        for name, added in reverted:
            click.echo(f"  {name}  {added.splitlines()[0] if added else ''}")
        if {name for name, _ in reverted} & TOKEN_REVOKING_REVISIONS:
            click.echo("Tokens made read-only or to expire are revoked first: without those columns they would last, "
                       "with full access.")
        click.echo("Back up first (stepwise db backup FILE); stop the server and workers.")
        click.confirm(f"Revert {len(reverted)} migration{'s' if len(reverted) != 1 else ''}?", abort=True)
    downgrade(ctx.settings.database_url, revision)
    _say_revision(ctx)


def _say_revision(ctx: _Context) -> None:
    # The revision reached, not the one asked for: "head" or "-1" name no revision.
    from app.migrate import current_revision

    click.echo(f"database at {current_revision(ctx.settings.database_url) or 'base (no migration applied)'}")


@db.command("backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pass_ctx
def db_backup(ctx: _Context, file: Path) -> None:
    """Write the whole database to FILE while the server runs (SQLite's backup API, or pg_dump)."""
    from app.ops.backup import backup

    backup(ctx.settings.database_url, file)
    click.echo(f"backed up to {file}")


@db.command("restore")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="restore even while other sessions (PostgreSQL) or other processes "
                                            "(SQLite) have the database open")
@pass_ctx
def db_restore(ctx: _Context, file: Path, force: bool) -> None:
    """Replace the database's contents with a backup made by `db backup` (stop the server and
    workers first: on PostgreSQL, other sessions connected are refused unless --force; on
    SQLite, which lists no sessions, another process with the database open, as a server or
    worker keeps it, is refused unless --force). A backup made by an older version is restored
    as it was: run `stepwise db upgrade` after it; one made by a newer version is refused."""
    from collections import Counter

    from app.migrate import heads
    from app.ops.backup import restore, sqlite_open_elsewhere

    if not force and ctx.settings.is_sqlite and sqlite_open_elsewhere(ctx.settings.database_url):
        # Their connections would go on over the tables replaced under them.
        raise BadInput(f"another process has the database at {_shown_url(ctx.settings)} open (a server or worker): "
                       "stop the server and workers first, or pass --force")
    others = [] if force or ctx.settings.is_sqlite else _other_sessions(ctx.settings)
    if others:
        # Servers and workers would go on with the tables replaced under them (or hold locks
        # the restore waits on); application_name says which, where the client set one.
        named = Counter(name or "without an application_name" for name in others)
        raise BadInput(
            f"{len(others)} other session{'s are' if len(others) > 1 else ' is'} connected to the database at "
            f"{_shown_url(ctx.settings)} ({', '.join(f'{n} {name}' for name, n in named.most_common())}): "
            "stop the server and workers first, or pass --force")
    revision = restore(ctx.settings.database_url, file)
    click.echo(f"restored from {file}")
    if revision not in heads():
        click.echo(f"the backup's schema is at revision {revision}, older than this version's: "
                   "run `stepwise db upgrade` before using it", err=True)


def _other_sessions(settings: Settings) -> list[str]:
    """The application_name ('' where unset) of each other client connected to the PostgreSQL
    database. A role sees other roles' sessions only with pg_read_all_stats; Stepwise's
    processes share one role."""
    from sqlalchemy import text

    engine = create_db_engine(settings)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(
                "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")).scalars())
    finally:
        engine.dispose()


@cli.group(cls=_Group)
def users() -> None:
    """User accounts."""



@users.command("create")
@click.option("--username", required=True)
@click.option("--role", required=True, type=click.Choice([r.value for r in Role]))
# Off by default here, whose operator often makes an account for themselves; on for generated
# passwords (create-many), which are always someone else's to replace.
@click.option("--must-change-password/--no-must-change-password", default=False,
              help="the user chooses their own password at their first login, before anything else")
@pass_ctx
def users_create(ctx: _Context, username: str, role: str, must_change_password: bool) -> None:
    """Create a user; the password is read from standard input."""
    from app.users.schemas import UserCreate
    from app.users.service import create_user

    password = _read_password()
    data = _validated(UserCreate, {"password": "the password"}, username=username, role=role, password=password,
                      must_change_password=must_change_password)
    with ctx.session() as session:
        user = create_user(session, data)
        then = "; they choose their own password at their first login" if user.must_change_password else ""
        click.echo(f"created {user.role.value} {user.username} (id {user.id}){then}")


@users.command("create-many")
@click.option("--role", required=True, type=click.Choice([r.value for r in Role if r != Role.admin]))
# utf-8-sig: a BOM (Notepad writes one) is no part of the first name.
@click.argument("names", type=click.File("r", encoding="utf-8-sig"))
@click.option("--must-change-password/--no-must-change-password", default=True,
              help="each chooses their own password at their first login (the default)")
@pass_ctx
def users_create_many(ctx: _Context, role: str, names: TextIO, must_change_password: bool) -> None:
    """Create a user for each name in NAMES (a file, or - for standard input; one per line),
    each with a generated password; prints `username<TAB>password` lines, the only copy."""
    from app.users.schemas import UsersCreate
    from app.users.service import create_users

    # Standard input has no name where it is not a terminal's (a test's, say).
    source = getattr(names, "name", "<stdin>")
    # Each name with its line in NAMES: blank lines are skipped, and a name to fix is named by
    # the line an editor shows it on.
    try:
        named = [(number, line.strip()) for number, line in enumerate(names, start=1) if line.strip()]
    except UnicodeDecodeError:
        raise BadInput(f"{source}: not UTF-8 text") from None
    lines = [number for number, _ in named]
    data = _validated(UsersCreate, {"usernames": "NAMES"}, usernames=[name for _, name in named], role=role,
                      must_change_password=must_change_password)
    with ctx.session() as session:
        try:
            made = create_users(session, data, by=None, listed_at=lambda index: f"on line {lines[index]}")
        except BadInput as exc:
            # Named as a line of NAMES, not by the API's field; bad data, as an import's bad lines.
            details = [{"file": source, "line": lines[int(d["field"].rpartition(".")[2])], "message": d["message"]}
                       for d in exc.details or []]
            raise BadLines(exc.message, details) from None
    for account in made:
        click.echo(f"{account.user.username}\t{account.password}")
    then = "; each chooses their own at their first login" if must_change_password else ""
    click.echo(f"created {len(made)} {role}s: hand each their password privately{then}", err=True)


@users.command("list")
@pass_ctx
def users_list(ctx: _Context) -> None:
    """Every account: id, username, role, and whether it is deactivated."""
    from app.users.service import list_users

    with ctx.session() as session:
        for user in list_users(session):
            state = ("" if user.is_active else " (disabled)") + (" (to choose a password)" if user.must_change_password else "")
            click.echo(f"{user.id}\t{user.username}\t{user.role.value}{state}")


@users.command("set-role")
@click.option("--username", required=True)
@click.option("--role", required=True, type=click.Choice([r.value for r in Role]))
@pass_ctx
def users_set_role(ctx: _Context, username: str, role: str) -> None:
    """Change a user's role."""
    user = _update_user(ctx, username, role=role)
    click.echo(f"{user.username} is now {user.role.value}")


@users.command("set-password")
@click.option("--username", required=True)
@click.option("--must-change-password/--no-must-change-password", default=None,
              help="whether they replace it at their next login (neither: as before)")
@pass_ctx
def users_set_password(ctx: _Context, username: str, must_change_password: bool | None) -> None:
    """Give a user a new password, read from standard input; their logins and tokens end."""
    user = _update_user(ctx, username, password=_read_password(), must_change_password=must_change_password)
    then = "; they replace it at their next login" if user.must_change_password else ""
    click.echo(f"new password set for {user.username}; their logins and tokens have ended{then}")


@users.command("unlock")
@click.option("--username", default=None, help="the user whose name failed logins locked")
@click.option("--address", default=None, help="a client address failed logins locked (an office behind one proxy)")
@pass_ctx
def users_unlock(ctx: _Context, username: str | None, address: str | None) -> None:
    """Forget the failed logins against a username or from an address, and the lock they made."""
    from app.users.service import get_user_by_name, unlock, unlock_address

    if (username is None) == (address is None):
        raise click.UsageError("name one of --username and --address")
    typed, address = address, None if address is None else _ip_address(address)
    with ctx.session() as session:
        if username is not None:
            user = get_user_by_name(session, username)
            cleared, what = unlock(session, user, by=None), user.username
        else:
            assert address is not None
            cleared, what = unlock_address(session, address, by=None), typed
    click.echo(f"{what}: failed logins forgotten; logins are let in at once" if cleared
               else f"{what}: no failed logins to forget")


def _ip_address(typed: str) -> str:
    """The address as typed, once it is one: the throttle keeps addresses as the server was
    given them (an IPv4 client of a server bound to :: as ::ffff:10.0.0.7), which a rewritten
    form would miss."""
    try:
        ipaddress.ip_address(typed.strip())
        return typed.strip()
    except ValueError:
        raise click.BadParameter(f"{typed!r} is not an IP address (10.0.0.7, 2001:db8::7)",
                                 param_hint="--address") from None


def _activation_command(name: str, active: bool, doc: str) -> click.Command:
    @users.command(name, help=doc)
    @click.option("--username", required=True)
    @pass_ctx
    def command(ctx: _Context, username: str) -> None:
        user = _update_user(ctx, username, is_active=active)
        click.echo(f"{name}d {user.username}")

    return command


users_deactivate = _activation_command("deactivate", False, "Disable a user's account and end their logins and tokens.")
users_reactivate = _activation_command("reactivate", True, "Let a deactivated user log in again.")


def _update_user(ctx: _Context, username: str, **changes: object):  # type: ignore[no-untyped-def]
    from app.users.schemas import UserUpdate
    from app.users.service import get_user_by_name, update_user

    data = _validated(UserUpdate, {"password": "the password"}, **changes)
    with ctx.session() as session:
        return update_user(session, get_user_by_name(session, username), data, by=None)


# Control characters (a tab and a line break among them) written as escapes: a name someone
# chose (a token's, a project's) must not clear or colour an admin's terminal, nor break the
# tab-separated columns.
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}


def _cell(text: str) -> str:
    return text.translate(_CONTROL)


@cli.command("audit")
@click.option("--category", type=click.Choice([c.value for c in AuditCategory]), default=None)
@click.option("--actor", default=None, help='a username, or "command line"')
@click.option("--limit", type=IntRange(1, 10_000), default=50, show_default=True)
@pass_ctx
def audit_command(ctx: _Context, category: str | None, actor: str | None, limit: int) -> None:
    """Who changed accounts, roles, projects, members, imports, problems, gold, labelers' standing
    and rounds, and logins: newest first, one event a line (time, who, target, what;
    tab-separated)."""
    from app.audit.service import describe, list_events, who

    with ctx.session() as session:
        chosen = None if category is None else AuditCategory(category)
        for event in list_events(session, category=chosen, actor=actor, limit=limit).events:
            click.echo("\t".join(map(_cell, (event.at.strftime("%Y-%m-%d %H:%M:%S UTC"), who(event),
                                              event.target, describe(event)))))


@cli.group(cls=_Group)
def tokens() -> None:
    """Bearer tokens for the JSON API."""


@tokens.command("create")
@click.option("--username", required=True)
@click.option("--name", default="cli", show_default=True)
@click.option("--expires-in-days", type=IntRange(1, MAX_TOKEN_DAYS), default=None,
              help="refused from then on (default: until revoked, or STEPWISE_TOKEN_MAX_DAYS where set)")
@click.option("--read-only", is_flag=True, help="GET requests and scoring only: a script that reads, leaked, changes nothing")
@pass_ctx
def tokens_create(ctx: _Context, username: str, name: str, expires_in_days: int | None, read_only: bool) -> None:
    """Print a new API token for a user (shown once)."""
    from app.auth.service import issue_api_token
    from app.users.service import get_user_by_name

    with ctx.session() as session:
        click.echo(issue_api_token(session, get_user_by_name(session, username), name, expires_in_days,
                                   max_days=ctx.settings.token_max_days, read_only=read_only).token)


@tokens.command("list")
@click.option("--username", default=None, help="one user's (default: every user's, the holder's name first)")
@pass_ctx
def tokens_list(ctx: _Context, username: str | None) -> None:
    """Tokens that are not revoked: id, name, created, last used, expires (tab-separated)."""
    from app.auth.service import HeldToken, list_all_api_tokens, list_api_tokens
    from app.users.service import get_user_by_name

    def when(moment: datetime | None, never: str) -> str:
        return never if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")

    with ctx.session() as session:
        if username is None:
            held = list_all_api_tokens(session)
        else:
            user = get_user_by_name(session, username)
            held = [HeldToken(record, user.username) for record in list_api_tokens(session, user)]
        for token in held:
            record = token.record
            expires = when(record.expires_at, "never") + (" (expired)" if record.expired else "") + \
                (" (read-only)" if record.read_only else "")
            columns = (str(record.id), record.name, when(record.created_at, ""),
                       when(record.last_used_at, "never used"), expires)
            click.echo("\t".join(map(_cell, columns if username else (token.username, *columns))))


@tokens.command("revoke")
@click.option("--username", default=None, help="whose it must be (default: anyone's)")
@click.argument("token_id", type=IntRange(1, INT32_MAX))
@pass_ctx
def tokens_revoke(ctx: _Context, username: str | None, token_id: int) -> None:
    """Revoke a token by its id (see `tokens list`)."""
    from app.auth.service import HeldToken, revoke_any_token, revoke_own_token
    from app.users.service import get_user_by_name

    with ctx.session() as session:
        if username is None:
            held = revoke_any_token(session, token_id, by=None)
        else:
            user = get_user_by_name(session, username)
            held = HeldToken(revoke_own_token(session, user, token_id), user.username)
        click.echo(f"revoked token {held.record.id} ({held.record.name}) of {held.username}")


@cli.group(cls=_Group)
def projects() -> None:
    """Labeling projects."""


@projects.command("create")
@click.argument("name")
@click.option("--mode", "labeling_mode", type=click.Choice(["first_error", "full", "phase1"]), default="first_error", show_default=True)
@click.option("--overlap", type=int, default=1, show_default=True)
@click.option("--lease-minutes", type=int, default=30, show_default=True)
@click.option("--correction-window-hours", type=int, default=24, show_default=True, help="how long labelers may correct a label; 0 closes corrections")
@click.option("--description", default="")
@click.option("--members-only", is_flag=True, help="only the project's members may label (default: every labeler)")
@click.option("--guidelines", "guidelines_file", type=click.File("rb"), default=None, help="a Markdown file of guidelines for labelers ('-': standard input)")
@pass_ctx
def projects_create(
    ctx: _Context,
    name: str,
    labeling_mode: str,
    overlap: int,
    lease_minutes: int,
    correction_window_hours: int,
    description: str,
    members_only: bool,
    guidelines_file: BinaryIO | None,
) -> None:
    """Create a project."""
    from app.projects.schemas import ProjectCreate
    from app.projects.service import create_project

    data = _validated(
        ProjectCreate,
        {"name": "NAME", "guidelines": "--guidelines", "open_to_all": "--members-only"},
        name=name,
        labeling_mode=labeling_mode,
        overlap=overlap,
        lease_minutes=lease_minutes,
        correction_window_hours=correction_window_hours,
        description=description,
        guidelines=_read_guidelines(guidelines_file) if guidelines_file else "",
        open_to_all=not members_only,
    )
    with ctx.session() as session:
        project = create_project(session, data)
        click.echo(f"created project {project.name} (id {project.id})")


@projects.command("guidelines")
@click.argument("name")
@click.argument("file", type=click.File("rb"), required=False)
@pass_ctx
def projects_guidelines(ctx: _Context, name: str, file: BinaryIO | None) -> None:
    """Print a project's guidelines for labelers, or replace them with FILE's (Markdown; '-':
    standard input; an empty file removes them)."""
    from app.projects.schemas import ProjectUpdate
    from app.projects.service import get_project_by_name, update_project

    with ctx.session() as session:
        project = get_project_by_name(session, name)
        if file is None:
            if project.guidelines:
                click.echo(project.guidelines, nl=not project.guidelines.endswith("\n"))
            else:
                click.echo(f"{project.name} has no guidelines", err=True)
            return
        update_project(session, project, _validated(ProjectUpdate, {"guidelines": "FILE (the guidelines)"}, guidelines=_read_guidelines(file)))
        words = len(project.guidelines.split())
        click.echo(f"{project.name}: guidelines {'set, ' + format(words, ',') + ' words' if words else 'removed'}")


def _read_guidelines(file: BinaryIO) -> str:
    from app.projects.guidelines import GUIDELINES_MAX_LENGTH

    # UTF-8 takes at most four bytes a character: past that, the file is too long without
    # reading it whole.
    raw = file.read(4 * GUIDELINES_MAX_LENGTH + 1)
    if len(raw) > 4 * GUIDELINES_MAX_LENGTH:
        # Exit status 2, as the same refusal by ProjectUpdate (_validated) for fewer bytes.
        raise _BadArguments(f"{file.name}: guidelines may be {GUIDELINES_MAX_LENGTH:,} characters at most")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{file.name}: not UTF-8 text (byte {exc.start})") from None


@projects.command("list")
@pass_ctx
def projects_list(ctx: _Context) -> None:
    """Every project: id, name, labeling mode, overlap, and who may label it."""
    from app.projects.service import list_projects

    with ctx.session() as session:
        for project in list_projects(session):
            access = "open" if project.open_to_all else "members only"
            click.echo(f"{project.id}\t{_cell(project.name)}\t{project.labeling_mode.value}\toverlap {project.overlap}\t{access}")


@projects.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Delete without asking (scripts).")
@pass_ctx
def projects_delete(ctx: _Context, name: str, yes: bool) -> None:
    """Delete a project with its problems, solutions, labels, reports, rounds and model versions'
    records (checkpoint folders stay). There is no undo: export first."""
    from app.projects.service import delete_project, get_project_by_name

    if not yes:
        with ctx.session() as session:
            get_project_by_name(session, name)
        # Asked outside any transaction: on SQLite an open one would hold every writer waiting.
        click.confirm(f"Delete {name} and everything in it, for good?", abort=True)
    with ctx.session() as session:
        held = delete_project(session, get_project_by_name(session, name))
    click.echo(f"deleted {name}: {held['problems']} problems, {held['solutions']} solutions, {held['labels']} labels")


@cli.group(cls=_Group)
def members() -> None:
    """Who may label in a members-only project."""


@members.command("add")
@click.option("--project", "project_name", required=True)
@click.option("--username", required=True)
@pass_ctx
def members_add(ctx: _Context, project_name: str, username: str) -> None:
    """Let a labeler into a project."""
    from app.projects.members import add_member
    from app.projects.service import get_project_by_name

    with ctx.session() as session:
        project = get_project_by_name(session, project_name)
        member = add_member(session, project, username)
        click.echo(f"added {member.username} to {project.name}")


@members.command("remove")
@click.option("--project", "project_name", required=True)
@click.option("--username", required=True)
@pass_ctx
def members_remove(ctx: _Context, project_name: str, username: str) -> None:
    """Take a labeler out of a project; their leases there go back to the queue."""
    from app.projects.members import remove_member_by_name
    from app.projects.service import get_project_by_name

    with ctx.session() as session:
        project = get_project_by_name(session, project_name)
        remove_member_by_name(session, project, username)
        click.echo(f"removed {username} from {project.name}")


@members.command("list")
@click.option("--project", "project_name", required=True)
@pass_ctx
def members_list(ctx: _Context, project_name: str) -> None:
    """A project's members (and, on stderr, whether it is open to every labeler)."""
    from app.projects.members import list_members
    from app.projects.service import get_project_by_name

    with ctx.session() as session:
        project = get_project_by_name(session, project_name)
        access = "open to every labeler" if project.open_to_all else "members only"
        click.echo(f"{project.name}: {access}", err=True)
        for member in list_members(session, project):
            state = "" if member.is_active else " (disabled)"
            click.echo(f"{member.user_id}\t{member.username}{state}")


@cli.command("import")
@click.option("--project", "project_name", required=True)
@click.option("--format", "fmt", required=True, type=click.Choice(["prm800k", "math", "solutions"]))
@click.option("--separator", default=None, help="step separator for solutions given as text")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def import_(ctx: _Context, project_name: str, fmt: str, separator: str | None, file: Path) -> None:
    """Import a JSONL file into a project: all of it, or nothing if any line is bad."""
    from app.imports.service import import_file
    from app.projects.service import get_project_by_name

    _refuse_unused(fmt, separator=("solutions",))

    with ctx.session() as session, file.open("rb") as stream:
        project = get_project_by_name(session, project_name)
        result = import_file(
            session, project, stream, filename=file.name, fmt=fmt, separator=separator, user=None
        )
        click.echo(result.summary())


@cli.command("export")
@click.option("--project", "project_name", required=True)
@click.option("--format", "fmt", required=True, type=click.Choice(["prm800k", "trl", "parquet", "hf"]))
@click.option("--output", required=True, type=click.Path(path_type=Path), help="a file; for hf, a new directory")
@click.option("--since", default=None, help="labels created on or after this date (YYYY-MM-DD)")
@click.option("--until", default=None, help="labels created before this date (YYYY-MM-DD)")
@click.option("--generation", type=int, multiple=True, help="only these generations")
@click.option("--labeler", multiple=True, help="username or foreign labeler id")
@click.option("--source", "sources", multiple=True, help="only these label sources, comma-separated or repeated: human, rollout, judge, prm (default: all)")
@click.option("--qc", type=click.Choice(["include", "exclude", "only"]), default="include", show_default=True)
@click.option("--min-labeler-accuracy", type=float, default=None, help="only labelers whose agreement with QC gold is at least this (0 to 1)")
@click.option("--min-agreement", type=float, default=None, help="only solutions whose labelers agree on the first error at least this often (0 to 1)")
@click.option("--neutral", type=click.Choice(["positive", "negative"]), default="positive", show_default=True, help="TRL: what a 0 rating becomes")
@click.option("--completions", type=click.Choice(["chosen", "all"]), default="chosen", show_default=True, help="TRL, Parquet, hf: the labelers' paths only, or also every other rated alternative as its own example, human-written steps marked")
@pass_ctx
def export(ctx: _Context, project_name: str, fmt: str, output: Path, since: str | None, until: str | None, generation: tuple[int, ...], labeler: tuple[str, ...], sources: tuple[str, ...], qc: str, min_labeler_accuracy: float | None, min_agreement: float | None, neutral: str, completions: str) -> None:
    """Export a project's labels, streamed to a file (hf: a `datasets` directory)."""
    from app.exports.query import check_generations, check_labelers
    from app.audit import service as audit
    from app.exports.schemas import ExportFilters, filters_query, refuse_unread
    from app.exports.service import write_export
    from app.ops.files import output_directory, output_file, written_aside
    from app.projects.service import get_project_by_name

    typed = click.get_current_context()
    given = [name for name in ("neutral", "completions")
             if typed.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    try:
        refuse_unread(fmt, given, formats=("prm800k", "trl", "parquet", "hf"), spelled=lambda name: f"--{name}")
    except BadInput as exc:
        raise click.UsageError(exc.message) from None
    target = output_directory(output) if fmt == "hf" else output_file(output)
    filters = _validated(
        ExportFilters,
        {"generations": "--generation", "labelers": "--labeler", "sources": "--source", "": "--since/--until"},
        since=since,
        until=until,
        generations=list(generation) or None,
        labelers=list(labeler) or None,
        sources=_comma_list(",".join(sources) if sources else None),
        qc=qc,
        min_labeler_accuracy=min_labeler_accuracy,
        min_agreement=min_agreement,
        neutral=neutral,
        completions=completions,
    )
    # With every completion a label gives several records.
    what = "records" if completions == "all" else "labels"
    # Reading only, for as long as the export takes: on SQLite a session that may write holds
    # the write lock that long, and every labeler's submit waits on it.
    with session_scope(ctx.factory(), reads_only=True) as session:
        project = get_project_by_name(session, project_name)
        try:
            check_labelers(session, project.id, filters)
            check_generations(session, project.id, filters)
        except BadInput as exc:
            # Named as typed here: --labeler, --generation.
            details = [{**d, "field": f"--{d['field']}"} for d in exc.details or []]
            raise BadInput(exc.message, details) from None
        if fmt == "hf":
            from app.exports.hf import write_dataset

            count = write_dataset(session, project, filters, target)
        else:
            with written_aside(target) as partial, partial.open("wb") as sink:
                count = write_export(session, project, fmt, filters, sink)
    with ctx.session() as session:
        audit.record(session, None, "export.downloaded", audit.project_target(project), format=fmt,
                     filters=filters_query(filters), count=count)
        click.echo(f"exported {count} {what} to {output}")
        if not count:
            # Written all the same: an export since the last one may rightly find nothing new.
            click.echo("warning: no label matches these filters; the export is empty", err=True)


@cli.command("autolabel")
@click.option("--project", "project_name", required=True)
@click.option("--generator", "spec", required=True, help="a model directory or hub id (transformers), vllm:MODEL, or an OpenAI-compatible http(s)://host/v1[#model]")
@click.option("--rollouts", type=IntRange(1), default=8, show_default=True, help="completions sampled per step prefix")
@click.option("--method", type=click.Choice(["mc", "binary"]), default="mc", show_default=True, help="mc: every step; binary: search for the first error")
@click.option("--threshold", type=float, default=0.0, show_default=True, help="a step is +1 when its share of right completions exceeds this")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--max-new-tokens", type=IntRange(1), default=256, show_default=True)
@click.option("--batch-size", type=IntRange(1), default=16, show_default=True, help="prefixes per generator call")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--limit", type=IntRange(1), default=None, help="label at most this many solutions this run")
@click.option("--device", default="auto", show_default=True, help="transformers: cpu, cuda or auto")
@pass_ctx
def autolabel(ctx: _Context, project_name: str, spec: str, rollouts: int, method: str, threshold: float, temperature: float, top_p: float, max_new_tokens: int, batch_size: int, seed: int, limit: int | None, device: str) -> None:
    """Label the pool's solutions by rollouts from a generator (source 'rollout'); run it again
    with the same generator and settings to go on where it stopped."""
    from active_learning.rollouts import RolloutSettings, open_generator
    from app.machine_labels.rollouts import label_by_rollouts
    from app.projects.service import get_project_by_name

    with ctx.session() as session:
        project_id = get_project_by_name(session, project_name).id
    try:
        settings = RolloutSettings(rollouts=rollouts, method=method, threshold=threshold, temperature=temperature,
                                   top_p=top_p, max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)
        # An endpoint's key comes from the environment, never the command line (shell history).
        with _endpoint_errors():
            generator = open_generator(spec, device=device, api_key=os.environ.get("OPENAI_API_KEY"))
    except (ValueError, OSError) as exc:
        raise BadInput(str(exc)) from None

    def progress(done: int, total: int) -> None:
        click.echo(f"autolabel: {done}/{total} solutions", err=True)

    # Labels stored before an endpoint failed are kept, and the next run goes on from them.
    with _endpoint_errors():
        result = label_by_rollouts(ctx.factory(), project_id, generator, spec, settings, limit=limit, progress=progress)
    click.echo(f"stored {result.stored} rollout labels ({result.skipped} of {result.candidates} "
               "pool solutions with an answer already had this generator's label)")


@contextlib.contextmanager
def _endpoint_errors() -> Iterator[None]:
    """An endpoint the user named that cannot be reached or answers badly, whose message already
    says so; any other error is a bug and keeps its traceback."""
    from active_learning.rollouts import EndpointError

    try:
        yield
    except EndpointError as exc:
        raise BadInput(f"generator: {exc}") from None


@cli.command("agreement")
@click.option("--project", "project_name", required=True)
@pass_ctx
def agreement(ctx: _Context, project_name: str) -> None:
    """Print a project's inter-annotator agreement as one JSON object."""
    from app.projects.service import get_project_by_name
    from app.quality.agreement import project_agreement
    from app.quality.schemas import ProjectAgreementRead

    with ctx.session() as session:
        found = project_agreement(session, get_project_by_name(session, project_name))
    click.echo(ProjectAgreementRead.model_validate(found).model_dump_json())


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, type=IntRange(0, 65535), show_default=True)
@click.option("--workers", default=1, type=IntRange(min=1), show_default=True, help="server processes")
@click.option("--access-log", is_flag=True, help="log a line for every request")
@pass_ctx
def serve(ctx: _Context, host: str, port: int, workers: int, access_log: bool) -> None:
    """Run the web server (several worker processes with --workers)."""
    from app.server import CannotListen, serve as run_server

    for warning in ctx.settings.production_warnings():
        click.echo(f"warning: {warning}", err=True)
    try:
        status = run_server(
            host,
            port,
            workers,
            announce=lambda url: click.echo(f"Stepwise at {url}"),
            access_log=access_log,
            log_format=ctx.settings.log_format,
        )
    except CannotListen as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(status)


@cli.command("demo")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, type=IntRange(0, 65535), show_default=True)
@click.option("--no-serve", is_flag=True, help="load the demo data and stop")
@pass_ctx
def demo(ctx: _Context, host: str, port: int, no_serve: bool) -> None:
    """Migrate, load the MATH-500 demo project and demo users, print their logins, serve."""
    from app.demo.service import default_problems_file, load_demo, read_problems
    from app.migrate import upgrade

    if ctx.settings.environment == "production":
        # Demo accounts, one an admin, with passwords printed to a terminal and its scrollback.
        raise click.ClickException("the demo adds demo accounts (an admin among them) and a demo project: "
                                   "not with STEPWISE_ENV=production")
    # Read before the database is made or migrated: a wrong STEPWISE_DEMO_PROBLEMS stops here,
    # and leaves no database behind.
    source = default_problems_file()
    problems = read_problems(source)
    upgrade(ctx.settings.database_url)
    with ctx.session() as session:
        report = load_demo(session, source, problems)
    click.echo(report.describe())
    if not no_serve:
        # The first start would wait a minute for MATH-500's figures; they are drawn while the
        # server already serves (a page that needs one first draws it itself).
        threading.Thread(target=_draw_figures, args=(ctx,), daemon=True).start()
        ctx_click = click.get_current_context()
        ctx_click.invoke(serve, host=host, port=port, workers=1)


@cli.command("figures")
@pass_ctx
def figures(ctx: _Context) -> None:
    """Draw the [asy] figures of all problems into the figure cache (STEPWISE_FIGURES_DIR)."""
    from app.figures.service import asymptote_path

    if asymptote_path(ctx.settings) is None:
        raise click.ClickException("Asymptote is off or not installed (STEPWISE_ASYMPTOTE): figures show as source")
    drawn, failed = _draw_figures(ctx)
    click.echo(f"{drawn} figures drawn or already cached, {failed} could not be drawn")


def _draw_figures(ctx: _Context) -> tuple[int, int]:
    from app.figures.service import draw_all, figure_sources

    with ctx.session() as session:
        sources = figure_sources(session)
    return draw_all(ctx.settings, sources)


def _read_password() -> str:
    if sys.stdin.isatty():
        return click.prompt("Password", hide_input=True, confirmation_prompt=True)
    line = sys.stdin.readline()
    if not line:
        # Nothing piped in (or `< /dev/null`): said as such, not as a password too short.
        raise BadInput("no password on standard input: pipe it in (echo \"$PASSWORD\" | stepwise …) or run "
                       "the command in a terminal to be asked for it")
    return line.rstrip("\r\n")


def _validated(model, given_as: dict[str, str] | None = None, **values):  # type: ignore[no-untyped-def]
    """`model` built from command-line values; an error names the option the user typed
    (`--source`, or `given_as`'s words for a field given otherwise), not the API's field."""
    given_as = given_as or {}

    def option(field: str) -> str:
        head, _, index = field.partition(".")
        name = given_as.get(head, "--" + head.replace("_", "-"))
        # A repeated option's or a comma-list's value, counted from one.
        return f"{name} (value {int(index) + 1})" if index.isdigit() else name

    try:
        return model.model_validate(values, context=AS_TEXT)
    except ValidationError as exc:
        # An error about several arguments at once is named by `given_as[""]`.
        raise _BadArguments("invalid arguments", _details(exc, option, model, given_as.get("", "arguments"))) from exc


def _comma_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()] or None


def _details(exc: ValidationError, name: Callable[[str], str] = str,
             schema: type[BaseModel] | None = None, whole: str = "arguments") -> list[dict[str, str]]:
    return [field_error(e, whole=whole, name=name, schema=schema) for e in exc.errors()]


# The PRM engine's own command group; it imports torch only inside its commands.
cli.add_command(prm)


# -- active learning: rounds, their workers, the simulation and the generator ------------------
# Heavy modules (torch, transformers) are imported inside the commands.


@cli.group(cls=_Group)
def rounds() -> None:
    """Active-learning rounds: train, evaluate, promote, score, select, enqueue."""


@rounds.command("start")
@click.option("--project", "project_name", required=True)
@click.option("--wait", is_flag=True, help="run the round in this process instead of a worker's")
@pass_ctx
def rounds_start(ctx: _Context, project_name: str, wait: bool) -> None:
    """Queue a round for a project (one at a time per project)."""
    from app.projects.service import get_project_by_name
    from app.rounds.jobs import wake_after_commit
    from app.rounds.service import start_round

    with ctx.session() as session:
        round_ = start_round(session, get_project_by_name(session, project_name))
        if not wait:
            # This process runs it; should it die, the workers' sweep finds the round queued.
            wake_after_commit(session, round_.id)
        round_id, number = round_.id, round_.number
    click.echo(f"round {number} of {project_name} queued (id {round_id})")
    if wait:
        from app.rounds.worker import run_here

        outcome, done = run_here(ctx.settings, round_id, waiting=lambda line: click.echo(line, err=True))
        click.echo(outcome)
        if not done:
            # Failed or cancelled: a script waiting on it must know.
            raise SystemExit(1)


@rounds.command("list")
@click.option("--project", "project_name", required=True)
@pass_ctx
def rounds_list(ctx: _Context, project_name: str) -> None:
    """The project's rounds, newest first."""
    from app.projects.service import get_project_by_name
    from app.rounds.service import list_rounds

    with ctx.session() as session:
        for r in list_rounds(session, get_project_by_name(session, project_name).id):
            labels = "-" if r.snapshot_labels is None else r.snapshot_labels
            click.echo(f"{r.number}\t{r.status_text}\t{r.stage_text}\t{r.percent:.0f}%\t{labels} labels\t{r.message}")


@rounds.command("cancel")
@click.option("--project", "project_name", required=True)
@pass_ctx
def rounds_cancel(ctx: _Context, project_name: str) -> None:
    """Cancel the project's queued or running round; its training stops at the next step, and
    nothing it has not finished is served."""
    from app.projects.service import get_project_by_name
    from app.rounds.service import active_round, cancel_round

    with ctx.session() as session:
        project = get_project_by_name(session, project_name)
        round_ = active_round(session, project.id)
        if round_ is None:
            raise Conflict(f"project {project.name!r} has no round queued or running")
        cancel_round(round_)
        click.echo(f"round {round_.number} of {project.name} cancelled")


@rounds.command("compare")
@click.option("--project", "project_name", required=True)
@click.argument("version_a")
@click.argument("version_b")
@click.option("--json", "as_json", is_flag=True, help="print the whole comparison as JSON")
@pass_ctx
def rounds_compare(ctx: _Context, project_name: str, version_a: str, version_b: str, as_json: bool) -> None:
    """Score model versions VERSION_A and VERSION_B (ids, or `served`) on the project's held-out
    labels as they stand, with a paired 95% interval for each metric's difference, in this
    process (the research page's Compare queues it for a worker); the page and
    GET /api/v1/projects/{id}/model-comparisons keep it. Run it where the checkpoints are."""
    from app.models import ComparisonStatus, ModelComparison
    from app.projects.service import get_project_by_name
    from app.rounds.comparison import metric_differences, request_comparison
    from app.rounds.schemas import ModelComparisonRead
    from app.rounds.service import served_version
    from app.rounds.worker import compare_here

    with ctx.session() as session:
        project = get_project_by_name(session, project_name)
        served = served_version(session, project.id)
        ids = []
        for given in (version_a, version_b):
            if given == "served":
                if served is None:
                    raise Conflict(f"project {project.name!r} serves no model yet")
                ids.append(served.id)
            elif given.isdigit() and 0 < int(given) <= INT32_MAX:
                ids.append(int(given))
            else:
                raise BadInput(f"{given!r} is not a model version: give its id (GET …/model-versions) or `served`")
        comparison_id = request_comparison(session, project.id, *ids).id
    quiet_transformers()
    compare_here(ctx.factory(), comparison_id, waiting=lambda line: click.echo(line, err=True))
    with ctx.session() as session:
        comparison = session.get(ModelComparison, comparison_id)
        assert comparison is not None
        if comparison.status == ComparisonStatus.failed:
            raise BadInput(f"comparison {comparison_id} failed: {comparison.message}")
        if as_json:
            click.echo(ModelComparisonRead.model_validate(comparison).model_dump_json(indent=2))
            return
        click.echo(f"version {ids[0]} (A) against version {ids[1]} (B) on {comparison.heldout_labels} held-out "
                   f"labels of {project.name} (comparison {comparison.id})")
        click.echo("metric\tA\tB\tA - B [95% paired interval]\tverdict")
        for row in metric_differences(comparison.results):
            values = "\t".join("-" if v is None else f"{v:.3f}" for v in (row.a, row.b, row.difference))
            interval = "" if row.ci95 is None else f" [{row.ci95[0]:.3f}, {row.ci95[1]:.3f}]"
            click.echo(f"{row.metric}\t{values}{interval}\t{row.verdict}")


@cli.command("worker")
@click.option("--once", is_flag=True, help="run the rounds waiting now, then exit")
@click.option("--metrics-port", type=IntRange(1, 65535), default=None, help="serve this worker's round metrics for Prometheus on this port")
@click.option("--metrics-host", default=None, help="address the metrics port listens on  [default: 127.0.0.1]")
@pass_ctx
def worker(ctx: _Context, once: bool, metrics_port: int | None, metrics_host: str | None) -> None:
    """Run rounds: procrastinate's worker on PostgreSQL, a polling loop on SQLite."""
    import logging.config

    if metrics_host is not None and metrics_port is None:
        raise click.UsageError("--metrics-host says where the metrics port listens: give --metrics-port too")
    metrics_host = metrics_host or "127.0.0.1"

    from app.ops.logs import logging_config
    from app.rounds.worker import run_worker, wait_for_database

    logging.config.dictConfig(logging_config(ctx.settings.log_format, access_log=False))
    # A PostgreSQL that is down or closed to connections is waited for, as the server waits
    # for it (one started with it, or restarted in an outage); --once runs what waits now, and
    # exits if it cannot. SIGTERM or SIGINT meanwhile ends the wait.
    if not once and not wait_for_database(ctx.settings):
        return
    # The database checked as every other command checks it: a worker started before `db
    # upgrade`, or with a wrong URL, says so in a line instead of a traceback, and a mistyped
    # SQLite path is not created empty. The worker opens its own engine, so the check's
    # connection is closed.
    ctx.factory().kw["bind"].dispose()
    if metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            start_http_server(metrics_port, metrics_host)
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on {metrics_host}:{metrics_port} for metrics: {exc.strerror or exc}") from None
    run_worker(ctx.settings, once=once)


@cli.command("simulate")
@click.option("--protocol", type=click.Choice(["iterative", "paper"]), default="iterative", show_default=True, help="iterative: the platform's retrain-every-round arms; paper: Lightman et al.'s fixed-selector ladder (active_learning.experiment)")
@click.option("--output", default=None, type=click.Path(dir_okay=False, path_type=Path), help="JSON results, an SVG beside it (default bench/results/active_learning.json for paper, active_learning_iterative.json for iterative)")
@click.option("--seed", default=0, show_default=True, help="seed of the pool, the held-out set and training (paper: the first seed)")
@click.option("--rounds", "n_rounds", default=None, type=int, help="iterative: rounds after the seed round")
@click.option("--seed-labels", default=None, type=IntRange(1), help="iterative: uniform labels both arms start from")
@click.option("--labels-per-round", default=None, type=int, help="iterative: new labels each round")
@click.option("--epochs", default=None, type=FloatRange(0, min_open=True), help="iterative: training passes over an arm's labels each round")
@click.option("--pool-problems", default=None, type=IntRange(1))
@click.option("--score", type=click.Choice(["product", "minimum"]), default=None, help="solution score the active arm ranks by (default: product)")
@click.option("--errors", default=None, help="kinds of injected mistakes, comma-separated, from result,operand,carry,remark,restate")
@click.option("--pretrain-steps", default=None, type=IntRange(0), help="pretrain the base this many steps first (0: none)")
@click.option("--train-steps", default=None, type=IntRange(0), help="optimizer steps of every PRM (iterative: 0 uses --epochs)")
@click.option("--base", default=None, help="PRM backbone: a preset (tiny, 100m, 500m) or a directory")
@click.option("--pool-size", default=None, type=IntRange(1), help="paper: candidates per pool problem (K, default 64)")
@click.option("--ladder", default=None, help="paper: samples per problem at each rung (default 1,2,4)")
@click.option("--seeds", default=None, type=IntRange(1), help="paper: seeds run (default 3)")
@click.option("--arms", default=None, help="paper: arms, from active,uniform,retrain,uncertainty,mixed,warm (default: all but mixed and warm)")
@click.option("--selector-labels", default=None, type=IntRange(1), help="paper: uniform samples per problem the fixed selector learns from")
@click.option("--wrong-share", default=None, type=FloatRange(0, 1), help="paper: share of active picks that are convincing wrong answers")
@click.option("--warm-labels", default=None, type=IntRange(1), help="paper: uniform samples per problem the warm arm draws before it picks by a selector trained on them (default 4)")
@click.option("--control-share", default=None, type=FloatRange(0, 1), help="paper: share of the mixed arm's picks drawn uniformly first, as a round's control slice (default 0.1)")
@click.option("--metric", type=click.Choice(["best_of_n", "step_auroc", "first_error_f1"]), default=None, help="paper: quality the ratio is read from (default best_of_n)")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None, help="paper: where to train and score (default auto)")
@click.option("--jobs", default=None, type=IntRange(1), help="paper: seeds run at once, each in a process of its own (default 3)")
@click.option("--bases", default=None, type=click.Path(file_okay=False), help="paper: directory keeping each seed's pretrained base for later runs, reused when its settings match")
@click.option("--ablations", default="", help="paper: named ablations to run beside it, comma-separated, from pool_16,selector_4_labels,wrong_share_half,minimum_score,control_half")
@click.option("--quick", is_flag=True, help="a smoke run of seconds to minutes, not a measurement")
def simulate(protocol: str, output: Path | None, seed: int, quick: bool, ablations: str, **options: Any) -> None:
    """Active learning against uniform selection on synthetic data with an oracle labeler."""
    if output is None:
        output = Path("bench/results") / ("active_learning.json" if protocol == "paper" else "active_learning_iterative.json")
    else:
        from app.ops.files import output_file

        # Checked now: the run takes minutes to hours before it writes.
        output = output_file(output)
    iterative_only = {"n_rounds", "seed_labels", "labels_per_round", "epochs"}
    paper_only = {"pool_size", "ladder", "seeds", "arms", "selector_labels", "wrong_share", "control_share", "metric",
                  "device", "jobs", "bases", "warm_labels"}
    given = {k for k, v in options.items() if v is not None}
    wrong = given & (iterative_only if protocol == "paper" else paper_only)
    if wrong or (ablations and protocol != "paper"):
        names = sorted("--" + ("rounds" if k == "n_rounds" else k).replace("_", "-") for k in wrong)
        raise click.ClickException(f"not an option of --protocol {protocol}: {', '.join(names or ['--ablations'])}")
    overrides = {("rounds" if k == "n_rounds" else k): options[k] for k in given}
    if protocol == "paper":
        from active_learning.experiment import ExperimentConfig, check_ablations
        from active_learning.experiment import run_and_report as run_experiment

        config = ExperimentConfig.quick(seed) if quick else ExperimentConfig(seed=seed)
        names = [n.strip() for n in ablations.split(",") if n.strip()]
        try:
            config = config.replace(**overrides)
            check_ablations(names)
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        with _diverged_as_message():
            click.echo(run_experiment(config, output, names, log=lambda line: click.echo(line, err=True)))
        return
    from active_learning.simulate import SimulationConfig, run_and_report

    config = SimulationConfig.quick(seed) if quick else SimulationConfig(seed=seed)
    try:
        config = config.replace(**overrides)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    with _diverged_as_message():
        click.echo(run_and_report(config, output))


@contextlib.contextmanager
def _diverged_as_message() -> Iterator[None]:
    """A run whose loss went NaN ends with the trainer's message (step, rate, what to change)."""
    from active_learning.train import TrainingDiverged

    try:
        yield
    except TrainingDiverged as e:
        raise click.ClickException(str(e)) from None


@cli.command("generate")
@click.option("--project", "project_name", required=True)
@click.option("--model", "model_name", required=True, help="a local directory or a hub id of a causal LM")
@click.option("--samples", default=4, show_default=True, type=IntRange(1, 1000), help="solutions per problem")
@click.option("--max-new-tokens", default=512, show_default=True, type=IntRange(1, 32768))
@click.option("--temperature", default=0.7, show_default=True, type=FloatRange(0, 5))
@click.option("--top-p", default=0.95, show_default=True, type=FloatRange(0, 1))
@click.option("--seed", default=0, show_default=True)
@click.option("--limit", default=None, type=IntRange(1), help="only the first N problems")
@pass_ctx
def generate(ctx: _Context, project_name: str, model_name: str, samples: int, max_new_tokens: int, temperature: float, top_p: float, seed: int, limit: int | None) -> None:
    """Sample solutions to the project's problems, grade them and add them to the pool."""
    from active_learning.generate import GenerationConfig
    from active_learning.generator_spec import local_model_path
    from app.rounds.generation import generate_for_project
    from app.projects.service import get_project_by_name

    # As autolabel's: a path that is not a directory must not become a hub download.
    try:
        model_name = local_model_path(model_name)
    except ValueError as e:
        raise BadInput(str(e)) from None
    config = GenerationConfig(model=model_name, samples=samples, max_new_tokens=max_new_tokens,
                              temperature=temperature, top_p=top_p, seed=seed)
    with ctx.session() as session:
        result = generate_for_project(session, get_project_by_name(session, project_name), config, limit=limit)
        click.echo(result.summary())


def main() -> None:
    cli(prog_name="stepwise")
