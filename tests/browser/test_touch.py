"""A phone's touch screen (390×844, or held sideways): what an #anchor, a stacked snippet, a wide
table, a word about keys or hovering, and a fingertip's target look like there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, Locator, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.labeling.schemas import LabelSubmit
from app.labeling.service import next_task, submit_label
from app.models import Project, Skip
from tests.browser.conftest import SCREENSHOTS, add_solution, login, screenshot, watched_page
from tests.browser.test_phase1 import RECORD
from tests.conftest import make_project, make_user
from tests.imports.conftest import import_bytes, jsonl

PHONE = {"width": 390, "height": 844}
# WCAG 2.2's minimum target size (2.5.8), in CSS pixels.
TARGET = 24
STATEMENT = "Compute $\\frac{1}{2}+\\frac{1}{3}$ in lowest terms."


@contextmanager
def _phone(browser: Browser, live_server: str, viewport: dict[str, int] = PHONE) -> Iterator[Page]:
    with watched_page(browser, live_server, viewport=viewport, device_scale_factor=2, is_mobile=True,
                      has_touch=True) as page:
        yield page


def _busy_project(factory: sessionmaker[Session]) -> Project:
    """lena gave up on one solution, labeled one and skipped one; omar holds a task; boss manages."""
    project = make_project(factory, "Pilot")
    lena = make_user(factory, "lena", "labeler")
    omar = make_user(factory, "omar", "labeler")
    make_user(factory, "boss", "admin")
    ids = [add_solution(factory, project, ["$1+1=2$.", "# Answer\n\n2"], statement=STATEMENT) for _ in range(4)]
    for reason, ratings in (("give_up", [1]), ("solution", [1, 1])):
        with session_scope(factory) as session:
            task = next_task(session, project.id, lena.id).task
            assert task is not None
            submit_label(session, lena.id, task.assignment_id, LabelSubmit(
                idempotency_key=f"key-{reason}-0001", ratings=[{"rating": r} for r in ratings],
                finish_reason=reason, finish_note="too hard" if reason == "give_up" else None,
                total_time_ms=1000))
    with session_scope(factory) as session:
        session.add(Skip(user_id=lena.id, solution_id=ids[3], project_id=project.id))
        assert next_task(session, project.id, omar.id).task is not None
    return project


def _shot(target: Locator | Page, name: str) -> None:
    """What the phone shows: conftest's full-page screenshot() is taken as if by a mouse (hover
    and pointer media turn to a desktop's while it captures), and goes back to the top."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / name))


def _size(page: Page, selector: str) -> list[tuple[float, float]]:
    return page.locator(selector).evaluate_all(
        "all => all.map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })")


def _assert_targets(page: Page, selector: str) -> None:
    sizes = _size(page, selector)
    assert sizes, f"nothing matches {selector}"
    assert all(w >= TARGET and h >= TARGET for w, h in sizes), f"{selector} under {TARGET}px: {sizes}"


def test_an_anchor_lands_below_the_sticky_top_bar(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Pause and Resume labeling come back to the overview's #pause: it landed under the top bar,
    # after Resume wholly hidden.
    project = _busy_project(session_factory)
    with _phone(browser, live_server) as page:
        login(page, "boss", f"/manage/projects/{project.id}")
        for button, then in (("Pause labeling", "Resume labeling"), ("Resume labeling", "Pause labeling")):
            page.get_by_role("button", name=button).tap()
            expect(page.get_by_role("button", name=then)).to_be_visible()
            assert page.url.endswith("#pause")
            bar, target = page.evaluate("""() => [document.querySelector('.topbar').getBoundingClientRect().bottom,
                                                  document.getElementById('pause').getBoundingClientRect().top]""")
            # Scrolled to, and just below the bar.
            assert bar <= target <= bar + 16, (button, bar, target)
        _shot(page, "touch_pause_anchor.png")


def test_stacked_problem_snippets_take_the_cards_width(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    # The Skipped tab's snippet kept its desktop column's 45%: half the card, its formula cut.
    project = _busy_project(session_factory)
    with _phone(browser, live_server) as page:
        login(page, "boss", f"/manage/projects/{project.id}/skips")
        for tab in ("skips", "labels", "reports"):
            page.goto(f"/manage/projects/{project.id}/{tab}")
            expect(page.locator("td.problem .statement .katex").first).to_be_visible()
            row = page.locator("table.stack tbody tr").first.bounding_box()
            snippet = page.locator("td.problem .statement").first.bounding_box()
            assert row is not None and snippet is not None
            assert snippet["width"] >= row["width"] - 40, (tab, snippet, row)
            # Short enough to show whole, formula and words, in a card's width: not cut.
            cut = page.locator("td.problem .statement").first.evaluate("e => e.scrollWidth - e.clientWidth")
            assert cut <= 1, (tab, cut)
        page.goto(f"/manage/projects/{project.id}/skips")
        screenshot(page, "touch_skips_snippet.png")


def test_a_table_wider_than_a_phone_fades_at_its_hidden_edge(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    # As a wide display formula does: cut at the screen's edge, nothing said it scrolled.
    project = _busy_project(session_factory)
    with _phone(browser, live_server) as page:
        login(page, "boss", "/manage/projects")
        box = page.locator(".table-scroll").first
        expect(box).to_have_class(re.compile(r"\bscrolls\b"))
        assert "linear-gradient" in box.evaluate("e => getComputedStyle(e).maskImage || getComputedStyle(e).webkitMaskImage")
        screenshot(page, "touch_projects_table_fade.png")
        box.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
        expect(box).to_have_class(re.compile(r"\bat-end\b"))
        expect(box).to_have_class(re.compile(r"\bscrolled\b"))
        # A table that fits is left alone; one in a closed <details> is marked once it opens.
        page.goto(f"/manage/projects/{project.id}")
        expect(page.locator("#activity .table-scroll")).not_to_have_class(re.compile(r"\bscrolls\b"))
        page.get_by_text("1 task in hand now").tap()
        expect(page.locator("details.leases .table-scroll")).to_have_class(re.compile(r"\bscrolls\b"))
        _shot(page.locator("details.leases"), "touch_leases_table_fade.png")


def test_touch_words_name_what_to_tap(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _busy_project(session_factory)
    with _phone(browser, live_server) as page:
        login(page, "boss", f"/manage/projects/{project.id}")
        # No hovering on a phone: the hint says tap, and a tap writes the bar's count out.
        expect(page.locator(".tap-words").first).to_be_visible()
        expect(page.locator(".hover-words").first).to_be_hidden()
        today = page.locator("#chart-days .bar").last
        today.tap()
        expect(page.locator("#chart-days + .chart-readout")).to_have_text(today.locator("title").text_content())
        expect(page.locator("#chart-days + .chart-readout")).to_have_text(re.compile(r": 2 labels$"))
        line = page.locator("table.activity svg.sparkline").first
        width = line.bounding_box()["width"]  # type: ignore[index]
        line.tap(position={"x": width - 1, "y": 10})
        expect(page.locator("table.activity .chart-readout").first).to_have_text(re.compile(r": 2 labels$"))
        _shot(page.locator("section.card", has=page.locator("#chart-days")), "touch_chart_tapped.png")
        _shot(page.locator("#activity tbody tr").first, "touch_sparkline_tapped.png")

    # Skip with ratings given asks again by the button, not the S key.
    second = make_project(session_factory, "Plain")
    make_user(session_factory, "ann", "labeler")
    add_solution(session_factory, second, ["$1+1=2$.", "# Answer\n\n2"])
    with _phone(browser, live_server) as page:
        login(page, "ann", f"/label/{second.id}")
        page.locator("#steps > .step").first.locator(".rate.good").tap()
        page.locator("#skip").tap()
        expect(page.locator("#notice")).to_contain_text("Tap Skip again to skip it")

    # Phase 1: both alternatives −1 puts the cursor on Write your own step, with no W badge.
    third = make_project(session_factory, "Phase one", labeling_mode="phase1", overlap=2)
    import_bytes(session_factory, third, jsonl([RECORD]), filename="phase1.jsonl")
    with _phone(browser, live_server) as page:
        login(page, "ann", f"/label/{third.id}")
        alternatives = page.locator("#steps > .p1-step").first.locator(".alt:not(.own)")
        alternatives.first.locator(".rate.good").tap()
        expect(page.locator("#status")).to_contain_text("then tap Continue on a good one or Write your own step.")
        alternatives.nth(1).locator(".rate.bad").tap()
        expect(page.locator("#status")).to_have_text(re.compile(r"tap Continue on a good alternative, or Write your own step\.$"))
        alternatives.first.locator(".rate.bad").tap()
        own = page.locator("#steps > .p1-step").first.locator(".alt.own")
        expect(own).to_have_class(re.compile(r"\bis-current\b"))
        expect(own.locator(".own-open kbd")).to_be_hidden()
        expect(page.locator("#steps > .p1-step").first.locator(".step-note")).to_have_text(
            "No alternative is good: tap Write your own step, or Submit: the solution ends here.")
        assert "(W)" not in page.locator("#status").inner_text() + page.locator("#notice").inner_text()
        _shot(page.locator("#steps > .p1-step").first, "touch_phase1_own_step.png")


def test_touch_targets_are_at_least_24px(browser: Browser, page: Page, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = _busy_project(session_factory)
    add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"])
    with _phone(browser, live_server) as phone:
        login(phone, "boss", f"/manage/projects/{project.id}")
        _assert_targets(phone, "table.activity td.num a")
        _assert_targets(phone, "#settings input[type=radio]")
        _shot(phone.locator("#activity tbody tr").first, "touch_activity_row_targets.png")
        _shot(phone.locator("#settings fieldset").filter(has=phone.locator("input[type=radio]")).first, "touch_mode_radios.png")
        for tab in ("skips", "labels", "problems"):
            phone.goto(f"/manage/projects/{project.id}/{tab}")
            _assert_targets(phone, "tbody td a[href*='problem=']")
        _shot(phone.locator("tbody tr").first, "touch_problems_row_targets.png")
    with _phone(browser, live_server) as phone:
        login(phone, "lena", "/label/stats")
        _assert_targets(phone, "table.my-labels td a")
        _shot(phone.locator("table.my-labels tbody tr").first, "touch_stats_row_targets.png")
    # Held sideways the phone is wider than 640px: its rating buttons stay thumb-sized.
    with _phone(browser, live_server, {"width": 844, "height": 390}) as phone:
        login(phone, "lena", f"/label/{project.id}")
        expect(phone.locator("#steps .rate").first).to_be_visible()
        sizes = _size(phone, "#steps > .step.is-current .rate")
        assert len(sizes) == 3 and all(w >= 44 and h >= 44 for w, h in sizes), sizes
        _shot(phone.locator("#steps > .step").first, "touch_landscape_rates.png")
    # A mouse keeps the desktop's tighter look.
    login(page, "boss", f"/manage/projects/{project.id}")
    assert all(w < TARGET for w, _ in _size(page, "#settings input[type=radio]"))
    assert all(h < TARGET for _, h in _size(page, "table.activity td.num a"))
