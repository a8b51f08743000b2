"""Headings, tables, charts and form fields as a screen reader and a contrast checker meet them."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.models import Label
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import PASSWORD, make_project, make_user

HEADING_LEVELS = "() => [...document.querySelectorAll('main :is(h1, h2, h3, h4, h5, h6)')].map(h => Number(h.tagName[1]))"


def _luminance(rgb: str) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(v) for v in re.findall(r"\d+", rgb)[:3])
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def _contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _assert_nested(levels: list[int]) -> None:
    assert levels[0] == 1, levels
    for before, after in zip(levels, levels[1:], strict=False):
        assert after <= before + 1, f"a heading jumps from h{before} to h{after}: {levels}"


def test_the_charts_read_at_aa_and_give_their_values_to_everyone(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mona", "manager")
    login(page, "mona", f"/manage/projects/{project.id}")
    texts = page.locator(".bar-chart text")
    expect(texts.first).to_be_attached()
    # The lightest grey behind the charts' text that a checker met: what is drawn and the colour a
    # checker reads both reach AA's 4.5:1 on it.
    for fill, color in texts.evaluate_all("ts => ts.map(t => [getComputedStyle(t).fill, getComputedStyle(t).color])"):
        assert _contrast(fill, "rgb(239, 241, 245)") >= 4.5, fill
        assert _contrast(color, "rgb(239, 241, 245)") >= 4.5, color
    for chart in ("chart-days", "chart-hours"):
        title = page.locator(f"#{chart}-title").text_content()
        table = page.get_by_role("table", name=title)
        expect(table).to_be_attached()
        tooltips = page.locator(f"#{chart} .bar > title").all_text_contents()
        rows = table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => `${r.cells[0].textContent}: ${r.cells[1].textContent}`)"
        )
        assert [re.sub(r" labels?$", "", t) for t in tooltips] == rows


def test_headings_nest_and_action_columns_are_named(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full", guidelines="# Rating\n\nRate each step.\n\n## Edge cases\n\nFlag them.\n")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Let $x = 2$.", "# Answer\n\n2"])
    login(page, "lena", f"/label/{project.id}/guidelines")
    levels = page.evaluate(HEADING_LEVELS)
    _assert_nested(levels)
    expect(page.get_by_role("heading", name="Rating")).to_be_visible()

    page.goto("/label")
    expect(page.locator("main th").first).to_be_attached()
    for header in page.locator("main th").all():
        assert header.text_content().strip(), "a table column without a name"

    page.goto(f"/label/{project.id}")
    expect(page.locator("#guidelines-dialog")).to_be_visible()
    page.get_by_role("button", name="Got it").click()
    expect(page.locator("#task-view")).to_be_visible()
    page.keyboard.press("1")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#empty-view")).to_be_visible()
    with session_scope(session_factory) as session:
        label_id = session.scalars(select(Label.id)).one()
    page.goto(f"/label/labels/{label_id}")
    expect(page.get_by_role("heading", name="Problem", level=2)).to_be_visible()
    expect(page.get_by_role("heading", name="Solution, as you rated it", level=2)).to_be_visible()
    _assert_nested(page.evaluate(HEADING_LEVELS))
    screenshot(page, "a11y_label_view_headings.png")

    page.goto("/label/stats")
    headers = page.locator("main th")
    expect(headers.first).to_be_attached()
    for header in headers.all():
        assert header.text_content().strip(), "a table column without a name"


def test_a_field_is_named_by_its_label_and_described_by_its_hint_and_error(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rhea", "labeler")
    page.goto("/login")
    page.get_by_label("Username").fill("rhea")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    for field in (page.locator("input[name=username]"), page.locator("input[name=password]")):
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(field).to_have_accessible_description("Wrong username or password.")

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto("/account")
    current = page.locator("input[name=current_password]")
    new = page.locator("input[name=new_password]")
    expect(new).to_have_accessible_name("New password")
    expect(new).to_have_accessible_description("8 characters or more, not easy to guess")
    current.fill("not the password")
    new.fill("a new password 1")
    page.locator("input[name=repeat_password]").fill("a new password 1")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#current_password-error")).to_be_visible()
    expect(current).to_have_accessible_name("Current password")
    expect(current).to_have_accessible_description("Is not your password")
    expect(current).to_have_attribute("aria-invalid", "true")
    expect(page.locator("input[name=name]")).to_have_accessible_name("Name")
    screenshot(page, "a11y_account_fields.png")
