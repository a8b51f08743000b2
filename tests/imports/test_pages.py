"""The manager's upload page: every bad line in a table and nothing kept, or a summary."""

from __future__ import annotations

import html
import re

import pytest

from tests.conftest import browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, jsonl, row_counts

PROBLEMS = [{"problem": "What is $2+2$?", "answer": "4"}, {"problem": "What is $3+3$?", "answer": "6"}]


@pytest.fixture
def manager(client, session_factory) -> str:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    return browser_login(client, "max")


def _upload(client, csrf, project_id, data: bytes, fmt: str, filename: str = "upload.jsonl", **form):  # type: ignore[no-untyped-def]
    return client.post(
        f"/manage/projects/{project_id}/import",
        data={"csrf_token": csrf, "format": fmt, **form},
        files={"file": (filename, data, "application/x-ndjson")},
    )


def _error_rows(page: str) -> list[tuple[str, str, str, str]]:
    table = page.split('<table class="list compact line-errors stack">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>\s*<td[^>]*>(.*?)</td>\s*<td[^>]*>(.*?)</td>\s*<td[^>]*>(.*?)</td>\s*<td[^>]*>(.*?)</td>", table, re.S)
    return [tuple(html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in row) for row in rows]  # type: ignore[misc]


def test_the_form_offers_every_format(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    page = client.get(f"/manage/projects/{project.id}/import")
    assert page.status_code == 200
    for fmt in ("solutions", "math", "prm800k"):
        assert f'name="format" value="{fmt}"' in page.text
    assert 'enctype="multipart/form-data"' in page.text and 'name="csrf_token"' in page.text


def test_every_bad_line_is_listed_and_nothing_is_kept(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _upload(client, manager, project.id, jsonl(PROBLEMS), "math", "problems.jsonl")
    before = row_counts(session_factory)
    # Line 1 is good and is written before the bad lines are found: the page must undo it.
    data = b"\n".join(
        [
            b'{"problem": "What is $2+2$?", "steps": ["2+2=4", "# Answer\\n\\n4"]}',
            b'{"problem": "What is $2+2$?", "steps": "2+2=4"}',
            b"{not json",
            b'{"problem_id": 99999, "steps": ["a"]}',
        ]
    )
    response = _upload(client, manager, project.id, data, "solutions", "candidates.jsonl")
    assert response.status_code == 422
    text = html.unescape(response.text)
    assert "nothing was imported" in text.lower()
    rows = _error_rows(response.text)
    assert [(r[0], r[1]) for r in rows] == [("candidates.jsonl", "2"), ("candidates.jsonl", "3"), ("candidates.jsonl", "4")]
    assert rows[0][2] == "steps" and "array of strings" in rows[0][3]
    assert "JSON" in rows[1][3]
    assert rows[2][2] == "problem_id" and "99999" in rows[2][3]
    assert row_counts(session_factory) == before


def test_a_good_file_shows_its_summary_and_joins_the_batch_list(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    response = _upload(client, manager, project.id, SAMPLE.read_bytes(), "prm800k", "prm800k_sample.jsonl")
    assert response.status_code == 200
    assert "Imported prm800k_sample.jsonl." in response.text
    assert "Labels added</dt><dd>9</dd>" in response.text
    assert row_counts(session_factory)["labels"] == 9
    overview = client.get(f"/manage/projects/{project.id}")
    assert ">prm800k_sample.jsonl</span>" in overview.text
    again = _upload(client, manager, project.id, SAMPLE.read_bytes(), "prm800k", "again.jsonl")
    assert again.status_code == 200 and "was imported before" in again.text
    assert row_counts(session_factory)["import_batches"] == 1


def test_problems_without_an_answer_are_pointed_out(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    # 5,000 problems went in as "Problems added 5000", nothing said that none could be graded.
    project = make_project(session_factory)
    problems = [{"problem": "What is $5+5$?"}, {"problem": "Sum it.", "solution": "It is $\\boxed{3}$."}, *PROBLEMS]
    response = _upload(client, manager, project.id, jsonl(problems), "math")
    assert response.status_code == 200
    shown = html.unescape(re.sub(r"<[^>]+>", "", response.text))
    assert "1 of the new problems has no answer (none given, and no \\boxed{} in a reference solution)" in shown
    # One block of text: the flash lays out its children in a row, and the <code> words stood apart.
    assert '<div class="flash warning" role="status"><div>' in response.text
    plain = _upload(client, manager, project.id, jsonl([{"problem": "What is $9+9$?", "answer": "18"}]), "math", "b.jsonl")
    assert "no answer" not in plain.text


def test_text_solutions_are_cut_at_the_separator_typed_in_the_form(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _upload(client, manager, project.id, jsonl(PROBLEMS), "math")
    data = jsonl([{"problem": "What is $2+2$?", "text": "Add.\n---\nIt is 4.\n---\n# Answer\n\n4"}])
    response = _upload(client, manager, project.id, data, "solutions", "text.jsonl", separator="\\n---\\n")
    assert response.status_code == 200
    assert "Solutions added</dt><dd>1</dd>" in response.text


@pytest.mark.parametrize(
    ("fmt", "data", "message"),
    [
        ("xml", b'{"problem": "p", "answer": "1"}', "unknown import format"),
        ("math", b"", "holds no records (it is empty or only blank lines"),
    ],
)
def test_a_wrong_format_or_empty_file_is_refused(client, session_factory, manager, fmt, data, message) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    response = _upload(client, manager, project.id, data, fmt)
    assert response.status_code == 422
    text = html.unescape(response.text).lower()
    assert message in text and "nothing was imported" in text
    assert row_counts(session_factory)["import_batches"] == 0


def test_two_files_at_once_are_refused_and_neither_is_imported(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    # FastAPI hands the route the last file part: the first was dropped without a word.
    project = make_project(session_factory)
    response = client.post(
        f"/manage/projects/{project.id}/import",
        data={"csrf_token": manager, "format": "math"},
        files=[("file", ("first.jsonl", jsonl(PROBLEMS[:1]), "application/x-ndjson")),
               ("file", ("second.jsonl", jsonl(PROBLEMS[1:]), "application/x-ndjson"))],
    )
    assert response.status_code == 422
    text = html.unescape(response.text)
    assert "One file at a time: the upload holds 2 files; import each on its own." in text
    assert "Nothing was imported." in text
    assert row_counts(session_factory)["import_batches"] == 0 and row_counts(session_factory)["problems"] == 0


def test_a_missing_file_is_asked_for(client, session_factory, manager) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    response = client.post(f"/manage/projects/{project.id}/import", data={"csrf_token": manager, "format": "math"})
    assert response.status_code == 422
    assert "choose a file to upload" in response.text.lower()
