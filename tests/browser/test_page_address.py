"""Reloading a page in Chromium after a form: a one-time notice does not come back, and a refused
form's page reloads as the page it belongs to instead of posting again (page_address.js)."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import add_member, login
from tests.conftest import make_project, make_user


def test_a_notice_is_gone_after_a_reload_and_the_fragment_stays(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "addresses", open_to_all=False)
    make_user(session_factory, "mona", "manager")
    make_user(session_factory, "lou", "labeler")
    add_member(page, project.id, "mona", "lou")
    page.wait_for_function("() => !location.search")
    assert page.evaluate("location.pathname + location.hash") == f"/manage/projects/{project.id}#members"
    page.reload()
    expect(page.get_by_role("button", name="Remove lou")).to_be_visible()
    expect(page.get_by_text("lou is now a member.")).to_have_count(0)


def test_a_refused_form_reloads_as_its_page(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "rhea", "labeler")
    login(page, "rhea", "/account")
    page.get_by_label("Current password").fill("not the password")
    page.locator("input[name=new_password]").fill("a new password 1")
    page.get_by_label("New password again").fill("a new password 1")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#current_password-error", has_text="Is not your password")).to_be_visible()
    page.wait_for_function("() => location.pathname === '/account'")
    response = page.reload()
    assert response is not None and response.status == 200 and response.request.method == "GET"
    expect(page.locator("#current_password-error", has_text="Is not your password")).to_have_count(0)
