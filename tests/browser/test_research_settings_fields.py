"""The round settings form on the research page, read at a laptop's and a phone's width."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SCREENSHOTS, login
from tests.conftest import make_project, make_user

# Each select's options wider than the room the select gives its chosen one, in CSS pixels. The
# room leaves out the padding and the drop-down arrow Chromium draws inside it (about 20px): a
# select shows its chosen option cut short, with no ellipsis, and a researcher cannot tell
# "every step (Math-Shephe" from what it was meant to say.
CUT_SHORT = """form => {
  const canvas = document.createElement("canvas").getContext("2d");
  const cut = [];
  for (const select of form.querySelectorAll("select")) {
    const style = getComputedStyle(select);
    canvas.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
    for (const option of select.options) {
      const width = canvas.measureText(option.text).width;
      if (width > room) cut.push(`${select.name}: "${option.text}" needs ${Math.ceil(width)}px of ${Math.floor(room)}`);
    }
  }
  return cut;
}"""


@pytest.mark.parametrize("width, height", [(1366, 900), (390, 844)])
def test_every_round_setting_choice_shows_whole(page: Page, session_factory, width: int, height: int) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "settings")
    make_user(session_factory, "rita", "researcher")
    page.set_viewport_size({"width": width, "height": height})
    login(page, "rita", f"/research/projects/{project.id}")
    form = page.locator("#settings form.settings-grid")
    expect(form).to_be_visible()
    page.evaluate("document.fonts.ready.then(() => true)")
    assert form.evaluate(CUT_SHORT) == []
    method = page.get_by_label("Method")
    method.select_option("binary")
    machine_labels = page.get_by_role("group", name="Machine labels")
    # What each method does is said below the select, not squeezed into it.
    expect(machine_labels).to_contain_text("binary search: for the first error, with fewer rollouts (OmegaPRM)")
    machine_labels.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    machine_labels.screenshot(path=str(SCREENSHOTS / f"research-settings-machine-labels-{width}.png"),
                              animations="disabled")
