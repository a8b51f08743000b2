"""The research page follows what a worker is doing: a waiting comparison's result and a round's
end appear without the researcher reloading, wherever on the page they are.

The test's server runs no worker, so the test plays the worker's part here, as a separate worker
process would."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from sqlalchemy import update

from app.db import session_scope
from app.models import Round, RoundStage, RoundStatus
from app.rounds.comparison import request_comparison
from app.rounds.worker import LocalWorker
from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.rounds.conftest import add_versions, synthetic_project, untrained_checkpoint


def test_a_waiting_comparison_shows_its_result_when_a_worker_finishes(  # type: ignore[no-untyped-def]
    page: Page, session_factory, tmp_path: Path
) -> None:
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id,
                               [untrained_checkpoint(tmp_path / f"seed-{seed}", seed) for seed in (0, 1)])
    make_user(session_factory, "rita", "researcher")
    with session_scope(session_factory) as session:
        request_comparison(session, project.id, old, served)
    page.set_viewport_size({"width": 1360, "height": 900})
    login(page, "rita", f"/research/projects/{project.id}")

    comparison = page.locator("div.comparison")
    expect(comparison.locator('[data-field="status"]')).to_have_text("queued")
    expect(comparison.locator("table")).to_have_count(0)

    LocalWorker(session_factory).run_once()
    section = comparison.first
    expect(section.get_by_role("cell", name="step AUROC", exact=True)).to_be_visible(timeout=20_000)
    expect(section).to_contain_text(f"Version {old} (A) against version {served} (B) on")
    expect(page.locator("[data-live-comparison]")).to_have_count(0)
    screenshot(page, "research_comparison_done.png")


def _running_round(factory, project_id: int) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        round_ = Round(project_id=project_id, number=1, status=RoundStatus.running, stage=RoundStage.train,
                       percent=40.0)
        session.add(round_)
        session.flush()
        return round_.id


def test_a_round_that_ends_reloads_the_page_even_at_an_anchor(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    round_id = _running_round(session_factory, project.id)
    login(page, "rita", f"/research/projects/{project.id}")
    # Following a link to a section leaves the page's address with a #fragment.
    page.goto(f"/research/projects/{project.id}#comparisons")
    expect(page.locator(f'[data-live-round="{round_id}"]')).to_have_count(1)

    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(
            status=RoundStatus.failed, stage=RoundStage.train, message="the base model could not be loaded"))
    # Only a reloaded page drops the live marker; the poll alone updates the badge in place.
    expect(page.locator("[data-live-round]")).to_have_count(0, timeout=20_000)
    expect(page.locator("tr[data-round]").first).to_contain_text("failed")


def test_a_page_with_changes_in_a_form_is_not_reloaded_under_the_researcher(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    round_id = _running_round(session_factory, project.id)
    login(page, "rita", f"/research/projects/{project.id}")
    page.get_by_label("Picks per round").fill("77")
    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(status=RoundStatus.done))
    expect(page.locator("[data-reload-hint]:visible")).to_have_count(1, timeout=20_000)
    expect(page.get_by_label("Picks per round")).to_have_value("77")
    expect(page.locator(f'[data-live-round="{round_id}"]')).to_have_count(1)


def test_a_round_ending_while_a_form_posts_leaves_the_post_to_finish(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    round_id = _running_round(session_factory, project.id)
    login(page, "rita", f"/research/projects/{project.id}")
    # The cancel's answer is held back, as a busy server's comes late, while the round ends.
    page.route("**/cancel", lambda route: None)
    page.locator("tr[data-round]").get_by_role("button", name="Cancel").click()
    page.get_by_role("dialog", name="Cancel round 1?").get_by_role("button", name="Cancel round 1").click(
        no_wait_after=True)
    navigated: list[str] = []
    page.on("framenavigated", lambda frame: navigated.append(frame.url))
    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(status=RoundStatus.cancelled))
    with page.expect_response(lambda response: response.url.endswith(f"/api/v1/rounds/{round_id}"), timeout=20_000):
        pass
    # A round's end reloads the page 0.8 s after the poll that saw it, and that reload would abort
    # the cancel's answer on its way. The poll just answered may have left before the round
    # ended; the next comes 2 s later.
    page.wait_for_timeout(3_500)
    assert navigated == []


def test_a_cancel_asked_and_kept_still_reloads_the_page_when_the_round_ends(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    round_id = _running_round(session_factory, project.id)
    login(page, "rita", f"/research/projects/{project.id}")
    page.locator("tr[data-round]").get_by_role("button", name="Cancel").click()
    # The dialog's buttons submit a form of its own, which posts nothing.
    page.get_by_role("dialog", name="Cancel round 1?").get_by_role("button", name="Keep it").click()
    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(status=RoundStatus.done))
    expect(page.locator("[data-live-round]")).to_have_count(0, timeout=20_000)


def test_a_round_queued_for_a_retry_says_when_the_next_try_is(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    from app.rounds import lease

    project = make_project(session_factory)
    make_user(session_factory, "rita", "researcher")
    round_id = _running_round(session_factory, project.id)
    with session_scope(session_factory) as session:
        session.execute(update(Round).where(Round.id == round_id).values(lease_owner="w", attempts=1))
    login(page, "rita", f"/research/projects/{project.id}")
    progress = page.locator(f'[data-live-round="{round_id}"]')
    expect(progress.locator('[data-field="stage"]')).to_have_text("train")

    lease.give_up_or_retry(session_factory, round_id, "w", "OSError: the Hub cannot be reached", max_attempts=3,
                           retry_after_s=600)
    with session_scope(session_factory) as session:
        retry_at = session.get(Round, round_id).retry_at
    line = f"· next try at {retry_at:%H:%M:%S} UTC"
    # Followed live, and as the server writes it.
    expect(progress.locator('[data-field="eta"]')).to_have_text(line, timeout=20_000)
    expect(progress.locator('[data-field="stage"]')).to_have_text("train")
    expect(progress.locator('[data-field="message"]')).to_contain_text("will retry at")
    page.reload()
    expect(progress.locator('[data-field="eta"]')).to_have_text(line)
    expect(progress.locator('[data-field="stage"]')).to_have_text("train")
    screenshot(page, "research_round_retry.png")
