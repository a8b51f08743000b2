"""Guidelines for labelers: written by managers (page, API, CLI), read by labelers as Markdown
with math, never as markup of their own."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.demo.service import DEMO_PROJECT, MATH500, load_demo
from app.models import FinishReason, GuidelinesRead, Project, User
from app.projects.guidelines import GUIDELINES_MAX_LENGTH, guidelines_version, render_guidelines
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.reports.builders import add_problem, label_next

GUIDELINES = """# Rating

Rate **+1** when $\\frac{a}{b} < 1$ holds, and see [the handbook](https://example.org/h).

$$
x^2 + y^2 = z^2
$$
"""


def stored_guidelines(factory, name: str = "algebra") -> str:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalars(select(Project.guidelines).where(Project.name == name)).one()


def test_markdown_renders_with_formulas_left_as_text_for_katex() -> None:
    shown = render_guidelines(GUIDELINES)
    assert "<h3>Rating</h3>" in shown and "<strong>+1</strong>" in shown
    assert '<span class="math" data-display="inline">\\frac{a}{b} &lt; 1</span>' in shown
    assert '<div class="math" data-display="block">\nx^2 + y^2 = z^2\n</div>' in shown
    assert '<a href="https://example.org/h" target="_blank" rel="noopener noreferrer">' in shown


def test_headings_nest_under_the_title_of_the_dialog_or_page_they_are_shown_in() -> None:
    shown = render_guidelines("# Ratings\n\n## Good steps\n\n### Edge cases\n\n#### Notes\n\n###### Aside\n")
    assert shown == "<h3>Ratings</h3>\n<h4>Good steps</h4>\n<h5>Edge cases</h5>\n<h6>Notes</h6>\n<h6>Aside</h6>\n"


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        # Guidelines that start at "##": their top level is still the one under the title.
        ("## Ratings\n\n### Good steps\n", ["h3", "h4"]),
        # A skipped level closes up, and a later heading of the skipped level sits beside it.
        ("# Ratings\n\n### Edge cases\n\n## Good steps\n\n# Review\n", ["h3", "h4", "h4", "h3"]),
        ("## Ratings\n\n#### Notes\n\n###### Aside\n", ["h3", "h4", "h5"]),
        # A first heading deeper than a later one: both are top level, neither under the other.
        ("### Note\n\n# Ratings\n\n## Good steps\n", ["h3", "h3", "h4"]),
        # Setext headings, and one in a quote, take their place in the same outline.
        ("Ratings\n=======\n\n> ### Quoted\n\nSteps\n-----\n", ["h3", "h4", "h4"]),
    ],
)
def test_headings_are_relative_to_the_authors_top_level_and_skip_none(text: str, levels: list[str]) -> None:
    shown = str(render_guidelines(text))
    assert re.findall(r"<(h\d)>", shown) == levels
    assert re.findall(r"</(h\d)>", shown) == levels


def test_a_table_renders_and_prices_stay_text() -> None:
    shown = render_guidelines("| a | b |\n|---|---|\n| 1 | 2 |\n\nbetween $3 and $5")
    assert "<table>" in shown and "<td>2</td>" in shown
    assert "between $3 and $5" in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("See ![the *grid*](https://example.org/grid.png).",
         '<p>See <a class="guidelines-image" href="https://example.org/grid.png" target="_blank" '
         'rel="noopener noreferrer">the <em>grid</em> (image)</a>.</p>'),
        # A badge that links elsewhere: the outer link, named by the image (no link in a link).
        ("[![build](badge.png)](https://example.org/ci)",
         '<p><a href="https://example.org/ci" target="_blank" rel="noopener noreferrer">build (image)</a></p>'),
        ("![$x<y$ and [a](u)](p.png)", '><span class="math" data-display="inline">x&lt;y</span> and a (image)</a>'),
        ("![](grid.png)", '>image</a>'),
        ('![a <b> c](x.png "title")', ">a &lt;b&gt; c (image)</a>"),
        ("![x](javascript:alert(1))", "<p>![x](javascript:alert(1))</p>"),
    ],
)
def test_an_image_is_a_link_named_by_its_alt_text(text: str, shown: str) -> None:
    assert shown in render_guidelines(text)
    assert "<img" not in render_guidelines(text)


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("<script>alert(1)</script>", "<script>"),
        ('<img src=x onerror="alert(1)">', "<img"),
        ("[click](javascript:alert(1))", 'href="javascript'),
        ("[click](data:text/html;base64,PHNjcmlwdD4=)", 'href="data'),
        ("![tracker](https://example.org/pixel.png)", "<img"),
        ("$</span><script>alert(1)</script>$", "<script>"),
    ],
)
def test_markup_in_guidelines_is_never_live(text: str, absent: str) -> None:
    assert absent not in render_guidelines(text)


def test_the_version_follows_the_text() -> None:
    assert guidelines_version(GUIDELINES) == guidelines_version(GUIDELINES)
    assert guidelines_version(GUIDELINES) != guidelines_version(GUIDELINES + ".")


@pytest.fixture
def headers(client, session_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    return api_headers(client, "max")


def test_the_api_writes_reads_and_clears_guidelines(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    created = client.post("/api/v1/projects", headers=headers, json={"name": "algebra", "guidelines": GUIDELINES})
    assert created.status_code == 201, created.text
    assert created.json()["guidelines"] == GUIDELINES
    project_id = created.json()["id"]
    changed = client.patch(f"/api/v1/projects/{project_id}", headers=headers, json={"guidelines": "Be careful."})
    assert changed.status_code == 200 and changed.json()["guidelines"] == "Be careful."
    cleared = client.patch(f"/api/v1/projects/{project_id}", headers=headers, json={"guidelines": ""})
    assert cleared.json()["guidelines"] == ""
    assert stored_guidelines(session_factory) == ""


def test_guidelines_too_long_are_refused_and_change_nothing(client, session_factory, headers) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", guidelines="Kept.")
    response = client.patch(
        f"/api/v1/projects/{project.id}", headers=headers, json={"guidelines": "x" * (GUIDELINES_MAX_LENGTH + 1)}
    )
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["guidelines"]
    assert stored_guidelines(session_factory) == "Kept."


def test_the_settings_form_saves_and_clears_guidelines(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "max")
    project = make_project(session_factory, "algebra")
    form = {"csrf_token": csrf, "labeling_mode": "first_error", "overlap": "1", "lease_minutes": "30",
            "correction_window_hours": "24", "screening_items": "0", "screening_pass_mark": "0",
            "qc_rate": "0", "qc_feedback": "false", "qc_pause_below": "0", "description": ""}
    saved = client.post(f"/manage/projects/{project.id}/settings", data={**form, "guidelines": GUIDELINES},
                        follow_redirects=False)
    assert saved.status_code == 303, saved.text
    assert stored_guidelines(session_factory) == GUIDELINES
    overview = client.get(f"/manage/projects/{project.id}").text
    assert f'href="/label/{project.id}/guidelines"' in overview
    too_long = client.post(f"/manage/projects/{project.id}/settings",
                           data={**form, "guidelines": "x" * (GUIDELINES_MAX_LENGTH + 1)})
    assert too_long.status_code == 422
    assert "at most 50000 characters" in html.unescape(too_long.text).split('id="guidelines-error">', 1)[1]
    assert stored_guidelines(session_factory) == GUIDELINES
    client.post(f"/manage/projects/{project.id}/settings", data={**form, "guidelines": ""})
    assert stored_guidelines(session_factory) == ""


def test_labelers_read_the_guidelines_of_projects_they_may_label_only(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    open_project = make_project(session_factory, "algebra", guidelines=GUIDELINES)
    closed = make_project(session_factory, "secret", guidelines="Private.", open_to_all=False)
    bare = make_project(session_factory, "bare")
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    page = client.get(f"/label/{open_project.id}/guidelines")
    assert page.status_code == 200
    assert '<div class="math" data-display="block">' in page.text
    # The guidelines' own "# Rating" is no second page title.
    assert page.text.count("<h1") == 1
    listing = client.get("/label").text
    assert f'href="/label/{open_project.id}/guidelines"' in listing
    assert f'href="/label/{bare.id}/guidelines"' not in listing
    task_page = client.get(f"/label/{open_project.id}").text
    assert 'id="guidelines-dialog"' in task_page
    assert f'"guidelines": {{"read": false, "version": "{guidelines_version(GUIDELINES)}"}}' in task_page
    assert 'id="guidelines-dialog"' not in client.get(f"/label/{bare.id}").text
    assert "Its managers have written none" in client.get(f"/label/{bare.id}/guidelines").text
    hidden = client.get(f"/label/{closed.id}/guidelines")
    assert hidden.status_code == 404 and "Private." not in hidden.text


def test_the_demo_project_comes_with_guidelines_and_keeps_a_managers_own(session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    problems = tmp_path / "math2.jsonl"
    problems.write_text("\n".join(MATH500.read_text().splitlines()[:2]) + "\n")
    with session_scope(session_factory) as session:
        load_demo(session, problems)
    assert "## The three ratings" in stored_guidelines(session_factory, DEMO_PROJECT)
    with session_scope(session_factory) as session:
        assert session.scalars(select(Project).where(Project.name == DEMO_PROJECT)).one().guidelines_updated_at
    with session_scope(session_factory) as session:
        session.scalars(select(Project).where(Project.name == DEMO_PROJECT)).one().guidelines = "Ours."
    with session_scope(session_factory) as session:
        load_demo(session, problems)
    assert stored_guidelines(session_factory, DEMO_PROJECT) == "Ours."


def test_the_form_stores_guidelines_as_typed_whatever_line_breaks_the_browser_sends(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """A browser sends a textarea's line breaks as CRLF: guidelines set by the API at the limit
    save back unchanged through the form, so labelers are not shown them again as new."""
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "max")
    text = ("Rate every step.\n" * (GUIDELINES_MAX_LENGTH // 17))[:GUIDELINES_MAX_LENGTH]
    project = make_project(session_factory, "algebra", guidelines=text)
    form = {"csrf_token": csrf, "labeling_mode": "first_error", "overlap": "1", "lease_minutes": "30",
            "correction_window_hours": "24", "screening_items": "0", "screening_pass_mark": "0",
            "qc_rate": "0", "qc_feedback": "false", "qc_pause_below": "0", "description": " \r\n ",
            "guidelines": text.replace("\n", "\r\n")}
    saved = client.post(f"/manage/projects/{project.id}/settings", data=form, follow_redirects=False)
    assert saved.status_code == 303, html.unescape(saved.text)[:2000]
    assert stored_guidelines(session_factory) == text
    with session_scope(session_factory) as session:
        assert session.get(Project, project.id).description == ""
    blank = client.post(f"/manage/projects/{project.id}/settings", data={**form, "guidelines": "\r\n  \r\n"},
                        follow_redirects=False)
    assert blank.status_code == 303
    assert stored_guidelines(session_factory) == ""



def reads(factory) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """(username, version read) of every acknowledgement, by name."""
    with session_scope(factory) as session:
        return [tuple(row) for row in session.execute(
            select(User.username, GuidelinesRead.version).join(User, User.id == GuidelinesRead.user_id)
            .order_by(User.username))]


def test_a_labeler_acknowledges_the_current_version_only(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", guidelines=GUIDELINES)
    bare = make_project(session_factory, "bare")
    closed = make_project(session_factory, "secret", guidelines="Private.", open_to_all=False)
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    version = guidelines_version(GUIDELINES)
    url = f"/api/v1/projects/{project.id}/guidelines/read"

    stale = client.post(url, headers=headers, json={"version": guidelines_version("an older text")})
    assert stale.status_code == 409 and "have changed since this version" in stale.json()["detail"]
    for bad in [{}, {"version": ""}, {"version": "x" * 17}, {"version": version, "extra": 1}]:
        assert client.post(url, headers=headers, json=bad).status_code == 422, bad
    none = client.post(f"/api/v1/projects/{bare.id}/guidelines/read", headers=headers, json={"version": version})
    assert none.status_code == 409 and "no guidelines" in none.json()["detail"]
    hidden = client.post(f"/api/v1/projects/{closed.id}/guidelines/read", headers=headers,
                         json={"version": guidelines_version("Private.")})
    assert hidden.status_code == 404
    assert reads(session_factory) == []

    first = client.post(url, headers=headers, json={"version": version})
    assert first.status_code == 200 and first.json()["version"] == version
    again = client.post(url, headers=headers, json={"version": version})
    assert again.status_code == 200 and again.json()["read_at"] >= first.json()["read_at"]
    assert reads(session_factory) == [("lena", version)]
    browser_login(client, "lena")
    task_page = client.get(f"/label/{project.id}").text
    assert f'"guidelines": {{"read": true, "version": "{version}"}}' in task_page


def test_managers_see_who_read_the_guidelines_as_they_stand(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", guidelines=GUIDELINES)
    for name, role in [("lena", "labeler"), ("omar", "labeler"), ("pia", "labeler"), ("max", "manager"),
                       ("rita", "researcher")]:
        make_user(session_factory, name, role)
    add_problem(session_factory, project, "What is 1+1?", n_solutions=1)
    old = guidelines_version(GUIDELINES)
    for name in ("lena", "omar"):
        client.post(f"/api/v1/projects/{project.id}/guidelines/read", headers=api_headers(client, name),
                    json={"version": old})
    readers_url = f"/api/v1/projects/{project.id}/guidelines/readers"
    assert client.get(readers_url, headers=api_headers(client, "lena")).status_code == 403
    before = client.get(readers_url, headers=api_headers(client, "rita")).json()
    assert (before["version"], before["current"]) == (old, 2)
    created_at = before["updated_at"]
    assert created_at is not None

    manager = api_headers(client, "max")
    same = client.patch(f"/api/v1/projects/{project.id}", headers=manager, json={"guidelines": GUIDELINES})
    assert same.json()["guidelines_updated_at"] == created_at and same.json()["guidelines_version"] == old
    edited = client.patch(f"/api/v1/projects/{project.id}", headers=manager,
                          json={"guidelines": GUIDELINES + "\nFlag what you doubt.\n"})
    new = edited.json()["guidelines_version"]
    assert new != old and edited.json()["guidelines_updated_at"] > created_at
    client.post(f"/api/v1/projects/{project.id}/guidelines/read", headers=api_headers(client, "omar"),
                json={"version": new})
    # pia labeled (through the queue) but never read them.
    with session_scope(session_factory) as session:
        pia = session.scalar(select(User.id).where(User.username == "pia"))
    label_next(session_factory, project.id, pia, FinishReason.solution)
    # A manager who read them is no labeler to follow up; a member who has not labeled yet is.
    client.post(f"/api/v1/projects/{project.id}/guidelines/read", headers=manager, json={"version": new})
    make_user(session_factory, "quin", "labeler")
    assert client.post(f"/api/v1/projects/{project.id}/members", headers=manager,
                       json={"username": "quin"}).status_code == 201
    after = client.get(readers_url, headers=api_headers(client, "max")).json()
    assert after["current"] == 1
    assert [(r["username"], r["read"]) for r in after["rows"]] == [("lena", "older"), ("omar", "current"),
                                                                    ("pia", "none"), ("quin", "none")]

    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}").text
    section = page.split('id="guidelines-readers"', 1)[1].split("</section>", 1)[0]
    assert "<strong>1 of 4</strong> labelers have read the guidelines as they stand" in section
    assert section.count("read before the last edit") == 1 and section.count(">not read<") == 2


def test_the_guidelines_page_marks_them_read(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "algebra", guidelines=GUIDELINES)
    bare = make_project(session_factory, "bare")
    make_user(session_factory, "lena", "labeler")
    csrf = browser_login(client, "lena")
    url = f"/label/{project.id}/guidelines"
    assert "I have read these guidelines" in client.get(url).text
    stale = client.post(f"{url}/read", data={"csrf_token": csrf, "version": "0123456789abcdef"})
    assert stale.status_code == 409 and "Not recorded: the guidelines have changed" in stale.text
    assert reads(session_factory) == []
    done = client.post(f"{url}/read", data={"csrf_token": csrf, "version": guidelines_version(GUIDELINES)},
                       follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == url
    shown = client.get(url).text
    assert "You read these guidelines, as they stand, on" in shown and "I have read these" not in shown
    assert reads(session_factory) == [("lena", guidelines_version(GUIDELINES))]
    nothing = client.post(f"/label/{bare.id}/guidelines/read", data={"csrf_token": csrf, "version": "x"})
    assert nothing.status_code == 409 and "no guidelines to read" in nothing.text
    assert client.post(f"{url}/read", data={"version": guidelines_version(GUIDELINES)}).status_code == 403


def test_a_task_asked_for_under_guidelines_since_edited_is_refused_and_nothing_leased(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from app.models import Assignment, AssignmentStatus

    project = make_project(session_factory, "algebra", guidelines=GUIDELINES)
    bare = make_project(session_factory, "bare")
    closed = make_project(session_factory, "secret", guidelines="Private.", open_to_all=False)
    for each in (project, bare, closed):
        add_problem(session_factory, each, "1+1?", n_solutions=1)
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")

    def next_task(project_id: int, shown: str):  # type: ignore[no-untyped-def]
        return client.post(f"/api/v1/projects/{project_id}/tasks/next", params={"guidelines": shown}, headers=headers)

    def leased() -> int:
        with session_scope(session_factory) as session:
            return len(session.scalars(select(Assignment).where(Assignment.status == AssignmentStatus.leased)).all())

    for shown in ("", "0123456789abcdef"):
        stale = next_task(project.id, shown)
        assert stale.status_code == 409 and "guidelines have changed" in stale.json()["detail"]
    assert leased() == 0
    assert next_task(project.id, guidelines_version(GUIDELINES)).json()["task"] is not None
    assert next_task(bare.id, "").json()["task"] is not None
    assert next_task(bare.id, guidelines_version(GUIDELINES)).status_code == 409
    # A project the labeler may not see is not found, whatever its guidelines.
    assert next_task(closed.id, "").status_code == 404
    assert leased() == 2
    # Without the parameter (API clients), no check: the held task comes back.
    with session_scope(session_factory) as session:
        session.get(Project, project.id).guidelines = "Edited again."
    assert client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"] is not None
