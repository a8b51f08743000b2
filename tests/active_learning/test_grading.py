import json
import subprocess
import sys
import threading
import time

import math_verify
import pytest

from active_learning import grading
from active_learning.grading import GRADER_VERSION, extract_answer, grade, is_equivalent
from app.demo.service import MATH500
from tests.conftest import process_alive



@pytest.mark.parametrize(
    "text, expected",
    [
        ("Adding them up gives 12.\n\n# Answer\n\n12", "12"),
        ("# Answer\n\n$\\frac{1}{2}$", "\\frac{1}{2}"),
        ("so $x = \\boxed{\\frac{\\sqrt{3}}{2}}$.", "\\frac{\\sqrt{3}}{2}"),
        ("first \\boxed{1}, then \\boxed{\\{1, \\{2\\}\\}}", "\\{1, \\{2\\}\\}"),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("Therefore 6 + 7 = 13. The answer is: 13", "13"),
        ("The answer is $\\dfrac{3}{4}$.", "\\dfrac{3}{4}"),
        ("We did not finish.", None),
        ("unbalanced \\boxed{1 + {2}", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "answer, truth",
    [
        ("10,000", "10000"),
        ("1{,}234{,}567", "1234567"),
        ("2\\!000", "2000"),
        ("\\dfrac{1}{2}", "\\frac12"),
        ("\\tfrac{3}{4}", "0.75"),
        ("30^\\circ", "30"),
        ("\\$5.00", "5"),
        ("12 \\text{ inches}", "12"),
        ("\\text{Monday}", "Monday"),
        ("[1,2)", "[1, 2)"),
        ("(-\\infty, 3]", "(-\\infty,3]"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\pi/2)"),
        ("3+4i", "4i+3"),
        ("x^2+2x+1", "(x+1)^2"),
        ("\\{1,2\\}", "\\{2,1\\}"),
    ],
)
def test_equivalent(answer, truth):
    assert is_equivalent(answer, truth)


@pytest.mark.parametrize(
    "answer, truth",
    [("7", "8"), ("[1,2]", "(1,2)"), ("(2,1)", "(1,2)"), ("3-4i", "3+4i"), ("0.333", "\\frac13"), ("\\pi", "3.14")],
)
def test_not_equivalent(answer, truth):
    assert not is_equivalent(answer, truth)


def test_grade_states():
    assert grade("Step one.\n\n# Answer\n\n42", "42") == "right"
    assert grade("41", "42") == "wrong"
    assert grade("We tried.\nNothing worked.", "42") == "no_answer"
    assert GRADER_VERSION


@pytest.mark.parametrize(("answer", "state"), [("42", "right"), ("-42.0", "wrong"), ("41", "wrong")])
def test_a_plain_number_is_graded_without_looking_for_answer_markers(monkeypatch, answer, state):
    monkeypatch.setattr(grading, "extract_answer", lambda text: pytest.fail("looked for markers"))
    assert grade(answer, "42") == state


def test_a_number_on_a_line_of_its_own_is_still_read_as_a_solution():
    assert grade("Adding up:\n42", "42") == "no_answer"
    assert grade("The answer is 42\n", "42") == "right"


def test_a_number_too_long_for_a_bare_answer_is_no_answer():
    long = "7" * 201
    assert grade(long, long) == grade(long, "7") == "no_answer"
    assert grade("7" * 200, "7" * 200) == "right"


def test_time_limit_in_main_thread(monkeypatch):
    monkeypatch.setattr(grading, "_compare", lambda a, b: time.sleep(30))
    assert is_equivalent("\\frac{1}{2}", "0.5", timeout_s=0.3) is False


def test_off_main_thread():
    results = []
    worker = threading.Thread(target=lambda: results.append(is_equivalent("\\frac12", "0.5")))
    worker.start()
    worker.join()
    assert results == [True]


def test_math500_reference_solutions_agree():
    rows = [json.loads(line) for line in MATH500.read_text().splitlines()]
    agree = sum(is_equivalent(extract_answer(r["solution"]) or "", r["answer"]) for r in rows)
    assert agree >= 495


@pytest.mark.parametrize(
    ("answer", "truth", "same"),
    [("5", "5.0", True), ("1,000", "1000", True), ("-3", "-3", True), ("4", "5", False), ("0.25", "0.2500", True)],
)
def test_plain_numbers_are_settled_without_parsing(monkeypatch, answer, truth, same):
    monkeypatch.setattr(math_verify, "parse", lambda *a, **k: pytest.fail("parsed a plain number"))
    assert is_equivalent(answer, truth) is same


def test_the_comparison_helper_leaves_when_its_parent_is_killed() -> None:
    # A server killed outright must not leave its sympy helper process behind for good.
    script = (
        "import time; from active_learning import grading; pool = grading._pool(); "
        "print(next(iter(pool._processes)), flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        helper = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert process_alive(helper)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while process_alive(helper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(helper)

