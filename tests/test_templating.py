"""Figures as pages show them."""

from __future__ import annotations

import pytest

from app.templating import percent_down


@pytest.mark.parametrize(("share", "digits", "shown"), [
    (249 / 250, 0, "99"),  # not "100" until every solution is done
    (2 / 3, 1, "66.6"),  # typed as an export's minimum accuracy, it keeps this labeler
    (0.29, 0, "29"),  # 28.999… in floating point
    (0.5, 1, "50.0"),
    (1.0, 1, "100.0"),
    (0.0, 0, "0"),
])
def test_a_share_is_shown_rounded_down(share: float, digits: int, shown: str) -> None:
    assert percent_down(share, digits) == shown
    assert float(shown) / 100 <= share
