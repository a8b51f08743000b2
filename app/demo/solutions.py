"""Demo solutions made from MATH reference solutions, by a fixed, documented procedure.

MATH-500 has no model-written solutions, so the demo makes three per problem:

1. `reference`: the reference solution split into steps (paragraphs, then sentences outside
   math), and PRM800K's closing step `# Answer\\n\\n<answer>`. Its final answer is right. A
   reference solution that draws a figure (`[asy]`) makes none: its steps lean on the figure
   ("First, we build a diagram:"), which a step cannot show.
2. `wrong_answer`: the reference steps with the final answer changed (the first number in the
   boxed answer moved by one; if it has none, its first sign flipped or `+ 1` appended), in the
   boxed step and the `# Answer` step. The first wrong step is the step holding the box.
3. `slip`: a number inside the math of one middle step moved by one, everything else
   untouched: a flawed step in a solution whose final answer is still right.

Variants the procedure cannot make (no middle step with a number, say) are skipped.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

ASY_BLOCK = re.compile(r"\[asy\].*?\[/asy\]", re.DOTALL)
# Math spans inside which a period never ends a sentence.
# A dollar escaped (\$, a dollar sign) neither opens nor closes one: MATH writes prices so.
MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(?:\\.|[^\\$]|\$(?!\$))*?\$\$|(?<!\\)\$(?:\\.|[^\\$])*\$"
    r"|\\\[.*?\\\]|\\\(.*?\\\)|\\begin\{(\w+\*?)\}.*?\\end\{\1\}",
    re.DOTALL,
)
# A sentence ends at . ? ! before a capital (also when the period sits inside math, as in
# "$x = 2.$  Then", whose hidden span is closed by \x01), or where display math runs straight
# into the next sentence, as MATH writes "…\\]Thus, …".
SENTENCE_END = re.compile(r"(?<=[.?!\x01])\s+(?=[A-Z\\$\x00])|(?<=[\x00\x01])(?=[A-Z][a-z])")
NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\d.])")


@dataclass(frozen=True)
class DemoSolution:
    kind: str
    steps: list[str]
    answer: str


def split_steps(solution: str) -> list[str]:
    steps: list[str] = []
    for paragraph in re.split(r"\n\s*\n", solution):
        paragraph = paragraph.strip()
        if paragraph:
            steps.extend(_sentences(paragraph))
    return steps


def _sentences(paragraph: str) -> list[str]:
    # Hide math so that "x = 1.5." inside $…$ never splits; put it back after.
    spans: list[str] = []

    def hide(match: re.Match[str]) -> str:
        span = match.group(0)
        spans.append(span)
        closing = "\x01" if re.search(r"[.?!]\s*(\$+|\\\]|\\\))$", span) else "\x00"
        return f"\x00{len(spans) - 1}{closing}"

    masked = MATH_SPAN.sub(hide, paragraph)
    parts = [p.strip() for p in SENTENCE_END.split(masked) if p.strip()]
    return [re.sub(r"\x00(\d+)[\x00\x01]", lambda m: spans[int(m.group(1))], p) for p in parts]


def perturb_answer(answer: str) -> str:
    match = NUMBER.search(answer)
    if match:
        n = int(match.group(1))
        return answer[: match.start()] + str(n + 1) + answer[match.end() :]
    for a, b in (("-", "+"), ("+", "-")):
        if a in answer:
            return answer.replace(a, b, 1)
    return f"{answer} + 1"


def demo_solutions(solution: str, answer: str, seed: int) -> list[DemoSolution]:
    if ASY_BLOCK.search(solution):
        return []
    steps = split_steps(solution)
    if not steps:
        return []
    closing = f"# Answer\n\n{answer}"
    made = [DemoSolution("reference", [*steps, closing], answer)]
    boxed_at = _last_index(steps, lambda s: "\\boxed{" in s)
    wrong = perturb_answer(answer)
    if boxed_at is not None and wrong != answer and answer in steps[boxed_at]:
        changed = list(steps)
        changed[boxed_at] = _replace_last(steps[boxed_at], answer, wrong)
        made.append(DemoSolution("wrong_answer", [*changed, f"# Answer\n\n{wrong}"], wrong))
    middle = [i for i in range(1, max(1, len(steps) - 1)) if _math_number(steps[i])]
    if middle:
        i = random.Random(seed).choice(middle)
        slipped = list(steps)
        slipped[i] = _slip(steps[i])
        made.append(DemoSolution("slip", [*slipped, closing], answer))
    return made


def _math_number(step: str) -> re.Match[str] | None:
    for span in MATH_SPAN.finditer(step):
        found = NUMBER.search(span.group(0))
        if found:
            return found
    return None


def _slip(step: str) -> str:
    for span in MATH_SPAN.finditer(step):
        found = NUMBER.search(span.group(0))
        if found:
            at = span.start() + found.start()
            n = int(found.group(1))
            return step[:at] + str(n + 1) + step[at + len(found.group(1)) :]
    return step


def _replace_last(text: str, old: str, new: str) -> str:
    at = text.rfind(old)
    return text[:at] + new + text[at + len(old) :]


def _last_index(items: list[str], test) -> int | None:  # type: ignore[no-untyped-def]
    for i in range(len(items) - 1, -1, -1):
        if test(items[i]):
            return i
    return None
