"""The Labels tab: a project's current labels, filtered and paged, over the service and HTTP."""

from __future__ import annotations

import html
import re

import orjson
import pytest
from sqlalchemy import select, update

from app.browse import service
from app.browse.service import PAGE_SIZE, LabelFilters
from app.db import session_scope
from app.labeling.schemas import StepRating
from app.labeling.service import prm800k_step
from app.models import FinishReason, Label, LabelSource, Problem, Project, Solution, User, utcnow
from app.quality.agreement import project_agreement
from app.quality.gold import set_gold
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes
from tests.reports.builders import add_problem, label_next


def _listed(factory, project_id: int, **filters: object) -> list[int]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return [row.label_id for row in service.list_labels(session, project_id, LabelFilters(**filters)).rows]


def _ids(factory, project_id: int, *where) -> list[int]:  # type: ignore[no-untyped-def]
    """Newest first by when labeled: an imported file's times do not follow its order."""
    with session_scope(factory) as session:
        return list(session.scalars(select(Label.id).where(Label.project_id == project_id, *where)
                                    .order_by(Label.created_at.desc(), Label.id.desc())))


@pytest.fixture
def sample(session_factory):  # type: ignore[no-untyped-def]
    """The PRM800K sample: nine labels of eight labelers, every outcome, a QC and a screening one."""
    project = make_project(session_factory, "sample")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    return project


def test_every_filter_keeps_what_it_names(session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    every = _ids(session_factory, sample.id)
    assert _listed(session_factory, sample.id) == every and len(every) == 9
    assert every != sorted(every, reverse=True), "the sample's times should not follow its order"
    assert _listed(session_factory, sample.id, outcome="found_error") == _ids(
        session_factory, sample.id, Label.finish_reason == FinishReason.found_error)
    assert _listed(session_factory, sample.id, kind="qc") == _ids(session_factory, sample.id, Label.is_quality_control)
    answers = _listed(session_factory, sample.id, kind="screening")
    assert answers == _ids(session_factory, sample.id, Label.is_initial_screening & ~Label.is_quality_control)
    ordinary = _listed(session_factory, sample.id, kind="ordinary")
    assert len(ordinary) == 7
    # The kinds part the labels: a screening item's gold is gold, not a screening answer.
    with session_scope(session_factory) as session:
        session.execute(update(Label).where(Label.project_id == sample.id, Label.is_quality_control.is_(True))
                        .values(is_initial_screening=True))
    gold = _listed(session_factory, sample.id, kind="qc")
    assert gold and _listed(session_factory, sample.id, kind="screening") == answers
    assert sorted(ordinary + gold + answers) == sorted(every)
    labeler = "340d89bc-f5b7-45e9-b272-909ba68ee363"
    assert _listed(session_factory, sample.id, labeler=labeler) == _ids(session_factory, sample.id, Label.foreign_labeler == labeler)
    assert _listed(session_factory, sample.id, source="rollout") == []
    with session_scope(session_factory) as session:
        problem_id = session.scalar(select(Problem.id).where(Problem.statement == "What is $7 \\times 8$?"))
    assert len(_listed(session_factory, sample.id, problem=problem_id)) == 1
    # Words of the statement, in any case; LIKE's wildcards typed are themselves.
    assert _listed(session_factory, sample.id, text="7 \\TIMES 8") == _listed(session_factory, sample.id, problem=problem_id)
    with session_scope(session_factory) as session:
        assert not any("%" in statement for statement in session.scalars(select(Problem.statement)))
    assert _listed(session_factory, sample.id, text="%") == []
    assert _listed(session_factory, sample.id, text="no such words_") == []
    assert len(_listed(session_factory, sample.id, grade="wrong")) == 3
    assert _listed(session_factory, sample.id, outcome="solution", grade="wrong") == []


def test_rows_carry_the_path_ratings_and_a_correction_replaces_its_label(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, correction_window_hours=24)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    _, label_id = label_next(session_factory, project.id, ann.id, FinishReason.found_error, ratings=[(1, True), (-1, False)])
    with session_scope(session_factory) as session:
        (row,) = service.list_labels(session, project.id, LabelFilters(labeler="ann")).rows
        assert (row.label_id, row.labeler, row.source) == (label_id, "ann", LabelSource.human)
        assert row.ratings == [(1, True), (-1, False)] and row.flags == 1
        assert service.labeler_names(session, project.id) == ["ann"]
        assert [r.label_id for r in service.list_labels(session, project.id, LabelFilters(labeler="ANN")).rows] == [label_id]
        label = session.get(Label, label_id)
        label.superseded_at = label.created_at
        session.add(Label(project_id=project.id, solution_id=label.solution_id, user_id=ann.id, steps=label.steps,
                          finish_reason=FinishReason.found_error, supersedes_id=label_id))
    listed = _listed(session_factory, project.id)
    assert len(listed) == 1 and listed != [label_id]


def test_pages_hold_the_newest_first(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    add_problem(session_factory, project, "What is $1+1$?", n_solutions=PAGE_SIZE + 3)
    ann = make_user(session_factory, "ann", "labeler")
    for _ in range(PAGE_SIZE + 3):
        label_next(session_factory, project.id, ann.id, FinishReason.solution)
    with session_scope(session_factory) as session:
        first = service.list_labels(session, project.id, LabelFilters())
        second = service.list_labels(session, project.id, LabelFilters(page=2))
        beyond = service.list_labels(session, project.id, LabelFilters(page=3))
    assert (first.total, first.pages, len(first.rows), len(second.rows), beyond.rows) == (PAGE_SIZE + 3, 2, PAGE_SIZE, 3, [])
    ids = [r.label_id for r in first.rows + second.rows]
    assert ids == sorted(ids, reverse=True)


def test_the_tab_lists_labels_with_text_shown_as_text(client, session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        session.scalars(select(Problem).where(Problem.project_id == sample.id)).first().statement = "<b>bold</b> $x$"
    make_user(session_factory, "rae", "researcher")
    browser_login(client, "rae")
    page = client.get(f"/manage/projects/{sample.id}/labels")
    assert page.status_code == 200
    assert 'aria-current="page">Labels</a>' in page.text
    assert "9 current labels, newest first" in page.text
    assert "&lt;b&gt;bold&lt;/b&gt;" in page.text and "<b>bold</b>" not in page.text
    assert len(re.findall(r'<tr id="label-\d+">', page.text)) == 9
    # An imported labeler's UUID loses its middle, not its end: ids sharing a start still differ.
    with session_scope(session_factory) as session:
        uuid = session.scalar(select(Label.foreign_labeler).where(Label.project_id == sample.id).limit(1))
    assert len(uuid) == 36 and f'title="{uuid}">{uuid[:9]}…{uuid[-8:]}</td>' in page.text
    filtered = client.get(f"/manage/projects/{sample.id}/labels", params={"outcome": "give_up", "labeler": " "})
    assert "1 current label matches these filters" in filtered.text


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"outcome": "maybe"}, "outcome", "be one of"),
        ({"problem": "-4"}, "problem", "be at least 1"),
        ({"problem": "9" * 30}, "problem", "be at most 2147483647"),
        ({"kind": "gold"}, "kind", "be one of"),
        ({"labeler": "x" * 101}, "labeler", "at most 100 characters"),
        ({"labeler": "x" * 1500}, "labeler", "at most 100 characters"),
        ({"outcome": "y" * 1500}, "outcome", "be one of"),
        ({"agreement": "maybe"}, "agreement", "be one of"),
        ({"agreement": "disagreed" * 150}, "agreement", "be one of"),
    ],
)
def test_bad_filters_are_shown_in_place_and_list_nothing(client, session_factory, sample, params, field, message) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{sample.id}/labels", params=params)
    assert page.status_code == 422
    assert "No labels are listed: correct the filters marked above." in page.text
    assert message in html.unescape(page.text).split(f'id="{field}-error">', 1)[1].split("<", 1)[0]
    assert '<tr id="label-' not in page.text


def test_a_bad_page_number_is_said_and_a_page_past_the_end_leads_back(client, session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    bad = client.get(f"/manage/projects/{sample.id}/labels", params={"page": "two"})
    assert bad.status_code == 422 and "Page: must be a whole number." in bad.text
    past = client.get(f"/manage/projects/{sample.id}/labels", params={"page": "7", "kind": "qc"})
    assert past.status_code == 200 and "No labels on page 7" in past.text
    assert 'href="?kind=qc">Back to the newest</a>' in past.text


def test_labelers_cannot_browse_labels(client, session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    page = client.get(f"/manage/projects/{sample.id}/labels", follow_redirects=False)
    assert page.status_code == 403 and "340d89bc" not in page.text


def _label(factory, project_id: int, solution_id: int, user_id: int | None, ratings: list[int], **fields: object) -> int:  # type: ignore[no-untyped-def]
    """A current label of `ratings`, one a step from the first, stored as the labeling page stores them."""
    with session_scope(factory) as session:
        label = Label(project_id=project_id, solution_id=solution_id, user_id=user_id,
                      steps=[prm800k_step(StepRating(rating=r, flagged=False)) for r in ratings],  # type: ignore[arg-type]
                      finish_reason=FinishReason.found_error if -1 in ratings else FinishReason.solution, **fields)
        session.add(label)
        session.flush()
        return label.id


@pytest.fixture
def overlapping(session_factory):  # type: ignore[no-untyped-def]
    """A project of overlap 2 with a problem of four three-step solutions, and labelers ann and bob."""
    project = make_project(session_factory, overlap=2)
    _, solutions = add_problem(session_factory, project, "What is $1+1$?", n_solutions=4)
    ann, bob = (make_user(session_factory, name, "labeler").id for name in ("ann", "bob"))
    return project, solutions, ann, bob


def test_labelers_who_disagree_on_the_first_error_are_listed_side_by_side_and_marked(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _, solutions = add_problem(session_factory, project, "What is $1+1$?", n_solutions=2)
    ann, bob = (make_user(session_factory, name, "labeler") for name in ("ann", "bob"))
    # Each labels both solutions before the other starts: newest first would part their labels.
    made = {}
    for user, ratings in ((ann, [(1, False), (-1, False)]), (bob, [(-1, False)])):
        for _ in solutions:
            task, label_id = label_next(session_factory, project.id, user.id, FinishReason.found_error, ratings=ratings)
            made[label_id] = task.solution.id
    by_solution = sorted(made, key=lambda label_id: (made[label_id], label_id))
    assert _listed(session_factory, project.id) == sorted(made, reverse=True)
    assert _listed(session_factory, project.id, agreement="disagreed") == by_solution
    assert _listed(session_factory, project.id, agreement="agreed") == []
    with session_scope(session_factory) as session:
        listing = service.list_labels(session, project.id, LabelFilters(agreement="disagreed"))
    assert all(row.disagreed for row in listing.rows)
    assert (listing.overlap.agreed, listing.overlap.disagreed) == (frozenset(), frozenset(solutions))
    assert listing.overlap.disagreed_labels == frozenset(made)

    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels", params={"agreement": "disagreed"})
    assert page.status_code == 200
    rows = re.findall(r'<tr id="label-(\d+)"( class="next-solution")?>', page.text)
    assert [int(label_id) for label_id, _ in rows] == by_solution
    # The second solution's first row draws the line between the two solutions' labels.
    assert [bool(line) for _, line in rows] == [False, False, True, False]
    assert page.text.count(">disagrees</span>") == 4
    assert "4 current labels match these filters, by problem and solution, each solution's labels together." in html.unescape(page.text)
    # Each order is offered once, by its name, the one in force chosen: what the form sends is
    # what it shows.
    def offered(address_page: str) -> list[tuple[str, bool, str]]:
        orders = re.search(r'<select name="sort"[^>]*>(.*?)</select>', address_page, re.S).group(1)
        return [(value, bool(chosen), words) for value, chosen, words in
                re.findall(r'<option value="(\w*)"( selected)?>([^<]+)</option>', orders)]
    assert [words for _, _, words in offered(page.text)] == ["Newest first", "Oldest first", "Quickest first",
                                                             "Slowest first", "By problem and solution"]
    assert [value for value, chosen, _ in offered(page.text) if chosen] == ["solution"]
    unfiltered = client.get(f"/manage/projects/{project.id}/labels").text
    assert [value for value, chosen, _ in offered(unfiltered) if chosen] == ["newest"]
    asked = client.get(f"/manage/projects/{project.id}/labels", params={"agreement": "disagreed", "sort": "newest"}).text
    assert [value for value, chosen, _ in offered(asked) if chosen] == ["newest"]


def test_labelers_who_agree_are_listed_under_agreed_and_a_step_one_left_unrated_is_no_disagreement(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (same, unrated_after_error, rated_apart, alone), ann, bob = overlapping
    agreeing = [_label(session_factory, project.id, same, ann, [1, 0, 1]), _label(session_factory, project.id, same, bob, [1, 0, 1]),
                # Ann stopped at the first error, Bob rated on: the third step has one rating.
                _label(session_factory, project.id, unrated_after_error, ann, [1, -1]),
                _label(session_factory, project.id, unrated_after_error, bob, [1, -1, 1])]
    # No error either way, but the second step is 0 for one and +1 for the other.
    apart = [_label(session_factory, project.id, rated_apart, ann, [1, 0, 1]),
             _label(session_factory, project.id, rated_apart, bob, [1, 1, 1])]
    _label(session_factory, project.id, alone, ann, [-1])
    assert _listed(session_factory, project.id, agreement="agreed") == agreeing
    assert _listed(session_factory, project.id, agreement="disagreed") == apart
    with session_scope(session_factory) as session:
        listing = service.list_labels(session, project.id, LabelFilters())
    assert {row.label_id for row in listing.rows if row.disagreed} == set(apart)
    assert listing.overlap.shared == 3

    # The label's own page says so too: the step Ann left unrated is not marked as differing.
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    for label_id, differing in ((agreeing[3], 0), (agreeing[2], 0), (apart[0], 1)):
        page = client.get(f"/manage/projects/{project.id}/labels/{label_id}").text
        assert page.count('class="other-rating differs"') == differing, label_id
    assert "not rated there" in client.get(f"/manage/projects/{project.id}/labels/{agreeing[3]}").text


def test_a_machine_label_that_disagrees_with_a_labeler_is_no_disagreement(session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (one_human, two_humans, *_), ann, bob = overlapping
    _label(session_factory, project.id, one_human, ann, [1, 1, 1])
    _label(session_factory, project.id, one_human, None, [-1], source=LabelSource.prm)
    with session_scope(session_factory) as session:
        found = service.overlap(session, project.id)
        assert (found.agreed, found.disagreed, found.settled) == (frozenset(), frozenset(), frozenset())
    humans = [_label(session_factory, project.id, two_humans, ann, [1, 1, 1]),
              _label(session_factory, project.id, two_humans, bob, [1, 1, 1])]
    _label(session_factory, project.id, two_humans, None, [1, -1], source=LabelSource.rollout)
    assert _listed(session_factory, project.id, agreement="disagreed") == []
    # The machine's label is no labeler's: it is not listed with the labelers who agree.
    assert _listed(session_factory, project.id, agreement="agreed") == humans


def test_only_current_labels_count_a_correction_settles_a_disagreement(session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (solution, *_), ann, bob = overlapping
    wrong = _label(session_factory, project.id, solution, ann, [1, -1])
    right = _label(session_factory, project.id, solution, bob, [1, 1, 1])
    assert _listed(session_factory, project.id, agreement="disagreed") == [wrong, right]
    with session_scope(session_factory) as session:
        session.get(Label, wrong).superseded_at = utcnow()
    correction = _label(session_factory, project.id, solution, ann, [1, 1, 1], supersedes_id=wrong)
    assert _listed(session_factory, project.id, agreement="disagreed") == []
    assert _listed(session_factory, project.id, agreement="agreed") == [right, correction]


def test_the_count_of_solutions_whose_labelers_disagree_links_to_them(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (first, second, third, _), ann, bob = overlapping
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/labels"
    link = f'<a href="{url}?agreement=disagreed">'
    _label(session_factory, project.id, first, ann, [1, 1, 1])
    alone = client.get(url).text
    assert "where labelers disagree" not in alone and "Labelers agree" not in alone
    _label(session_factory, project.id, first, bob, [1, 1, 1])
    assert "Labelers agree on the solution that two or more of them rated." in client.get(url).text
    for solution in (second, third):
        _label(session_factory, project.id, solution, ann, [-1])
        _label(session_factory, project.id, solution, bob, [1, -1])
    page = client.get(url, params={"outcome": "solution"})
    assert page.status_code == 200
    assert f"{link}<strong>2 solutions where labelers disagree</strong></a>" in page.text
    assert "of 3 that two labelers or more rated" in page.text


def _phase1_label(factory, project_id: int, solution_id: int, user_id: int, steps: list[dict]) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        label = Label(project_id=project_id, solution_id=solution_id, user_id=user_id, steps=steps,
                      finish_reason=FinishReason.solution)
        session.add(label)
        session.flush()
        return label.id


def _step(ratings: list[int | None], chosen: int | None, written: int | None = None) -> dict:
    """A phase-1 step: its alternatives as rated, the one taken, or a step the labeler wrote."""
    # The first alternative is the solution's own step, stored without its text (see models.label).
    return {"completions": [{**({"text": f"alternative {i}"} if i else {}), "rating": r, "flagged": False}
                            for i, r in enumerate(ratings)],
            "chosen_completion": chosen,
            "human_completion": None if written is None else {"text": "my step", "rating": written, "flagged": False}}


def test_phase1_labelers_are_compared_on_the_alternatives_they_both_rated(session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (same_rating_other_choice, wrote_or_stopped, rated_apart, _), ann, bob = overlapping
    # Alike ratings, different alternatives taken: after that step they label different steps.
    _phase1_label(session_factory, project.id, same_rating_other_choice, ann, [_step([1, 0], 0), _step([1], 0)])
    _phase1_label(session_factory, project.id, same_rating_other_choice, bob, [_step([1, 0], 1), _step([-1], None)])
    # Both find the model's step wrong; one writes a step of their own, the other stops.
    _phase1_label(session_factory, project.id, wrote_or_stopped, ann, [_step([1], 0), _step([-1], None, written=1)])
    _phase1_label(session_factory, project.id, wrote_or_stopped, bob, [_step([1], 0), _step([-1], None)])
    # An alternative rated +1 by one and −1 by the other, though each went on with a +1 one.
    _phase1_label(session_factory, project.id, rated_apart, ann, [_step([1, 1], 0)])
    _phase1_label(session_factory, project.id, rated_apart, bob, [_step([-1, 1], 1)])
    with session_scope(session_factory) as session:
        found = service.overlap(session, project.id)
    assert found.agreed == {same_rating_other_choice, wrote_or_stopped}
    assert found.disagreed == {rated_apart}


def test_a_step_written_in_a_phase1_record_is_the_solution_step_a_label_made_here_rates(session_factory) -> None:  # type: ignore[no-untyped-def]
    # The solution made from the record's path goes on with the step its labeler wrote, after
    # rating the model's two alternatives -1; a labeler here who rates every step +1 agrees.
    def completion(text: str, rating: int) -> dict:
        return {"text": text, "rating": rating, "flagged": False}
    record = {
        "labeler": "ext-1", "timestamp": "2023-01-05T10:00:00", "generation": None,
        "is_quality_control_question": False, "is_initial_screening_question": False,
        "question": {"problem": "What is $1+1$?", "ground_truth_answer": "2"},
        "label": {"steps": [
            {"completions": [completion("We add.", 1)], "human_completion": None, "chosen_completion": 0},
            {"completions": [completion("$1+1=3$.", -1), completion("$1+1=11$.", -1)], "chosen_completion": None,
             "human_completion": {"text": "$1+1=2$.", "rating": None, "source": "human", "flagged": False,
                                  "corrected_rating": None}},
            {"completions": [completion("# Answer\n\n2", 1)], "human_completion": None, "chosen_completion": 0},
        ], "total_time": 1000, "finish_reason": "solution"},
    }
    project = make_project(session_factory, overlap=2)
    import_bytes(session_factory, project, (orjson.dumps(record) + b"\n"))
    ann = make_user(session_factory, "ann", "labeler").id
    with session_scope(session_factory) as session:
        solution = session.scalar(select(Solution))
        assert solution.steps == ["We add.", "$1+1=2$.", "# Answer\n\n2"]
        imported = session.scalar(select(Label.id))
    mine = _label(session_factory, project.id, solution.id, ann, [1, 1, 1])
    with session_scope(session_factory) as session:
        found = service.overlap(session, project.id)
        report = project_agreement(session, session.get(Project, project.id))
        rows = {row.label_id: row for row in service.list_labels(session, project.id, LabelFilters()).rows}
    assert found.agreed == {solution.id} and not found.disagreed
    assert (report.first_error_pairs, report.first_error_agreement) == (1, 1.0)
    # Steps 1 and 3 are rated by both; the written step's rejected alternatives by the record alone.
    assert report.confusion == [[0, 0, 0], [0, 0, 0], [0, 0, 4]]
    assert [r for r, _ in rows[imported].ratings] == [1, 1, 1] == [r for r, _ in rows[mine].ratings]


def test_a_gold_label_settles_a_disagreement_and_other_labels_are_not_compared(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (solution, *_), ann, bob = overlapping
    cid = make_user(session_factory, "cid", "labeler").id
    first = _label(session_factory, project.id, solution, ann, [1, 1, 1])
    second = _label(session_factory, project.id, solution, bob, [1, -1])
    gave_up = _label(session_factory, project.id, solution, cid, [])
    with session_scope(session_factory) as session:
        session.get(Label, gave_up).finish_reason = FinishReason.give_up
    assert _listed(session_factory, project.id, agreement="disagreed") == [first, second]
    with session_scope(session_factory) as session:
        rows = service.list_labels(session, project.id, LabelFilters()).rows
    assert {row.label_id for row in rows if row.disagreed} == {first, second}

    with session_scope(session_factory) as session:
        set_gold(session, project.id, second, gold=True)
    assert _listed(session_factory, project.id, agreement="disagreed") == []
    with session_scope(session_factory) as session:
        found = service.overlap(session, project.id)
    assert (found.disagreed, found.settled) == (frozenset(), {solution})
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = html.unescape(client.get(f"/manage/projects/{project.id}/labels").text)
    assert "No disagreement left to settle among the 1 solution" in page and "1 disagreement settled with a gold label" in page


def test_the_agreement_views_page_by_solution_so_that_labels_stay_together(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=3)
    _, solutions = add_problem(session_factory, project, "What is $1+1$?", n_solutions=service.SOLUTIONS_PER_PAGE + 1)
    people = [make_user(session_factory, name, "labeler").id for name in ("ann", "bob", "cid")]
    # Three labels a solution: pages of 50 labels would cut the 17th solution's.
    for solution in solutions:
        for person, ratings in zip(people, ([1, 1, 1], [1, -1], [1, 1, 1]), strict=True):
            _label(session_factory, project.id, solution, person, ratings)
    with session_scope(session_factory) as session:
        first = service.list_labels(session, project.id, LabelFilters(agreement="disagreed"))
        second = service.list_labels(session, project.id, LabelFilters(agreement="disagreed", page=2))
    assert (first.pages, first.total) == (2, 3 * len(solutions))
    assert [row.solution_id for row in first.rows] == [s for s in sorted(solutions)[:-1] for _ in range(3)]
    assert [row.solution_id for row in second.rows] == [max(solutions)] * 3


def test_phase1_agreement_compares_the_alternatives_of_steps_reached_the_same_way(session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (solution, *_), ann, bob = overlapping
    # Alike on both alternatives of the first step; then each rates the next step of another path.
    _phase1_label(session_factory, project.id, solution, ann, [_step([1, 0], 0), _step([1], 0)])
    _phase1_label(session_factory, project.id, solution, bob, [_step([1, 0], 1), _step([-1], None)])
    with session_scope(session_factory) as session:
        report = project_agreement(session, session.get(Project, project.id))
    assert (report.rating_pairs, report.units) == (2, 2)
    assert report.labelers[0].rating_agreement == 1.0
    assert report.confusion == [[0, 0, 0], [0, 2, 0], [0, 0, 2]]


def test_a_labeler_filter_that_names_nobody_says_so_and_offers_names_it_may_mean(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (solution, *_), ann, bob = overlapping
    _label(session_factory, project.id, solution, ann, [1, 1, 1])
    with session_scope(session_factory) as session:
        session.add(Label(project_id=project.id, solution_id=solution, foreign_labeler="Alice-ext_7",
                          steps=[{"completions": [{"rating": 1}], "chosen_completion": 0}], created_at=utcnow()))
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/labels"
    page = html.unescape(client.get(url, params={"labeler": "alice", "outcome": "solution"}).text)
    note = page.split('id="unmatched-labeler"', 1)[1].split("</p>", 1)[0]
    assert "No label here names the labeler “alice”" in note
    assert '<a href="?outcome=solution&labeler=Alice-ext_7">Alice-ext_7</a>' in note
    # Imported ids match as filed; a LIKE wildcard typed is a character, not a pattern.
    assert "Perhaps" not in html.unescape(client.get(url, params={"labeler": "a%e"}).text).split('id="unmatched-labeler"')[1]
    assert "Alice-ext_7</a>" in html.unescape(client.get(url, params={"labeler": "EXT_"}).text)
    # A labeler who labeled here, on labels the other filters leave out, is no unknown name.
    page = client.get(url, params={"labeler": "ANN", "outcome": "give_up"}).text
    assert "No labels match these filters" in page and "unmatched-labeler" not in page


def test_every_order_lists_the_labels_it_names_and_a_time_less_label_last(session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        labels = session.scalars(select(Label).where(Label.project_id == sample.id)).all()
        # Three labels without a time (as many imported ones) and two alike, so that ties show.
        for label, ms in zip(labels, (None, 9_000, 2_000, 2_000, None, 40_000, 500, None, 12_000), strict=True):
            label.total_time_ms = ms
        # The first solution moved to the last problem: by problem is then not by solution id.
        first = session.get(Solution, min(label.solution_id for label in labels))
        first.problem_id = max(session.get(Solution, label.solution_id).problem_id for label in labels)
        session.flush()
        known = [(label.id, label.total_time_ms, label.created_at, label.solution_id,
                  session.get(Solution, label.solution_id).problem_id) for label in labels]
    newest = _ids(session_factory, sample.id)
    assert _listed(session_factory, sample.id, sort="newest") == newest
    assert _listed(session_factory, sample.id, sort="oldest") == newest[::-1]
    place = {label_id: index for index, label_id in enumerate(newest)}
    timed = sorted((k for k in known if k[1] is not None), key=lambda k: (k[1], place[k[0]]))
    untimed = sorted((k[0] for k in known if k[1] is None), key=place.__getitem__)
    assert _listed(session_factory, sample.id, sort="quickest") == [k[0] for k in timed] + untimed
    slowest = sorted((k for k in known if k[1] is not None), key=lambda k: (-k[1], place[k[0]]))
    assert _listed(session_factory, sample.id, sort="slowest") == [k[0] for k in slowest] + untimed
    by_solution = sorted(known, key=lambda k: (k[4], k[3], k[2], k[0]))
    assert by_solution != sorted(known, key=lambda k: (k[3], k[2], k[0]))
    assert _listed(session_factory, sample.id, sort="solution") == [k[0] for k in by_solution]


def test_an_order_in_the_agreement_views_orders_the_solutions_and_keeps_their_labels_together(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (first, second, third, _), ann, bob = overlapping
    made: dict[int, list[int]] = {}
    # Times on task: the second solution has the quickest label and the third the slowest.
    for solution, times in ((first, (5_000, 6_000)), (second, (1_000, 30_000)), (third, (4_000, 90_000))):
        made[solution] = [_label(session_factory, project.id, solution, person, ratings, total_time_ms=ms)
                          for person, ratings, ms in zip((ann, bob), ([1, 1, 1], [1, -1]), times, strict=True)]

    def solutions(**filters: object) -> list[int]:
        with session_scope(session_factory) as session:
            rows = service.list_labels(session, project.id, LabelFilters(agreement="disagreed", **filters)).rows
        listed = [row.solution_id for row in rows]
        # Each solution's labels together, as labeled.
        assert [row.label_id for row in rows] == [label for s in dict.fromkeys(listed) for label in made[s]]
        return list(dict.fromkeys(listed))

    assert solutions() == solutions(sort="solution") == [first, second, third]
    assert solutions(sort="quickest") == [second, third, first]
    assert solutions(sort="slowest") == [third, second, first]
    # Labeled one solution after another: the newest label is the third solution's.
    assert solutions(sort="newest") == [third, second, first]
    assert solutions(sort="oldest") == [first, second, third]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = html.unescape(client.get(f"/manage/projects/{project.id}/labels", params={"agreement": "disagreed", "sort": "quickest"}).text)
    assert ("6 current labels match these filters, by problem and solution, each solution's labels together, the solution with"
            " the quickest label first by time on task (labels without a time last)") in page
    assert [int(i) for i in re.findall(r'<tr id="label-(\d+)"', page)] == made[second] + made[third] + made[first]
    plain = client.get(f"/manage/projects/{project.id}/labels", params={"agreement": "disagreed"}).text
    assert '<th aria-sort="ascending"><a class="sort" href="?agreement=disagreed&amp;sort=solution"' in plain


def test_column_headings_order_the_list_and_keep_the_filters(client, session_factory, sample) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{sample.id}/labels"
    page = html.unescape(client.get(url, params={"kind": "ordinary", "page": "1"}).text)
    assert '<th aria-sort="descending"><a class="sort" href="?kind=ordinary&sort=oldest"' in page
    assert '<a class="sort" href="?kind=ordinary&sort=quickest" title="Order quickest first">Time</a>' in page
    slowest = html.unescape(client.get(url, params={"kind": "ordinary", "sort": "slowest"}).text)
    assert "7 current labels match these filters, slowest first by time on task (labels without a time last)." in slowest
    assert '<th class="num" aria-sort="descending"><a class="sort" href="?kind=ordinary&sort=quickest"' in slowest
    assert '<option value="slowest" selected>' in slowest
    bad = client.get(url, params={"sort": "random"})
    assert bad.status_code == 422 and "be one of" in html.unescape(bad.text).split('id="sort-error">', 1)[1].split("<", 1)[0]


def test_the_labels_api_names_labelers_as_the_export_does_and_refuses_one_who_labeled_nothing(client, session_factory, overlapping) -> None:  # type: ignore[no-untyped-def]
    project, (solution, *_), ann, bob = overlapping
    mine = _label(session_factory, project.id, solution, ann, [1, 1, 1])
    with session_scope(session_factory) as session:
        uuid = session.get(User, ann).labeler_uuid
        imported = Label(project_id=project.id, solution_id=solution, foreign_labeler="ext-7",
                         steps=[{"completions": [{"rating": 1}], "chosen_completion": 0}], created_at=utcnow())
        session.add(imported)
        session.flush()
        imported_id = imported.id
    make_user(session_factory, "max", "manager")
    url = f"/api/v1/projects/{project.id}/labels"
    headers = api_headers(client, "max")

    def listed(labeler: str) -> list[int]:
        answer = client.get(url, headers=headers, params={"labeler": labeler})
        assert answer.status_code == 200, answer.text
        return [item["label_id"] for item in answer.json()["items"]]

    assert listed(uuid) == listed(uuid.upper()) == listed("ANN") == [mine]
    assert listed("ext-7") == [imported_id]
    refused = client.get(url, headers=headers, params={"labeler": "nobody"})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("no label in this project is by 'nobody'")
    assert refused.json()["errors"] == [{"field": "labeler", "message": "no labels by 'nobody' here"}]
    # bob labeled nothing here: the export refuses him too, and so does the list.
    assert client.get(url, headers=headers, params={"labeler": "bob"}).status_code == 422
    browser_login(client, "max")
    page = html.unescape(client.get(f"/manage/projects/{project.id}/labels", params={"labeler": uuid}).text)
    assert f'id="label-{mine}"' in page and "unmatched-labeler" not in page
