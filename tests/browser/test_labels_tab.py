"""The Labels tab in Chromium: filter a project's labels, open one as labeled, come back."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes


def test_a_manager_filters_labels_and_opens_one(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "sample", labeling_mode="phase1")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    make_user(session_factory, "maria", "manager")
    login(page, "maria", f"/manage/projects/{project.id}/labels")
    rows = page.locator("table.labels tbody tr")
    expect(rows).to_have_count(9)
    expect(rows.first.locator(".statement .katex")).to_be_visible()
    page.set_viewport_size({"width": 1440, "height": 900})
    # A preview too long for its line shows whole formulas and ends in "…": Chromium's ellipsis
    # clipped a formula part-way ("what is f(g(−2") and drew none.
    long_one = page.locator('.statement[title^="If $f(x) = 3x + 2$"]').first
    expect(long_one.locator(".line-end")).to_have_text("…")
    page.wait_for_function("""() => {
        const lines = [...document.querySelectorAll('.statement')];
        const shown = (line) => [...line.querySelectorAll('.katex')].filter((f) => !f.closest('.line-cut'));
        return lines.some((line) => shown(line).length) && lines.every((line) =>
            shown(line).every((f) => f.getBoundingClientRect().right <= line.getBoundingClientRect().right));
    }""")
    screenshot(page, "manage_labels.png")

    # A label whose solution's other labeler disagrees: the other's rating stands under each
    # step, the differing one marked.
    rows.filter(has=page.locator(".badge", has_text="disagrees")).first.get_by_role(
        "link", name=re.compile(r"^Label \d+$")).first.click()
    others = page.locator(".viewed-steps .other-ratings")
    expect(others.first).to_be_visible()
    expect(page.locator(".viewed-steps .other-rating.differs")).not_to_have_count(0)
    screenshot(page, "manage_label_disagreement.png")
    page.get_by_role("link", name="← Labels").click()

    page.get_by_label("Outcome").select_option("solution")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(3)
    expect(page.get_by_text("3 current labels match these filters")).to_be_visible()
    # The phase-1 label whose second step its labeler wrote: the strip and the view follow that path.
    written = rows.filter(has=page.locator('.statement[title^="If $f(x) = 3x + 2$"]'))
    written.get_by_role("link", name=re.compile(r"^Label \d+$")).first.click()
    expect(page.get_by_role("heading", name=re.compile(r"Label \d+"))).to_be_visible()
    expect(page.locator(".viewed-steps li")).to_have_count(3)
    expect(page.locator(".viewed-steps li").nth(1).get_by_text("labeler's own step")).to_be_visible()
    screenshot(page, "manage_label_phase1.png")
    page.get_by_role("link", name="← Labels").click()
    expect(page).to_have_url(re.compile(r"/labels$"))

    page.set_viewport_size({"width": 390, "height": 844})
    expect(rows).to_have_count(9)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # Each label is a block of named cells: its outcome is on the screen, not in a table
    # scrolled sideways.
    assert page.locator("table.labels").evaluate("e => e.parentElement.scrollWidth <= e.parentElement.clientWidth")
    outcome = rows.first.locator('td[data-label="Outcome"]')
    box = outcome.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    expect(page.locator("table.labels thead")).to_be_hidden()
    screenshot(page, "manage_labels_phone.png")
