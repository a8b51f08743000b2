"""Controls that many rows share by their visible words are named by what they act on: a screen
reader's list of links or buttons, read out of the table, heard "View, View, View" before
(WCAG 2.4.4, 4.1.2). And what only a title said is said in words on the page."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

from app.db import session_scope
from app.models import FinishReason
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.reports.builders import add_problem, label_next


@dataclass
class Control:
    tag: str
    attrs: dict[str, str | None]
    text: str = ""

    @property
    def name(self) -> str:
        """The accessible name, as a browser computes it for these elements: aria-label, else
        the text inside."""
        return self.attrs.get("aria-label") or self.text


class _Controls(HTMLParser):
    TAGS = ("a", "button", "h1")

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Control] = []
        self._open: list[tuple[Control, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.TAGS:
            self._open.append((Control(tag, dict(attrs)), []))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0].tag == tag:
            control, parts = self._open.pop()
            control.text = " ".join("".join(parts).split())
            self.found.append(control)

    def handle_data(self, data: str) -> None:
        for _, parts in self._open:
            parts.append(data)


def controls(html: str, tag: str, href: str | None = None, text: str | None = None) -> list[Control]:
    """The page's `tag` elements, those whose href matches `href` or whose text is `text`."""
    parser = _Controls()
    parser.feed(html)
    return [c for c in parser.found if c.tag == tag
            and (href is None or re.search(href, c.attrs.get("href") or ""))
            and (text is None or c.text == text)]


def test_my_stats_view_links_name_the_solution_of_their_label(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    ids = add_solutions(session_factory, project, 2)
    ann = make_user(session_factory, "ann", "labeler")
    for _ in ids:
        label_next(session_factory, project.id, ann.id, FinishReason.solution)
    browser_login(client, "ann")
    views = controls(client.get("/label/stats").text, "a", href=r"^/label/labels/\d+$")
    assert [c.text for c in views] == ["View", "View"]
    assert sorted(c.name for c in views) == sorted(f"View label of solution {i}" for i in ids)


def test_the_reports_buttons_name_their_report_and_problem(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    problem, solutions = add_problem(session_factory, project, "Broken $x$", n_solutions=3)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")
    make_user(session_factory, "max", "manager")
    first, _ = label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="The statement is cut.")
    second, _ = label_next(session_factory, project.id, bob.id, FinishReason.give_up, ratings=[(1, False), (1, True)], note="Stuck.")
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports").text
    dismiss = controls(page, "button", text="Dismiss")
    s1, s2 = first.solution.id, second.solution.id
    assert sorted(c.name for c in dismiss) == sorted([
        f"Dismiss the bad-problem report by ann on solution {s1}",
        f"Dismiss the give-up by bob on solution {s2}",
        f"Dismiss the flag of step 2 by bob on solution {s2}",
    ])
    [retire] = controls(page, "button", text="Retire problem")
    assert retire.name == f"Retire problem {problem}"

    retired = client.post(f"/manage/projects/{project.id}/problems/{problem}/retire",
                          data={"csrf_token": csrf}, follow_redirects=False)
    assert retired.status_code == 303, retired.text
    page = client.get(f"/manage/projects/{project.id}/reports").text
    returns = controls(page, "button", text="Return to labeling")
    assert returns and {c.name for c in returns} == {f"Return to labeling problem {problem}"}


def _skip_next(client, project_id: int, headers: dict[str, str]) -> int:  # type: ignore[no-untyped-def]
    task = client.post(f"/api/v1/projects/{project_id}/tasks/next", headers=headers).json()["task"]
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/skip", headers=headers).status_code == 204
    return task["solution"]["id"]


def test_the_skipped_tabs_give_back_buttons_name_the_solution(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    ann = api_headers(client, "ann")
    skipped = [_skip_next(client, project.id, ann) for _ in range(2)]
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/skips").text
    buttons = controls(page, "button", text="Give back to ann")
    assert sorted(c.name for c in buttons) == sorted(f"Give back to ann solution {s}" for s in skipped)
    problems = controls(page, "a", href=r"/labels\?problem=\d+$")
    assert problems and all(re.fullmatch(r"Labels of problem \d+", c.name) for c in problems), [c.name for c in problems]


def test_the_activity_cards_counts_name_what_they_count_and_whose(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Broken $x$", n_solutions=4)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    # Skips first: reported as bad, the problem serves ann nothing more.
    headers = api_headers(client, "ann")
    for _ in range(2):
        _skip_next(client, project.id, headers)
    label_next(session_factory, project.id, ann.id, FinishReason.give_up, ratings=[(1, False)], note="Stuck.")
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note="The statement is cut.")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}").text
    counts = {c.attrs["href"]: c for c in controls(page, "a", href=r"labeler=ann$")}
    base = f"/manage/projects/{project.id}"
    assert {href: (c.text, c.name) for href, c in counts.items()} == {
        f"{base}/reports?kind=give_up&labeler=ann": ("1", "1 give-up by ann"),
        f"{base}/reports?kind=bad_problem&labeler=ann": ("1", "1 bad-problem report by ann"),
        f"{base}/skips?labeler=ann": ("2", "2 skips by ann"),
    }


def test_the_labels_and_problems_tabs_number_links_say_what_they_open(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    problem, _ = add_problem(session_factory, project, "What is $1+1$?", n_solutions=2)
    ann = make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    labels = [label_next(session_factory, project.id, ann.id, FinishReason.solution)[1] for _ in range(2)]
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels").text
    opened = controls(page, "a", href=r"/labels/\d+$")
    assert sorted((c.text, c.name) for c in opened) == sorted((f"#{i}", f"Label {i}") for i in labels)
    every = controls(page, "a", href=r"/labels\?problem=\d+$")
    assert [(c.text, c.name) for c in every] == [(f"#{problem}", f"Every label of problem {problem}")] * 2
    page = client.get(f"/manage/projects/{project.id}/problems").text
    [listed] = controls(page, "a", href=r"/labels\?problem=\d+$")
    assert listed.name == f"Every label of problem {problem}"


def test_a_demo_projects_heading_is_its_name_alone_with_the_badge_beside_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        project = create_project(session, ProjectCreate(name="MATH-500 demo"), is_demo=True)
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    for tab in ("", "/labels", "/reports", "/skips"):
        page = client.get(f"/manage/projects/{project.id}{tab}").text
        [heading] = controls(page, "h1")
        assert heading.name == "MATH-500 demo", tab
        assert re.search(r'</h1>\s*<span class="badge accent">demo</span>', page), tab


def _visible_text(html: str) -> str:
    """The page's words as shown, attributes (a title, say) left out."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_for_you_column_is_explained_in_words_not_a_tooltip(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    browser_login(client, "ann")
    page = client.get("/label").text
    assert "<abbr" not in page
    assert "For you counts the solutions the queue would give you now" in _visible_text(page)
    assert 'aria-describedby="for-you-note"' in page and 'id="for-you-note"' in page


def test_the_overview_charts_tables_are_in_the_tab_order(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}").text
    for chart in ("chart-days", "chart-hours"):
        table = re.search(rf'<table [^>]*id="{chart}-values"[^>]*>', page)
        assert table and 'tabindex="0"' in table.group(0) and "shown-on-focus" in table.group(0), chart
    assert "or press Tab to reach a table of every hour's count" in _visible_text(page)
