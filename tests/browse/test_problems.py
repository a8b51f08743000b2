"""The Problems tab: a project's problems with their ids and unique_ids, found by their words,
retired and served again from there by a manager."""

from __future__ import annotations

import html

import pytest
from sqlalchemy import select

from app.browse.problems import ProblemRow
from app.db import session_scope
from app.models import FinishReason, Problem
from tests.conftest import browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl
from tests.reports.builders import label_next

PROBLEMS = [
    {"problem": "What is $2 + 2$?", "answer": "4", "unique_id": "test/algebra/1.json"},
    {"problem": "Find 100% of <b>7</b>.", "answer": "7", "unique_id": "test/prealgebra/2.json"},
    {"problem": "What is $3 \\cdot 3$?", "answer": "9"},
]


def _ids(factory) -> list[int]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return list(session.scalars(select(Problem.id).order_by(Problem.id)))


def _rows(page: str) -> list[str]:
    return [row.split('"', 1)[0] for row in page.split('<tr id="problem-')[1:]]


def test_the_tab_lists_problems_with_their_ids_counts_and_state(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(PROBLEMS), "math")
    import_bytes(session_factory, project, jsonl([
        {"problem_id": "test/algebra/1.json", "steps": ["2 + 2 = 4.", "# Answer\n\n4"]},
        {"problem_id": "test/algebra/1.json", "steps": ["2 + 2 = 5.", "# Answer\n\n5"]},
        {"problem_id": "test/prealgebra/2.json", "steps": ["7."]},
    ]), "solutions")
    first, second, third = _ids(session_factory)
    lena = make_user(session_factory, "lena", "labeler")
    label_next(session_factory, project.id, lena.id, FinishReason.solution)
    make_user(session_factory, "mona", "manager")
    csrf = browser_login(client, "mona")
    url = f"/manage/projects/{project.id}/problems"

    page = html.unescape(client.get(url).text)
    assert _rows(page) == [str(first), str(second), str(third)]
    row = page.split(f'<tr id="problem-{first}">', 1)[1].split("</tr>", 1)[0]
    assert "test/algebra/1.json" in row
    # Two solutions, one labeled, one slot still waiting.
    assert [int(n) for n in row.split('class="num"')[1:] for n in [n.split(">", 1)[1].split("<", 1)[0]]] == [2, 1, 1]
    # Text shows as text.
    assert "Find 100% of &lt;b&gt;7&lt;/b&gt;." in client.get(url).text

    assert _rows(client.get(url, params={"text": "PREALGEBRA"}).text) == [str(second)]
    assert _rows(client.get(url, params={"text": "100%"}).text) == [str(second)]
    assert _rows(client.get(url, params={"text": "%%"}).text) == []
    bad = client.get(url, params={"state": "gone", "page": "0"})
    assert bad.status_code == 422 and 'id="state-error"' in bad.text and 'id="page-error"' not in bad.text

    # Retired from the tab, back to the same search, the problem marked and its slot gone.
    retired = client.post(f"/manage/projects/{project.id}/problems/{first}/retire",
                          data={"csrf_token": csrf, "via": "problems", "text": "algebra"}, follow_redirects=False)
    assert retired.status_code == 303
    assert retired.headers["location"] == f"{url}?text=algebra&retired={first}#problem-{first}"
    shown = html.unescape(client.get(retired.headers["location"]).text)
    assert f"Problem {first} is retired" in shown
    row = shown.split(f'<tr id="problem-{first}">', 1)[1].split("</tr>", 1)[0]
    assert ">retired</span>" in row and "Serve again" in row
    assert _rows(client.get(url, params={"state": "retired"}).text) == [str(first)]
    assert _rows(client.get(url, params={"state": "served"}).text) == [str(second), str(third)]
    restored = client.post(f"/manage/projects/{project.id}/problems/{first}/restore",
                           data={"csrf_token": csrf, "via": "problems"}, follow_redirects=False)
    assert restored.headers["location"] == f"{url}?restored={first}#problem-{first}"
    assert _rows(client.get(url, params={"state": "retired"}).text) == []


def test_researchers_read_the_tab_and_labelers_do_not(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(PROBLEMS), "math")
    make_user(session_factory, "rita", "researcher")
    csrf = browser_login(client, "rita")
    url = f"/manage/projects/{project.id}/problems"
    page = client.get(url)
    assert page.status_code == 200 and len(_rows(page.text)) == 3 and "/retire\"" not in page.text
    first = _ids(session_factory)[0]
    refused = client.post(f"/manage/projects/{project.id}/problems/{first}/retire", data={"csrf_token": csrf, "via": "problems"})
    assert refused.status_code == 403
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    assert client.get(url, follow_redirects=False).status_code == 403


def test_the_api_lists_problems_and_labels_with_the_tabs_filters(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import api_headers

    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(PROBLEMS), "math")
    import_bytes(session_factory, project, jsonl([
        {"problem_id": "test/algebra/1.json", "steps": ["2 + 2 = 4.", "# Answer\n\n4"]},
        {"problem_id": "test/prealgebra/2.json", "steps": ["7."]},
    ]), "solutions")
    first, second, _ = _ids(session_factory)
    lena = make_user(session_factory, "lena", "labeler")
    label_next(session_factory, project.id, lena.id, FinishReason.found_error, ratings=[(1, False), (-1, True)])
    make_user(session_factory, "rita", "researcher")
    headers = api_headers(client, "rita")

    found = client.get(f"/api/v1/projects/{project.id}/problems", params={"text": "prealgebra"}, headers=headers).json()
    assert found["total"] == 1 and found["items"][0] == {
        "problem_id": second, "unique_id": "test/prealgebra/2.json", "statement": "Find 100% of <b>7</b>.",
        "answer": "7", "retired_at": None, "solutions": 1, "labels": 0, "waiting": 1}
    listed = client.get(f"/api/v1/projects/{project.id}/labels", params={"labeler": "LENA"}, headers=headers).json()
    assert (listed["total"], listed["page"], listed["pages"]) == (1, 1, 1)
    (item,) = listed["items"]
    assert (item["problem_id"], item["labeler"], item["ratings"], item["flagged"]) == (first, "lena", [1, -1], [False, True])
    assert item["finish_reason"] == "found_error" and item["answer_grade"] == "right"
    for path, params in (("labels", {"kind": "some"}), ("labels", {"unknown": "1"}), ("problems", {"state": "x"}),
                         ("problems", {"page": "0"})):
        refused = client.get(f"/api/v1/projects/{project.id}/{path}", params=params, headers=headers)
        assert refused.status_code == 422, (path, params)
    assert client.get(f"/api/v1/projects/{project.id}/labels", headers=api_headers(client, "lena")).status_code == 403


def test_the_tab_pages_by_fifty_and_a_page_past_the_last_leads_back(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl([{"problem": f"What is {n} + 1?", "answer": str(n + 1)} for n in range(51)]), "math")
    make_user(session_factory, "mona", "manager")
    browser_login(client, "mona")
    url = f"/manage/projects/{project.id}/problems"
    first = client.get(url, params={"text": "+ 1"}).text
    assert len(_rows(first)) == 50 and 'href="?text=%2B+1&amp;page=2">Next →</a>' in first
    second = client.get(url, params={"text": "+ 1", "page": "2"}).text
    assert len(_rows(second)) == 1 and 'href="?text=%2B+1&amp;page=1">← Previous</a>' in second
    past = client.get(url, params={"page": "3"}).text
    assert "No problems on page 3" in past and "There are 2 pages." in past


@pytest.mark.parametrize(
    ("statement", "preview"),
    [
        ("satisfy\n\\[2x = 3y = -z\\]is a line.", "satisfy\n \\[ 2x = 3y = -z \\] is a line."),
        ("Add:$$1 + 2$$is it.", "Add: $$ 1 + 2 $$ is it."),
        ("\\begin{align*}a &= 1\\end{align*}Find $a$.", " \\begin{align*} a &= 1 \\end{align*} Find $a$."),
        # An escaped first character is no display: a dollar sign, a row's spacing.
        ("It costs $\\$$5 and $a \\\\[2pt] b$.", "It costs $\\$$5 and $a \\\\[2pt] b$."),
        # A row's end just before the display's.
        ("\\[a \\\\ b \\\\\\]so", " \\[ a \\\\ b \\\\ \\] so"),
    ],
)
def test_the_preview_spaces_display_math_from_the_words_around_it(statement: str, preview: str) -> None:
    row = ProblemRow(problem_id=1, source_id=None, statement=statement, answer=None, retired_at=None, solutions=0,
                     labels=0, waiting=0)
    assert row.preview == preview
