"""Sample candidate solutions from a causal language model, and cut what it writes into steps.

The model is asked for one step a line and PRM800K's closing `# Answer` step. vLLM samples when
it is installed; transformers' `generate` otherwise. Putting the samples into a project's pool
is the platform's part (app.rounds.generation).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

PROMPT = (
    "Solve the following math problem step by step. Write each step on its own line. "
    "When you are done, write a line with only `# Answer` and, on the next line, the final "
    "answer alone.\n\nProblem: {problem}\n\nSolution:\n"
)
_ANSWER_LINE = re.compile(r"^\s*#\s*Answer\s*:?\s*(.*)$", re.IGNORECASE)
# Control characters a sampler can emit; the import refuses NUL (PostgreSQL text cannot hold it).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class GenerationConfig:
    model: str
    samples: int = 4
    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    batch_size: int = 8

    def origin(self, backend: str) -> dict:
        """What each generated solution records about where it came from."""
        params = {k: v for k, v in asdict(self).items() if k not in ("model", "batch_size")}
        return {"model": self.model, "backend": backend, **params}


def parse_solution(text: str) -> tuple[list[str], str | None]:
    """(steps, final answer) from generated text: one step a line, PRM800K's `# Answer` step
    last. Text after the answer line is the model rambling on and is dropped."""
    steps: list[str] = []
    lines = _CONTROL.sub("", text).splitlines()
    for i, line in enumerate(lines):
        marker = _ANSWER_LINE.match(line)
        if marker:
            answer = marker.group(1).strip() or next((rest.strip() for rest in lines[i + 1:] if rest.strip()), "")
            if answer:
                steps.append(f"# Answer\n\n{answer}")
                return steps, answer
            break
        if line.strip():
            steps.append(line.strip())
    return steps, None


def refuse_prm_checkpoint(model: str) -> None:
    """ValueError for a Stepwise PRM checkpoint named as a generator, whatever samples from it."""
    from active_learning.model import META_FILE

    meta_path = os.path.join(model, META_FILE)
    if not os.path.isfile(meta_path):
        return
    try:
        with open(meta_path) as f:
            kind = json.load(f).get("kind")
    except (OSError, ValueError, AttributeError) as e:
        raise ValueError(f"cannot read {meta_path}: {e}") from None
    if kind != "pretrained base":
        raise ValueError(f"{model} is a PRM checkpoint, not a language model; give a generator "
                         "(a causal LM, such as a base from `stepwise prm pretrain`)")


def load_causal_lm(model: str, device: str):
    """(model, tokenizer) of a causal language model to sample from, padding on the left: a local
    directory or a hub id. Refused (ValueError) before anything is sampled: a Stepwise PRM checkpoint, a model
    transformers cannot load, and one whose language-model head is not in its weights (a
    token-classification checkpoint loads as a causal LM with a random head, and writes noise
    that would go into the pool as solutions)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from active_learning.bases import files_only_here
    from active_learning.model import missing_weights

    refuse_prm_checkpoint(model)
    local = files_only_here(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=local)
        lm, loading = AutoModelForCausalLM.from_pretrained(
            model, local_files_only=local, output_loading_info=True,
            dtype=torch.bfloat16 if device.startswith("cuda") else torch.float32)
    except Exception as e:  # noqa: BLE001 - a damaged file raises whatever its parser does
        raise ValueError(f"cannot load generator {model!r} through transformers: {type(e).__name__}: {e}") from None
    if loading["missing_keys"]:
        raise ValueError(f"{model} is not a whole causal language model: its weights lack "
                         f"{missing_weights(loading['missing_keys'])}; give a generator "
                         "(a causal LM, such as a base from `stepwise prm pretrain`)")
    tokenizer.padding_side = "left"  # generation continues from the right end of each row
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm.to(device).eval(), tokenizer


class Sampler:
    """Samples `config.samples` texts per problem, the model loaded once: vLLM when installed,
    transformers' `generate` otherwise. Loading a 7B model takes longer than sampling a few
    hundred problems, so a project's problems are sampled chunk by chunk from one Sampler."""

    def __init__(self, config: GenerationConfig) -> None:
        self.config = config
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            from transformers import set_seed

            from active_learning.model import resolve_device

            self.backend = "transformers"
            self._model, self._tokenizer = load_causal_lm(config.model, resolve_device("auto"))
            # Once: seeded again for every chunk, each chunk's samples would draw the same stream.
            set_seed(config.seed)
            return
        self.backend = "vllm"
        refuse_prm_checkpoint(config.model)
        self._llm = LLM(model=config.model, seed=config.seed)
        self._params = SamplingParams(n=config.samples, temperature=config.temperature, top_p=config.top_p,
                                      max_tokens=config.max_new_tokens, seed=config.seed)

    def sample(self, problems: Sequence[str]) -> list[list[str]]:
        """Per problem, the `samples` texts the model wrote."""
        prompts = [PROMPT.format(problem=p) for p in problems]
        if self.backend == "vllm":
            return [[o.text for o in out.outputs] for out in self._llm.generate(prompts, self._params)]
        return list(self._sample_transformers(prompts))

    def _sample_transformers(self, prompts: list[str]) -> Iterator[list[str]]:
        import torch

        config, model, tokenizer = self.config, self._model, self._tokenizer
        sampling = config.temperature > 0
        for start in range(0, len(prompts), config.batch_size):
            batch = prompts[start:start + config.batch_size]
            inputs = tokenizer(batch, return_tensors="pt", padding=True).to(model.device)
            with torch.inference_mode():
                out = model.generate(
                    **inputs, do_sample=sampling, temperature=config.temperature if sampling else None,
                    top_p=config.top_p if sampling else None, max_new_tokens=config.max_new_tokens,
                    num_return_sequences=config.samples, pad_token_id=tokenizer.pad_token_id,
                )  # [batch * samples, prompt + new]
            texts = tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
            for i in range(len(batch)):
                yield texts[i * config.samples:(i + 1) * config.samples]
