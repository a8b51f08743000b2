"""Sources on the export page and source weights in the round settings, in Chromium."""

from __future__ import annotations

import orjson
from playwright.sync_api import Page, expect

from app.db import session_scope
from app.machine_labels.service import MachineLabel, store_machine_labels
from app.models import LabelSource
from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user


def test_export_page_downloads_the_ticked_sources(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "provenance")
    solution = add_solution(session_factory, project, ["$1+1=2$.", "# Answer\n\n2"])
    with session_scope(session_factory) as session:
        store_machine_labels(session, project.id, LabelSource.rollout, {"model": "tiny"},
                             [MachineLabel(solution, [1, 1], {"shares": [1.0, 1.0]})])
    make_user(session_factory, "max", "manager")
    login(page, "max", f"/manage/projects/{project.id}/export")
    boxes = page.locator('input[name="sources"]')
    assert boxes.count() == 4 and all(boxes.nth(i).is_checked() for i in range(4))
    page.get_by_role("checkbox", name="Labelers (human)", exact=True).uncheck()
    screenshot(page, "export-sources.png")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download").click()
    records = [orjson.loads(line) for line in open(download.value.path(), "rb").read().splitlines()]
    assert [r["source"] for r in records] == ["rollout"]


def test_research_settings_take_source_weights(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "weights")
    make_user(session_factory, "rita", "researcher")
    login(page, "rita", f"/research/projects/{project.id}")
    field = page.get_by_label("Source weights")
    field.fill("human=1, rollout=lots")
    page.get_by_role("button", name="Save round settings").click()
    expect(page.locator("#settings")).to_contain_text("write SOURCE=WEIGHT")
    page.get_by_label("Source weights").fill("human=1, rollout=0.5")
    # Waited for from before the click: the page takes saved=1 out of its address as it loads.
    with page.expect_navigation(url="**saved=1**"):
        page.get_by_role("button", name="Save round settings").click()
    assert page.get_by_label("Source weights").input_value() == "human=1, rollout=0.5"
    page.locator("#settings").scroll_into_view_if_needed()
    screenshot(page, "research-source-weights.png")
