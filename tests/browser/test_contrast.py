"""Rating buttons not chosen still read at WCAG AA: contrast from the colours Chromium computes."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import add_solution, login, screenshot
from tests.conftest import make_project, make_user

AA_NORMAL_TEXT = 4.5
# The text colour, the element's own background, the backgrounds behind it (nearest first, up to
# the first opaque one) and the product of its and its ancestors' opacity.
COLOURS = """
(element) => {
  let opacity = 1;
  for (let e = element; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
  const behind = [];
  for (let e = element.parentElement; e; e = e.parentElement) {
    const colour = getComputedStyle(e).backgroundColor;
    behind.push(colour);
    if (!colour.startsWith("rgba")) break;
  }
  const style = getComputedStyle(element);
  return {text: style.color, own: style.backgroundColor, behind, opacity};
}
"""
Rgb = tuple[float, float, float]


def _rgba(css: str) -> tuple[Rgb, float]:
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    return (parts[0], parts[1], parts[2]), parts[3] if len(parts) > 3 else 1.0


def _over(top: Rgb, alpha: float, bottom: Rgb) -> Rgb:
    return tuple(alpha * t + (1 - alpha) * b for t, b in zip(top, bottom))  # type: ignore[return-value]


def _luminance(rgb: Rgb) -> float:
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(colours: dict) -> float:  # type: ignore[type-arg]
    """WCAG contrast of the text against what is drawn behind it, opacity included."""
    backdrop: Rgb = (255.0, 255.0, 255.0)
    for css in reversed(colours["behind"]):
        backdrop = _over(*_rgba(css), backdrop)
    background = _over(*_rgba(colours["own"]), backdrop)
    text = _over(*_rgba(colours["text"]), background)
    opacity = colours["opacity"]
    text, background = _over(text, opacity, backdrop), _over(background, opacity, backdrop)
    light, dark = sorted((_luminance(text), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_contrast_arithmetic() -> None:
    black_on_white = {"text": "rgb(0, 0, 0)", "own": "rgb(255, 255, 255)", "behind": [], "opacity": 1}
    assert round(contrast(black_on_white), 1) == 21.0
    faded = {**black_on_white, "opacity": 0.28}
    assert contrast(faded) < AA_NORMAL_TEXT


def test_rating_buttons_not_chosen_reach_aa_contrast(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full")
    make_user(session_factory, "lena", "labeler")
    add_solution(session_factory, project, ["Step one.", "Step two.", "Step three.", "# Answer\n\n2"])
    login(page, "lena", f"/label/{project.id}")
    steps = page.locator("#steps > .step")
    expect(steps).to_have_count(4)
    page.keyboard.press("1")  # step 1: +1, and the cursor moves on to step 2
    page.keyboard.press("3")  # step 2: −1, on to step 3
    expect(steps.nth(2)).to_have_class(re.compile(r"\bis-current\b"))
    page.mouse.move(0, 0)  # a hovered step shows its buttons in full colour
    screenshot(page, "labeler_contrast.png")

    # Steps 1 and 2 rated (two buttons each not chosen), step 3 current, step 4 waiting.
    unchosen = page.locator('#steps .rate[aria-pressed="false"]')
    expect(unchosen).to_have_count(10)
    for i in range(unchosen.count()):
        button = unchosen.nth(i)
        ratio = contrast(button.evaluate(COLOURS))
        label = f"step {button.evaluate('b => b.closest(`.step`).querySelector(`.step-num`).textContent')} {button.inner_text()!r}"
        assert ratio >= AA_NORMAL_TEXT, f"{label}: contrast {ratio:.2f} is below {AA_NORMAL_TEXT}"
