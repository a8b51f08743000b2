"""The disagreement rule: who disagrees with whom, on which step, and which goes first."""

from __future__ import annotations

import pytest

from active_learning.disagreement import (
    Opinion,
    first_error_of_ratings,
    first_error_of_scores,
    judge,
)


def test_first_errors_of_ratings_and_scores():
    assert first_error_of_ratings([1, 0, -1, 1]) == 2
    assert first_error_of_ratings([1, 1]) is None
    assert first_error_of_scores([0.9, None, 0.4, 0.2]) == 2
    assert first_error_of_scores([0.9, 0.5]) is None


def test_rollout_and_prm_disagree_on_the_earlier_first_error():
    verdict = judge([Opinion("rollout", 2)], [0.9, 0.8, 0.9, 0.9])
    assert verdict.route
    assert verdict.reason == "rollout and PRM disagree on step 3"


def test_prm_error_before_the_rollout_one_is_the_contested_step():
    verdict = judge([Opinion("rollout", None)], [0.9, 0.3, 0.9])
    assert verdict.reason == "rollout and PRM disagree on step 2"


def test_two_sources_that_disagree_outrank_a_prm_disagreement():
    sources = judge([Opinion("rollout", 1), Opinion("judge", 3)], [0.9] * 5)
    prm = judge([Opinion("rollout", 1)], [0.9] * 5)
    assert sources.reason == "rollout and judge disagree on step 2"
    assert sources.priority > prm.priority


def test_uncertain_rollout_is_routed_below_disagreements():
    verdict = judge([Opinion("rollout", None, [0.9, 0.45, 0.8])], [0.9, 0.9, 0.9])
    assert verdict.route
    assert verdict.reason == "rollout uncertain at step 2 (share 0.45)"
    assert verdict.priority < judge([Opinion("rollout", 1)], [0.9, 0.9, 0.9]).priority


def test_shares_after_the_first_error_are_not_uncertainty():
    verdict = judge([Opinion("rollout", 0, [0.1, 0.5])], [0.2, 0.9])
    assert not verdict.route
    assert verdict.reason == "rollout and PRM agree"


def test_closer_to_the_threshold_and_earlier_goes_first():
    near = judge([Opinion("rollout", None, [0.9, 0.49])], [0.9, 0.9]).priority
    far = judge([Opinion("rollout", None, [0.9, 0.58])], [0.9, 0.9]).priority
    early = judge([Opinion("rollout", 0)], [0.9, 0.9, 0.9]).priority
    late = judge([Opinion("rollout", 2)], [0.9, 0.9, 0.9]).priority
    assert near > far
    assert early > late


def test_agreeing_sources_and_prm_are_not_routed():
    verdict = judge([Opinion("rollout", 1, [0.9, 0.1]), Opinion("judge", 1)], [0.9, 0.2, 0.1])
    assert not verdict.route
    assert verdict.priority == 0.0


def test_a_lone_source_without_a_prm_is_routed():
    assert judge([Opinion("judge", None)], None).route
    assert not judge([Opinion("judge", None), Opinion("rollout", None)], None).route


def test_no_opinions_is_an_error():
    with pytest.raises(ValueError):
        judge([], [0.9])
