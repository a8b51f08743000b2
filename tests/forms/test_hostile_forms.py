"""Every form of the pages answers whatever is typed into it without a 500.

Hypothesis fills each form's fields with arbitrary text and with the values that break things
(a NUL character, which PostgreSQL text cannot hold; numbers past every column; markup), posted
as an admin, who passes every role check, on both databases.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.exports.pages import ExportForm
from app.models import Problem
from app.projects.pages import SettingsForm as ProjectSettingsForm
from app.rounds.pages import SettingsForm as RoundSettingsForm
from tests.conftest import browser_login, make_project, make_user

pytestmark = pytest.mark.timeout(1800)

HOSTILE = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "0",
    "-1",
    "1.5",
    "1e309",
    "nan",
    "inf",
    "99999999999999999999",
    str(2**31),
    "７",
    "<script>alert(1)</script>",
    "first_error",
    "full",
    "labeler",
    "admin",
    "true",
]
values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40))

# (path, fields); {project} and {user} are filled in. Fields come from each form's own model
# where it has one, so that a field added there is fuzzed too.
FORMS = [
    ("/manage/projects", list(ProjectSettingsForm.model_fields)),
    ("/manage/projects/{project}/settings", list(ProjectSettingsForm.model_fields)),
    ("/research/projects/{project}/settings", list(RoundSettingsForm.model_fields)),
    ("/admin/users", ["username", "role", "password"]),
    ("/admin/users/{user}/role", ["role"]),
    ("/admin/users/{user}/active", ["is_active"]),
]

FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def admin_client(client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "form-admin", "admin")
    csrf = browser_login(client, "form-admin")
    return client, csrf


@pytest.mark.parametrize("path, fields", FORMS, ids=[path for path, _ in FORMS])
def test_a_form_answers_anything_without_a_500(admin_client, session_factory, path, fields):  # type: ignore[no-untyped-def]
    client, csrf = admin_client
    project = make_project(session_factory, "typed-into")
    other = make_user(session_factory, "someone", "labeler")
    url = path.format(project=project.id, user=other.id)

    @given(form=st.fixed_dictionaries({field: values for field in fields}))
    @FUZZ
    def post(form: dict[str, str]) -> None:
        response = client.post(url, data={**form, "csrf_token": csrf}, follow_redirects=False)
        assert response.status_code < 500, (form, response.text[:500])

    post()


EXPORT_FIELDS = list(ExportForm.model_fields)


def test_the_export_form_answers_anything_without_a_500(admin_client, session_factory):  # type: ignore[no-untyped-def]
    # A GET form, and the download streams: a filter the database refuses must be caught
    # before the answer starts.
    client, _ = admin_client
    project = make_project(session_factory, "exported-from")
    export_values = st.one_of(values, st.sampled_from(["prm800k", "trl", "parquet", "2026-01-01", "0, 1", "exclude"]))

    @given(form=st.fixed_dictionaries({field: export_values for field in EXPORT_FIELDS}))
    @FUZZ
    def download(form: dict[str, str]) -> None:
        response = client.get(f"/manage/projects/{project.id}/export/download", params=form)
        assert response.status_code < 500, (form, response.text[:500])

    download()


def test_the_login_form_answers_anything_without_a_500(client, session_factory):  # type: ignore[no-untyped-def]
    make_user(session_factory, "someone", "labeler")

    @given(username=values, password=values, next_path=values)
    @FUZZ
    def login(username: str, password: str, next_path: str) -> None:
        # A fresh form each time: the login token is good for one attempt.
        page = client.get("/login")
        token = page.text.split('name="login_csrf" value="', 1)[1].split('"', 1)[0]
        data = {"username": username, "password": password, "login_csrf": token, "next": next_path}
        response = client.post("/login", data=data, follow_redirects=False)
        assert response.status_code < 500, (data, response.text[:500])

    login()


def test_the_import_form_answers_any_file_without_a_500(admin_client, session_factory):  # type: ignore[no-untyped-def]
    client, csrf = admin_client
    project = make_project(session_factory, "imported-into")

    @given(
        content=st.one_of(
            st.binary(max_size=300),
            st.sampled_from(
                [
                    b'{"problem": "x\\u0000", "answer": "1"}\n',
                    b'{"problem": "1+1", "answer": "2"}\n' * 3,
                    b"\xff\xfe\x00\x00",
                    b'{"question": {"problem": "p"}, "label": {"steps": "no"}}\n',
                ]
            ),
        ),
        fmt=st.one_of(st.sampled_from(["prm800k", "math", "solutions"]), values),
        separator=values,
    )
    @FUZZ
    def upload(content: bytes, fmt: str, separator: str) -> None:
        response = client.post(
            f"/manage/projects/{project.id}/import",
            data={"format": fmt, "separator": separator, "csrf_token": csrf},
            files={"file": ("typed.jsonl", content, "application/octet-stream")},
            follow_redirects=False,
        )
        assert response.status_code < 500, (content, fmt, separator, response.text[:500])

    upload()
    # And a good file still goes in after all that.
    good = client.post(
        f"/manage/projects/{project.id}/import",
        data={"format": "math", "csrf_token": csrf},
        files={"file": ("good.jsonl", b'{"problem": "2+2", "answer": "4"}\n', "application/json")},
        follow_redirects=False,
    )
    assert good.status_code == 200, good.text[:500]
    with session_factory() as session:
        assert session.scalar(select(Problem.statement).where(Problem.statement == "2+2")) == "2+2"
