"""The manager's project pages over HTTP: create, settings, progress; bad input never a 500."""

from __future__ import annotations

import html
import re
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import func, select

from app.db import session_scope
from app.models import Assignment, LabelingMode, Project
from app.projects.pages import CHART_HEIGHT, daily_bars
from app.projects.schemas import DailyCount
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.forms.shipped import form_fields
from tests.imports.conftest import SAMPLE, import_bytes, jsonl

PROBLEMS = [
    {"problem": f"What is ${n} + {n}$?", "answer": str(2 * n), "solution": f"${2 * n}$"}
    for n in range(1, 4)
]


def _solutions(n_per_problem: int = 2) -> bytes:
    return jsonl(
        [
            {"problem": p["problem"], "steps": [f"Step one of {k}.", f"So it is {k}.", f"# Answer\n\n{k}"], "answer": str(k)}
            for p in PROBLEMS
            for k in range(n_per_problem)
        ]
    )


def _project(factory, name: str = "algebra") -> Project:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalars(select(Project).where(Project.name == name)).one()


def _projects(factory) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalar(select(func.count()).select_from(Project)) or 0


def _stats(html: str) -> dict[str, int]:
    return {
        dt: int(dd)
        for dt, dd in re.findall(r"<dt>([^<]+)</dt><dd>(\d+)</dd>", html)
    }


@pytest.fixture
def manager(client, session_factory) -> str:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    return browser_login(client, "max")


def test_a_manager_creates_a_project_through_the_form(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        "/manage/projects",
        data={
            "csrf_token": manager, "name": "Geometry 2", "description": "Triangles",
            "labeling_mode": "full", "overlap": "3", "lease_minutes": "45",
        },
        follow_redirects=False,
    )
    assert response.status_code == 303
    project = _project(session_factory, "Geometry 2")
    assert response.headers["location"] == f"/manage/projects/{project.id}"
    assert (project.description, project.labeling_mode, project.overlap, project.lease_minutes) == (
        "Triangles", LabelingMode.full, 3, 45,
    )
    page = client.get(response.headers["location"])
    assert page.status_code == 200
    assert "<h1>Geometry 2" in page.text
    listing = client.get("/manage/projects")
    assert f'href="/manage/projects/{project.id}"' in listing.text
    assert project.open_to_all


def test_a_project_can_be_members_only_from_its_creation(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    # Made open and restricted after, it was open to every labeler in between.
    form = client.get("/manage/projects").text
    assert 'name="open_to_all" value="true" checked' in form and 'name="open_to_all" value="false">' in form
    response = client.post("/manage/projects", follow_redirects=False, data={
        "csrf_token": manager, "name": "Closed", "open_to_all": "false", "overlap": "2", "lease_minutes": "30"})
    assert response.status_code == 303
    assert not _project(session_factory, "Closed").open_to_all
    assert "members only" in client.get(response.headers["location"]).text
    refused = client.post("/manage/projects", data={"csrf_token": manager, "name": "Ajar", "open_to_all": "maybe"})
    assert refused.status_code == 422 and "The project was not created" in refused.text
    assert _projects(session_factory) == 1


@pytest.mark.parametrize(
    ("form", "field_message"),
    [
        ({"name": ""}, "Needs a value"),
        ({"name": "no/slashes"}, "Use only 1-100 letters (A-Z, without accents), digits, space, _ . -, the first a letter or digit"),
        ({"name": "ok", "overlap": "0"}, "be at least 1"),
        ({"name": "ok", "overlap": "many"}, "Must be a whole number"),
        # Emptied, as the settings form refuses it, not made with the default.
        ({"name": "ok", "lease_minutes": ""}, "Needs a value"),
        ({"name": "ok", "qc_rate": "nan"}, "Must be a finite number"),
        # Sixty digits: answered next to the field, not with a bare error page.
        ({"name": "ok", "overlap": "9" * 60}, "be at most 20"),
        ({"name": "ok", "lease_minutes": "100000"}, "be at most 1440"),
        ({"name": "ok", "labeling_mode": "whenever"}, "'first_error', 'full' or 'phase1'"),
        ({"name": "x" * 101}, "Must be at most 100 characters long"),
    ],
)
def test_bad_new_project_fields_are_shown_and_nothing_is_created(client, session_factory, manager, form, field_message) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/manage/projects", data={"csrf_token": manager, **form})
    assert response.status_code == 422
    assert "The project was not created" in response.text
    bad_field = list(form)[-1]
    shown = html.unescape(response.text).split(f'id="{bad_field}-error">', 1)[1].split("<", 1)[0]
    assert field_message in shown
    assert _projects(session_factory) == 0


def test_a_duplicate_project_name_is_refused_with_409(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "algebra")
    response = client.post("/manage/projects", data={"csrf_token": manager, "name": "algebra"})
    assert response.status_code == 409
    assert "A project named 'algebra' already exists" in html.unescape(response.text)
    assert _projects(session_factory) == 1


def test_markup_in_a_description_is_shown_as_text(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "algebra", description="<script>alert(1)</script> & <b>bold</b>")
    page = client.get(f"/manage/projects/{_project(session_factory).id}")
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page.text


def test_the_settings_form_saves_and_a_larger_overlap_adds_queue_slots(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", description="old")
    import_bytes(session_factory, project, jsonl(PROBLEMS), "math")
    import_bytes(session_factory, project, _solutions(), "solutions")
    response = client.post(
        f"/manage/projects/{project.id}/settings",
        data={"csrf_token": manager, "description": "", "labeling_mode": "full", "overlap": "2", "lease_minutes": "10"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    saved = client.get(response.headers["location"])
    assert "Settings saved." in saved.text
    project = _project(session_factory)
    assert (project.description, project.labeling_mode, project.overlap, project.lease_minutes) == (
        "", LabelingMode.full, 2, 10,
    )
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)) == 12


@pytest.mark.parametrize(
    ("form", "field_message"),
    [
        ({"overlap": "21"}, "be at most 20"),
        ({"lease_minutes": "0"}, "be at least 1"),
        ({"labeling_mode": "sometimes"}, "'first_error', 'full' or 'phase1'"),
        ({"description": "d" * 5001}, "at most 5000 characters"),
        ({"description": "d" * 20_000}, "at most 5000 characters"),
        # As an import refuses it: labelers read the guidelines, reordered after the override.
        ({"guidelines": "Mark \u202edrawkcab"}, "bidirectional override, embedding or isolate character"),
        # Emptied, a setting that cannot be empty stayed as stored under "saved".
        ({"correction_window_hours": ""}, "Needs a value"),
        ({"overlap": "21", "lease_minutes": ""}, "Needs a value"),
    ],
)
def test_bad_settings_are_shown_and_change_nothing(client, session_factory, manager, form, field_message) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", description="kept", overlap=2)
    response = client.post(
        f"/manage/projects/{project.id}/settings",
        data={"csrf_token": manager, "description": "changed", "overlap": "3", **form},
    )
    assert response.status_code == 422
    assert "The settings were not saved" in response.text
    bad_field = list(form)[-1]
    shown = html.unescape(response.text).split(f'id="{bad_field}-error">', 1)[1].split("<", 1)[0]
    assert field_message in shown
    project = _project(session_factory)
    assert (project.description, project.overlap) == ("kept", 2)


STORED = {"description": "kept", "overlap": 2, "lease_minutes": 45, "qc_rate": 0.25, "qc_feedback": True,
          "labeling_mode": LabelingMode.full}


def _settings(factory) -> dict[str, object]:  # type: ignore[no-untyped-def]
    project = _project(factory)
    return {name: getattr(project, name) for name in STORED}


def test_a_field_left_out_keeps_its_setting_and_one_emptied_clears_it(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", **STORED)
    url = f"/manage/projects/{project.id}/settings"
    partial = client.post(url, data={"csrf_token": manager, "overlap": "3"}, follow_redirects=False)
    assert partial.status_code == 303
    assert _settings(session_factory) == {**STORED, "overlap": 3}

    # The form as shipped sends every field, so one the manager emptied arrives empty.
    shipped = form_fields(client.get(f"/manage/projects/{project.id}").text, url)
    assert shipped["description"] == "kept" and shipped["labeling_mode"] == "full"
    emptied = client.post(url, data={**shipped, "description": ""}, follow_redirects=False)
    assert emptied.status_code == 303
    assert _settings(session_factory) == {**STORED, "overlap": 3, "description": ""}


def test_the_settings_form_renames_the_project_or_says_why_not(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", **STORED)
    make_project(session_factory, "geometry")
    url = f"/manage/projects/{project.id}/settings"
    shipped = form_fields(client.get(f"/manage/projects/{project.id}").text, url)
    assert shipped["name"] == "algebra"
    taken = client.post(url, data={**shipped, "name": "Geometry", "overlap": "3"})
    assert taken.status_code == 409
    shown = html.unescape(taken.text).split('id="name-error">', 1)[1].split("<", 1)[0]
    assert "A project named 'geometry' already exists: names may not differ only in case" in shown
    assert form_fields(taken.text, url)["name"] == "Geometry"
    assert _project(session_factory).name == "algebra" and _settings(session_factory) == STORED
    # Typed with a space at an end, as a form field is easily left.
    renamed = client.post(url, data={**shipped, "name": " Algebra II "}, follow_redirects=False)
    assert renamed.status_code == 303
    renamed_project = _project(session_factory, "Algebra II")
    assert {name: getattr(renamed_project, name) for name in STORED} == STORED


def test_a_refused_partial_post_shows_the_stored_settings_it_left_out(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", **STORED)
    url = f"/manage/projects/{project.id}/settings"
    refused = client.post(url, data={"csrf_token": manager, "overlap": "99"})
    assert refused.status_code == 422
    shown = form_fields(refused.text, url)
    assert (shown["overlap"], shown["description"], shown["lease_minutes"], shown["qc_feedback"]) == ("99", "kept", "45", "true")
    assert _settings(session_factory) == STORED


@pytest.mark.parametrize(
    ("method", "path", "message"),
    [
        ("GET", "/manage/projects/999", "no project with id 999"),
        ("POST", "/manage/projects/999/settings", "no project with id 999"),
        ("GET", "/manage/projects/999/import", "no project with id 999"),
        ("POST", "/manage/projects/999/import", "no project with id 999"),
        ("GET", "/manage/projects/999/export", "no project with id 999"),
        ("GET", "/manage/projects/999/export/download", "no project with id 999"),
        # An address that cannot hold an id names nothing, as on any page.
        ("GET", "/manage/projects/abc", "there is nothing at /manage/projects/abc"),
        ("POST", "/manage/projects/abc/settings", "there is nothing at /manage/projects/abc/settings"),
        ("GET", "/manage/projects/99999999999999999999999", "there is nothing at /manage/projects/9999"),
        ("GET", "/label/0", "there is nothing at /label/0"),
        ("GET", "/label/labels/abc", "there is nothing at /label/labels/abc"),
    ],
)
def test_unknown_and_malformed_project_ids_get_a_clear_404(client, session_factory, manager, method, path, message) -> None:  # type: ignore[no-untyped-def]
    response = client.request(method, path, data={"csrf_token": manager} if method == "POST" else None)
    assert response.status_code == 404
    assert message in response.text
    assert "<h1>" in response.text, "an error page, not a bare error"


def test_an_unknown_address_keeps_the_visitors_menu(client, manager) -> None:  # type: ignore[no-untyped-def]
    page = client.get("/manage/projets")
    assert page.status_code == 404
    assert "there is nothing at /manage/projets" in page.text
    assert "Log out" in page.text and "Back to the start page" in page.text
    client.cookies.clear()
    anonymous = client.get("/manage/projets")
    assert anonymous.status_code == 404 and "Log out" not in anonymous.text and 'href="/login"' in anonymous.text
    api = client.get("/api/v1/no-such-thing")
    assert api.status_code == 404 and api.json() == {"detail": "there is nothing at /api/v1/no-such-thing"}


def test_progress_numbers_and_the_labels_chart(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", overlap=2)
    make_project(session_factory, "empty one")
    import_bytes(session_factory, project, jsonl(PROBLEMS), "math")
    import_bytes(session_factory, project, _solutions(), "solutions")
    for name in ("ann", "bob"):
        make_user(session_factory, name, "labeler")
    # ann finishes two solutions, bob labels one of those too, and holds another one.
    done_by_both: list[int] = []
    for name, count in (("ann", 2), ("bob", 1)):
        headers = api_headers(client, name)
        for n in range(count):
            task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
            done_by_both.append(task["solution"]["id"])
            submitted = client.post(
                f"/api/v1/assignments/{task['assignment_id']}/submit",
                headers=headers,
                json={"idempotency_key": f"{name}-label-{n}", "ratings": [{"rating": 1}] * 3,
                      "finish_reason": "solution", "total_time_ms": 1000},
            )
            assert submitted.status_code == 200, submitted.text
    held = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(client, "bob"))
    touched = set(done_by_both) | {held.json()["task"]["solution"]["id"]}
    fully_done = len(done_by_both) - len(set(done_by_both))

    page = client.get(f"/manage/projects/{project.id}")
    assert page.status_code == 200
    stats = _stats(page.text)
    assert stats["Problems"] == 3 and stats["Solutions"] == 6 and stats["Labels"] == 3
    assert stats["Done"] == fully_done
    assert stats["In progress"] == len(touched) - fully_done
    assert stats["Not started"] == 6 - len(touched)
    # Twelve slots at overlap 2, three labeled: bob's lease in hand still waits for its label.
    assert stats["Labels to go"] == 12 - 3
    today = datetime.now(UTC).date().isoformat()
    assert f"<title>{today}: 3 labels</title>" in page.text
    assert page.text.count('<td class="filename"') == 2, "both imported files are listed"

    listing = client.get("/manage/projects")
    row = listing.text.split(f'href="/manage/projects/{project.id}"', 1)[1].split("</tr>", 1)[0]
    numbers = [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', row)]
    assert numbers == [2, 3, 6, stats["Done"], stats["In progress"], stats["Not started"], 3]


def test_a_chart_without_the_imported_labels_dates_says_why(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "imported")
    empty = client.get(f"/manage/projects/{project.id}").text
    assert "No labels in these days." in empty and "file's date" not in empty
    # PRM800K's labels were made years ago: the last two weeks show none of them.
    import_bytes(session_factory, project, SAMPLE.read_bytes(), "prm800k")
    page = html.unescape(client.get(f"/manage/projects/{project.id}").text)
    assert "No labels in these days (a label counts on the day it was made; an imported one on its file's date)." in page


def test_daily_bars_fill_missing_days_and_scale_to_the_busiest() -> None:
    today = date(2026, 3, 10)
    bars = daily_bars(
        [DailyCount(day=date(2026, 3, 8), labels=4), DailyCount(day=today, labels=2)], today, days=5
    )
    assert [b["day"].day for b in bars] == [6, 7, 8, 9, 10]
    assert [b["labels"] for b in bars] == [0, 0, 4, 0, 2]
    assert [b["height"] for b in bars] == [0, 0, CHART_HEIGHT, 0, CHART_HEIGHT / 2]
    assert all(b["height"] == 0 for b in daily_bars([], today))
    # A labeler's small bars: a day with one label beside a busy one still shows.
    small = daily_bars([DailyCount(day=date(2026, 3, 9), labels=500), DailyCount(day=today, labels=1)], today,
                       days=3, height=19, least=2)
    assert [b["height"] for b in small] == [0, 19, 2]


def test_a_researcher_sees_progress_but_no_forms(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra")
    make_user(session_factory, "rhea", "researcher")
    csrf = browser_login(client, "rhea")
    listing = client.get("/manage/projects")
    assert listing.status_code == 200 and "algebra" in listing.text
    assert 'action="/manage/projects"' not in listing.text
    page = client.get(f"/manage/projects/{project.id}")
    assert page.status_code == 200
    assert "/settings" not in page.text and "Labeling mode</dt>" in page.text
    assert f'href="/manage/projects/{project.id}/import"' not in page.text
    assert client.get(f"/manage/projects/{project.id}/export").status_code == 200
    assert client.post("/manage/projects", data={"csrf_token": csrf, "name": "mine"}).status_code == 403
    assert client.get(f"/manage/projects/{project.id}/import").status_code == 403
    assert _projects(session_factory) == 1


def test_a_form_opened_before_a_colleagues_change_saves_only_its_own(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    # The form posts every field: opened before a colleague set overlap and QC over the API, it
    # put them back when its manager saved a new description.
    project = make_project(session_factory, "algebra", **STORED)
    url = f"/manage/projects/{project.id}/settings"
    opened = form_fields(client.get(f"/manage/projects/{project.id}").text, url)
    make_user(session_factory, "mia", "manager")
    mia = api_headers(client, "mia")
    assert client.patch(f"/api/v1/projects/{project.id}", headers=mia,
                        json={"overlap": 3, "qc_rate": 0.5}).status_code == 200
    saved = client.post(url, data={**opened, "description": "mine"}, follow_redirects=False)
    assert saved.status_code == 303
    assert _settings(session_factory) == {**STORED, "overlap": 3, "qc_rate": 0.5, "description": "mine"}

    # Both changed the same setting: nothing is saved, the field says what it is now, and
    # saving the form as shown again keeps this manager's value.
    opened = form_fields(client.get(f"/manage/projects/{project.id}").text, url)
    assert client.patch(f"/api/v1/projects/{project.id}", headers=mia, json={"overlap": 4}).status_code == 200
    clash = client.post(url, data={**opened, "overlap": "5", "lease_minutes": "50"}, follow_redirects=False)
    assert clash.status_code == 409
    assert "Changed by someone else to “4” while you edited" in html.unescape(clash.text)
    assert "Nothing was saved: someone else changed the settings marked below" in clash.text
    assert _settings(session_factory)["overlap"] == 4 and _settings(session_factory)["lease_minutes"] == 45
    again = form_fields(clash.text, url)
    assert (again["overlap"], again["lease_minutes"]) == ("5", "50")
    assert client.post(url, data=again, follow_redirects=False).status_code == 303
    assert _settings(session_factory) == {**STORED, "overlap": 5, "lease_minutes": 50, "qc_rate": 0.5,
                                          "description": "mine"}


def test_a_patch_with_if_match_refuses_to_overwrite_a_change_it_did_not_see(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", **STORED)
    make_user(session_factory, "mia", "manager")
    mia = api_headers(client, "mia")
    url = f"/api/v1/projects/{project.id}"
    read = client.get(url, headers=mia)
    etag = read.headers["etag"]
    changed = client.patch(url, headers={**mia, "If-Match": etag}, json={"overlap": 3})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert client.get(url, headers=mia).headers["etag"] == changed.headers["etag"]
    stale = client.patch(url, headers={**mia, "If-Match": etag}, json={"qc_rate": 0.75})
    assert stale.status_code == 412 and changed.headers["etag"] in stale.json()["detail"]
    assert _settings(session_factory)["qc_rate"] == 0.25, "a refused write changes nothing"
    assert client.patch(url, headers={**mia, "If-Match": "*"}, json={"lease_minutes": 50}).status_code == 200
    assert client.patch(url, headers=mia, json={"lease_minutes": 55}).status_code == 200
    listed = f'"other", W/{client.get(url, headers=mia).headers["etag"]}'
    assert client.patch(url, headers={**mia, "If-Match": listed}, json={"lease_minutes": 60}).status_code == 200
