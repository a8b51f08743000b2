"""The Reports tab over HTTP: rows, filters, CSV, dismiss and retire forms, the label view."""

from __future__ import annotations

import csv
import io

import pytest

from app.db import session_scope
from app.models import FinishReason, Label, Project, utcnow
from app.quality.agreement import project_agreement
from app.reports import service
from app.reports.csv_export import safe_cell
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.reports.builders import add_problem, label_next

HOSTILE = '=HYPERLINK("http://evil.example","click") <b>bold</b>'


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Broken $x$", n_solutions=3, priority=5.0)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    label_next(session_factory, project.id, ann.id, FinishReason.bad_problem, ratings=[], note=HOSTILE)
    label_next(session_factory, project.id, bob.id, FinishReason.give_up, ratings=[(1, True)], note="-2 is not an answer")
    return project


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _change_problem(client, project_id: int, problem_id: object, action: str, csrf: str, fields: dict):  # type: ignore[no-untyped-def]
    """Retire or restore a problem through the page's form, the redirect not followed."""
    return client.post(f"/manage/projects/{project_id}/problems/{problem_id}/{action}",
                       data={"csrf_token": csrf, **fields}, follow_redirects=False)


def test_the_tab_lists_every_report_with_text_shown_as_text(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports")
    assert page.status_code == 200
    assert 'aria-current="page">Reports</a>' in page.text
    assert "=HYPERLINK(" in page.text and "&lt;b&gt;bold&lt;/b&gt;" in page.text and "<b>bold</b>" not in page.text
    assert page.text.count('<tr id="report-') == 3
    assert "Retire problem" in page.text and "Dismiss" in page.text
    filtered = client.get(f"/manage/projects/{project.id}/reports", params={"kind": "flagged_step", "labeler": "bob"})
    assert filtered.text.count('<tr id="report-') == 1
    assert "kind=flagged_step&amp;labeler=bob" in filtered.text


def test_a_researcher_sees_the_tab_without_the_buttons(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "rae")
    page = client.get(f"/manage/projects/{project.id}/reports")
    assert page.status_code == 200 and page.text.count('<tr id="report-') == 3
    assert "Retire problem" not in page.text and "Dismiss</button>" not in page.text


def test_bad_filters_are_shown_not_crashed(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports", params={"kind": "rude", "status": "x" * 60})
    assert page.status_code == 422
    download = client.get(f"/manage/projects/{project.id}/reports/download", params={"status": "closed"})
    assert download.status_code == 422 and "status" in download.text


def test_the_csv_holds_the_filtered_rows_with_formulas_made_text(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "max")
    response = client.get(f"/manage/projects/{project.id}/reports/download")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"] == f'attachment; filename="project-{project.id}-reports.csv"'
    rows = _csv(response.text)
    assert [(r["kind"], r["labeler"], r["step"]) for r in rows] == [
        ("flagged_step", "bob", "1"),
        ("give_up", "bob", ""),
        ("bad_problem", "ann", ""),
    ]
    assert rows[2]["reason"] == "'" + HOSTILE
    assert rows[1]["reason"] == "'-2 is not an answer"
    assert rows[0]["label_url"] == f"/manage/projects/{project.id}/labels/{rows[0]['label_id']}"
    only_ann = _csv(client.get(f"/manage/projects/{project.id}/reports/download", params={"labeler": "ann"}).text)
    assert [r["labeler"] for r in only_ann] == ["ann"]


def test_cells_that_a_spreadsheet_would_run_are_made_text() -> None:
    assert [safe_cell(v) for v in ("=1", "+1", "-1", "@A1", "\tx", "a=1", None, 3)] == [
        "'=1", "'+1", "'-1", "'@A1", "'\tx", "a=1", "", "3"
    ]


def test_dismiss_and_retire_from_the_tab_keep_the_filters(client, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    rows = _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)
    bad = rows[2]
    dismissed = client.post(
        f"/manage/projects/{project.id}/reports/{rows[0]['report_id']}/dismiss",
        data={"csrf_token": csrf, "kind": "flagged_step", "status": "bogus"},
        follow_redirects=False,
    )
    assert dismissed.status_code == 303
    assert dismissed.headers["location"] == f"/manage/projects/{project.id}/reports?dismissed={rows[0]['report_id']}"
    assert f"Report {rows[0]['report_id']} is dismissed." in client.get(dismissed.headers["location"]).text
    # An address naming a report that is open says nothing.
    assert f"Report {bad['report_id']} is dismissed." not in client.get(
        f"/manage/projects/{project.id}/reports?dismissed={bad['report_id']}").text
    retired = _change_problem(client, project.id, bad['problem_id'], "retire", csrf, {"status": "open"})
    assert retired.headers["location"] == f"/manage/projects/{project.id}/reports?status=open&retired={bad['problem_id']}"
    page = client.get(retired.headers["location"])
    assert f"Problem {bad['problem_id']} is retired: it is not served again. Its bad-problem reports are dismissed." in page.text
    # Retiring answered the bad-problem report, so the open filter no longer lists it.
    assert page.text.count('<tr id="report-') == 1 and f'id="report-{bad["report_id"]}"' not in page.text
    assert '<span class="badge">retired</span>' in page.text and "Retire problem" not in page.text
    after = {r["report_id"]: r for r in _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)}
    assert after[rows[0]["report_id"]]["status"] == "dismissed" and after[rows[0]["report_id"]]["dismissed_by"] == "max"
    assert after[bad["report_id"]]["problem_retired"] == "yes"
    assert (after[bad["report_id"]]["status"], after[bad["report_id"]]["dismissed_by"]) == ("dismissed", "max")

    # The retired row offers the way back, which keeps the filters too.
    assert "Return to labeling</button>" in page.text
    restored = _change_problem(client, project.id, bad['problem_id'], "restore", csrf, {"status": "open"})
    assert restored.headers["location"] == f"/manage/projects/{project.id}/reports?status=open&restored={bad['problem_id']}"
    page = client.get(restored.headers["location"])
    assert f"Problem {bad['problem_id']} is back in labeling" in page.text
    assert '<span class="badge">retired</span>' not in page.text
    # The dismissed bad-problem report offers retiring again.
    assert "Retire problem" in client.get(f"/manage/projects/{project.id}/reports").text
    # A banner only for a problem of the project that is being served.
    assert "is back in labeling" not in client.get(f"/manage/projects/{project.id}/reports?restored=99999").text


@pytest.mark.parametrize("retired", ["%C2%B2", "%E2%91%A0", "%D9%A1%D9%A2", "99999999999999999999999999", "0", "-1", "x"])
def test_a_retired_banner_only_for_a_retired_problem(client, project, retired) -> None:  # type: ignore[no-untyped-def]
    """Superscript and Arabic-Indic digits are digits to str.isdigit (one crashed int()), and a
    number alone named a problem that no one retired."""
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports?retired={retired}")
    assert page.status_code == 200 and "is retired: it is not served again" not in page.text
    not_retired = _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)[0]["problem_id"]
    assert "is retired" not in client.get(f"/manage/projects/{project.id}/reports?retired={not_retired}").text


def test_the_label_view_shows_the_label_as_submitted(client, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    rows = _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)
    page = client.get(rows[0]["label_url"])
    assert page.status_code == 200
    assert "Broken $x$" in page.text and "-2 is not an answer" in page.text
    assert page.text.count('<li id="step-') == 3 and "not rated" in page.text and "⚑ flagged" in page.text
    assert '/static/js/math_view.js' in page.text
    retired = _change_problem(client, project.id, rows[0]['problem_id'], "retire", csrf, {"label_id": rows[0]["label_id"]})
    problem = rows[0]["problem_id"]
    # Back to the label, with a banner saying what changed, as the Reports tab gives.
    assert retired.headers["location"] == f"{rows[0]['label_url']}?retired={problem}"
    page = client.get(retired.headers["location"]).text
    assert "retired " in page and "Return to labeling" in page and "Retire problem" not in page
    assert f"Problem {problem} is retired: it is not served again." in page
    restored = _change_problem(client, project.id, rows[0]['problem_id'], "restore", csrf, {"label_id": rows[0]["label_id"]})
    assert restored.headers["location"] == f"{rows[0]['label_url']}?restored={problem}"
    page = client.get(restored.headers["location"]).text
    assert "retired " not in page and "Retire problem" in page
    assert f"Problem {problem} is back in labeling" in page
    assert client.get(f"/manage/projects/{project.id}/labels/99999").status_code == 404


def test_retiring_from_a_label_that_is_not_there_changes_nothing(client, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    rows = _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)
    response = _change_problem(client, project.id, rows[0]['problem_id'], "retire", csrf, {"label_id": "99999"})
    assert response.status_code == 404
    assert all(r["problem_retired"] == "no" for r in _csv(client.get(f"/manage/projects/{project.id}/reports/download").text))


def test_dismissing_a_report_a_correction_withdrew_says_so(client, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "max")
    rows = _csv(client.get(f"/manage/projects/{project.id}/reports/download").text)
    bad = next(r for r in rows if r["kind"] == "bad_problem")
    # The labeler corrects the label the report was made on: the open report is withdrawn.
    browser_login(client, "ann")
    corrected = client.post(f"/api/v1/me/labels/{bad['label_id']}/corrections", headers=api_headers(client, "ann"),
                            json={"idempotency_key": "fixed-after-all", "ratings": [{"rating": 1}] * 3,
                                  "finish_reason": "solution", "total_time_ms": 5})
    assert corrected.status_code == 200, corrected.text

    csrf = browser_login(client, "max")
    gone = client.post(f"/manage/projects/{project.id}/reports/{bad['report_id']}/dismiss",
                       data={"csrf_token": csrf, "status": "open"})
    assert gone.status_code == 200
    assert f"Report {bad['report_id']} is no longer there: the labeler corrected the label" in gone.text
    # An address naming a report that is there, or nonsense, shows no such banner.
    present = rows[0]["report_id"]
    for value in (present, "x", "99999999999999999999"):
        assert "is no longer there" not in client.get(f"/manage/projects/{project.id}/reports?gone={value}").text
    missing_project = client.post(f"/manage/projects/999999/reports/{bad['report_id']}/dismiss", data={"csrf_token": csrf})
    assert missing_project.status_code == 404


def test_the_label_view_links_the_solutions_other_labels(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "pairs", overlap=2)
    problem, _ = add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = label_next(session_factory, project.id, make_user(session_factory, "ann", "labeler").id,
                     FinishReason.solution, ratings=[(1, False)] * 3)[1]
    bob = label_next(session_factory, project.id, make_user(session_factory, "bob", "labeler").id,
                     FinishReason.found_error, ratings=[(1, False), (-1, False)])[1]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels/{ann}").text
    assert '<dt>Finished as</dt><dd><span class="badge good">no error</span></dd>' in page
    others = page.split('id="other-labels"', 1)[1].split("</ul>", 1)[0]
    assert f'href="/manage/projects/{project.id}/labels/{bob}"' in others and "bob" in others
    assert "found error" in others and ">disagrees</span>" in others
    assert f'href="/manage/projects/{project.id}/labels?agreement=disagreed&amp;problem={problem}"' in page
    side_by_side = client.get(f"/manage/projects/{project.id}/labels?agreement=disagreed&problem={problem}").text
    assert f"/labels/{ann}" in side_by_side and f"/labels/{bob}" in side_by_side


def test_a_labelers_earlier_label_of_a_solution_names_the_later_one_compared_instead(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    """An import can hold two current labels of one solution by one labeler: agreement compares
    the later; the label pages and the Agreement card say so instead of leaving them unmarked."""
    project = make_project(session_factory, "twice", overlap=2)
    _, (solution,) = add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)

    def imported(labeler: str, *ratings: int) -> int:
        with session_scope(session_factory) as session:
            label = Label(project_id=project.id, solution_id=solution, foreign_labeler=labeler, created_at=utcnow(),
                          finish_reason=FinishReason.found_error if -1 in ratings else FinishReason.solution,
                          steps=[{"completions": [{"rating": r}], "chosen_completion": None if r == -1 else 0}
                                 for r in ratings])
            session.add(label)
            session.flush()
            return label.id

    earlier, other, later = imported("ext-1", 1, 1), imported("ext-2", 1, -1), imported("ext-1", 1, -1)
    with session_scope(session_factory) as session:
        report = project_agreement(session, session.get(Project, project.id))
        earlier_view = service.label_view(session, project.id, earlier)
        other_view = service.label_view(session, project.id, other)
    assert (report.labels, report.earlier_labels, report.first_error_agreement) == (2, 1, 1.0)
    assert earlier_view.compared_instead == later and other_view.compared_instead is None
    assert [(o.label_id, o.disagrees, o.compared_instead) for o in other_view.other_labels] == [
        (earlier, None, later), (later, False, None)]

    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels/{earlier}").text
    note = page.split('id="compared-instead"', 1)[1].split("</p>", 1)[0]
    assert "ext-1 labeled this solution again" in note and f'href="/manage/projects/{project.id}/labels/{later}"' in note
    assert "earlier, not compared" in client.get(f"/manage/projects/{project.id}/labels/{other}").text
    assert "the later one counts; 1 left out here" in client.get(f"/manage/projects/{project.id}").text
    assert client.get(f"/api/v1/projects/{project.id}/agreement", headers=api_headers(client, "max")
                      ).json()["earlier_labels"] == 1


def test_all_open_reports_the_filters_show_are_dismissed_at_once(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "rae")
    assert "Dismiss all" not in client.get(f"/manage/projects/{project.id}/reports").text, "researchers read"
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports").text
    assert "Dismiss all 3 open</button>" in page
    newest = max(int(r["report_id"]) for r in _csv(client.get(f"/manage/projects/{project.id}/reports/download").text))
    assert f'name="through" value="{newest}"' in page
    bobs = client.get(f"/manage/projects/{project.id}/reports", params={"labeler": "bob"}).text
    assert "Dismiss all 2 open</button>" in bobs and 'data-confirm="Dismiss all 2 open reports these filters show?"' in bobs

    action = f"/manage/projects/{project.id}/reports/dismiss-all"
    refused = client.post(action, data={"csrf_token": csrf, "kind": "rude", "through": newest}, follow_redirects=False)
    assert refused.status_code == 422 and "Dismiss all" not in refused.text
    done = client.post(action, data={"csrf_token": csrf, "labeler": "bob", "through": newest}, follow_redirects=False)
    assert done.headers["location"] == f"/manage/projects/{project.id}/reports?labeler=bob&all_dismissed=2"
    after = client.get(done.headers["location"]).text
    assert "2 reports dismissed." in after and "Dismiss all" not in after and after.count('class="inactive"') == 2
    left = _csv(client.get(f"/manage/projects/{project.id}/reports/download", params={"status": "open"}).text)
    assert [r["labeler"] for r in left] == ["ann"], "another labeler's report stays open"
    again = client.post(action, data={"csrf_token": csrf, "labeler": "bob", "through": newest}, follow_redirects=False)
    assert "No open report matched: nothing was dismissed." in client.get(again.headers["location"]).text


def test_the_tab_pages_its_reports_and_a_dismiss_goes_back_to_the_page(client, project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("app.reports.pages.REPORTS_PAGE_SIZE", 2)
    csrf = browser_login(client, "max")
    tab = f"/manage/projects/{project.id}/reports"
    first = client.get(tab).text
    assert first.count('<tr id="report-') == 2 and 'href="?page=2">Older →' in first and "Page 1 of 2" in first
    second = client.get(tab, params={"page": 2}).text
    assert second.count('<tr id="report-') == 1 and 'href="?page=1">← Newer' in second
    oldest = min(int(r["report_id"]) for r in _csv(client.get(f"{tab}/download").text))
    assert f'id="report-{oldest}"' in second and '<input type="hidden" name="page" value="2">' in second
    done = client.post(f"{tab}/{oldest}/dismiss", data={"csrf_token": csrf, "page": "2"}, follow_redirects=False)
    assert done.headers["location"] == f"{tab}?page=2&dismissed={oldest}"
    past = client.get(tab, params={"page": 3}).text
    assert "No reports on page 3" in past and 'href="?">Back to the newest' in past
    assert client.get(tab, params={"page": 0}).status_code == 422


def test_a_labeler_filter_that_names_no_labeler_here_is_said_in_place(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "Broken", n_solutions=1)
    label_next(session_factory, project.id, make_user(session_factory, "ann", "labeler").id, FinishReason.give_up,
               ratings=[], note="lost")
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/reports", params={"labeler": "nobody"})
    assert page.status_code == 422
    assert "No label in this project is by &#39;nobody&#39;" in page.text
    download = client.get(f"/manage/projects/{project.id}/reports/download", params={"labeler": "nobody"})
    assert download.status_code == 422 and "no label in this project is by 'nobody'" in download.text
    assert client.get(f"/manage/projects/{project.id}/reports", params={"labeler": "ANN"}).status_code == 200
