"""MATH-style problem files and candidate solution files through the import service."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import select

from app.db import session_scope
from app.demo.service import MATH500
from app.errors import BadInput
from app.models import AnswerGrade, Assignment, ImportBatch, Problem, Solution
from tests.conftest import make_project
from tests.imports.conftest import import_bytes, jsonl, row_counts



def test_math500_imports_every_problem_with_its_fields(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    result = import_bytes(session_factory, project, MATH500.read_bytes(), "math", filename="math500.jsonl")
    assert result.added == {"problems": 500, "solutions": 0, "labels": 0} and result.lines == 500
    first = orjson.loads(MATH500.read_bytes().splitlines()[0])
    with session_scope(session_factory) as session:
        problem = session.scalar(select(Problem).where(Problem.statement == first["problem"]))
        assert problem is not None
        assert (problem.answer, problem.subject, problem.level) == (first["answer"], first["subject"], first["level"])
        assert problem.reference_solution == first["solution"]
        assert problem.source_id == first.get("unique_id")
    again = import_bytes(session_factory, project, MATH500.read_bytes() + b"\n", "math")
    assert again.added["problems"] == 0 and again.duplicates == 500


def test_original_math_layout_takes_the_boxed_answer(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    line = {
        "problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?",
        "level": "Level 2",
        "type": "Prealgebra",
        "solution": "The sum is $\\boxed{\\frac{5}{6}}$.",
    }
    unknown_level = {"problem": "Shade it.", "level": "Level ?", "type": "Geometry", "solution": "$\\boxed{3}$"}
    import_bytes(session_factory, project, jsonl([line, unknown_level]), "math")
    with session_scope(session_factory) as session:
        rows = session.execute(select(Problem.answer, Problem.subject, Problem.level).order_by(Problem.id)).all()
    assert [tuple(r) for r in rows] == [("\\frac{5}{6}", "Prealgebra", 2), ("3", "Geometry", None)]


def _problems(factory, project) -> None:  # type: ignore[no-untyped-def]
    problems = [
        {"problem": "What is $2 + 2$?", "answer": "4"},
        {"problem": "What is $3 \\cdot 3$?", "answer": 9},
    ]
    import_bytes(factory, project, jsonl(problems), "math", filename="problems.jsonl")


def test_candidates_by_text_and_by_id_are_graded_and_queued(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _problems(session_factory, project)
    with session_scope(session_factory) as session:
        nine_id = session.scalar(select(Problem.id).where(Problem.answer == "9"))
    candidates = [
        {"problem": "What is $2 + 2$?", "steps": ["Two and two.", "# Answer\n\n4"]},
        {"problem": "What is $2 + 2$?", "text": "Two and two.\n\nMakes five.\n\n", "answer": "5", "model": "gpt-x", "temperature": 0.7},
        {"problem_id": nine_id, "steps": ["Three threes are $\\boxed{9}$."]},
        {"problem_id": nine_id, "steps": ["I am not sure."]},
    ]
    result = import_bytes(session_factory, project, jsonl(candidates), "solutions", filename="cands.jsonl")
    assert result.added == {"problems": 0, "solutions": 4, "labels": 0}
    assert result.queued == 8
    assert result.grades == {"right": 2, "wrong": 1, "no_answer": 1}
    with session_scope(session_factory) as session:
        rows = session.execute(select(Solution).order_by(Solution.id)).scalars().all()
        assert [s.steps for s in rows][1] == ["Two and two.", "Makes five."]
        assert [s.final_answer for s in rows] == ["4", "5", "9", None]
        assert [s.answer_grade for s in rows] == [
            AnswerGrade.right,
            AnswerGrade.wrong,
            AnswerGrade.right,
            AnswerGrade.no_answer,
        ]
        assert rows[1].origin["meta"] == {"model": "gpt-x", "temperature": 0.7}
        assert rows[0].origin["file"] == "cands.jsonl" and rows[0].origin["line"] == 1
        assert session.scalar(select(Assignment.id).limit(1)) is not None


@pytest.mark.parametrize(
    ("separator", "steps"),
    [(None, ["a\nb", "c"]), ("\\n", ["a", "b", "c"]), ("###", ["a\nb\n\nc"])],
    ids=["default blank line", "escaped newline", "custom"],
)
def test_text_is_cut_at_the_separator(session_factory, separator, steps) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    line = {"problem": "What is $2 + 2$?", "text": "a\nb\n\nc"}
    import_bytes(session_factory, project, jsonl([line]), "solutions", separator=separator)
    with session_scope(session_factory) as session:
        assert session.scalar(select(Solution.steps)) == steps


@pytest.mark.parametrize("separator", [None, "\\n"], ids=["default blank line", "escaped newline"])
def test_a_figure_is_not_cut_into_steps(session_factory, separator) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    figure = "[asy]\nsize(80);\n\ndraw((0,0)--(1,1));\nlabel(\"$A$\", (0,0));\n[/asy]"
    line = {"problem": "What is $2 + 2$?", "text": f"Draw it:\n\n{figure}\n\nSo 4."}
    import_bytes(session_factory, project, jsonl([line]), "solutions", separator=separator)
    with session_scope(session_factory) as session:
        steps = session.scalar(select(Solution.steps))
    (drawn,) = [step for step in steps if "[asy]" in step]
    assert drawn.endswith("[/asy]") and "draw((0,0)--(1,1));" in drawn and steps[-1] == "So 4."


def test_a_figure_that_never_closes_joins_no_steps(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    line = {"problem": "What is $2 + 2$?", "text": "MATH writes figures as [asy] blocks.\n\nSo 2 + 2.\n\nIt is 4."}
    import_bytes(session_factory, project, jsonl([line]), "solutions")
    with session_scope(session_factory) as session:
        assert session.scalar(select(Solution.steps)) == ["MATH writes figures as [asy] blocks.", "So 2 + 2.", "It is 4."]


def test_the_same_file_cut_at_another_separator_or_read_as_another_format_is_imported(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    data = jsonl([{"problem": "What is $2 + 2$?", "answer": "4", "text": "a\nb\n\nc"}])
    # Problems first, then the same bytes as solutions: the second read is not the first again.
    assert import_bytes(session_factory, project, data, "math").added["problems"] == 1
    cut = import_bytes(session_factory, project, data, "solutions", separator="###")
    assert not cut.already_imported and cut.added["solutions"] == 1
    assert import_bytes(session_factory, project, data, "solutions", separator="###").already_imported
    # A mistyped separator put right.
    recut = import_bytes(session_factory, project, data, "solutions", separator="\\n")
    assert not recut.already_imported and recut.added["solutions"] == 1
    with session_scope(session_factory) as session:
        assert sorted(session.scalars(select(Solution.steps))) == [["a", "b", "c"], ["a\nb\n\nc"]]
        batches = session.scalars(select(ImportBatch).order_by(ImportBatch.id)).all()
        assert [(b.format.value, b.separator) for b in batches] == [
            ("math", None), ("solutions", "###"), ("solutions", "\n")]


def test_a_separator_longer_than_a_batch_keeps_is_refused(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    with pytest.raises(BadInput, match="at most 100 characters"):
        import_bytes(session_factory, project, jsonl([{"problem": "p", "steps": ["4"]}]), "solutions", separator="#" * 101)
    assert row_counts(session_factory)["import_batches"] == 0


def test_an_answer_heading_cut_off_by_the_separator_stays_with_its_answer(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    text = "So $2 + 2 = 4$.\n\n# Answer\n\n4"
    import_bytes(session_factory, project, jsonl([{"problem": "What is $2 + 2$?", "text": text}]), "solutions")
    with session_scope(session_factory) as session:
        assert session.scalar(select(Solution.steps)) == ["So $2 + 2 = 4$.", "# Answer\n\n4"]


def test_a_heading_ending_a_step_goes_with_the_answer(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    # Cut at something else than the file's separator, the heading ends the step before the answer.
    text = "s1\n---\ns2\n---\n# Answer\n\n4"
    import_bytes(session_factory, project, jsonl([{"problem": "What is $2 + 2$?", "text": text}]), "solutions")
    with session_scope(session_factory) as session:
        assert session.scalar(select(Solution.steps)) == ["s1\n---\ns2\n---", "# Answer\n\n4"]


def test_windows_line_endings_are_cut_as_blank_lines(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    lines = [{"problem": "What is $2 + 2$?", "text": "Two and two.\r\n\r\nMake four.\r\n\r\n# Answer\r\n\r\n4"},
             {"problem": "What is $2 + 2$?", "text": "Old Mac.\r\rFour.\r\r# Answer\r\r4"}]
    result = import_bytes(session_factory, project, jsonl(lines), "solutions")
    assert (result.added["solutions"], result.uncut) == (2, 0)
    # A separator that names the carriage return itself is taken as given.
    crlf = [{"problem": "What is $2 + 2$?", "text": "Two.\r\n\r\nPlus two.\r\n\r\n# Answer\r\n\r\n4"}]
    import_bytes(session_factory, project, jsonl(crlf), "solutions", separator="\\r\\n\\r\\n")
    with session_scope(session_factory) as session:
        assert sorted(session.scalars(select(Solution.steps))) == [
            ["Old Mac.", "Four.", "# Answer\n\n4"],
            ["Two and two.", "Make four.", "# Answer\n\n4"],
            ["Two.", "Plus two.", "# Answer\r\n\r\n4"],
        ]


def test_texts_the_separator_did_not_cut_are_counted(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    lines = [{"problem": "What is $2 + 2$?", "text": "Two and two.\nMake four.\n# Answer: 4"},
             {"problem": "What is $2 + 2$?", "text": "# Answer\n\n4"},
             {"problem": "What is $2 + 2$?", "text": "Four."}]
    result = import_bytes(session_factory, project, jsonl(lines), "solutions", separator="###")
    # Only the first: the others are one step of one line, or the answer alone.
    assert result.uncut == 1
    assert "warning: 1 solution text held no separator and became one step each" in result.summary()


def test_candidates_again_add_nothing(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    _problems(session_factory, project)
    line = jsonl([{"problem": "What is $2 + 2$?", "steps": ["4"]}])
    import_bytes(session_factory, project, line, "solutions")
    result = import_bytes(session_factory, project, line + line, "solutions")
    assert result.added["solutions"] == 0 and result.duplicates == 2 and result.queued == 0


def test_same_statement_with_two_answers_needs_an_id(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    twins = [{"problem": "Guess.", "answer": "1"}, {"problem": "Guess.", "answer": "2"}]
    import_bytes(session_factory, project, jsonl(twins), "math")
    before = row_counts(session_factory)
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, jsonl([{"problem": "Guess.", "steps": ["1"]}]), "solutions")
    assert caught.value.details[0]["field"] == "problem"
    assert "2 problems have this text" in caught.value.details[0]["message"]
    assert row_counts(session_factory) == before


def test_problem_ids_of_another_project_are_not_found(session_factory) -> None:  # type: ignore[no-untyped-def]
    mine = make_project(session_factory, "mine")
    theirs = make_project(session_factory, "theirs")
    _problems(session_factory, theirs)
    with session_scope(session_factory) as session:
        foreign_id = session.scalar(select(Problem.id).limit(1))
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, mine, jsonl([{"problem_id": foreign_id, "steps": ["x"]}]), "solutions")
    assert caught.value.details[0]["field"] == "problem_id"


def test_a_solution_names_its_problem_by_the_unique_id_of_the_problems_file(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    problems = [{"problem": "What is $2 + 2$?", "answer": "4", "unique_id": "test/algebra/1.json"},
                {"problem": "What is $3 + 3$?", "answer": "6", "unique_id": "test/algebra/2.json"},
                {"problem": "What is $4 + 4$?", "answer": "8", "unique_id": "twice"},
                {"problem": "What is $5 + 5$?", "answer": "10", "unique_id": "twice"}]
    import_bytes(session_factory, project, jsonl(problems), "math")
    before = row_counts(session_factory)
    with pytest.raises(BadInput) as caught:
        import_bytes(session_factory, project, jsonl([
            {"problem_id": "test/algebra/1.json", "steps": ["2 + 2 = 4.", "# Answer\n\n4"]},
            {"problem_id": "test/algebra/9.json", "steps": ["no."]},
            {"problem_id": "twice", "steps": ["which?"]},
        ]), "solutions", filename="sols.jsonl")
    assert [(d["line"], d["field"], d["message"]) for d in caught.value.details] == [
        (2, "problem_id", "no problem with unique_id 'test/algebra/9.json' in this project: import the problems first"),
        (3, "problem_id", "2 problems have unique_id 'twice': give the problem's text or Stepwise's number instead"),
    ]
    assert row_counts(session_factory) == before
    added = import_bytes(session_factory, project, jsonl([
        {"problem_id": "test/algebra/1.json", "steps": ["2 + 2 = 4.", "# Answer\n\n4"]},
        {"problem_id": "test/algebra/2.json", "text": "3 + 3 = 5.\n\n# Answer\n\n5"},
    ]), "solutions")
    assert added.added["solutions"] == 2
    with session_scope(session_factory) as session:
        graded = dict(session.execute(select(Problem.source_id, Solution.answer_grade).join(Solution)).all())
    assert graded == {"test/algebra/1.json": AnswerGrade.right, "test/algebra/2.json": AnswerGrade.wrong}
