"""The labeler page in Chromium: what a labeler sees and does, and what lands in the database."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from playwright.sync_api import Page, expect
from sqlalchemy import select, update

from app.db import session_scope
from app.models import Assignment, FinishReason, Label, Project, Skip, User, utcnow
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import PASSWORD, make_project, make_user

PRM800K_PROBLEM = (
    "The denominator of a fraction is 7 less than 3 times the numerator. If the fraction is "
    "equivalent to $2/5$, what is the numerator of the fraction?"
)
PRM800K_STEPS = [
    "Let's call the numerator $x$.",
    "So the denominator is $3x-7$.",
    "We know that $\\frac{x}{3x-7} = \\frac{2}{5}$.",
    "So $5x = 2(3x-7)$.",
    "$5x = 6x - 14$.",
    "So $x = 7$.",
]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _labels(factory) -> list[Label]:  # type: ignore[no-untyped-def]
    # A short transaction of its own: on SQLite every transaction takes the write lock (see
    # app.db), and one left open would stall the server.
    with session_scope(factory) as session:
        return list(session.scalars(select(Label).order_by(Label.id)))


def _ratings(label: Label) -> list[tuple[int, bool]]:
    return [(s["completions"][0]["rating"], s["completions"][0]["flagged"]) for s in label.steps]


def _steps(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("#steps > .step")


def _project_and_labeler(session_factory, mode: str = "first_error"):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode=mode)
    make_user(session_factory, "lena", "labeler")
    return project


def _start(page: Page, project) -> None:  # type: ignore[no-untyped-def]
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()


def test_first_error_with_keys_submit_and_next_task(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    first = add_solution(session_factory, project, PRM800K_STEPS, statement=PRM800K_PROBLEM, answer="14", priority=2)
    second = add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"], priority=1)
    _start(page, project)
    steps = _steps(page)
    expect(steps).to_have_count(6)
    expect(page.locator("#answer .katex")).to_be_visible()
    expect(steps.nth(0)).to_have_attribute("aria-current", "step")
    expect(steps.nth(1)).to_have_class(re.compile(r"\bis-locked\b"))

    for key in "11111":
        page.keyboard.press(key)
    page.keyboard.press("3")

    expect(steps.nth(5)).to_have_class(re.compile(r"\brated-bad\b"))
    expect(page.locator("#status")).to_contain_text("Step 6 is the first error")
    expect(page.locator("#submit")).to_be_enabled()
    screenshot(page, "labeler_first_error_found.png")

    page.keyboard.press("Enter")
    expect(page.locator("#task-ids")).to_have_text(f"Solution {second}")
    expect(_steps(page)).to_have_count(2)
    (label,) = _labels(session_factory)
    assert label.solution_id == first
    assert _ratings(label) == [(1, False)] * 5 + [(-1, False)]
    assert label.finish_reason == FinishReason.found_error
    assert UUID.match(label.idempotency_key or "")
    assert label.total_time_ms is not None and label.total_time_ms >= 0
    assert label.started_at is not None

    page.keyboard.press("1")
    expect(page.locator("#finish")).to_be_hidden()
    page.keyboard.press("1")
    expect(page.locator("#finish")).to_contain_text("no error")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    screenshot(page, "labeler_queue_empty.png")
    labels = _labels(session_factory)
    assert [(l.solution_id, l.finish_reason) for l in labels] == [
        (first, FinishReason.found_error),
        (second, FinishReason.solution),
    ]

    page.goto("/label/stats")
    expect(page.locator("dl.stats")).to_contain_text("2")
    screenshot(page, "labeler_stats.png")


def test_earlier_ratings_change_reopen_and_undo_with_flag(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$", "$d$"])
    _start(page, project)
    steps = _steps(page)

    # A held-down key rates one step, not every step while it repeats.
    page.keyboard.down("1")
    page.keyboard.down("1")
    page.keyboard.up("1")
    expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    expect(page.locator("#steps .step.is-rated")).to_have_count(1)
    page.keyboard.press("3")
    expect(page.locator("#steps .step.is-after-error")).to_have_count(2)

    # Steps after the error are out of reach; earlier ones are a click away.
    steps.nth(3).click()
    expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    steps.nth(0).locator(".step-text").click()
    expect(steps.nth(0)).to_have_attribute("aria-current", "step")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    expect(steps.nth(0)).to_have_attribute("aria-current", "step")
    page.keyboard.press("2")
    expect(steps.nth(0)).to_have_class(re.compile(r"\brated-okay\b"))
    expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    # Changing a -1 by key takes the same key twice.
    page.keyboard.press("1")
    page.keyboard.press("1")
    expect(page.locator("#steps .step.is-after-error")).to_have_count(0)
    expect(steps.nth(2)).to_have_attribute("aria-current", "step")

    page.keyboard.press("u")
    expect(page.locator("#steps .step.is-after-error")).to_have_count(2)
    page.keyboard.press("Control+z")
    expect(steps.nth(0)).to_have_class(re.compile(r"\brated-good\b"))
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-bad\b"))

    steps.nth(1).get_by_role("button", name="+1").click()
    expect(steps.nth(2)).to_have_attribute("aria-current", "step")
    page.keyboard.press("f")
    expect(steps.nth(2)).to_have_class(re.compile(r"\bis-flagged\b"))
    expect(steps.nth(2)).to_contain_text("Flagged as unsure")
    page.keyboard.press("1")
    page.keyboard.press("1")
    screenshot(page, "labeler_flagged_complete.png")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()

    (label,) = _labels(session_factory)
    assert _ratings(label) == [(1, False), (1, False), (1, True), (1, False)]
    assert label.finish_reason == FinishReason.solution


def _in_view(page: Page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return box is not None and box["y"] >= 52 and box["y"] + box["height"] <= page.viewport_size["height"]


def test_rating_down_a_long_solution_by_key_keeps_the_steps_after_the_current_one_in_sight(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, [f"Step {n}: $x_{{{n}}} = {n}$." for n in range(1, 32)])
    page.emulate_media(reduced_motion="reduce")
    _start(page, project)
    height = page.viewport_size["height"]
    for n in range(20):
        page.keyboard.press("1")
        current = page.locator("#steps > .step[aria-current=step]").bounding_box()
        assert current is not None and 52 <= current["y"] and current["y"] + current["height"] <= height * 2 / 3 + 1, (n, current)
    # The next steps show below it.
    assert _in_view(page, "#steps > .step:nth-child(23)")


def test_a_long_solution_keeps_its_notices_and_steps_in_view(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    tall = [f"Step {i}: we have\n$$x_{{{i}}} = \\frac{{1}}{{1 - x_{{{i - 1}}}}}$$\nand so on." for i in range(1, 13)]
    add_solution(session_factory, project, tall, priority=2)
    add_solution(session_factory, project, ["$a$", "$b$"], priority=1)
    _start(page, project)
    steps = _steps(page)
    rate_bad = steps.nth(0).get_by_role("button", name="−1: wrong or misleading (key 3)")
    expect(rate_bad).to_be_visible()
    for _ in range(11):
        page.keyboard.press("1")
    page.keyboard.press("3")
    # Back to the top by key: each step stops below the sticky top bar, not under it.
    for _ in range(11):
        page.keyboard.press("ArrowUp")
    expect(steps.nth(0)).to_have_attribute("aria-current", "step")
    page.wait_for_function("() => document.querySelector('#steps > .step').getBoundingClientRect().top >= 52")
    # Down to the -1 step and over it: the warning shows where the labeler looks.
    for _ in range(11):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("1")
    expect(page.locator("#notice")).to_contain_text("Press 1 again")
    assert _in_view(page, "#notice")
    screenshot(page, "labeler_change_warning.png")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text("Saved.")
    assert _in_view(page, "#notice")
    # The next task, of two steps, in place before it is measured.
    expect(_steps(page)).to_have_count(2)
    page.evaluate("document.fonts.ready.then(() => true)")
    first = _steps(page).nth(0).bounding_box()
    expect(page.locator("#notice")).to_be_hidden(timeout=6000)
    # The notice floats: the next task does not move when it goes.
    assert _steps(page).nth(0).bounding_box() == first


def _start_full_mode(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory, mode="full")
    add_solution(session_factory, project, ["$a=1$", "$b=2$", "$c=3$", "$d=4$"])
    _start(page, project)


def test_full_mode_rates_every_step(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _start_full_mode(page, session_factory)

    page.keyboard.press("1")
    page.keyboard.press("3")
    expect(page.locator("#steps .step.is-after-error")).to_have_count(0)
    expect(_steps(page).nth(2)).to_have_attribute("aria-current", "step")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("1 step left")
    assert _labels(session_factory) == []

    page.keyboard.press("2")
    expect(page.locator("#status")).to_contain_text("All steps rated, with an error")
    screenshot(page, "labeler_full_mode.png")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    (label,) = _labels(session_factory)
    assert _ratings(label) == [(1, False), (-1, False), (1, False), (0, False)]
    assert label.finish_reason == FinishReason.found_error


def test_full_mode_counts_ratings_out_of_order_and_says_what_a_give_up_keeps(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _start_full_mode(page, session_factory)

    page.keyboard.press("j")
    page.keyboard.press("1")
    page.keyboard.press("1")
    expect(page.locator("#progress-text")).to_have_text("2 of 4 steps rated")
    expect(page.locator("#status")).to_have_text("2 steps left to rate.")
    page.keyboard.press("g")
    help_text = page.locator("#reason-help")
    expect(help_text).to_have_text("A label keeps ratings from step 1 on, without gaps. Step 1 is not rated, so your 2 "
                                   "ratings after it would be lost: rate every step up to step 3 first to keep them.")
    page.keyboard.press("Escape")

    # Closed by Escape, the dialog leaves the keys to the page again.
    for _ in range(3):
        page.keyboard.press("k")
    expect(_steps(page).nth(0)).to_have_attribute("aria-current", "step")
    page.keyboard.press("1")
    expect(page.locator("#progress-text")).to_have_text("3 of 4 steps rated")
    page.keyboard.press("g")
    expect(help_text).to_contain_text("A give-up is a label, with the ratings you gave so far")
    page.locator("#reason-dialog").get_by_label("Reason").fill("The last step needs a table I do not have.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    (label,) = _labels(session_factory)
    assert label.finish_reason == FinishReason.give_up
    assert _ratings(label) == [(1, False), (1, False), (1, False)]


def test_give_up_needs_a_reason(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)

    page.keyboard.press("1")
    page.keyboard.press("g")
    dialog = page.locator("#reason-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Give up on this solution")
    dialog.get_by_role("button", name="Give up").click()
    expect(dialog.get_by_role("alert")).to_contain_text("reason")
    expect(dialog).to_be_visible()
    screenshot(page, "labeler_give_up_dialog.png")
    # Zero-width spaces show nothing, nor does the model's step marker, and the server would
    # refuse them: asked for here.
    dialog.get_by_label("Reason").fill("\u200b\u200b \u3000<|st<|step|>ep|>")
    dialog.get_by_role("button", name="Give up").click()
    expect(dialog.get_by_role("alert")).to_be_visible()
    expect(dialog).to_be_visible()
    dialog.get_by_label("Reason").fill("I cannot check the second step's algebra.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()

    (label,) = _labels(session_factory)
    assert label.finish_reason == FinishReason.give_up
    assert label.finish_note == "I cannot check the second step's algebra."
    assert _ratings(label) == [(1, False)]


def test_a_refused_reason_comes_back_in_the_dialog_with_why(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    refusals: list[str] = []

    def refuse_once(route) -> None:  # type: ignore[no-untyped-def]
        if refusals:
            route.continue_()
            return
        refusals.append(json.loads(route.request.post_data or "{}")["finish_note"])
        route.fulfill(status=422, content_type="application/json",
                      json={"detail": "finish_note: the reason holds a character that cannot be stored"})

    page.route("**/api/v1/assignments/*/submit", refuse_once)
    _start(page, project)
    page.keyboard.press("b")
    dialog = page.locator("#reason-dialog")
    note = "The figure the problem names is missing, and two answers fit."
    dialog.get_by_label("Reason").fill(note)
    page.keyboard.press("Control+Enter")
    # The labeler's words are back, with the server's reason, not lost with the closed dialog.
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("alert")).to_have_text("Not saved: finish_note: the reason holds a character that cannot be stored.")
    expect(dialog.get_by_label("Reason")).to_have_value(note)
    expect(dialog).to_contain_text("Report a bad problem")
    screenshot(page, "labeler_reason_refused.png")
    dialog.get_by_label("Reason").press("End")
    dialog.get_by_label("Reason").type(" Sent again.")
    expect(dialog.get_by_role("alert")).to_be_hidden()
    dialog.get_by_role("button", name="Report bad problem").click()
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    assert refusals == [note]
    (label,) = _labels(session_factory)
    assert (label.finish_reason, label.finish_note) == (FinishReason.bad_problem, note + " Sent again.")


def test_bad_problem_with_the_mouse_and_escape_cancels(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"], statement="Find $x$ in the figure. [asy]draw((0,0)--(1,1));[/asy]")
    _start(page, project)

    page.keyboard.press("b")
    dialog = page.locator("#reason-dialog")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert _labels(session_factory) == []

    page.get_by_role("button", name="Bad problem").click()
    dialog.get_by_label("Reason").fill("The figure is missing.")
    dialog.get_by_role("button", name="Report bad problem").click()
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    (label,) = _labels(session_factory)
    assert label.finish_reason == FinishReason.bad_problem
    assert label.finish_note == "The figure is missing."
    assert label.steps == []


def test_html_and_script_in_text_are_shown_as_text(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    step = "<script>window.__pwned = 1</script><b>bold</b> and $x<y$"
    add_solution(
        session_factory,
        project,
        [step, '<img src=x onerror="window.__pwned = 2">'],
        statement='<img src=x onerror="window.__pwned = 3">What is <i>1+1</i>?',
        answer="<i>2</i>",
    )
    _start(page, project)

    expect(page.get_by_text("<script>window.__pwned = 1</script><b>bold</b> and")).to_be_visible()
    expect(page.get_by_text('<img src=x onerror="window.__pwned = 2">')).to_be_visible()
    expect(page.locator("#problem-text")).to_contain_text("What is <i>1+1</i>?")
    expect(page.locator("#answer")).to_contain_text("<i>2</i>")
    for selector in ("script", "img", "b", "i"):
        expect(page.locator(f"#labeler :is(#steps, #problem-text, #answer) {selector}")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    screenshot(page, "labeler_html_as_text.png")


def test_math_renders_with_katex_from_the_platform(page: Page, session_factory, live_server: str) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(
        session_factory,
        project,
        [
            "Inline $\\frac{1}{2}$ and \\(\\sqrt{x}\\).",
            "Display $$x^2 + y^2 = z^2$$ and \\[\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\\]",
            "\\begin{align*}\na &= b + c \\\\\n&= d\n\\end{align*}",
            "So the answer is \\boxed{7}.",
        ],
        statement="Compute $\\frac{14}{3} + \\frac{1}{3}$ and \\[\\int_0^1 x\\,dx.\\]",
        answer="\\frac{14}{3}",
    )
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    _start(page, project)

    steps = _steps(page)
    for i in range(4):
        expect(steps.nth(i).locator(".katex").first).to_be_visible()
    expect(steps.nth(1).locator(".katex-display")).to_have_count(2)
    expect(steps.nth(2).locator(".katex-display")).to_have_count(1)
    expect(steps.nth(3).locator(".fbox")).to_have_count(1)
    expect(page.locator("#answer .fbox")).to_have_count(1)
    expect(page.locator("#problem-text .katex")).to_have_count(2)
    expect(page.locator(".katex-error")).to_have_count(0)
    page.evaluate("document.fonts.ready")
    assert any(u.endswith("/static/vendor/katex/katex.min.js") for u in requests)
    assert any("/static/vendor/katex/fonts/" in u and u.endswith(".woff2") for u in requests)
    assert all(u.startswith(live_server) for u in requests)
    screenshot(page, "labeler_math.png")


def test_submit_is_retried_with_the_same_key_after_a_network_failure(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    attempts: list[dict] = []

    def flaky(route) -> None:  # type: ignore[no-untyped-def]
        attempts.append(json.loads(route.request.post_data or "{}"))
        if len(attempts) == 1:
            route.abort("internetdisconnected")
        else:
            route.continue_()

    page.route("**/api/v1/assignments/*/submit", flaky)
    _start(page, project)
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("kept")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible(timeout=15000)

    assert len(attempts) == 2
    assert attempts[0] == attempts[1]
    assert UUID.match(attempts[0]["idempotency_key"])
    (label,) = _labels(session_factory)
    assert label.idempotency_key == attempts[0]["idempotency_key"]


def test_a_submit_made_offline_says_so_plainly_and_goes_as_the_connection_returns(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    _start(page, project)
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.context.set_offline(True)
    page.keyboard.press("Enter")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Your label is kept and not yet saved. Trying again in 1 s (no connection to the server).")
    # Offline through waits of 1, 2 and 4 s: the next would be 8.
    expect(notice).to_contain_text("Trying again in 8 s", timeout=15_000)
    page.context.set_offline(False)
    # Sent when the connection comes back, not at the end of the wait.
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible(timeout=5_000)
    assert len(_labels(session_factory)) == 1


def test_a_session_that_ends_mid_task_says_so_at_login_and_the_label_goes_after(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    _start(page, project)
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.context.clear_cookies()
    page.keyboard.press("Enter")
    page.wait_for_url("**/login?next=*")
    expect(page.get_by_role("status")).to_contain_text("Your session ended. Log in again to go on: ratings not yet saved are kept")
    screenshot(page, "login_session_ended.png")
    page.get_by_label("Username").fill("lena")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/label/{project.id}")
    expect(page.locator("#notice")).to_contain_text("A label from your last visit has been saved.")
    assert len(_labels(session_factory)) == 1


def test_skip_passes_the_solution_on_and_asks_twice_once_ratings_were_given(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    first = add_solution(session_factory, project, ["$a$", "$b$"], priority=3)
    second = add_solution(session_factory, project, ["$c$", "$d$"], priority=2)
    third = add_solution(session_factory, project, ["$e$", "$f$"], priority=1)
    _start(page, project)
    expect(page.locator("#task-ids")).to_have_text(f"Solution {first}")
    # Nothing rated: one key skips.
    page.keyboard.press("s")
    expect(page.locator("#task-ids")).to_have_text(f"Solution {second}")
    expect(page.locator("#notice")).to_contain_text("it will not come back to you")
    # A rating given: the first press warns, another key keeps the rating, two presses skip.
    page.keyboard.press("1")
    page.keyboard.press("s")
    expect(page.locator("#notice")).to_contain_text("Skipping drops the ratings you gave")
    screenshot(page, "labeler_skip_asks_again.png")
    page.keyboard.press("k")
    expect(page.locator("#notice")).to_be_hidden()
    page.keyboard.press("s")
    expect(page.locator("#notice")).to_contain_text("Skipping drops the ratings you gave")
    expect(page.locator("#task-ids")).to_have_text(f"Solution {second}")
    page.get_by_role("button", name="Skip").click()
    expect(page.locator("#task-ids")).to_have_text(f"Solution {third}")
    # The warning that asked twice is answered: the skip is said instead.
    expect(page.locator("#notice")).to_have_text(re.compile("^Skipped: "))
    page.reload(wait_until="domcontentloaded")
    expect(page.locator("#task-ids")).to_have_text(f"Solution {third}")
    page.keyboard.press("u")
    expect(page.locator("#notice")).to_have_text("Nothing to undo here.")
    page.keyboard.press("s")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    # The solution in focus is gone: Enter on the queue's end checks again.
    expect(page.get_by_role("button", name="Check again")).to_be_focused()
    assert _labels(session_factory) == []
    with session_scope(session_factory) as session:
        assert set(session.scalars(select(Skip.solution_id))) == {first, second, third}


def test_on_a_laptop_screen_the_side_panel_keeps_progress_and_submit_in_sight(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Taller than 720 px, the panel stuck at the top slid its progress and Submit under the bar.
    project = _project_and_labeler(session_factory, "full")
    add_solution(session_factory, project, [f"Step {i}: ${i} + {i} = {2 * i}$, " + "so on. " * 40 for i in range(6)])
    page.set_viewport_size({"width": 1280, "height": 720})
    _start(page, project)
    for _ in range(4):
        page.keyboard.press("1")
    expect(page.locator("#progress-text")).to_have_text("4 of 6 steps rated")
    # Wherever the rating left the page, down to its foot.
    page.evaluate("window.scrollTo({top: document.body.scrollHeight, behavior: 'instant'})")
    page.wait_for_function("window.scrollY > 300 && window.scrollY + innerHeight >= document.body.scrollHeight - 2")
    screenshot(page, "labeler_laptop_side_panel.png")
    header = page.locator("header").first.bounding_box()
    for part in ("#progress-text", "#submit"):
        box = page.locator(part).bounding_box()
        assert box is not None and header is not None
        assert box["y"] >= header["y"] + header["height"] and box["y"] + box["height"] <= 720, (part, box)
    screenshot(page, "labeler_laptop_side_panel.png")


def test_reload_keeps_ratings_in_progress(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    page.keyboard.press("1")
    page.keyboard.press("2")
    page.reload(wait_until="domcontentloaded")
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-okay\b"))
    expect(_steps(page).nth(2)).to_have_attribute("aria-current", "step")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    (label,) = _labels(session_factory)
    assert _ratings(label) == [(1, False), (0, False), (1, False)]


def test_a_second_tab_keeps_its_own_draft(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # One draft per labeler: rating in a second tab, or submitting there, wiped the first's.
    first = _project_and_labeler(session_factory)
    second = make_project(session_factory, "second project")
    add_solution(session_factory, first, ["$a$", "$b$", "$c$"])
    add_solution(session_factory, second, ["$x$"])
    _start(page, first)
    page.keyboard.press("1")
    page.keyboard.press("2")
    other = page.context.new_page()
    other.goto(f"/label/{second.id}")
    expect(other.locator("#task-view")).to_be_visible()
    other.keyboard.press("1")
    expect(other.locator("#status")).to_have_text("The step is rated, no error. Press Enter to submit.")
    other.keyboard.press("Enter")
    expect(other.get_by_role("heading", name="Queue empty")).to_be_visible()
    page.reload(wait_until="domcontentloaded")
    expect(_steps(page).nth(0)).to_have_class(re.compile(r"\brated-good\b"))
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-okay\b"))
    expect(_steps(page).nth(2)).to_have_attribute("aria-current", "step")


def _second_tab_of_one_solution(page: Page, session_factory) -> Page:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    other = page.context.new_page()
    other.goto(f"/label/{project.id}")
    expect(other.locator("#task-view")).to_be_visible()
    return other


def test_two_tabs_of_one_project_keep_in_step(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Both hold the one lease: each took the other's draft over on reload, losing ratings.
    other = _second_tab_of_one_solution(page, session_factory)
    expect(other.locator("#task-ids")).to_have_text(page.locator("#task-ids").inner_text())
    page.keyboard.press("1")
    expect(_steps(other).nth(0)).to_have_class(re.compile(r"\brated-good\b"))
    expect(other.locator("#notice")).to_have_text("Ratings made in another tab of this solution are shown here too.")
    other.keyboard.press("2")
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-okay\b"))
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    # The other tab sees the label sent and moves on, instead of a conflict on its own submit.
    expect(other.get_by_role("heading", name="Queue empty")).to_be_visible()
    expect(other.locator("#notice")).to_have_text("This solution was sent from another tab. Loading the next one.")
    (label,) = _labels(session_factory)
    assert _ratings(label) == [(1, False), (0, False), (1, False)]


def test_a_tab_with_its_reason_dialog_open_takes_the_other_tabs_ratings_after(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Followed under an open dialog, the task could change and the reason go to the next solution.
    other = _second_tab_of_one_solution(page, session_factory)
    page.keyboard.press("g")
    expect(page.locator("#reason-dialog")).to_be_visible()
    other.keyboard.press("1")
    expect(_steps(other).nth(0)).to_have_class(re.compile(r"\brated-good\b"))
    expect(_steps(page).nth(0)).not_to_have_class(re.compile(r"\brated-good\b"))
    page.keyboard.press("Escape")
    expect(_steps(page).nth(0)).to_have_class(re.compile(r"\brated-good\b"))


def test_full_mode_comes_back_to_the_first_unrated_step(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory, "full")
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    page.keyboard.press("3")
    page.reload(wait_until="domcontentloaded")
    # Not the −1 of step 1, where the next digit would only ask to change it.
    expect(_steps(page).nth(1)).to_have_attribute("aria-current", "step")
    page.keyboard.press("1")
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-good\b"))
    expect(_steps(page).nth(0)).to_have_class(re.compile(r"\brated-bad\b"))


def test_undo_while_a_change_of_a_minus_one_waits_keeps_it(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("1")
    notice = page.locator("#notice")
    expect(notice).to_have_text("Step 2 is rated −1. Press 1 again to change it to +1; any other key keeps the −1.")
    page.keyboard.press("u")
    expect(notice).to_have_text("Kept the −1 of step 2.")
    page.keyboard.press("1")
    page.keyboard.press("Control+z")
    expect(notice).to_have_text("Kept the −1 of step 2.")
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-bad\b"))
    # Without a change waiting, undo takes back the last rating as before.
    page.keyboard.press("u")
    expect(_steps(page).nth(1)).not_to_have_class(re.compile(r"\brated-bad\b"))
    # A click that changes the −1 ends the change waiting for a second key: undo then undoes it.
    page.keyboard.press("3")
    page.keyboard.press("1")
    expect(notice).to_contain_text("Press 1 again")
    _steps(page).nth(1).locator(".rate.good").click()
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-good\b"))
    expect(notice).to_be_hidden()
    page.keyboard.press("u")
    expect(_steps(page).nth(1)).to_have_class(re.compile(r"\brated-bad\b"))


def test_the_same_rating_again_leaves_nothing_for_undo_to_take_back(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    steps = _steps(page)
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("3")
    expect(steps.nth(1)).to_have_class(re.compile(r"\brated-bad\b"))
    # One undo takes back the −1 itself, not the second press that changed nothing.
    page.keyboard.press("u")
    expect(steps.nth(1)).not_to_have_class(re.compile(r"\brated-bad\b"))
    expect(steps.nth(0)).to_have_class(re.compile(r"\brated-good\b"))


def test_a_draft_kept_the_old_way_is_taken_up_once(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Before drafts were kept per lease, one per labeler: a tab open across the upgrade keeps it.
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    _start(page, project)
    page.keyboard.press("1")
    page.evaluate("""() => {
        const [draft] = Object.values(JSON.parse(localStorage.getItem("stepwise.drafts.lena")));
        const old = { ...draft, assignmentId: Number(draft.key.split("/")[0]), key: draft.idempotencyKey };
        localStorage.removeItem("stepwise.drafts.lena");
        localStorage.setItem("stepwise.draft.lena", JSON.stringify(old));
    }""")
    page.reload(wait_until="domcontentloaded")
    expect(_steps(page).nth(0)).to_have_class(re.compile(r"\brated-good\b"))
    assert page.evaluate("localStorage.getItem('stepwise.draft.lena')") is None


def test_lease_countdown_and_expiry_and_idle_time(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$"])
    page.clock.install()
    _start(page, project)
    lease = page.locator("#lease")
    expect(lease).to_contain_text(re.compile(r"(29|30):\d\d left"))
    page.clock.fast_forward("31:00")
    expect(lease).to_contain_text("expired")
    expect(page.locator("#notice")).to_contain_text("lease on this solution ran out")
    # Nobody touched the page for 31 minutes: only the first two count as active time.
    expect(page.locator("#clock b")).to_have_text(re.compile(r"^2:0\d$"))


def test_a_labeler_at_work_keeps_the_lease_and_an_idle_tab_lets_it_run_out(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    page.clock.install()
    _start(page, project)
    lease = page.locator("#lease")
    # Past half the lease with nobody at the page: nothing is renewed.
    page.clock.fast_forward("16:00")
    expect(lease).to_contain_text(re.compile(r"1[34]:\d\d left"))
    # A key pressed: the lease is the labeler's for a whole one from now, on the server too.
    page.keyboard.press("1")
    page.clock.fast_forward("00:02")
    expect(lease).to_contain_text(re.compile(r"(29|30):\d\d left"))
    with session_scope(session_factory) as session:
        held = session.scalars(select(Assignment.expires_at)).one()
    assert held - utcnow() > timedelta(minutes=29)

    # Leases shortened meanwhile: a renewal of 10 minutes is not taken for half of 30 gone.
    renewals: list[str] = []
    page.on("request", lambda request: renewals.append(request.url) if request.url.endswith("/renew") else None)
    with session_scope(session_factory) as session:
        session.execute(update(Project).values(lease_minutes=10))
    page.clock.fast_forward("16:00")
    page.keyboard.press("ArrowUp")
    page.clock.fast_forward("00:05")
    expect(lease).to_contain_text(re.compile(r"(9|10):\d\d left"))
    page.keyboard.press("ArrowDown")
    page.clock.fast_forward("00:05")
    assert len(renewals) == 1


def test_a_label_for_a_solution_another_labeler_took_says_so_in_the_pages_words(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    add_solution(session_factory, project, ["$a$"])
    _start(page, project)
    # The lease ran out and another labeler took the slot: the API's 404 names a task id the
    # page shows nowhere.
    sam = make_user(session_factory, "sam", "labeler").id
    with session_scope(session_factory) as session:
        session.execute(update(Assignment).values(user_id=sam))
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text(
        "Not saved: this solution is no longer yours (your lease ran out and another labeler took it, or you were "
        "taken out of the project). Loading the next solution.")


def test_queue_empty_when_nothing_is_waiting(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    login(page, "lena", f"/label/{project.id}")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    expect(page.locator("#empty-text")).to_contain_text("has the labels it needs")
    expect(page.locator("#lease")).to_be_hidden()


def test_login_errors_and_missing_project_pages(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    page.goto("/label/9999")
    expect(page).to_have_url(re.compile(r"/login\?next=/label/9999$"))
    page.get_by_label("Username").fill("lena")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    expect(page.get_by_label("Username")).to_have_value("lena")
    expect(page.get_by_label("Password")).to_have_value("")
    expect(page.get_by_label("Password")).to_be_focused()
    screenshot(page, "login_wrong_password.png")

    login(page, "lena", "/label/9999")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("no project with id 9999")
    screenshot(page, "error_not_found.png")


def test_a_deactivated_labeler_is_told_why_they_cannot_log_in(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    with session_scope(session_factory) as session:
        session.execute(update(User).where(User.username == "lena").values(is_active=False))
    page.goto("/login")
    page.get_by_label("Username").fill("lena")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text(
        "This account is deactivated: ask an administrator to reactivate it."
    )
    expect(page.get_by_label("Username")).to_have_value("lena")
    screenshot(page, "login_deactivated.png")


def test_the_empty_queues_recheck_does_not_keep_the_session_going(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    page.clock.install()
    with page.expect_request(lambda request: "/tasks/next" in request.url) as first:
        login(page, "lena", f"/label/{project.id}")
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    with page.expect_request(lambda request: "/tasks/next" in request.url) as recheck:
        page.clock.fast_forward("00:31")
    assert first.value.headers.get("x-stepwise-unattended") is None
    assert recheck.value.headers.get("x-stepwise-unattended") == "1"


def test_a_lease_longer_than_the_session_may_go_unused_is_renewed_before_it_would_end(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _project_and_labeler(session_factory)
    with session_scope(session_factory) as session:
        session.execute(update(Project).values(lease_minutes=240))
    add_solution(session_factory, project, ["$a$", "$b$"])
    renewals: list[str] = []
    page.on("request", lambda request: renewals.append(request.url) if request.url.endswith("/renew") else None)
    page.clock.install()
    _start(page, project)
    # At work (a key now and then) for most of an hour: far from half of four hours, and within
    # half the two hours the session may go unused (STEPWISE_SESSION_IDLE_MINUTES): nothing sent.
    for _ in range(59):
        page.keyboard.press("ArrowDown")
        page.clock.fast_forward("01:00")
    assert renewals == []
    # An hour at work: the page renews, which tells the server someone is there.
    page.keyboard.press("ArrowUp")
    with page.expect_request(lambda request: request.url.endswith("/renew")):
        page.clock.fast_forward("01:05")
    page.keyboard.press("ArrowDown")
    page.clock.fast_forward("00:05")
    assert len(renewals) == 1, renewals
