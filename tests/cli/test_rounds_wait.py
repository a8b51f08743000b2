"""`stepwise rounds start --wait` tells a script whether the round it ran is done."""

from __future__ import annotations

import pytest

from tests.conftest import make_project


@pytest.mark.parametrize(("outcome", "code"), [(("round 1: done: 12 picks queued", True), 0),
                                               (("round 1: failed: no base", False), 1)])
def test_the_exit_status_says_whether_the_round_is_done(stepwise, database_url, session_factory, monkeypatch,
                                                        outcome, code) -> None:  # type: ignore[no-untyped-def]
    make_project(session_factory, "waited")
    monkeypatch.setattr("app.rounds.worker.run_here", lambda settings, round_id: outcome)
    result = stepwise(database_url, "rounds", "start", "--project", "waited", "--wait")
    assert result.exit_code == code, result.output
    assert outcome[0] in result.output
    if code:
        assert "Traceback" not in result.output
