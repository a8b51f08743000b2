"""Generated solutions into a project's pool: grading through the candidate import, and
`stepwise generate` with a tiny causal language model built from a config (random weights, no
download)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from sqlalchemy import select
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForTokenClassification

from active_learning.generate import GenerationConfig
from active_learning.grading import GRADER_VERSION
from active_learning.tokenizer import build_byte_tokenizer
from app.db import session_scope
from app.errors import BadInput
from app.imports.service import import_file
from app.models import AnswerGrade, Assignment, Problem, Project, Solution
from app.rounds.generation import GenerationResult, add_samples, generate_for_project
from tests.conftest import make_project

STEPWISE = str(Path(sys.executable).with_name("stepwise"))


def problems_project(factory, name: str = "gen") -> Project:  # type: ignore[no-untyped-def]
    project = make_project(factory, name)
    rows = [{"problem": "What is $2+3$?", "answer": "5"}, {"problem": "What is $\\frac{1}{2} + \\frac{1}{2}$?", "answer": "1"}]
    with session_scope(factory) as session:
        import_file(session, session.merge(project), io.BytesIO(b"".join(orjson.dumps(r) + b"\n" for r in rows)),
                    filename="problems.jsonl", fmt="math", separator=None, user=None)
    return project


def test_samples_are_graded_queued_and_keep_their_origin(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = problems_project(session_factory)
    origin = {"model": "some/model", "backend": "transformers", "temperature": 0.7, "top_p": 0.95}
    texts = [["$2+3=5$.\n# Answer\n\n5", "$2+3=6$.\n# Answer\n\n6", ""],
             ["Half and half.\n# Answer\n\n$1$", "It is one."]]
    result = GenerationResult()
    with session_scope(session_factory) as session:
        project = session.merge(project)
        problem_ids = list(session.scalars(select(Problem.id).order_by(Problem.id)))
        add_samples(session, project, origin, problem_ids, texts, "generated.jsonl", result)
    assert (result.sampled, result.empty, result.added) == (5, 1, 4)
    assert result.grades == {"right": 2, "wrong": 1, "no_answer": 1}
    with session_scope(session_factory) as session:
        solutions = session.scalars(select(Solution).order_by(Solution.id)).all()
        assert [s.answer_grade for s in solutions] == [AnswerGrade.right, AnswerGrade.wrong, AnswerGrade.right, AnswerGrade.no_answer]
        assert {s.grader_version for s in solutions} == {GRADER_VERSION}
        assert all(s.origin["meta"]["generator"] == origin for s in solutions)
        assert solutions[0].steps == ["$2+3=5$.", "# Answer\n\n5"]
        assert len(session.scalars(select(Assignment)).all()) == 4


@pytest.fixture(scope="module")
def tiny_causal_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = build_byte_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    directory = tmp_path_factory.mktemp("tiny-lm")
    Qwen2ForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.mark.slow
def test_stepwise_generate_samples_from_a_model_directory(session_factory, database_url, tiny_causal_lm) -> None:  # type: ignore[no-untyped-def]
    problems_project(session_factory, "gen")
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run(
        [STEPWISE, "generate", "--project", "gen", "--model", str(tiny_causal_lm), "--samples", "3",
         "--max-new-tokens", "16", "--seed", "1"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sampled 6 solutions for 2 problems" in done.stdout
    with session_scope(session_factory) as session:
        solutions = session.scalars(select(Solution)).all()
        assert solutions, done.stdout
        generator = solutions[0].origin["meta"]["generator"]
        assert generator["model"] == str(tiny_causal_lm) and generator["backend"] == "transformers"
        assert (generator["samples"], generator["max_new_tokens"], generator["seed"]) == (3, 16, 1)
        # Random weights write no `# Answer` line: graded as no answer, by a known grader.
        assert {s.answer_grade for s in solutions} == {AnswerGrade.no_answer}
        assert {s.grader_version for s in solutions} == {GRADER_VERSION}
    again = subprocess.run([STEPWISE, "generate", "--project", "nope", "--model", str(tiny_causal_lm)],
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1 and "no project named 'nope'" in again.stderr


def test_the_model_is_loaded_once_for_all_of_a_projects_problems(
    session_factory, tiny_causal_lm, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    from active_learning import generate
    from app.rounds import generation

    loads = []
    real = generate.load_causal_lm
    monkeypatch.setattr(generate, "load_causal_lm", lambda *args: loads.append(args) or real(*args))
    monkeypatch.setattr(generation, "PROBLEMS_PER_IMPORT", 1)
    project = problems_project(session_factory)
    with session_scope(session_factory) as session:
        result = generation.generate_for_project(session, session.merge(project), GenerationConfig(
            model=str(tiny_causal_lm), samples=2, max_new_tokens=4))
    assert (result.problems, result.sampled) == (2, 4)
    assert len(loads) == 1


def test_a_model_without_a_language_model_head_is_refused_before_anything_is_added(
    session_factory, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    tokenizer = build_byte_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, num_labels=3)
    Qwen2ForTokenClassification(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    project = problems_project(session_factory)
    with pytest.raises(BadInput, match="not a whole causal language model: its weights lack lm_head.weight"):
        with session_scope(session_factory) as session:
            generate_for_project(session, session.merge(project), GenerationConfig(model=str(tmp_path)))
    with session_scope(session_factory) as session:
        assert session.scalars(select(Solution)).all() == []


def test_a_project_without_problems_loads_no_model(session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from active_learning import generate

    def never(*_args):  # type: ignore[no-untyped-def]
        raise AssertionError("a model was loaded for no problems")

    monkeypatch.setattr(generate, "load_causal_lm", never)
    project = make_project(session_factory, "empty")
    with session_scope(session_factory) as session:
        result = generate_for_project(session, session.merge(project), GenerationConfig(model="some/hub-model"))
    assert (result.problems, result.sampled) == (0, 0)
