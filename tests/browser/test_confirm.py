"""Actions that end someone's work ask first (confirm_action.js): removing a member, deactivating
a user, cancelling a round. Cancel and Escape change nothing; the confirming button posts."""

from __future__ import annotations

from datetime import timedelta

from playwright.sync_api import Page, expect
from sqlalchemy import select

from app.db import session_scope
from app.models import Project, ProjectMember, Round, RoundStatus, RoundTrigger, User, utcnow
from tests.browser.conftest import add_member, login, screenshot
from tests.conftest import PASSWORD, make_project, make_user


def _is_member(session_factory, project_id: int, username: str) -> bool:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalar(
            select(ProjectMember.user_id).join(User, User.id == ProjectMember.user_id)
            .where(ProjectMember.project_id == project_id, User.username == username)
        ) is not None


def test_removing_a_member_asks_first(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "closed algebra", open_to_all=False)
    make_user(session_factory, "mona", "manager")
    make_user(session_factory, "lou", "labeler")
    add_member(page, project.id, "mona", "lou")

    dialog = page.get_by_role("dialog", name="Remove lou from closed algebra?")
    page.get_by_role("button", name="Remove lou").click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Their tasks in progress here go back to the queue")
    # The safe answer has the focus, so Enter after a slip keeps the member.
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    screenshot(page, "confirm_remove_member.png")
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="Remove lou").click()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert _is_member(session_factory, project.id, "lou")

    page.get_by_role("button", name="Remove lou").click()
    with page.expect_navigation():
        dialog.get_by_role("button", name="Remove lou").click()
    expect(page.get_by_text("lou is no longer a member.")).to_be_visible()
    assert not _is_member(session_factory, project.id, "lou")


def test_deactivating_a_user_asks_first(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "tina", "labeler")
    login(page, "boss", "/admin/users")
    row = page.locator("tr", has=page.locator("td.username", has_text="tina"))
    row.get_by_role("button", name="Deactivate").click()
    dialog = page.get_by_role("dialog", name="Deactivate tina?")
    expect(dialog).to_contain_text("their API tokens are revoked for good")
    dialog.get_by_role("button", name="Cancel").click()
    expect(row.locator(".badge")).to_have_text("active")
    row.get_by_role("button", name="Deactivate").click()
    dialog.get_by_role("button", name="Deactivate tina").click()
    expect(row.locator(".badge")).to_have_text("deactivated")
    # Reactivating takes nothing away, and does not ask.
    row.get_by_role("button", name="Reactivate").click()
    expect(row.locator(".badge")).to_have_text("active")


def _role(session_factory, username: str) -> str:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return session.scalars(select(User.role).where(User.username == username)).one().value


def test_making_an_admin_asks_for_your_own_password_in_the_dialog(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "tina", "labeler")
    login(page, "boss", "/admin/users")
    row = page.locator("tr", has=page.locator("td.username", has_text="tina"))
    row.get_by_label("Role of tina").select_option("admin")
    row.get_by_role("button", name="Change role").click()
    dialog = page.get_by_role("dialog", name="Make tina an admin?")
    password = dialog.get_by_label("Your password")
    # The password is what is asked: it has the focus, and Enter in it confirms.
    expect(password).to_be_focused()
    # Confirming with an empty field asks for it, and posts nothing.
    dialog.get_by_role("button", name="Make tina an admin").click()
    expect(dialog).to_be_visible()
    password.fill("not my password")
    screenshot(page, "confirm_make_admin.png")
    with page.expect_navigation():
        password.press("Enter")
    # A wrong one: the page says so and asks again, in its own form.
    card = page.locator("#confirm-change")
    expect(card).to_contain_text("making tina an admin asks for your own password")
    expect(card).to_contain_text("Is not your password")
    assert _role(session_factory, "tina") == "labeler"
    screenshot(page, "confirm_make_admin_wrong.png")
    card.get_by_label("Your password").fill(PASSWORD)
    with page.expect_navigation():
        card.get_by_role("button", name="Confirm").click()
    expect(page.get_by_text("tina's role is now admin.")).to_be_visible()
    assert _role(session_factory, "tina") == "admin"

    # Cancel forgets what was typed, and the password never stays in the page.
    row.locator("summary", has_text="Set password").click()
    row.get_by_label("New password for tina").fill("a new password for tina")
    row.get_by_role("button", name="Set the password of tina").click()
    dialog = page.get_by_role("dialog", name="Set the password of tina, an admin?")
    dialog.get_by_label("Your password").fill(PASSWORD)
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert page.locator("input[name=your_password]").count() == 0
    row.get_by_role("button", name="Set the password of tina").click()
    expect(dialog.get_by_label("Your password")).to_have_value("")
    dialog.get_by_label("Your password").fill(PASSWORD)
    with page.expect_navigation():
        dialog.get_by_role("button", name="Set the password").click()
    expect(page.get_by_text("New password set for tina")).to_be_visible()


def test_cancelling_a_round_asks_first(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "rounds to cancel")
    make_user(session_factory, "rosa", "researcher")
    with session_scope(session_factory) as session:
        # Leased far ahead by a worker elsewhere, so the server's own worker leaves it alone.
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.running, trigger=RoundTrigger.manual,
                       lease_owner="elsewhere", lease_expires_at=utcnow() + timedelta(hours=1))
        session.add(round_)
        session.flush()
        round_id = round_.id
    login(page, "rosa", f"/research/projects/{project.id}")
    cancel = page.locator("tr[data-round]").get_by_role("button", name="Cancel")
    cancel.click()
    dialog = page.get_by_role("dialog", name="Cancel round 1?")
    expect(dialog).to_contain_text("what it trained is thrown away")
    screenshot(page, "confirm_cancel_round.png")
    dialog.get_by_role("button", name="Keep it").click()
    with session_scope(session_factory) as session:
        assert session.get(Round, round_id).status == RoundStatus.running
    cancel.click()
    with page.expect_navigation():
        dialog.get_by_role("button", name="Cancel round 1").click()
    with session_scope(session_factory) as session:
        assert session.get(Round, round_id).status == RoundStatus.cancelled
        assert session.get(Project, project.id) is not None


def test_without_dialog_support_the_browser_asks(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Safari before 15.4 has no <dialog>: the action must still ask, and still be possible.
    page.add_init_script("delete window.HTMLDialogElement")
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "tina", "labeler")
    login(page, "boss", "/admin/users")
    row = page.locator("tr", has=page.locator("td.username", has_text="tina"))
    asked: list[str] = []

    def answer(dialog, accept: bool) -> None:  # type: ignore[no-untyped-def]
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    row.get_by_role("button", name="Deactivate").click()
    expect(row.locator(".badge")).to_have_text("active")
    page.once("dialog", lambda dialog: answer(dialog, True))
    row.get_by_role("button", name="Deactivate").click()
    expect(row.locator(".badge")).to_have_text("deactivated")
    assert asked[0].startswith("Deactivate tina?\n\nThey are signed out everywhere") and len(asked) == 2
