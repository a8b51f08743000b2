"""Final-answer grading: pull the answer out of a solution and compare it with ground truth.

Equivalence is math-verify's (sympy-backed), not a hand-made normalizer; we only remove the
notation it does not know about (thousands separators, `\\!`, `\\$`, trailing units in `\\text`).
Every comparison runs under a time limit, because sympy can spin for minutes on adversarial input
and the platform grades every imported solution inline.
"""

import concurrent.futures
import functools
import multiprocessing
import multiprocessing.connection
import os
import logging
import re
import signal
import threading
from decimal import Decimal
from typing import Literal

# Bump whenever extraction or equivalence changes: the platform stores it beside every grade so
# that stale grades can be found and recomputed.
GRADER_VERSION = "stepwise-grader-1+math-verify-0.9"

Grade = Literal["right", "wrong", "no_answer"]

COMPARISON_TIMEOUT_S = 5.0
_LONGEST_BARE_ANSWER = 200

# It warns once that its own timeouts are off; ours replace them (see _compare).
logging.getLogger("math_verify").setLevel(logging.ERROR)

_ANSWER_SECTION = re.compile(r"^#\s*Answer\s*$(.*)", re.MULTILINE | re.DOTALL | re.IGNORECASE)
_ANSWER_IS = re.compile(r"the (?:final )?answer is\s*:?\s*(.+)", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_THOUSANDS = re.compile(r"(?<=\d)(?:,|\{,\})(?=\d{3}(?!\d))")
_PLAIN_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_TEXT_UNITS = re.compile(r"^(.*?\d)\s*(?:\\(?:text|mbox|mathrm)\{\s*[a-zA-Z ]+\}(?:\^\{?\d\}?)?\s*)+$")


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...}, matching nested braces (a regex cannot)."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    depth, start = 1, starts[-1]
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i].strip()
    return None


def extract_answer(solution_text: str) -> str | None:
    """The final answer written in a solution, as raw text/LaTeX, or None if there is none.

    Order follows how confident each marker is: PRM800K's `# Answer` section is written by the
    generator as the answer, a \\boxed{} is the MATH convention, "The answer is" the MetaMath one.
    """
    section = _ANSWER_SECTION.search(solution_text)
    if section:
        answer = section.group(1).strip()
        boxed = _last_boxed(answer)
        answer = boxed if boxed is not None else answer
        return answer.strip().strip("$").strip() or None
    boxed = _last_boxed(solution_text)
    if boxed is not None:
        return boxed or None
    matches = list(_ANSWER_IS.finditer(solution_text))
    if matches:
        answer = matches[-1].group(1).strip().splitlines()[0].strip()
        answer = answer.rstrip(".").strip().strip("$").strip()
        return answer or None
    return None


def _clean(answer: str) -> str:
    """Notation math-verify does not normalise itself."""
    answer = answer.strip().strip("$").strip()
    answer = answer.replace("\\!", "").replace("\\$", "").replace("\\%", "%")
    answer = re.sub(r"\\[,;: ]", " ", answer)
    answer = answer.replace("^\\circ", "").replace("^{\\circ}", "").replace("°", "")
    answer = _THOUSANDS.sub("", answer)
    units = _TEXT_UNITS.match(answer)
    if units:
        answer = units.group(1)
    return answer.strip().rstrip(".").strip()


def _plain_text(answer: str) -> str:
    """Lower-case words without LaTeX wrappers, for answers that are names rather than values."""
    answer = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", answer)
    return re.sub(r"[\s{}\\]", "", answer).lower()


def _quick_verdict(answer: str, ground_truth: str) -> bool | None:
    """The verdict when no parsing is needed, else None.

    Most answers are the ground truth written the same way, or two plain numbers; settling those
    here keeps sympy (milliseconds a pair, and a process hop off the main thread) for the rest,
    which is what makes grading at import speed possible.
    """
    if _PLAIN_NUMBER.match(answer) and _PLAIN_NUMBER.match(ground_truth):
        # Plain numbers as they come need none of the cleaning below, which took five times
        # as long as this comparison.
        return Decimal(answer) == Decimal(ground_truth)
    answer, ground_truth = _clean(answer), _clean(ground_truth)
    if _plain_text(answer) == _plain_text(ground_truth):
        return True
    if _PLAIN_NUMBER.match(answer) and _PLAIN_NUMBER.match(ground_truth):
        return Decimal(answer) == Decimal(ground_truth)
    return None


def _load_math_verify() -> None:
    """Import math-verify, and sympy with it: a quarter of a second, which most commands and
    most imports (whose answers _quick_verdict settles) never pay. Called before a comparison's
    time limit starts, so that loading does not count against it."""
    import math_verify  # noqa: F401


def _compare(answer: str, ground_truth: str) -> bool:
    quick = _quick_verdict(answer, ground_truth)
    if quick is not None:
        return quick
    # Here, not at the top: see _load_math_verify.
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    answer, ground_truth = _clean(answer), _clean(ground_truth)
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    # math-verify's own limits use whole-second SIGALRM and refuse to run off the main thread;
    # is_equivalent enforces the limit instead.
    gold = parse(f"${ground_truth}$", config, parsing_timeout=None)
    pred = parse(f"${answer}$", config, parsing_timeout=None)
    if not gold or not pred:
        return False
    return verify(gold, pred, timeout_seconds=None)


class _Overrun(BaseException):
    """BaseException so that math-verify's and sympy's `except Exception` cannot swallow it."""


def _raise_overrun(signum, frame):
    raise _Overrun


def _exit_with_parent() -> None:
    """The helper holds both ends of its own task queue, so it never sees its parent go: a
    server killed outright (or a test's) left it running for good. It leaves when the parent does."""

    def watch() -> None:
        parent = multiprocessing.parent_process()
        if parent is not None:
            multiprocessing.connection.wait([parent.sentinel])
            os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


@functools.cache
def _pool() -> concurrent.futures.ProcessPoolExecutor:
    pool = concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with_parent
    )
    # Start the helper and import sympy in it now, so that start-up does not count against the
    # time limit of the first comparison.
    pool.submit(_load_math_verify).result()
    return pool


def _compare_in_helper_process(answer: str, ground_truth: str, timeout_s: float) -> bool:
    # A thread cannot be interrupted, so off the main thread (web handlers, worker threads) the
    # comparison runs in a helper process that is killed if it overruns.
    future = _pool().submit(_compare, answer, ground_truth)
    try:
        return future.result(timeout=timeout_s)
    except (concurrent.futures.TimeoutError, concurrent.futures.process.BrokenProcessPool):
        pool = _pool()
        _pool.cache_clear()
        for process in list(pool._processes.values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        return False


def is_equivalent(answer: str, ground_truth: str, timeout_s: float = COMPARISON_TIMEOUT_S) -> bool:
    """True when `answer` is mathematically the same as `ground_truth`; False on timeout."""
    quick = _quick_verdict(answer, ground_truth)
    if quick is not None:
        return quick
    if threading.current_thread() is not threading.main_thread():
        return _compare_in_helper_process(answer, ground_truth, timeout_s)
    _load_math_verify()
    previous = signal.signal(signal.SIGALRM, _raise_overrun)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return _compare(answer, ground_truth)
    except _Overrun:
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def grade(solution_text_or_answer: str, ground_truth: str) -> Grade:
    """Grade a whole solution (its final answer is extracted) or a bare answer."""
    text = solution_text_or_answer
    # A bare answer ("12", "\\frac{1}{2}") has no marker; a long multi-line text without one
    # is a solution that never stated an answer. A plain number holds no marker: most imported
    # answers are one, and looking for markers took as long as the comparison.
    if len(text) <= _LONGEST_BARE_ANSWER and _PLAIN_NUMBER.fullmatch(text):
        answer: str | None = text
    else:
        answer = extract_answer(text)
    if answer is None:
        text = text.strip()
        if not text or "\n" in text or len(text) > _LONGEST_BARE_ANSWER:
            return "no_answer"
        answer = text
    return "right" if is_equivalent(answer, ground_truth) else "wrong"
