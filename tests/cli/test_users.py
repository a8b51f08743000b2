"""`stepwise users set-role|deactivate|reactivate|unlock` and `members remove`, through the API's services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.auth import throttle
from app.models import AuditEvent, LoginKeyKind, Role, User, utcnow
from app.users.service import get_user_by_name
from tests.cli.conftest import refused
from tests.conftest import make_project, make_user


def _user(session_factory, username: str) -> User:  # type: ignore[no-untyped-def]
    with session_factory() as session:
        return get_user_by_name(session, username)


def test_roles_and_active_flags_change(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "root", "admin")
    make_user(session_factory, "ann", "labeler")
    done = stepwise(database_url, "users", "set-role", "--username", "ann", "--role", "manager")
    assert done.exit_code == 0 and "ann is now manager" in done.stdout
    assert _user(session_factory, "ann").role == Role.manager
    assert stepwise(database_url, "users", "deactivate", "--username", "ann").exit_code == 0
    assert not _user(session_factory, "ann").is_active
    assert stepwise(database_url, "users", "reactivate", "--username", "ann").exit_code == 0
    assert _user(session_factory, "ann").is_active
    refused(stepwise(database_url, "users", "deactivate", "--username", "nobody"), "no user named 'nobody'")


def test_the_last_active_admin_stays(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "root", "admin")
    make_user(session_factory, "boss", "admin")
    assert stepwise(database_url, "users", "deactivate", "--username", "boss").exit_code == 0
    refused(stepwise(database_url, "users", "deactivate", "--username", "root"), "root is the last active admin")
    refused(stepwise(database_url, "users", "set-role", "--username", "root", "--role", "labeler"), "last active admin")
    root = _user(session_factory, "root")
    assert root.role == Role.admin and root.is_active


def test_removing_a_non_member_names_them(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "P1", open_to_all=False)
    make_user(session_factory, "bob", "labeler")
    refused(stepwise(database_url, "members", "remove", "--project", project.name, "--username", "bob"),
            "user bob is not a member of P1")


def test_a_deactivated_user_gets_no_token(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    assert stepwise(database_url, "users", "deactivate", "--username", "ann").exit_code == 0
    refused(stepwise(database_url, "tokens", "create", "--username", "ann"), "ann is deactivated")
    assert stepwise(database_url, "users", "reactivate", "--username", "ann").exit_code == 0
    assert stepwise(database_url, "tokens", "create", "--username", "ann").exit_code == 0


def test_tokens_are_listed_and_revoked_by_id(stepwise, database_url, session_factory, client) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    made = stepwise(database_url, "tokens", "create", "--username", "ann", "--name", "notebook", "--expires-in-days", "30")
    assert made.exit_code == 0
    token = made.stdout.strip()
    assert client.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    listed = stepwise(database_url, "tokens", "list", "--username", "ann")
    (line,) = listed.stdout.splitlines()
    token_id, name, _, last_used, expires = line.split("\t")
    assert (name, last_used.endswith("UTC"), expires.endswith("UTC")) == ("notebook", True, True)
    zero = stepwise(database_url, "tokens", "create", "--username", "ann", "--expires-in-days", "0")
    assert zero.exit_code == 2 and "--expires-in-days" in zero.output
    revoked = stepwise(database_url, "tokens", "revoke", "--username", "ann", token_id)
    assert revoked.exit_code == 0 and f"revoked token {token_id} (notebook) of ann" in revoked.stdout
    assert client.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert stepwise(database_url, "tokens", "list", "--username", "ann").stdout == ""
    refused(stepwise(database_url, "tokens", "revoke", "--username", "ann", token_id), "no token")


def test_names_typed_in_another_case_find_their_user_and_project(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "Algebra Set", open_to_all=False)
    make_user(session_factory, "ann", "labeler")
    added = stepwise(database_url, "members", "add", "--project", "algebra set", "--username", "ANN")
    assert added.exit_code == 0 and added.stdout.strip() == "added ann to Algebra Set"
    refused(stepwise(database_url, "members", "add", "--project", "geometry", "--username", "ann"), "no project named 'geometry'")


def test_a_password_missing_from_standard_input_is_said_to_be_missing(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    refused(stepwise(database_url, "users", "create", "--username", "ann", "--role", "labeler"),
            "no password on standard input")
    with session_factory() as session:
        assert session.query(User).count() == 0


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_port_out_of_range_is_a_usage_error(stepwise, database_url, port) -> None:  # type: ignore[no-untyped-def]
    result = stepwise(database_url, "serve", "--port", port)
    assert result.exit_code == 2 and "--port" in result.output and "0<=x<=65535" in result.output



def test_unlock_forgets_failed_logins_of_a_name_or_an_address(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    limits = throttle.Limits(per_username=1, per_address=1, window=timedelta(minutes=15), lockout=timedelta(minutes=15))
    with session_factory.begin() as session:
        throttle.record_failure(session, throttle.keys_for("ann", "10.0.0.7", limits), limits, utcnow())
    with session_factory() as session:
        assert set(throttle.locks(session, LoginKeyKind.username, utcnow())) == {"ann"}
    assert stepwise(database_url, "users", "unlock", "--username", "ANN").stdout == \
        "ann: failed logins forgotten; logins are let in at once\n"
    assert stepwise(database_url, "users", "unlock", "--username", "ann").stdout == "ann: no failed logins to forget\n"
    assert stepwise(database_url, "users", "unlock", "--address", "10.0.0.7").stdout.startswith("10.0.0.7: failed logins forgotten")
    with session_factory() as session:
        assert not throttle.locks(session, LoginKeyKind.address, utcnow())
        unlocked = session.execute(select(AuditEvent.action, AuditEvent.target).order_by(AuditEvent.id)).all()[-2:]
    assert unlocked == [("user.unlocked", "user ann"), ("address.unlocked", "address 10.0.0.7")]
    neither = stepwise(database_url, "users", "unlock")
    assert neither.exit_code == 2 and "name one of --username and --address" in neither.stderr
    typo = stepwise(database_url, "users", "unlock", "--address", "10.0.0.700")
    assert typo.exit_code == 2 and "'10.0.0.700' is not an IP address" in typo.stderr
    refused(stepwise(database_url, "users", "unlock", "--username", "nobody"), "no user named 'nobody'")


def test_create_many_reads_names_and_prints_each_password_once(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "taken", "labeler")
    result = stepwise(database_url, "users", "create-many", "--role", "labeler", "-", input="ann\n\n bob \n")
    assert result.exit_code == 0, result.output
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert [name for name, _ in lines] == ["ann", "bob"] and all(len(password) >= 12 for _, password in lines)
    assert "created 2 labelers" in result.stderr
    assert _user(session_factory, "bob").role == Role.labeler
    refused(stepwise(database_url, "users", "create-many", "--role", "labeler", "-", input="cy\ntaken\n"),
            "no user was created", "<stdin>:2 a user named 'taken' already exists", status=2)
    refused(stepwise(database_url, "users", "create-many", "--role", "labeler", "-", input="cy\nno way\n"),
            "<stdin>:2 'no way' cannot be a username", status=2)
    admins = stepwise(database_url, "users", "create-many", "--role", "admin", "-", input="cy\n")
    assert admins.exit_code == 2 and "'admin' is not one of" in admins.stderr


def test_create_many_names_every_bad_name_at_once_by_its_line(stepwise, database_url, session_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "taken", "labeler")
    names = tmp_path / "team.txt"
    # A BOM, as Notepad writes one: it was read as part of the first name, which was refused.
    names.write_bytes("\ufeffann\n\nbad name!\nTAKEN\n\nANN\nbo\n".encode())
    result = stepwise(database_url, "users", "create-many", "--role", "labeler", names)
    # Every problem in one answer (the malformed name hid the others until it was fixed), each
    # by the file's line: the blank lines shifted the count.
    refused(result, "no user was created: 3 of the names cannot be used", status=2)
    assert result.stderr.splitlines()[1:] == [
        f"  {names}:3 'bad name!' cannot be a username: use only 2-64 letters (A-Z, without accents), digits, _ . -",
        f"  {names}:4 a user named 'taken' already exists",
        f"  {names}:6 'ANN' is listed already, on line 1",
    ], result.stderr
    with session_factory() as session:
        assert session.scalar(select(User).where(User.username == "ann")) is None
    names.write_bytes("\ufeffann\n\nbo\n".encode())
    made = stepwise(database_url, "users", "create-many", "--role", "labeler", names)
    assert made.exit_code == 0, made.output
    assert [line.split("\t")[0] for line in made.stdout.splitlines()] == ["ann", "bo"]


def test_users_list_orders_names_in_any_case(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    for name in ("bob", "FINN", "Alice"):
        make_user(session_factory, name, "labeler")
    # Names are one name in any case elsewhere: capitals first (Alice, FINN, bob) read as two lists.
    listed = stepwise(database_url, "users", "list")
    assert [line.split("\t")[1] for line in listed.stdout.splitlines()] == ["Alice", "bob", "FINN"]
