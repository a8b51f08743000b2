"""Phase-1 mode in Chromium: a labeler rates a phase-1 record's alternatives with the keyboard,
continues with one, writes a step of their own, submits; the manager's PRM800K export gives
the label back in phase-1 shape, and importing that file elsewhere gives the same export."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.models import Label
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.exports.conftest import export
from tests.imports.conftest import import_bytes, jsonl, sample_records

RECORD = next(r for r in sample_records() if r["question"]["problem"].startswith("If $f(x)"))
ALTERNATIVES = [[c["text"] for c in step["completions"]] for step in RECORD["label"]["steps"]]
HUMAN = "So $g(-2) = (-3)^2 = 9$, and $<b>$ stays text."


def _alternatives(page: Page, step: int):  # type: ignore[no-untyped-def]
    return page.locator("#steps > .p1-step").nth(step).locator(".alt:not(.own)")


def _open_lenas_task(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Overlap 2: the imported label fills one slot, the other waits for lena.
    project = make_project(session_factory, "Phase one", labeling_mode="phase1", overlap=2)
    import_bytes(session_factory, project, jsonl([RECORD]), filename="phase1.jsonl")
    make_user(session_factory, "lena", "labeler")
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()


def test_rate_choose_write_submit_then_export_round_trips(page: Page, browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Overlap 2: the imported label fills one slot, the other waits for lena.
    project = make_project(session_factory, "Phase one", labeling_mode="phase1", overlap=2)
    import_bytes(session_factory, project, jsonl([RECORD]), filename="phase1.jsonl")
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "boss", "admin")
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator(".crumbs .badge")).to_have_text("Phase 1 mode")

    # Only the first step shows until it is continued; the alternatives are text and math.
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(1)
    first = _alternatives(page, 0)
    expect(first).to_have_count(2)
    expect(first.nth(0).locator(".katex").first).to_be_visible()
    expect(first.nth(0)).to_have_attribute("aria-current", "true")

    # Step 1: A is +1, B is -1; the cursor goes back to A. A -1 cannot be continued with;
    # Enter on A continues with it.
    page.keyboard.press("1")
    expect(first.nth(1)).to_have_attribute("aria-current", "true")
    page.keyboard.press("3")
    expect(first.nth(0)).to_have_attribute("aria-current", "true")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("cannot be continued with")
    expect(first.nth(1)).not_to_have_class(re.compile(r"\bis-chosen\b"))
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    expect(first.nth(0)).to_have_class(re.compile(r"\bis-chosen\b"))
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(2)

    # Step 2: both alternatives wrong, one flagged: the solution could end here.
    page.keyboard.press("f")
    page.keyboard.press("3")
    page.keyboard.press("3")
    expect(page.locator("#steps > .p1-step").nth(1).locator(".step-note")).to_contain_text("No alternative is good")
    expect(page.locator("#finish")).to_be_visible()
    expect(page.locator("#finish-text")).to_contain_text("ends there")

    # W writes a step of their own; an empty one is refused, Ctrl+Enter keeps it as +1.
    page.keyboard.press("w")
    editor = page.locator("#steps > .p1-step").nth(1).locator(".own-editor")
    expect(editor).to_be_visible()
    expect(editor.locator("textarea")).to_be_focused()
    page.keyboard.press("Control+Enter")
    expect(editor.locator(".own-error")).to_be_visible()
    # So is one of zero-width spaces, which shows nothing either.
    editor.locator("textarea").fill("\u200b\u2800")
    page.keyboard.press("Control+Enter")
    expect(editor.locator(".own-error")).to_be_visible()
    editor.locator("textarea").fill(HUMAN)
    # Esc closes the editor; opened again, it still holds what was typed.
    page.keyboard.press("Escape")
    expect(editor).to_be_hidden()
    page.keyboard.press("w")
    expect(editor.locator("textarea")).to_have_value(HUMAN)
    screenshot(page, "labeler_phase1_writing.png")
    page.keyboard.press("Control+Enter")
    own = page.locator("#steps > .p1-step").nth(1).locator(".alt.own")
    expect(own).to_have_class(re.compile(r"\bis-chosen\b"))
    expect(own.locator(".own-text")).to_contain_text("<b>")
    expect(own.locator(".own-text b")).to_have_count(0)

    # Step 3: +1 and continue; the label is complete.
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_contain_text("All 3 steps done")
    screenshot(page, "labeler_phase1_complete.png")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "labeler_phase1_phone.png")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("Saved")

    with session_scope(session_factory) as session:
        label = session.scalars(select(Label).where(Label.user_id.is_not(None))).one()
        assert label.finish_reason.value == "solution"
        assert [s["chosen_completion"] for s in label.steps] == [0, None, 0]
        assert [[c["rating"] for c in s["completions"]] for s in label.steps] == [[1, -1], [-1, -1], [1]]
        assert label.steps[1]["completions"][0]["flagged"] is True

    # The manager downloads the PRM800K export of lena's labels.
    context = browser.new_context(base_url=live_server, viewport={"width": 1440, "height": 900})
    manager = context.new_page()
    login(manager, "boss", f"/manage/projects/{project.id}/export")
    manager.get_by_label("PRM800K JSONL").check()
    manager.locator("input[name=labelers]").fill("lena")
    with manager.expect_download() as info:
        manager.get_by_role("button", name="Download").click()
    exported = Path(info.value.path()).read_bytes()
    # TRL with every alternative: the labeler's path, its written step marked, then each
    # alternative after the steps before it.
    manager.get_by_label("TRL stepwise supervision JSONL").check()
    manager.get_by_label("Alternatives in TRL and Parquet").select_option("all")
    screenshot(manager, "manage_export_phase1.png")
    with manager.expect_download() as info:
        manager.get_by_role("button", name="Download").click()
    trl = [json.loads(line) for line in Path(info.value.path()).read_text(encoding="utf-8").splitlines()]
    context.close()
    assert trl[0]["completions"] == [ALTERNATIVES[0][0], HUMAN, ALTERNATIVES[2][0]]
    assert trl[0]["human_written"] == [False, True, False]
    assert [r["completions"][-1] for r in trl[1:]] == [ALTERNATIVES[0][1], ALTERNATIVES[1][0], ALTERNATIVES[1][1]]
    assert [r["labels"][-1] for r in trl[1:]] == [False, False, False]
    (record,) = [json.loads(line) for line in exported.splitlines()]
    assert record["question"] == RECORD["question"]
    steps = record["label"]["steps"]
    assert steps[0] == {
        "completions": [
            {"text": ALTERNATIVES[0][0], "rating": 1, "flagged": False},
            {"text": ALTERNATIVES[0][1], "rating": -1, "flagged": False},
        ],
        "human_completion": None,
        "chosen_completion": 0,
    }
    assert steps[1]["human_completion"] == {
        "text": HUMAN, "rating": 1, "source": "human", "flagged": False, "corrected_rating": None
    }
    assert steps[1]["chosen_completion"] is None
    assert [c["flagged"] for c in steps[1]["completions"]] == [True, False]
    assert steps[2]["chosen_completion"] == 0

    # Imported into another project, the file is a phase-1 record that exports as it came.
    other = make_project(session_factory, "Round trip")
    result = import_bytes(session_factory, other, exported, filename="export.jsonl")
    assert result.added == {"problems": 1, "solutions": 1, "labels": 1}
    assert export(session_factory, other) == exported


def test_a_reload_keeps_alternatives_rated_and_steps_written(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    for key in ("1", "3", "Enter", "3", "3", "w"):
        page.keyboard.press(key)
    page.locator(".own-editor:visible textarea").fill(HUMAN)
    page.keyboard.press("Control+Enter")
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(3)
    page.reload(wait_until="domcontentloaded")
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(3)
    expect(_alternatives(page, 0).nth(0)).to_have_class(re.compile(r"\bis-chosen\b"))
    expect(_alternatives(page, 1).nth(1)).to_have_class(re.compile(r"\brated-bad\b"))
    expect(page.locator("#steps > .p1-step").nth(1).locator(".own-text")).to_contain_text("stays text")


def test_enter_submits_a_solution_whose_step_has_no_good_alternative(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # The last −1 leaves the cursor on the write-your-own row; Enter still submits, as the page
    # says, and W is the key that writes.
    _open_lenas_task(page, session_factory)
    for key in ("1", "3", "Enter", "3", "3"):
        page.keyboard.press(key)
    expect(page.locator("#status")).to_contain_text("the solution ends there. Press Enter to submit.")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_contain_text("Saved")
    expect(page.locator(".own-editor:visible")).to_have_count(0)
    with session_scope(session_factory) as session:
        label = session.scalars(select(Label).where(Label.user_id.is_not(None))).one()
        assert label.finish_reason.value == "found_error"
        assert [[c["rating"] for c in s["completions"]] for s in label.steps] == [[1, -1], [-1, -1]]


def test_enter_on_an_earlier_steps_own_row_writes_even_in_a_complete_label(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    for key in ("1", "3", "k", "Enter", "1", "1", "Enter", "1", "Enter"):
        page.keyboard.press(key)
    expect(page.locator("#status")).to_contain_text("All 3 steps done")
    own = page.locator("#steps > .p1-step").nth(0).locator(".alt.own")
    for _ in range(12):
        if own.get_attribute("aria-current") == "true":
            break
        page.keyboard.press("k")
    expect(own).to_have_attribute("aria-current", "true")
    page.keyboard.press("Enter")
    expect(own.locator(".own-editor")).to_be_visible()
    expect(page.locator("#notice")).not_to_contain_text("Saved")


def test_a_step_is_continued_only_once_its_alternatives_are_all_rated(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    status, notice = page.locator("#status"), page.locator("#notice")
    editor = page.locator("#steps > .p1-step").nth(0).locator(".own-editor")

    # Neither W, the button, nor Enter on a +1 continues while an alternative waits for its rating.
    page.keyboard.press("w")
    expect(editor).to_be_hidden()
    expect(notice).to_contain_text("alternative A of step 1 is not rated yet")
    expect(status).to_contain_text("Step 1: rate alternative A")
    page.keyboard.press("1")
    expect(status).to_contain_text("Step 1: rate alternative B")
    page.locator("#steps > .p1-step").nth(0).get_by_role("button", name="Write your own step").click()
    expect(notice).to_contain_text("alternative B of step 1 is not rated yet")
    expect(editor).to_be_hidden()
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    expect(notice).to_contain_text("alternative B of step 1 is not rated yet")
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(1)
    screenshot(page, "labeler_phase1_unrated.png")

    # Rated through, the step is written and the rest goes as the tester's did.
    page.keyboard.press("j")
    page.keyboard.press("3")
    page.keyboard.press("w")
    expect(editor).to_be_visible()
    editor.locator("textarea").fill(HUMAN)
    # Undo, clicked with the editor open, takes a rating back: the step is not kept, and neither
    # is what was typed thrown away.
    page.locator("#undo").click()
    editor.locator("textarea").focus()
    page.keyboard.press("Control+Enter")
    expect(editor).to_be_hidden()
    expect(notice).to_contain_text("is not rated yet")
    page.keyboard.press("3")
    page.keyboard.press("w")
    expect(editor.locator("textarea")).to_have_value(HUMAN)
    page.keyboard.press("Control+Enter")
    for key in ("1", "1", "Enter", "1", "Enter"):
        page.keyboard.press(key)
    expect(page.locator("#progress-text")).to_have_text("Step 3 of 3 · 5/5 rated")
    expect(status).to_contain_text("All 3 steps done")
    expect(page.locator("#submit")).to_be_enabled()
    screenshot(page, "labeler_phase1_written_first_step.png")
    page.keyboard.press("Enter")
    expect(notice).to_contain_text("Saved")
    with session_scope(session_factory) as session:
        label = session.scalars(select(Label).where(Label.user_id.is_not(None))).one()
        assert [s["human_completion"] is not None for s in label.steps] == [True, False, False]
        assert [[c["rating"] for c in s["completions"]] for s in label.steps] == [[1, -1], [1, 1], [1]]
        label_id = label.id

    # Read back, the label shows every alternative rated, not only the path taken, and which
    # step the labeler wrote; the list counts every rating given.
    page.goto(f"/label/labels/{label_id}")
    steps = page.locator("#steps > .step")
    expect(steps).to_have_count(3)
    expect(steps.nth(0).locator(".step-written")).to_have_text("written by you")
    expect(steps.nth(0).locator(".step-text")).to_contain_text("stays text")
    expect(steps.nth(0).locator(".step-others li")).to_have_count(2)
    expect(steps.nth(0).locator(".step-others li .badge")).to_have_text(["+1", "−1"])
    expect(steps.nth(1).locator(".step-others li")).to_have_count(1)
    expect(steps.nth(2).locator(".step-others")).to_have_count(0)
    expect(page.locator(".step-written")).to_have_count(1)
    screenshot(page, "labeler_phase1_label_view.png")
    page.goto("/label/stats")
    counts = page.locator(f'tr:has(a[href="/label/labels/{label_id}"]) .ratings-summary')
    expect(counts).to_contain_text("+1 × 5")
    expect(counts).to_contain_text("−1 × 1")


def test_a_draft_continued_past_unrated_alternatives_asks_for_them(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # A draft saved before writing a step waited for the ratings: every step continued, the
    # first one's alternatives never rated.
    _open_lenas_task(page, session_factory)
    page.keyboard.press("1")
    page.evaluate(
        """(text) => {
          const drafts = JSON.parse(localStorage.getItem("stepwise.drafts.lena"));
          const [draft] = Object.values(drafts);
          Object.assign(draft.phase1, {
            ratings: [[null, null], [1, 1], [1]],
            chosen: [null, 0, 0],
            human: [{ text, rating: 1 }, null, null],
          });
          localStorage.setItem("stepwise.drafts.lena", JSON.stringify(drafts));
        }""",
        HUMAN,
    )
    page.reload(wait_until="domcontentloaded")
    expect(page.locator("#steps > .p1-step:visible")).to_have_count(3)
    expect(page.locator("#status")).to_have_text("Step 1: rate alternative A (2 of 2 left).")
    expect(page.locator("#submit")).to_be_disabled()
    expect(_alternatives(page, 0).nth(0)).to_have_attribute("aria-current", "true")
    page.keyboard.press("1")
    page.keyboard.press("3")
    expect(page.locator("#status")).to_contain_text("All 3 steps done")
    expect(page.locator("#submit")).to_be_enabled()


def test_a_screen_reader_hears_the_keys_of_phase1(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    announce = page.locator("#announce")
    page.keyboard.press("1")
    expect(announce).to_contain_text("Step 1, alternative A rated +1.")
    page.keyboard.press("3")
    expect(announce).to_contain_text("Step 1, alternative B rated −1.")
    # The cursor went back to A: moving down reads B out, with its words ("I'll plug $-2$ into $f$
    # first."), the formulas said, never their source.
    page.keyboard.press("j")
    expect(announce).to_have_text(re.compile(r"^Step 1, alternative B, rated −1: I'll plug − ?2 into f first\.$"))
    page.keyboard.press("f")
    expect(announce).to_have_text("Step 1, alternative B flagged as unsure.")
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    expect(announce).to_contain_text("Continued with alternative A of step 1.")
    # A mouse is heard as the keys are; so is a step of one's own.
    second = _alternatives(page, 1)
    second.nth(0).locator(".rate.bad").click()
    expect(announce).to_contain_text("Step 2, alternative A rated −1.")
    second.nth(1).locator(".rate.bad").click()
    expect(announce).to_contain_text("Step 2, alternative B rated −1.")
    page.keyboard.press("w")
    page.locator(".own-editor:visible textarea").fill(HUMAN)
    page.keyboard.press("Control+Enter")
    expect(announce).to_contain_text("Step 2: continued with your own step, rated +1.")


def test_the_same_rating_of_an_alternative_again_leaves_nothing_for_undo(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    good = _alternatives(page, 0).nth(0).locator(".rate.good")
    good.click()
    good.click()
    expect(good).to_have_attribute("aria-pressed", "true")
    # One undo takes back the +1 itself, not the second click that changed nothing.
    page.keyboard.press("u")
    expect(good).to_have_attribute("aria-pressed", "false")


def test_phase1_without_single_key_shortcuts(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    status = page.locator("#status")
    expect(status).to_contain_text("or write your own (W).")
    page.get_by_role("checkbox", name="Single-key shortcuts").click()
    # Its sentences stop naming keys that no longer act.
    expect(status).not_to_contain_text("(W)")
    first = _alternatives(page, 0)
    page.keyboard.press("1")
    expect(first.nth(0).locator(".rate.good")).to_have_attribute("aria-pressed", "false")
    for row in range(2):
        good = first.nth(row).get_by_role("button", name="+1: correct, advances", exact=True)
        good.focus()
        page.keyboard.press("Enter")
        expect(good).to_have_attribute("aria-pressed", "true")
    # The write-your-own button is in the Tab order, and Enter opens it.
    page.locator("#steps .own-open").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".own-input").first).to_be_focused()


def test_phase1_fits_a_narrow_window(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 390, "height": 844})
    _open_lenas_task(page, session_factory)
    for rate in _alternatives(page, 0).first.locator(".rate").all():
        size = rate.evaluate("e => ({width: e.offsetWidth, height: e.offsetHeight, scroll: e.scrollWidth, client: e.clientWidth})")
        # Thumb-sized, as in the other modes, and wide enough for their label.
        assert size["width"] >= 44 and size["height"] >= 44 and size["scroll"] <= size["client"], size
    # Both boxes from one layout, as the page may still be scrolling to the current step.
    choose_top, good_top = _alternatives(page, 0).first.evaluate(
        "a => [a.querySelector('.choose').getBoundingClientRect().top,"
        " a.querySelector('.rate.good').getBoundingClientRect().top]")
    assert choose_top > good_top, "Continue has a row of its own"
    screenshot(page, "labeler_phase1_narrow.png")


def test_undo_names_what_it_takes_back_in_phase1(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    _open_lenas_task(page, session_factory)
    announce = page.locator("#announce")
    for key in ("1", "3", "k", "Enter", "3", "3"):
        page.keyboard.press(key)
    expect(announce).to_contain_text("Step 2, alternative B rated −1.")
    page.keyboard.press("w")
    page.locator(".own-editor:visible textarea").fill(HUMAN)
    page.keyboard.press("Control+Enter")
    expect(announce).to_contain_text("Step 2: continued with your own step, rated +1.")
    page.keyboard.press("u")
    expect(announce).to_have_text(re.compile(r"^Undone: your own step 2 removed\. No alternative of step 2 is good"))
    page.keyboard.press("u")
    expect(announce).to_have_text(re.compile(r"^Undone: step 2, alternative B's −1 removed\. Step 2: rate alternative B"))
    page.keyboard.press("u")
    page.keyboard.press("u")
    expect(announce).to_have_text(re.compile(r"^Undone: step 1 no longer continues with alternative A\."))
