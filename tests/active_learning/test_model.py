import gc
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from torch._dynamo.utils import counters
from click.testing import CliRunner
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (AutoModelForTokenClassification, AutoTokenizer, BertConfig, BertForTokenClassification,
                          PreTrainedTokenizerFast)

from active_learning.cli import prm
from active_learning.config import TrainConfig

from active_learning.data import Solution, tokenize_example
from active_learning.model import (ID2LABEL, compile_layers, load_base, load_checkpoint, marker_id,
                                   needs_padding_mask, save_checkpoint)
from active_learning import score as scoring
from active_learning.score import iter_scores, pad_batch, score_solutions
from active_learning.tokenizer import STEP_MARKER
from active_learning.train import train

SOLUTIONS = [
    Solution("p1", "Start with 3. Add 4. What number do you get?", ["$3 + 4 = 7$.", "# Answer\n\n7"]),
    Solution("p2", "Start with 10. Subtract 2, then multiply by 3.", ["Let me go.", "$10 - 2 = 8$.",
                                                                        "$8 \\times 3 = 24$.\n\n# Answer\n\n24"]),
    Solution("p3", "x" * 300, ["y" * 50] * 4),
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model, tokenizer = load_base("tiny")
    directory = tmp_path_factory.mktemp("ckpt") / "prm"
    save_checkpoint(model, tokenizer, directory, {"base": "tiny", "data_hash": "abc"})
    return directory


def test_tiny_preset_is_small_and_offline():
    model, tokenizer = load_base("tiny")
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert model.config.num_labels == 3 and model.config.id2label == ID2LABEL
    assert tokenizer.convert_tokens_to_ids(STEP_MARKER) != tokenizer.unk_token_id


def test_checkpoint_loads_with_plain_transformers(checkpoint):
    model = AutoModelForTokenClassification.from_pretrained(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    assert json.loads((checkpoint / "stepwise.json").read_text())["data_hash"] == "abc"

    # Reading the head at the markers by hand gives what our scorer gives.
    solution = SOLUTIONS[1]
    text = solution.prompt + "\n\n" + "".join(step + STEP_MARKER for step in solution.steps)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        probs = model(input_ids=ids).logits.softmax(-1)[0]
    by_hand = probs[ids[0] == tokenizer.convert_tokens_to_ids(STEP_MARKER)]

    ours, our_tokenizer, meta = load_checkpoint(checkpoint)
    [score] = score_solutions(ours, our_tokenizer, [solution])
    assert torch.allclose(by_hand, torch.tensor(score.step_probs), atol=1e-5)
    assert meta["base"] == "tiny"


def test_checkpoint_as_base_keeps_the_head(checkpoint):
    model, tokenizer = load_base(str(checkpoint))
    reloaded = AutoModelForTokenClassification.from_pretrained(checkpoint)
    assert torch.equal(model.score.weight, reloaded.score.weight)
    assert marker_id(tokenizer) == reloaded.config.vocab_size - 1


def test_bucketed_batches_match_one_at_a_time(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)
    batched = score_solutions(model, tokenizer, SOLUTIONS * 3, batch_tokens=2048, chunk_size=5)
    single = [score_solutions(model, tokenizer, [s], batch_tokens=1)[0] for s in SOLUTIONS * 3]
    for a, b in zip(batched, single):
        assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)
        assert a.product == pytest.approx(b.product, abs=1e-5)
        assert a.minimum == pytest.approx(b.minimum, abs=1e-5)


def test_chunks_with_nothing_to_read_keep_the_order(checkpoint):
    # Each chunk is read back after the next is queued; a chunk with no step to read has no
    # batch at all.
    model, tokenizer, _ = load_checkpoint(checkpoint)
    odd = [Solution("e", "Q", []), Solution("g", "Q", ["z" * 400]), *SOLUTIONS, Solution("e2", "Q", [])]
    one_by_one = score_solutions(model, tokenizer, odd, max_length=256, chunk_size=1)
    together = score_solutions(model, tokenizer, odd, max_length=256)
    assert [len(s.step_scores) for s in one_by_one] == [0, 1, 2, 3, 4, 0]
    assert one_by_one[1].step_scores == [None] and one_by_one[1].truncated
    for a, b in zip(one_by_one[2:5], together[2:5], strict=True):
        assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)


def test_a_failure_in_one_chunk_keeps_the_chunks_before_it(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)

    def records():
        yield from SOLUTIONS[:2]
        raise ValueError("line 3: not a solution")

    scored = []
    with pytest.raises(ValueError, match="line 3"):
        for score in iter_scores(model, tokenizer, records(), chunk_size=1):
            scored.append(score)
    assert [len(s.step_scores) for s in scored] == [2, 3]


def test_an_input_that_fails_mid_chunk_gives_out_what_it_read(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)

    def records():
        yield from SOLUTIONS
        raise ValueError("line 4: not a solution")

    scored = []
    with pytest.raises(ValueError, match="line 4"):
        for score in iter_scores(model, tokenizer, records()):
            scored.append(score)
    assert [len(s.step_scores) for s in scored] == [2, 3, 4]


def test_the_default_batch_follows_the_device_and_the_environment(monkeypatch):
    monkeypatch.delenv(scoring.BATCH_TOKENS_VARIABLE, raising=False)
    assert (scoring.default_batch_tokens("cuda"), scoring.default_batch_tokens("cpu")) == (65536, 16384)
    monkeypatch.setenv(scoring.BATCH_TOKENS_VARIABLE, "8192")
    assert scoring.default_batch_tokens("cuda") == 8192
    for bad in ("0", "-5", "lots", "1e4", "8192.0", "８１９２"):
        monkeypatch.setenv(scoring.BATCH_TOKENS_VARIABLE, bad)
        with pytest.raises(ValueError, match="STEPWISE_SCORE_BATCH_TOKENS must be a whole number"):
            scoring.default_batch_tokens("cpu")


def test_bad_sizes_are_refused(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)
    for sizes in ({"chunk_size": 0}, {"batch_tokens": 0}):
        with pytest.raises(ValueError, match="must be 1 or more"):
            list(iter_scores(model, tokenizer, SOLUTIONS, **sizes))


def test_a_failure_while_tokenising_keeps_the_chunks_before_it(checkpoint):
    # The next chunk is tokenised on a worker thread; its error comes out after what was scored.
    model, tokenizer, _ = load_checkpoint(checkpoint)
    broken = [*SOLUTIONS[:2], Solution("bad", "Q", [("a pair", "of texts")])]
    scored = []
    with pytest.raises(TypeError, match="a step is tuple, not text"):
        for score in iter_scores(model, tokenizer, broken, chunk_size=1):
            scored.append(score)
    assert [len(s.step_scores) for s in scored] == [2, 3]


def test_growing_chunks_keep_the_order(checkpoint, monkeypatch):
    model, tokenizer, _ = load_checkpoint(checkpoint)
    monkeypatch.setattr(scoring, "FIRST_CHUNK", 2)
    many = [Solution(f"p{i}", f"Q{i}", SOLUTIONS[i % 3].steps[: 1 + i % 3]) for i in range(15)]
    assert [len(c) for c in scoring.in_chunks(many, 8, first=scoring.FIRST_CHUNK)] == [2, 4, 8, 1]
    assert [len(c) for c in scoring.in_chunks(many, 8)] == [8, 7]
    together = score_solutions(model, tokenizer, many, chunk_size=8)
    for solution, ours in zip(many, together, strict=True):
        [alone] = score_solutions(model, tokenizer, [solution])
        assert ours.step_scores == pytest.approx(alone.step_scores, abs=1e-5)


def test_a_consumer_may_stop_early(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)
    before = set(threading.enumerate())
    scores = iter_scores(model, tokenizer, SOLUTIONS * 200, chunk_size=4)
    first = next(scores)
    assert set(threading.enumerate()) - before  # the tokenising worker
    scores.close()  # the tokenising not begun is dropped, the worker thread ends
    assert len(first.step_scores) == len(SOLUTIONS[0].steps)
    assert not set(threading.enumerate()) - before


def test_the_collector_skips_older_objects_only_while_scoring(checkpoint):
    # Frozen while the stream runs, so that a full collection does not walk the whole process;
    # handed back however the stream ends: finished, stopped early or failed.
    model, tokenizer, _ = load_checkpoint(checkpoint)
    assert gc.get_freeze_count() == 0
    scores = iter_scores(model, tokenizer, SOLUTIONS * 20, chunk_size=4)
    next(scores)
    assert gc.get_freeze_count() > 0
    scores.close()
    assert gc.get_freeze_count() == 0
    assert len(score_solutions(model, tokenizer, SOLUTIONS)) == len(SOLUTIONS)
    assert gc.get_freeze_count() == 0
    broken = [*SOLUTIONS[:2], Solution("bad", "Q", [("a pair", "of texts")])]
    with pytest.raises(TypeError):
        list(iter_scores(model, tokenizer, broken, chunk_size=1))
    assert gc.get_freeze_count() == 0


def test_a_heap_frozen_before_scoring_stays_frozen(checkpoint):
    # Frozen on purpose (before forking workers, say) or by a scorer beside this one: scoring
    # neither thaws it nor freezes more.
    model, tokenizer, _ = load_checkpoint(checkpoint)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        scores = iter_scores(model, tokenizer, SOLUTIONS * 20, chunk_size=4)
        next(scores)
        # Frozen objects may be freed meanwhile; none is added, and the heap is not thawed.
        assert 0 < gc.get_freeze_count() <= frozen
        scores.close()
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def _encoder_prm(tokenizer):
    torch.manual_seed(0)
    return BertForTokenClassification(BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, pad_token_id=tokenizer.pad_token_id, num_labels=3,
        initializer_range=1.0))  # large weights, so that a read of the padding would show


def test_padding_is_masked_for_an_encoder_only():
    causal, tokenizer = load_base("tiny")
    encoder = _encoder_prm(tokenizer)
    assert not needs_padding_mask(causal) and needs_padding_mask(encoder)
    assert needs_padding_mask(torch.nn.Linear(2, 2))  # attention that says nothing either way
    # Solutions of different lengths in one padded batch score as each does alone: the causal
    # backbone without a mask, the encoder (whose tokens would read the padding) with one.
    for model in (causal, encoder):
        batched = score_solutions(model, tokenizer, SOLUTIONS, batch_tokens=4096, max_length=256)
        single = [score_solutions(model, tokenizer, [s], batch_tokens=1, max_length=256)[0] for s in SOLUTIONS]
        for a, b in zip(batched, single, strict=True):
            assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)


def test_pad_batch_lays_each_row_out_then_pads_it():
    features = [{"input_ids": [5, 6, 7], "labels": [-100, -100, 2], "lm_labels": [6, 7, -100]},
                {"input_ids": [8], "labels": [0], "lm_labels": [-100]},
                {"input_ids": [9, 10], "labels": [-100, 1], "lm_labels": [10, -100]}]
    batch = pad_batch(features, 0, "cpu")
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 2], [0, -100, -100], [-100, 1, -100]]
    assert batch["lm_labels"].tolist() == [[6, 7, -100], [-100, -100, -100], [10, -100, -100]]
    assert all(t.dtype == torch.long for t in batch.values())
    assert set(pad_batch([{"input_ids": [1]}], 0, "cpu", padding_mask=False)) == {"input_ids"}


def test_a_causal_backbone_trains_on_padded_batches_without_a_mask():
    model, tokenizer = load_base("tiny")
    model.eval()  # no dropout: the two passes must see the same network
    marker = marker_id(tokenizer)
    features = [tokenize_example(tokenizer, marker, s.prompt, s.steps, [1] * len(s.steps), 256) for s in SOLUTIONS]
    assert "attention_mask" not in pad_batch(features, tokenizer.pad_token_id, "cpu", padding_mask=False)
    grads = []
    for padding_mask in (True, False):
        model.zero_grad()
        model(**pad_batch(features, tokenizer.pad_token_id, "cpu", padding_mask)).loss.backward()
        grads.append([p.grad.clone() for p in (model.score.weight, model.model.layers[0].self_attn.q_proj.weight)])
    for masked, unmasked in zip(*grads):
        assert torch.allclose(masked, unmasked, atol=1e-6)


def test_score_shapes_and_long_solutions(checkpoint):
    model, tokenizer, _ = load_checkpoint(checkpoint)
    short, _, long = score_solutions(model, tokenizer, SOLUTIONS, max_length=256)
    assert len(short.step_probs) == 2 and all(abs(sum(p) - 1) < 1e-5 for p in short.step_probs)
    assert short.minimum == min(short.step_scores) and not short.truncated
    # Longer than the limit: read in windows, every step scored.
    assert not long.truncated and None not in long.step_scores
    # Steps that fit in the first window score as if the solution ended there.
    [prefix] = score_solutions(model, tokenizer, [Solution("p3", "x" * 300, ["y" * 50] * 2)], max_length=256)
    assert long.step_scores[:2] == pytest.approx(prefix.step_scores, abs=1e-5)
    [giant] = score_solutions(model, tokenizer, [Solution("p4", "Q", ["a", "z" * 400, "b"])], max_length=256)
    assert giant.truncated and giant.step_scores[1] is None
    assert giant.step_scores[0] is not None and giant.step_scores[2] is not None
    strict = score_solutions(model, tokenizer, SOLUTIONS[:1], neutral_as_correct=False)[0]
    assert strict.step_scores[0] == pytest.approx(short.step_probs[0][2], abs=1e-5)


def _base_without_tokenizer(directory):
    torch.manual_seed(0)
    model, _ = load_base("tiny")
    model.save_pretrained(directory)
    return directory


def test_base_without_tokenizer_files_is_refused(tmp_path):
    base = _base_without_tokenizer(tmp_path / "base")
    with pytest.raises(ValueError, match="has no tokenizer files"):
        load_base(str(base))


def test_base_with_a_damaged_tokenizer_file_is_refused(tmp_path):
    base = _base_without_tokenizer(tmp_path / "base")
    (base / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(ValueError, match="cannot load the tokenizer of .*base"):
        load_base(str(base))


def test_base_whose_tokenizer_reads_nothing_is_refused(tmp_path):
    base = _base_without_tokenizer(tmp_path / "base")
    # Only special tokens: the probe text has no token of its own.
    core = Tokenizer(models.BPE(vocab={"<|endoftext|>": 0}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    empty = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>")
    assert empty.encode("1 + 1 = 2", add_special_tokens=False) == []
    empty.save_pretrained(base)
    with pytest.raises(ValueError, match="encodes '1 \\+ 1 = 2' to no tokens"):
        load_base(str(base))


def test_training_refuses_such_a_base_before_it_starts(tmp_path):
    base = _base_without_tokenizer(tmp_path / "base")
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1?", "completions": ["1 + 1 = 2"], "labels": [True]}) + "\n")
    output = tmp_path / "prm"
    result = CliRunner().invoke(prm, ["train", "--train", str(data), "--base", str(base), "--output", str(output)])
    assert result.exit_code == 1 and "has no tokenizer files" in result.output
    assert not output.exists() and not output.with_name("prm.partial").exists()


def _card_snippet(checkpoint) -> str:
    card = (checkpoint / "README.md").read_text()
    return card.split("```python\n", 1)[1].split("```", 1)[0]


def test_model_card_snippet_scores_as_stepwise_does_without_stepwise(checkpoint):
    """The card's own snippet, run where Stepwise is never imported, gives score_solutions'
    numbers: BOS, prompt format, marker and P(correct) are what the scorer uses."""
    harness = textwrap.dedent("""
        import json, sys
        rows = [step_scores(problem, steps) for problem, steps in json.loads(sys.stdin.read())]
        assert not {"active_learning", "app"} & {name.split(".")[0] for name in sys.modules}
        print(json.dumps(rows))
    """)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # The marker's text in the input is no marker: one score a step, the snippet agreeing.
    solutions = [*SOLUTIONS, Solution("p4", "What is <|step|> 1 + 1?",
                                      ["We know <|st<|step|>ep|> that 1 + 1 = 2.", "# Answer\n\n2<|step|>"])]
    done = subprocess.run([sys.executable, "-c", _card_snippet(checkpoint) + harness], cwd=checkpoint.parent,
                          input=json.dumps([[s.prompt, s.steps] for s in solutions]), env=env,
                          capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(theirs[-1]) == 2
    ours, tokenizer, _ = load_checkpoint(checkpoint)
    for row, score in zip(theirs, score_solutions(ours, tokenizer, solutions), strict=True):
        assert len(row) == len(score.step_scores)
        assert max(abs(a - b) for a, b in zip(row, score.step_scores)) < 1e-5


def test_checkpoint_tokenizer_reads_text_as_training_did(checkpoint):
    _, trained_with = load_base("tiny")
    reloaded = AutoTokenizer.from_pretrained(checkpoint)
    text = "e\u0301 漢 😀\t\r\n  don't 1 + 1 = 2 <|step|> x\u00a0y"
    assert reloaded.encode(text, add_special_tokens=False) == trained_with.encode(text, add_special_tokens=False)
    # transformers 4.45 (the oldest pyproject allows) has no TokenizersBackend class.
    assert json.loads((checkpoint / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_checkpoint_names_its_base_and_prompt_format_without_local_paths(tmp_path):
    model, tokenizer = load_base("tiny")
    base = tmp_path / "my-base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    records = [{"prompt": f"{a} + 1?", "completions": [f"{a} + 1 = {a + 1}"], "labels": [a % 2 == 0]}
               for a in range(8)]
    for name, base_name, expected in (("named-by-dir", None, "my-base"), ("named", "org/math-base", "org/math-base")):
        output = train(TrainConfig(output=str(tmp_path / name), base=str(base), base_name=base_name, steps=1,
                                   batch_size=4), records, records)
        meta = json.loads((output / "stepwise.json").read_text())
        assert meta["base"] == meta["config"]["base"] == expected
        assert str(tmp_path) not in (output / "stepwise.json").read_text()
        assert meta["prompt_format"]["marker"] == STEP_MARKER and meta["prompt_format"]["prompt_end"] == "\n\n"
        assert meta["prompt_format"]["bos"] is None
        card = (output / "README.md").read_text()
        assert f"`{expected}`" in card and meta["data_hash"] in card and "step AUROC" in card
        # Every metric of the card with its 95% interval, as stepwise.json keeps them.
        low, high = meta["metrics"]["ci95"]["step_auroc"]
        assert f"| {meta['metrics']['step_auroc']:.3f} | {low:.3f} – {high:.3f} |" in card
        assert set(meta["metrics"]["ci95"]) >= {"step_f1", "step_accuracy", "first_error_f1"}
        assert f'path = "{name}"' in card
    assert "base_model: org/math-base" in card


def test_a_prm_keeps_no_key_value_cache(checkpoint):
    # It reads whole sequences and never decodes; a cache would be filled and dropped each pass.
    assert load_base("tiny")[0].config.use_cache is False
    assert load_checkpoint(checkpoint)[0].config.use_cache is False


@pytest.mark.slow
def test_compiled_layers_score_and_train_as_eager_ones(checkpoint):
    eager, tokenizer, _ = load_checkpoint(checkpoint)
    compiled, _, _ = load_checkpoint(checkpoint)
    assert compile_layers(compiled) == 4  # the tiny preset's layers
    # The state dict keeps its names: a compiled model saves a checkpoint like any other.
    assert list(compiled.state_dict()) == list(eager.state_dict())
    # Graphs another test compiled for the same layer would be reused, and count nothing new.
    torch._dynamo.reset()
    graphs = counters["stats"]["unique_graphs"]
    for ours, theirs in zip(score_solutions(compiled, tokenizer, SOLUTIONS * 2, batch_tokens=1024),
                            score_solutions(eager, tokenizer, SOLUTIONS * 2, batch_tokens=1024)):
        assert ours.step_scores == pytest.approx(theirs.step_scores, abs=1e-5)
    assert counters["stats"]["unique_graphs"] > graphs  # the compiled model did run compiled code

    ids = torch.tensor([tokenizer.encode("Q?\n\n$3 + 4 = 7$." + STEP_MARKER, add_special_tokens=False)] * 2)
    labels = torch.full_like(ids, -100)
    labels[:, -1] = 2
    # Gradients in eval mode: the head's dropout would make two eager passes differ too.
    for model in (eager, compiled):
        model(input_ids=ids, labels=labels).loss.backward()
    assert torch.allclose(compiled.score.weight.grad, eager.score.weight.grad, atol=1e-5)
    layer = "model.layers.0.mlp.down_proj.weight"
    grads = [dict(m.named_parameters())[layer].grad for m in (compiled, eager)]
    assert torch.allclose(*grads, atol=1e-5)


def test_compiling_a_model_without_repeated_layers_is_refused():
    with pytest.raises(ValueError, match="no repeated layer"):
        compile_layers(torch.nn.Linear(2, 2))


def test_a_max_length_past_the_models_positions_scores_as_at_its_positions(checkpoint):
    # A round's or a comparison's max_length past its base's positions failed on an index.
    model, tokenizer, _ = load_checkpoint(checkpoint)
    positions = model.config.max_position_embeddings
    long = [Solution("long", "Q " * positions, ["step " * 20] * 6), *SOLUTIONS]
    beyond = score_solutions(model, tokenizer, long, max_length=positions * 4)
    at = score_solutions(model, tokenizer, long, max_length=positions)
    for a, b in zip(beyond, at, strict=True):
        assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)
