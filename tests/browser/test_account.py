"""Your account's API tokens in the browser: a token is shown once, and a reload neither shows it
again nor makes another."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from sqlalchemy import func, select

from app.db import session_scope
from app.models import ApiToken
from tests.browser.conftest import login, screenshot
from tests.conftest import PASSWORD, make_user


def test_a_token_made_on_the_account_page_is_shown_once_and_a_reload_makes_no_other(  # type: ignore[no-untyped-def]
    page: Page, session_factory
) -> None:
    make_user(session_factory, "lena", "labeler")
    login(page, "lena", "/account")
    page.get_by_label("Name").fill("notebook")
    page.get_by_label("Your password").fill(PASSWORD)
    page.get_by_role("button", name="Make a token").click()
    shown = page.get_by_label("The new token")
    expect(shown).to_be_visible()
    token = shown.input_value()
    screenshot(page, "account_token_made.png")

    page.reload()
    expect(page.get_by_label("The new token")).to_have_count(0)
    expect(page.locator("tr[id^=token-]")).to_have_count(1)
    assert token not in page.content()
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(ApiToken)) == 1
