"""Every page on a phone (390×844): nothing scrolls sideways, and the labeler works by thumb."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect
from sqlalchemy import func, select

from app.db import session_scope
from app.models import Label, User
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user
from tests.imports.conftest import import_bytes, jsonl, sample_records

PHONE = {"width": 390, "height": 844}
# Display math far wider than a phone, and inline math with few places to break.
LONG_DISPLAY = (
    "$$\\sum_{k=1}^{100} \\left(\\frac{k^2 + 3k + 2}{k^3 + 6k^2 + 11k + 6}\\right) = "
    "\\frac{1}{2} + \\frac{1}{3} + \\frac{1}{4} + \\frac{1}{5} + \\frac{1}{6} + \\frac{1}{7} + "
    "\\frac{1}{8} + \\cdots + \\frac{1}{101} = H_{101} - 1$$"
)
LONG_STEPS = [
    "Write each term with partial fractions:",
    LONG_DISPLAY,
    "So $x_{1}x_{2}x_{3}x_{4}x_{5}x_{6}x_{7}x_{8}x_{9}x_{10}x_{11}x_{12}x_{13}x_{14}x_{15}x_{16}$ "
    "and https://example.org/a/very/long/address/without/any/spaces/in/it/at/all are both long.",
    "# Answer\n\n$H_{101} - 1$",
]


def _phone(browser: Browser, live_server: str) -> Page:
    context = browser.new_context(base_url=live_server, viewport=PHONE, device_scale_factor=2,
                                  is_mobile=True, has_touch=True)
    return context.new_page()


def _assert_fits(page: Page, name: str) -> None:
    page.evaluate("document.fonts.ready.then(() => true)")
    widths = page.evaluate(
        "({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth})"
    )
    screenshot(page, f"narrow_{name}.png")
    assert widths["scroll"] <= widths["client"], f"{name} scrolls sideways: {widths}"


def test_the_labeler_page_fits_a_phone_and_rates_by_thumb(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "A project with a rather long name for a phone")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, LONG_STEPS, statement="Find " + LONG_DISPLAY, answer="H_{101} - 1")
    page = _phone(browser, live_server)
    login(page, "lena", f"/label/{project.id}")
    expect(page.locator("#task-view")).to_be_visible()
    expect(page.locator("#steps .katex-display").first).to_be_visible()
    _assert_fits(page, "labeler")

    # The long display math scrolls in its own box, not the page.
    display = page.locator("#steps .katex-display").first
    box = display.evaluate("e => ({scroll: e.scrollWidth, client: e.clientWidth, overflow: getComputedStyle(e).overflowX})")
    assert box["scroll"] > box["client"] and box["overflow"] == "auto"
    # Its hidden end fades out, so that the labeler sees it goes on; scrolled to the end, the
    # start fades instead.
    expect(display).to_have_class(re.compile(r"\bscrolls\b"))
    assert "linear-gradient" in display.evaluate("e => getComputedStyle(e).maskImage || getComputedStyle(e).webkitMaskImage")
    display.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    expect(display).to_have_class(re.compile(r"\bat-end\b"))
    expect(display).to_have_class(re.compile(r"\bscrolled\b"))
    screenshot(page, "narrow_labeler_display_scrolled.png")
    display.evaluate("e => { e.scrollLeft = 0; }")
    expect(display).not_to_have_class(re.compile(r"\bscrolled\b"))
    # On a keyboard: → scrolls the current step's wide formula to its end, ← back; Tab reaches it.
    page.locator("#steps > .step").first.locator('.rate[data-rating="1"]').tap()
    expect(page.locator("#steps > .step").nth(1)).to_have_class(re.compile(r"\bis-current\b"))
    for _ in range(12):
        page.keyboard.press("ArrowRight")
    expect(display).to_have_class(re.compile(r"\bat-end\b"))
    for _ in range(12):
        page.keyboard.press("ArrowLeft")
    expect(display).not_to_have_class(re.compile(r"\bscrolled\b"))
    assert display.get_attribute("tabindex") == "0"
    assert page.locator("#steps > .step").nth(1).locator(".katex-display").count() == 1

    steps = page.locator("#steps > .step")
    viewport = PHONE["width"]
    for i in range(steps.count()):
        step = steps.nth(i).bounding_box()
        assert step is not None and step["width"] >= viewport - 40, "steps take the full width"
    first = steps.first
    # Both boxes from one layout: the page may still be scrolling to the current step, and two
    # calls would measure them at different scroll positions.
    body_bottom, controls_top = first.evaluate(
        "s => [s.querySelector('.step-body').getBoundingClientRect().bottom,"
        " s.querySelector('.step-controls').getBoundingClientRect().top]")
    assert controls_top >= body_bottom, "buttons sit under the step"
    for rate in first.locator(".rate").all():
        size = rate.bounding_box()
        assert size is not None and size["height"] >= 44 and size["width"] >= 44

    # The main menu folds behind a button, and opens on a tap.
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    page.get_by_role("button", name="Menu").tap()
    expect(nav.get_by_role("link", name="My stats")).to_be_visible()
    _assert_fits(page, "labeler_menu")
    page.get_by_role("button", name="Menu").tap()
    expect(nav).to_be_hidden()
    # Escape folds it too, and leaves the focus on the button that opened it.
    page.get_by_role("button", name="Menu").tap()
    expect(nav).to_be_visible()
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()
    expect(page.get_by_role("button", name="Menu")).to_be_focused()

    first.locator(".rate.good").tap()
    expect(first).to_have_class(re.compile(r"\brated-good\b"))
    # Rated by thumb to the end, the page names the button to tap, not a key it has not got.
    for i in range(1, steps.count()):
        steps.nth(i).locator(".rate.good").tap()
    expect(page.locator("#status")).to_have_text(re.compile(r"no error\. Tap Submit\.$"))
    expect(page.locator("#submit kbd")).to_be_hidden()

    page.goto("/label/stats")
    expect(page.get_by_role("heading", name="My stats")).to_be_visible()
    _assert_fits(page, "stats")

    # The project list's rows stack: where labeling goes on (the task rated above is still this
    # labeler's) is on the screen, not in a table scrolled sideways.
    add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"])
    page.goto("/label")
    box = page.get_by_role("link", name="Continue labeling").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    expect(page.get_by_text("For you", exact=True)).to_be_hidden()
    _assert_fits(page, "label_projects")
    page.context.close()


def test_manager_and_admin_pages_fit_a_phone(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "Pilot with a long project name to wrap somewhere")
    import_bytes(session_factory, project, jsonl(sample_records()),
                 filename="prm800k-phase2-train-sample-with-a-long-file-name.jsonl")
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "a-labeler-with-a-rather-long-username", "labeler")
    with session_scope(session_factory) as session:
        label_id = session.scalar(select(func.min(Label.id)))
    page = _phone(browser, live_server)
    login(page, "boss", "/manage/projects")
    _assert_fits(page, "manage_projects")
    for path, name in [
        (f"/manage/projects/{project.id}", "manage_project"),
        (f"/manage/projects/{project.id}/import", "manage_import"),
        (f"/manage/projects/{project.id}/export", "manage_export"),
        (f"/manage/projects/{project.id}/reports", "manage_reports"),
        (f"/manage/projects/{project.id}/labels/{label_id}", "manage_label"),
        (f"/research/projects/{project.id}", "research_project"),
        ("/admin/users", "admin_users"),
    ]:
        page.goto(path)
        expect(page.locator("h1, h2").first).to_be_visible()
        _assert_fits(page, name)
    page.context.close()


def test_long_names_formulas_and_row_actions_stay_on_a_phone(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    # The longest name the rule allows, without a space to break at.
    project = make_project(session_factory, "A" + "b" * 99)
    records = sample_records()
    records[0]["question"]["problem"] = "Find " + LONG_DISPLAY
    import_bytes(session_factory, project, jsonl(records), filename="a-file-name-" + "x" * 80 + ".jsonl")
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "lena", "labeler")
    with session_scope(session_factory) as session:
        label_id = session.scalar(select(func.min(Label.id)))
    page = _phone(browser, live_server)
    login(page, "boss", f"/manage/projects/{project.id}")
    _assert_fits(page, "manage_project_long_name")
    # An imported file's name takes the stacked row's width: it was held to a narrow column.
    name = page.locator("table.imports .filename .name").first.bounding_box()
    assert name is not None and name["width"] > PHONE["width"] / 2, name
    page.goto("/research")
    _assert_fits(page, "research_long_name")
    # On a laptop the name wraps in its column: it pushed the projects table's counts off screen.
    page.set_viewport_size({"width": 1360, "height": 900})
    page.goto("/manage/projects")
    table = page.locator("table.projects").evaluate("t => ({table: t.scrollWidth, box: t.parentElement.clientWidth})")
    assert table["table"] <= table["box"], table
    page.set_viewport_size(PHONE)
    page.goto(f"/manage/projects/{project.id}/labels/{label_id}")
    expect(page.locator(".label-view .katex-display").first).to_be_visible()
    _assert_fits(page, "manage_label_long_formula")
    # The formula keeps to the screen: wrapped, or scrolled in its own box.
    box = page.locator(".label-view .katex-display").first.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]

    # The users table's rows stack: each row's actions are on the screen.
    page.goto("/admin/users")
    deactivate = page.locator("#user-" + str(_user_id(session_factory, "lena"))).get_by_role("button", name="Deactivate")
    box = deactivate.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    _assert_fits(page, "admin_users_stacked")
    page.context.close()


def _user_id(session_factory, username: str) -> int:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalar(select(User.id).where(User.username == username))  # type: ignore[return-value]


def test_a_solution_ended_early_by_its_first_error_has_submit_on_a_phones_screen(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, [f"Step {n}: $x_{{{n}}} = {n}$." for n in range(1, 31)] + ["# Answer\n\n30"])
    page = _phone(browser, live_server)
    login(page, "lena", f"/label/{project.id}")
    steps = page.locator("#steps > .step")
    steps.nth(0).locator(".rate.good").tap()
    steps.nth(1).locator(".rate.bad").tap()
    expect(page.locator("#finish")).to_be_visible()
    # Thirty locked steps below, and Submit still at the foot of the screen.
    box = page.locator("#finish-submit").bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"], box
    screenshot(page, "narrow_labeler_first_error_submit.png")
    page.locator("#finish-submit").tap()
    expect(page.get_by_role("heading", name="Queue empty")).to_be_visible()
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 1
    page.context.close()
