"""Label sources in training: which records train, at what weight, and a loss that honours it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from active_learning.config import TrainConfig
from active_learning.data import (
    IGNORE_INDEX, format_source_weights, load_examples, parse_source_weights, snapshot_hash, source_mix,
    weigh_sources,
)
from active_learning.model import META_FILE
from active_learning.synthetic import iter_candidates, to_prm800k
from active_learning.train import train, weighted_step_loss


def _records(n: int, seed: int) -> list[dict]:
    return [to_prm800k(c) for c in iter_candidates(n, 2, seed)]


def _mixed() -> list[dict]:
    """Labelers' records (no source, as PRM800K writes them) and rollout records."""
    return _records(6, 1) + [{**r, "source": "rollout"} for r in _records(4, 2)]


def test_machine_labels_train_only_when_weighted() -> None:
    records = _mixed()
    assert source_mix(records) == {"human": 12, "rollout": 8}
    default = weigh_sources(records)
    assert len(default) == 12 and {r["weight"] for r in default} == {1.0}
    both = weigh_sources(records, {"human": 1, "rollout": 0.5})
    assert len(both) == 20 and sorted({r["weight"] for r in both}) == [0.5, 1.0]
    assert len(weigh_sources(records, {"rollout": 2})) == 8
    examples = load_examples(both)
    assert {e.weight for e in examples} == {0.5, 1.0}
    # Weight 1 leaves a snapshot's hash as it was before examples had weights.
    human = load_examples(_records(6, 1))
    assert snapshot_hash(load_examples(default)) == snapshot_hash(human)
    assert snapshot_hash(examples) != snapshot_hash(load_examples([{**r, "weight": 1.0} for r in both]))


def test_weights_are_written_and_read_back_and_mistakes_named() -> None:
    weights = parse_source_weights(" rollout=0.5, human=1 ")
    assert weights == {"rollout": 0.5, "human": 1.0}
    assert parse_source_weights(format_source_weights(weights)) == weights
    assert format_source_weights(weights) == "human=1, rollout=0.5"
    # Written as typed, to the last digit: the settings form shows this and saves what it shows.
    precise = {"human": 1.0, "rollout": 0.1234567, "judge": 1 / 3, "prm": 1e-7}
    assert parse_source_weights(format_source_weights(precise)) == precise
    with pytest.raises(ValueError, match="unknown label source 'robot'"):
        parse_source_weights("robot=1")
    with pytest.raises(ValueError, match="SOURCE=WEIGHT"):
        parse_source_weights("rollout")
    with pytest.raises(ValueError, match="'human' is given two weights"):
        parse_source_weights("human=1, human =2")
    with pytest.raises(ValueError, match="from 0 to 100"):
        weigh_sources([], {"human": -1})


def test_weighted_loss_is_the_plain_loss_at_equal_weights_and_ignores_weight_zero() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 3)
    labels = torch.tensor([[IGNORE_INDEX, 0, IGNORE_INDEX, 2, 1], [1, IGNORE_INDEX, 2, IGNORE_INDEX, IGNORE_INDEX]])
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
    assert weighted_step_loss(logits, labels, torch.tensor([1.0, 1.0])) == pytest.approx(plain.item())
    first_only = F.cross_entropy(logits[0], labels[0], ignore_index=IGNORE_INDEX)
    assert weighted_step_loss(logits, labels, torch.tensor([1.0, 0.0])) == pytest.approx(first_only.item())
    # Halving one example's weight moves the loss towards the other's mean.
    second_only = F.cross_entropy(logits[1], labels[1], ignore_index=IGNORE_INDEX)
    half = weighted_step_loss(logits, labels, torch.tensor([1.0, 0.5])).item()
    expected = (3 * first_only.item() + 0.5 * 2 * second_only.item()) / (3 + 0.5 * 2)
    assert half == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_training_takes_the_sources_asked_for(tmp_path: Path) -> None:
    records = _mixed()
    fast = {"epochs": 1, "batch_size": 4, "max_length": 256, "report_to": "none", "device": "cpu"}
    default = train(TrainConfig(output=str(tmp_path / "human"), **fast), records, records[:4])
    weighted = train(TrainConfig(output=str(tmp_path / "mixed"), source_weights="human=1,rollout=0.5", **fast),
                     records, records[:4])
    human_meta = json.loads((default / META_FILE).read_text())
    mixed_meta = json.loads((weighted / META_FILE).read_text())
    assert human_meta["train_examples"] == len(load_examples(weigh_sources(records)))
    assert mixed_meta["train_examples"] == len(load_examples(records))
    assert mixed_meta["config"]["source_weights"] == "human=1,rollout=0.5"
    assert mixed_meta["data_hash"] != human_meta["data_hash"]


def test_accepted_machine_labels_weigh_as_a_labelers() -> None:
    records = _mixed()
    accepted = [{**r, "accepted": True} if r.get("source") == "rollout" else r for r in records]
    assert {r["weight"] for r in weigh_sources(accepted)} == {1.0} and len(weigh_sources(accepted)) == 20
    assert {r["weight"] for r in weigh_sources(accepted, {"human": 0.5, "rollout": 0.1})} == {0.5}
