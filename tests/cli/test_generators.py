"""`autolabel` and `generate` with a generator they cannot use: a message, not a traceback."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select
from transformers import Qwen2Config, Qwen2ForCausalLM

from active_learning.tokenizer import build_byte_tokenizer
from app.models import Label, Solution
from tests.cli.conftest import refused
from tests.conftest import add_solutions, make_project
from tests.rounds.test_generation import problems_project


def test_an_unreachable_endpoint_is_a_message(stepwise, database_url, session_factory) -> None:  # type: ignore[no-untyped-def]
    add_solutions(session_factory, make_project(session_factory, "P1"), 2, steps=2)
    for spec in ("http://127.0.0.1:1/v1#m", "http://127.0.0.1:1/v1"):
        result = stepwise(database_url, "autolabel", "--project", "P1", "--generator", spec)
        refused(result, "cannot reach http://127.0.0.1:1/v1/")
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_generate_refuses_a_model_it_cannot_load(stepwise, database_url, session_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    add_solutions(session_factory, make_project(session_factory, "P1"), 1)
    refused(stepwise(database_url, "generate", "--project", "P1", "--model", tmp_path / "missing"),
            "no such model directory")
    (tmp_path / "config.json").write_text("{}")  # a directory without a tokenizer or weights
    refused(stepwise(database_url, "generate", "--project", "P1", "--model", tmp_path), str(tmp_path))
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Solution)) == 1


def test_generate_takes_a_model_directory_under_home_given_with_a_tilde(
    stepwise, database_url, session_factory, tmp_path: Path, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    tokenizer = build_byte_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    Qwen2ForCausalLM(config).save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    monkeypatch.setenv("HOME", str(tmp_path))
    problems_project(session_factory, "P1")
    # As `--model=~/lm` or a quoted "~/lm" arrives: the shell leaves the tilde to us.
    result = stepwise(database_url, "generate", "--project", "P1", "--model", "~/lm", "--samples", "1",
                      "--max-new-tokens", "2")
    assert result.exit_code == 0, result.output
    assert "sampled 2 solutions for 2 problems" in result.output
