"""What KaTeX and Asymptote cannot show still reads well, on the labeler page and in the picks
inspector: answers at the end of a last step, tables, LaTeX KaTeX cannot parse, [asy] figures,
and a long problem above the first step."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from playwright.sync_api import Page, expect

from app.db import session_scope
from app.demo.service import MATH500
from app.models import PickReason, Round, RoundPick, RoundStage, RoundStatus, Solution
from tests.browser.conftest import SCREENSHOTS, add_solution, login, screenshot
from tests.conftest import make_project, make_user

LAPTOP = {"width": 1440, "height": 900}


def _math500(predicate) -> dict:  # type: ignore[no-untyped-def]
    with MATH500.open() as lines:
        records = [json.loads(line) for line in lines]
    return max((r for r in records if predicate(r["problem"])), key=lambda r: len(r["problem"]))


def _open(page: Page, session_factory, steps: list[str], statement: str, answer: str = "5") -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, steps, statement=statement, answer=answer)
    page.set_viewport_size(LAPTOP)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#steps > .step")).to_have_count(len(steps))


def test_answer_at_the_end_of_the_last_step_renders_as_math(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps = ["Half of $5$ is what we want.", "So the answer is $\\frac{5}{2}$.\n\n# Answer\n\n\\frac{5}{2}"]
    _open(page, session_factory, steps, "What is half of $5$?", "\\frac{5}{2}")

    last = page.locator("#steps > .step").nth(1).locator(".step-text")
    expect(last.locator(".answer-lead .katex")).to_have_count(1)
    expect(last.locator(".answer-heading")).to_have_text("# Answer")
    expect(last.locator(".answer-value .katex")).to_have_count(1)
    assert "\\frac" not in last.inner_text()
    # Set as the boxed expected answer is, not at half its size (text style's tight fraction).
    expect(last.locator(".answer-value .mfrac")).to_have_count(1)
    expect(last.locator(".answer-value .mfrac .mtight")).to_have_count(0)
    screenshot(page, "labeler_answer_in_last_step.png")


@pytest.mark.parametrize("answer", ["$n(n+1)/2$", "5 apples each"])
def test_an_answer_in_delimiters_or_words_gets_the_same_heading(page: Page, session_factory, answer: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, session_factory, ["Add $1$ to each.", f"# Answer\n\n{answer}"], "Find $n$.")

    last = page.locator("#steps > .step").nth(1).locator(".step-text")
    expect(last.locator(".answer-heading")).to_have_text("# Answer")
    expect(last.locator(".answer-value")).to_have_count(1)
    assert "$" not in last.inner_text()
    expect(last.locator(".answer-value .katex")).to_have_count(1 if "$" in answer else 0)


def test_an_answer_with_an_escaped_dollar_is_math(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # MATH's "\\$32,\\!348" is LaTeX for a price: taken for text with delimiters, it showed
    # its backslashes.
    _open(page, session_factory, ["Add them.", "# Answer\n\n\\$32,\\!348"], "What is the total?", "\\$32,\\!348")
    value = page.locator("#steps > .step").nth(1).locator(".answer-value")
    expect(value.locator(".katex")).to_have_count(1)
    expect(value.locator(".math-source")).to_have_count(0)
    assert "\\" not in value.locator(".katex-html").inner_text()
    expect(page.locator("#answer .katex")).to_have_count(1)


def test_escaped_dollars_in_text_are_dollar_signs_not_delimiters(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # KaTeX's auto-render took the first "\\$" in text for a delimiter: "5 and" became math.
    steps = ["It costs \\$5 and \\$6, and $\\mbox{total} = \\$11$ in all.",
             "A table: $$\\begin{tabular}{|c|c|}\\hline a & b \\\\ \\hline\\end{tabular}$$",
             "So \\$11 in all: \\boxed{\\$11}"]
    _open(page, session_factory, steps, "What do \\$5 and \\$6 make?")

    first = page.locator("#steps .step-text").nth(0)
    expect(first.locator(".katex")).to_have_count(1)
    visible = first.evaluate("e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('')")
    assert visible == "It costs $5 and $6, and  in all.", visible
    expect(first.locator(".katex-html")).to_have_text(re.compile(r"total\s*=\s*\$11"))
    # The formula's source, as a copy takes it, keeps the escape as written.
    expect(first.locator("annotation")).to_have_text("\\mbox{total} = \\$11")
    expect(page.locator("#problem-text")).to_have_text("What do $5 and $6 make?")
    # A tabular written inside $$…$$ needs no delimiters of its own.
    table = page.locator("#steps .step-text").nth(1)
    expect(table.locator(".katex-display")).to_have_count(1)
    # A \boxed{…} written bare in text is drawn with its dollar.
    boxed = page.locator("#steps .step-text").nth(2)
    expect(boxed.locator(".katex")).to_have_count(1)
    expect(boxed.locator(".katex-html")).to_have_text(re.compile(r"\$11"))
    expect(page.locator(".katex-error, .math-source")).to_have_count(0)
    screenshot(page, "labeler_escaped_dollars.png")


def test_prices_stay_text_and_an_unclosed_brace_spoils_only_its_formula(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps = ["I paid $5 and then $7, total $12.",
             "Unclosed: $\\frac{1}{$ then fine $y^2$.",
             "Spaced: $ (1+2+3)(-4) $ and $x$, for $3$ apples at $2 each.",
             "Costs $5; so $\\boxed{x}$ stays math.",
             # Read as KaTeX reads them: two formulas side by side, and dollars inside braces.
             "Since $x,$$y,$ and $z$ are positive, $\\text{if $x>0$}$ holds."]
    _open(page, session_factory, steps, "What is $\\frac{1}{2}$ of $10?")

    texts = page.locator("#steps .step-text")
    expect(texts.nth(0)).to_have_text("I paid $5 and then $7, total $12.")
    expect(texts.nth(0).locator(".katex, .math-source")).to_have_count(0)
    # Only the broken formula is source, the reason on hover; the next one is drawn.
    source = texts.nth(1).locator(".math-source")
    expect(source).to_have_text("\\frac{1}{")
    expect(source).to_have_attribute("title", re.compile(r"^Shown as source: a brace is opened and not closed"))
    expect(texts.nth(1).locator(".katex")).to_have_count(1)
    expect(texts.nth(1).locator(".katex annotation")).to_have_text("y^2")
    expect(texts.nth(2).locator(".katex")).to_have_count(3)
    expect(texts.nth(2)).to_contain_text("apples at $2 each.")
    expect(texts.nth(3).locator(".katex")).to_have_count(1)
    expect(texts.nth(3)).to_contain_text("Costs $5; so")
    expect(texts.nth(4).locator(".math-source")).to_have_count(0)
    assert texts.nth(4).evaluate("e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('')") == (
        "Since  and  are positive,  holds.")
    expect(page.locator("#problem-text .katex")).to_have_count(1)
    expect(page.locator("#problem-text")).to_contain_text("of $10?")
    screenshot(page, "labeler_prices_and_unclosed_braces.png")


def test_a_fenced_code_block_keeps_its_indentation_and_no_math(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps = ["Check it in Python:\n```python\nfor i in range(3):\n    print(f\"${i}$\")\n```\nSo $x = 2$."]
    _open(page, session_factory, steps, "Find $x$.")
    text = page.locator("#steps .step-text").first
    code = text.locator("pre.step-code code")
    expect(code).to_have_text('for i in range(3):\n    print(f"${i}$")')
    assert code.evaluate("e => getComputedStyle(e.parentElement).whiteSpace") == "pre"
    # The formula after it is drawn; the dollars in the code are not.
    expect(text.locator(".katex")).to_have_count(1)
    expect(code.locator(".katex")).to_have_count(0)
    assert "```" not in text.inner_text()
    screenshot(page, "labeler_code_block.png")


def test_arrays_and_tables_render(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    table = _math500(lambda p: "\\multicolumn" in p)["problem"]
    steps = [
        "The signs:\n\\begin{array}{c|c} x & f(x) \\\\ \\hline 1 & 2 \\end{array}",
        "A table:\n\\begin{tabular}{|l|c|}\\hline\nGrade & $x$ \\\\ \\hline\n$9^{\\mathrm{th}}$ & $41.1\\%$ \\\\ \\hline\n\\end{tabular}",
    ]
    _open(page, session_factory, steps, table)

    for text in page.locator("#steps .step-text, #problem-text").all():
        expect(text.locator(".katex-display")).to_have_count(1)
        visible = text.evaluate("e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('')")
        assert "\\begin" not in visible and "tabular" not in visible, visible
    expect(page.locator(".katex-error, .math-source")).to_have_count(0)
    # The caption of MATH's table sits above it; its rules are drawn.
    expect(page.locator("#problem-text .katex-display")).to_contain_text("Number of Students per County")
    assert page.locator("#problem-text .katex-display .hline").count() >= 3
    screenshot(page, "labeler_tables.png")


def test_latex_of_math_solutions_that_katex_lacks_is_drawn_near_enough(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Each of these showed as source in the MATH demo's steps.
    steps = [
        "So $x = 5 \\mbox{ and } y = 2$.",
        "Cancel: $\\cancelto{0}{x - x} + 1$.",
        "\\begin{eqnarray*}\na + b &=& c \\\\\nd &=& e\n\\end{eqnarray*}",
        "$$\\begin{array}{@{}l@{\\;}c!{,}r}\\multicolumn{2}{c}{\\text{head}} & z \\\\ \\cline{1-2} a & b & c\\end{array}$$",
    ]
    _open(page, session_factory, steps, "Find $x$.")

    expect(page.locator("#steps .katex-error, #steps .math-source")).to_have_count(0)
    texts = page.locator("#steps .step-text")
    for i in range(len(steps)):
        expect(texts.nth(i).locator(".katex")).not_to_have_count(0)
        visible = texts.nth(i).evaluate("e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('')")
        assert "\\" not in visible, visible
    expect(texts.nth(0)).to_contain_text("and")
    expect(texts.nth(2).locator(".katex-display")).to_have_count(1)
    screenshot(page, "labeler_math_rewritten.png")
    # A \gdef in one formula stays in it: the macros given to KaTeX are a copy each time.
    assert page.evaluate("""() => {
        const probe = document.createElement("div");
        document.body.append(probe);
        return import("/static/js/math.js").then(({ renderMathText }) => {
            renderMathText(probe, "$\\gdef\\frac#1#2{BROKEN} 1$");
            renderMathText(probe, "$\\frac{1}{2}$");
            return !probe.textContent.includes("BROKEN");
        });
    }""")


def test_latex_katex_cannot_render_is_quiet_source(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    steps = ["Then $\\notacommand{x} + 1$ follows.", "So the answer is 5.\n\n# Answer\n\n\\frac{5}{"]
    _open(page, session_factory, steps, "Find $x$.")

    expect(page.locator(".katex-error")).to_have_count(0)
    source = page.locator("#steps > .step").nth(0).locator(".math-source")
    expect(source).to_have_text("\\notacommand{x} + 1")
    expect(source).to_have_attribute("title", "Shown as source: Undefined control sequence: \\notacommand")
    style = source.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).fontFamily]")
    assert style[0] == "rgb(107, 114, 128)" and "monospace" in style[1], style
    answer = page.locator("#steps > .step").nth(1).locator(".answer-value .math-source")
    expect(answer).to_have_text("\\frac{5}{")
    expect(answer).to_have_attribute("title", re.compile(r"^Shown as source: .*expected '\}'"))
    screenshot(page, "labeler_quiet_source.png")


def test_figure_that_cannot_be_drawn_is_a_collapsed_source_block(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    statement = "In the figure below,\n[asy]draw((0,0)--;[/asy]\nwhat is $x$?"
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/figures/" in request.url else None)
    _open(page, session_factory, ["$x = 5$."], statement)

    block = page.locator("#problem-text details.asy-source")
    expect(block.locator("summary")).to_have_text("figure not shown (Asymptote source)")
    expect(block).not_to_have_attribute("open", "")
    expect(block.locator("pre")).not_to_be_visible()
    if shutil.which("asy") is None:
        # The page knows the server draws nothing, and asks for no drawing (no 404 in the console).
        expect(block).to_have_attribute("title", "This server does not draw Asymptote figures (see make asymptote).")
        assert asked == []
    else:
        expect(block).to_have_attribute("title", re.compile("^figure not drawn: Asymptote failed: line 1: syntax error"))
    expect(page.locator("#problem-text")).not_to_contain_text("[asy]")
    block.locator("summary").click()
    expect(block.locator("pre")).to_have_text("draw((0,0)--;")
    screenshot(page, "labeler_asy_source.png")

    # Labeled, the problem reads the same on the label's own page, and its preview in the list
    # says a figure is there instead of showing its code.
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    page.goto("/label/stats")
    snippet = page.locator(".my-labels .snippet").first
    expect(snippet).to_contain_text("[figure]")
    expect(snippet).not_to_contain_text("draw(")
    page.locator(".my-labels").get_by_role("link", name="View").first.click()
    expect(page.locator(".label-view .problem-text details.asy-source summary")).to_have_text(
        "figure not shown (Asymptote source)")
    expect(page.locator(".label-view .problem-text")).not_to_contain_text("[asy]")


def test_a_figure_in_a_step_is_a_collapsed_source_block_with_no_math_in_it(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    figure = '[asy]\ndraw((0,0)--(3,0));\nlabel("$(0,3)$", (0,3), W);\n[/asy]'
    _open(page, session_factory, [f"Plot the points:\n{figure}\nso $x = 3$.", "Hence 5."], "What is $x$?")
    step = page.locator("#steps > .step").first.locator(".step-text")
    block = step.locator("details.asy-source")
    expect(block.locator("summary")).to_have_text("figure not shown (Asymptote source)")
    expect(block).to_have_attribute("title", "Figures in steps are not drawn: open to read the Asymptote source.")
    expect(step).not_to_contain_text("[asy]")
    # The text around it is math as before; the code's labels are not set as formulas.
    expect(step.locator(".katex")).to_have_count(1)
    block.locator("summary").click()
    expect(block.locator("pre")).to_contain_text('label("$(0,3)$", (0,3), W);')
    screenshot(page, "labeler_asy_in_step.png")


@pytest.mark.skipif(shutil.which("asy") is None, reason="Asymptote (Debian package asymptote) is not installed")
def test_math500_figure_is_drawn(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    record = _math500(lambda p: "[asy]" in p and "unitsize" in p)
    _open(page, session_factory, ["Look at the figure."], record["problem"], record["answer"])

    image = page.locator("#problem-text .asy-figure img")
    expect(image).to_have_count(record["problem"].count("[asy]"))
    image.first.scroll_into_view_if_needed()
    page.wait_for_function("() => [...document.querySelectorAll('.asy-figure img')].every(i => i.complete && i.naturalWidth > 0)")
    expect(page.locator(".asy-source")).to_have_count(0)
    screenshot(page, "labeler_asy_figure.png")


def test_first_step_is_on_screen_under_a_long_problem(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # MATH-500's longest statements without a figure, one after another: taller than the screen.
    with MATH500.open() as lines:
        problems = sorted((p for p in (json.loads(line)["problem"] for line in lines) if "[asy]" not in p), key=len)
    statement = "\n\n".join(problems[-4:])
    _open(page, session_factory, ["First, count the stamps.", "Then add."], statement)

    box = page.locator("#steps > .step").first.bounding_box()
    assert box is not None and box["y"] + box["height"] <= LAPTOP["height"], box
    # The statement is all there, in its own scrolling panel.
    panel = page.locator("#problem-text")
    assert panel.evaluate("e => e.scrollHeight > e.clientHeight")
    # The viewport only, as the labeler sees it on load: the fold is the point.
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "labeler_long_problem.png"))


def test_picks_inspector_renders_answers_tables_and_figures(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    statement = "Read the table.\n\\begin{tabular}{|c|c|}\\hline\nA & $1$ \\\\ \\hline\n\\end{tabular}\n[asy]draw((0,0)--;[/asy]"
    steps = ["$A$ is $1$.", "So the answer is $1$.\n\n# Answer\n\n\\frac{2}{2}"]
    wide = "$$" + " + ".join(f"\\frac{{{k}}}{{{k + 1}}}" for k in range(1, 30)) + "$$"
    solution_id = add_solution(session_factory, project, steps, statement=statement, answer="1")
    wide_id = add_solution(session_factory, project, ["Sum it."], statement=f"Add them:\n{wide}", answer="1")
    with session_scope(session_factory) as session:
        session.get(Solution, solution_id).final_answer = "\\frac{2}{"
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.done, stage=RoundStage.done)
        session.add(round_)
        session.flush()
        session.add(RoundPick(round_id=round_.id, solution_id=solution_id, rank=0, score=0.9,
                              reason=PickReason.convincing_wrong, answer_grade="wrong", priority=1.0))
        session.add(RoundPick(round_id=round_.id, solution_id=wide_id, rank=1, score=0.8,
                              reason=PickReason.convincing_wrong, answer_grade="wrong", priority=1.0))
        round_id = round_.id
    page.set_viewport_size(LAPTOP)
    login(page, "rita", f"/research/rounds/{round_id}")

    pick = page.locator(".pick").first
    pick.locator("summary.problem").click()
    expect(pick.locator("summary.problem .katex-display")).to_have_count(1)
    expect(pick.locator("summary.problem details.asy-source")).to_have_count(1)
    last = pick.locator(".step-text").nth(1)
    expect(last.locator(".answer-lead .katex")).to_have_count(1)
    expect(last.locator(".answer-value .katex")).to_have_count(1)
    # The model's unparsable final answer is quiet source, not a red error.
    expect(pick.locator(".pick-head .math-source")).to_have_text("\\frac{2}{")
    expect(page.locator(".katex-error")).to_have_count(0)
    screenshot(page, "research_picks_rendering.png")
    # On a phone a wide pick scrolls in its own box: the page scrolled sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator(".pick").nth(1).locator("summary.problem .katex-display")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
