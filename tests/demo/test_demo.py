"""The demo procedure and loader, on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlalchemy import func, select

from app.auth.security import verify_password
from app.auth.service import issue_api_token
from app.db import session_scope
from app.demo.service import DEMO_PROJECT, MATH500, load_demo
from app.demo.solutions import demo_solutions, perturb_answer, split_steps
from app.models import AnswerGrade, ApiToken, Assignment, Role, Solution, User
from app.users.schemas import UserUpdate
from app.users.service import get_user_by_name, update_user
from tests.cli.conftest import refused, stepwise  # noqa: F401 (a fixture)
from tests.conftest import make_user


def test_split_steps_keeps_math_whole() -> None:
    text = "Let $x = 1.5.$  Then $y = 2$. So\n\\[z = 3.\\]Thus, we are done.\n\nThe answer is $\\boxed{3}$."
    assert split_steps(text) == [
        "Let $x = 1.5.$",
        "Then $y = 2$.",
        "So\n\\[z = 3.\\]",
        "Thus, we are done.",
        "The answer is $\\boxed{3}$.",
    ]


def test_an_escaped_dollar_neither_opens_nor_closes_math() -> None:
    # MATH writes prices as $\\$15$ and \\$18: read as "$\\$" and a stray "$", the spans after
    # it were paired wrong, and a step ended inside an align* whose \\end began the next.
    text = ("Subtract $\\$15$ from it. We obtain \\begin{align*}\n\\$18-\\$15&=\\boxed{3}.\n\\end{align*}"
            "Notice that $a-b=a+(-b)$.")
    assert split_steps(text) == [
        "Subtract $\\$15$ from it.",
        "We obtain \\begin{align*}\n\\$18-\\$15&=\\boxed{3}.\n\\end{align*}",
        "Notice that $a-b=a+(-b)$.",
    ]


def test_a_reference_solution_that_draws_a_figure_makes_no_demo_solution() -> None:
    # Its steps would lean on a figure no step can show: "First, we build a diagram:".
    solution = "First, we build a diagram:\n\n[asy]draw((0,0)--(1,1));[/asy]\n\nThe answer is $\\boxed{3}$."
    assert demo_solutions(solution, "3", seed=0) == []


def test_perturbed_answers_differ() -> None:
    assert perturb_answer("42") == "43"
    assert perturb_answer("4210_{5}") == "4211_{5}"
    assert perturb_answer("\\frac{3}{4}") == "\\frac{4}{4}"
    assert perturb_answer("p - q") == "p + q"
    assert perturb_answer("\\pi") == "\\pi + 1"


def test_variants_carry_the_documented_changes() -> None:
    solution = "First $a = 2$.  Next $b = 5$.  Then $c = 7$.  So the answer is $\\boxed{12}$."
    kinds = {s.kind: s for s in demo_solutions(solution, "12", seed=0)}
    assert kinds["reference"].steps[-1] == "# Answer\n\n12"
    assert kinds["wrong_answer"].steps[-2] == "So the answer is $\\boxed{13}$."
    assert kinds["wrong_answer"].answer == "13"
    slip = kinds["slip"].steps
    changed = [i for i, (a, b) in enumerate(zip(slip, kinds["reference"].steps)) if a != b]
    assert len(changed) == 1 and 0 < changed[0] < len(slip) - 2


def test_load_demo_marks_grades_and_is_idempotent(session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = MATH500.read_text().splitlines()[:25]
    problems = tmp_path / "math25.jsonl"
    problems.write_text("\n".join(lines) + "\n")
    with session_scope(session_factory) as session:
        first = load_demo(session, problems)
    assert first.project == DEMO_PROJECT and first.problems_added == 25
    assert first.solutions_added >= 50
    with session_scope(session_factory) as session:
        second = load_demo(session, problems)
        assert second.problems_added == 0 and second.solutions_added == 0
        wrong = session.scalars(
            select(Solution.origin).where(Solution.answer_grade == AnswerGrade.wrong)
        ).all()
        assert wrong and {origin["demo"] for origin in wrong} == {"wrong_answer"}
        assert session.scalar(select(func.count()).where(Solution.is_demo.is_(False))) == 0
        assert session.scalar(select(func.count()).select_from(Assignment)) == first.solutions_added
        for username, _role, password in second.logins:
            user = session.scalar(select(User).where(User.username == username))
            assert user is not None and verify_password(user.password_hash, password)


def test_demo_logins_keep_the_user_rules(session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Run on a database whose admin has changed a demo user, the demo hands out that user as it
    is now: found in another case, its role kept and printed, its old logins ended; one the admin
    deactivated stays so, without a login printed."""
    problems = tmp_path / "math2.jsonl"
    problems.write_text("\n".join(MATH500.read_text().splitlines()[:2]) + "\n")
    make_user(session_factory, "admin", Role.admin)
    make_user(session_factory, "Demo-Labeler", Role.labeler)
    with session_scope(session_factory) as session:
        first = load_demo(session, problems)
        manager = get_user_by_name(session, "demo-manager")
        update_user(session, manager, UserUpdate(role=Role.researcher), by=None)
        update_user(session, get_user_by_name(session, "demo-admin"), UserUpdate(is_active=False), by=None)
        token = issue_api_token(session, get_user_by_name(session, "demo-researcher"), "notebook").token
    assert ("Demo-Labeler", "labeler") in [(name, role) for name, role, _ in first.logins]
    with session_scope(session_factory) as session:
        second = load_demo(session, problems)
        logins = {name: role for name, role, _ in second.logins}
        assert logins["demo-manager"] == "researcher" and "demo-labeler" not in logins
        assert "demo-admin" not in logins and not get_user_by_name(session, "demo-admin").is_active
        revoked = session.scalar(select(ApiToken.revoked_at).where(ApiToken.name == "notebook"))
        assert revoked is not None and token
        assert session.scalar(select(func.count()).select_from(User)) == 6


def test_a_demo_problems_file_that_is_not_jsonl_is_named_before_any_database_is_made(stepwise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    database = tmp_path / "demo.db"
    notes = tmp_path / "notes.txt"
    notes.write_text("problems, one a line\n")
    monkeypatch.setenv("STEPWISE_DEMO_PROBLEMS", str(notes))
    result = stepwise(f"sqlite:///{database}", "demo", "--no-serve")
    refused(result, f"demo problems file {notes}: line 1: not JSON", "STEPWISE_DEMO_PROBLEMS")
    assert len(result.stderr.splitlines()) == 1, result.stderr
    # It was an orjson traceback, after `stepwise demo` had made and migrated the database.
    assert not database.exists()

    # The line at fault is the file's: blank lines count, and JSON that is no object is named too.
    one = MATH500.read_text().splitlines()[0]
    notes.write_text(f"{one}\n\n[1, 2]\n")
    refused(stepwise(f"sqlite:///{database}", "demo", "--no-serve"), "line 3: not a JSON object")
    assert not database.exists()
