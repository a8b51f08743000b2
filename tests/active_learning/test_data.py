import json

import pytest

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from active_learning.data import (IGNORE_INDEX, PROMPT_END, check_written_steps, encode_solutions, is_blank,
                                  load_examples, load_solutions, problem_id, scoring_windows, split_by_problem,
                                  text_encoder, tokenize_example, weigh_sources)
from active_learning.tokenizer import STEP_MARKER, build_byte_tokenizer


def _step(*completions, chosen=0, human=None):
    return {"completions": [{"text": t, "rating": r, "flagged": None} for t, r in completions],
            "human_completion": human, "chosen_completion": chosen}


def _record(steps, finish="found_error", **flags):
    return {"labeler": "l", "timestamp": "t", "generation": 1,
            "is_quality_control_question": flags.get("qc", False),
            "is_initial_screening_question": flags.get("screening", False),
            "question": {"problem": "What is 1+1?", "ground_truth_answer": "2",
                         "pre_generated_steps": ["a", "b", "c"], "pre_generated_answer": "3"},
            "label": {"steps": steps, "total_time": 1, "finish_reason": finish}}


def test_phase2_record_stops_at_first_error():
    record = _record([_step(("a", 1)), _step(("b", 0)), _step(("c", -1), chosen=None)])
    [example] = load_examples([record])
    assert example.steps == ["a", "b", "c"] and example.labels == [1, 0, -1]
    assert example.problem_id == problem_id("What is 1+1?")


def test_alternatives_become_extra_examples_with_unlabeled_context():
    record = _record([_step(("a", 1)), _step(("b1", -1), ("b2", 1), ("b3", 0), chosen=1),
                      _step(("c", 1))], finish="solution")
    examples = load_examples([record])
    main = [e for e in examples if None not in e.labels]
    extra = [e for e in examples if None in e.labels]
    assert [(e.steps, e.labels) for e in main] == [(["a", "b2", "c"], [1, 1, 1])]
    assert sorted((e.steps, e.labels) for e in extra) == [
        (["a", "b1"], [None, -1]), (["a", "b3"], [None, 0])]
    # A blank alternative (the importer keeps one) is no step to learn from.
    record["label"]["steps"][1]["completions"][0]["text"] = "  "
    assert sorted(e.steps for e in load_examples([record]) if None in e.labels) == [["a", "b3"]]


@pytest.mark.parametrize("human", [{"text": "h", "rating": None, "source": "human"}, "h"])
def test_human_completion_continues_unlabeled(human):
    # PRM800K writes an object; some files give the bare string.
    record = _record([_step(("a", 1)), _step(("b", -1), chosen=None, human=human),
                      _step(("c", -1), chosen=None)])
    examples = load_examples([record])
    assert (["a", "h", "c"], [1, None, -1]) in [(e.steps, e.labels) for e in examples]
    assert (["a", "b"], [None, -1]) in [(e.steps, e.labels) for e in examples]
    del record["question"]["pre_generated_steps"]
    [solution] = load_solutions([record])
    assert solution.steps == ["a", "h", "c"]


@pytest.mark.parametrize("flags, finish", [({"qc": True}, "solution"), ({"screening": True}, "solution"),
                                           ({}, "give_up"), ({}, "bad_problem")])
def test_left_out_records(flags, finish):
    assert load_examples([_record([_step(("a", 1))], finish=finish, **flags)]) == []


def test_trl_records_and_paths(tmp_path):
    path = tmp_path / "trl.jsonl"
    rows = [{"prompt": "P", "completions": ["x", "y", "z"], "labels": [True, False, True]}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    [example] = load_examples(str(path))
    assert example.steps == ["x", "y"] and example.labels == [1, -1]
    [solution] = load_solutions(path)
    assert solution.steps == ["x", "y", "z"]


def test_a_byte_order_mark_at_the_start_is_read_past(tmp_path):
    path = tmp_path / "trl.jsonl"
    rows = [{"prompt": "P", "completions": ["x", "y"], "labels": [True, True]}] * 2
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) for r in rows).encode() + b"\n")
    assert [e.steps for e in load_examples(path)] == [["x", "y"]] * 2
    assert [s.steps for s in load_solutions(path)] == [["x", "y"]] * 2
    # Anywhere else it is no JSON.
    path.write_bytes(path.read_bytes() + b"\xef\xbb\xbf" + json.dumps(rows[0]).encode() + b"\n")
    with pytest.raises(ValueError, match="trl.jsonl:3: not valid JSON"):
        load_examples(path)


def test_bad_input_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "P", "completions": [], "labels": []}\n{oops\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_examples(path)
    with pytest.raises(ValueError, match="neither"):
        load_examples([{"foo": 1}])


@pytest.mark.parametrize("load, line, message", [
    (load_examples, '[1, 2]', r"bad.jsonl\[0\]: not a JSON object but int"),
    (load_examples, '{"problem": "1+1", "solution": "2"}', "bad.jsonl:1: neither .*its keys: problem, solution$"),
    (load_examples, '{"question": null, "label": {}}', "bad.jsonl:1: a PRM800K record, but `question` is not an object"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": "x"}]}}',
     r"a PRM800K record, but `label.steps\[0\].completions` is not a list of objects"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": null}}', "`label.steps` is not a list"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [{"text": "a", "rating": 7}]}]}}',
     r"`label.steps\[0\].completions\[0\].rating` is -1, 0, 1 or null, not 7"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [{"text": 5, "rating": 1}]}]}}',
     r"`label.steps\[0\].completions\[0\].text` is not text but int"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [], "chosen_completion": 2}]}}',
     "`label.steps.0..chosen_completion` 2 is not the index of one of its 0 completions"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [], "human_completion": '
                    '{"text": "a", "rating": true}}]}}', "human_completion.rating` is -1, 0, 1 or null, not true"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [{"text": " \\n", "rating": 1}], '
                    '"chosen_completion": 0}]}}',
     r"a PRM800K record, but `label.steps\[0\].completions\[0\].text` is blank: a step needs text"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [{"text": "a", "rating": 1}], '
                    '"chosen_completion": 0}, {"completions": [], "human_completion": "  "}]}}',
     r"`label.steps\[1\].human_completion` is blank: a step needs text"),
    (load_examples, '{"question": {"problem": "1+1"}, "label": {"steps": [{"completions": [{"text": "a", "rating": 1}], '
                    '"chosen_completion": 0, "human_completion": "b"}]}}',
     r"`label.steps\[0\]` has both a chosen_completion and a human_completion"),
    (load_examples, '{"prompt": "1+1", "completions": ["a", ""], "labels": [true, true]}',
     r"a TRL record, but `completions\[1\]` is blank: a step needs text"),
    (load_examples, '{"prompt": "1+1", "completions": ["a"], "labels": "yes"}', "a TRL record, but `labels` is not a list"),
    (load_examples, '{"prompt": "1+1", "completions": ["a", "b"], "labels": [true]}', "it has 1 labels for 2 completions"),
    (load_examples, '{"prompt": "1+1", "completions": "ab", "labels": [true, true]}', "`completions` is not a list of text"),
    (load_examples, '{"prompt": "1+1", "completions": ["a"], "labels": [true], "weight": "x"}', "`weight` 'x' is not a number"),
    (load_solutions, '{"problem": "1+1", "solution": "2"}', "bad.jsonl:1: not a solution.*its keys: problem, solution$"),
    (load_solutions, '{"problem": "1+1", "steps": [2, 3]}', "bad.jsonl:1: a candidate record, but `steps` is not a list of text"),
    (load_solutions, '{"problem": "1+1", "steps": "abc"}', "a candidate record, but `steps` is not a list of text"),
    (load_solutions, '{"prompt": "1+1", "completions": "two steps"}', "a TRL record, but `completions` is not a list of text"),
    (load_solutions, '{"question": {"problem": "1+1", "pre_generated_steps": "xy"}}',
     "`question.pre_generated_steps` is not a list of text"),
    (load_solutions, '{"steps": ["a"]}', "bad.jsonl:1: a candidate record, but no `problem`"),
    (load_solutions, '{"question": {"problem": "1+1"}, "label": {"steps": "x"}}', "a PRM800K record, but `label.steps` is not a list"),
])
def test_a_malformed_record_is_named_with_what_is_wrong(tmp_path, load, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        load(path)


def test_training_weighs_sources_while_reading_as_weigh_sources_does(tmp_path):
    human = {"prompt": "P", "completions": ["a"], "labels": [True]}
    machine = {**human, "prompt": "Q", "source": "rollout"}
    accepted = {**machine, "prompt": "R", "accepted": True}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (human, machine, accepted)))
    for weights in ({"human": 1.0}, {"human": 1.0, "rollout": 0.5}, {"rollout": 2.0}):
        read = load_examples(path, weights)
        assert [(e.prompt, e.weight) for e in read] == \
            [(e.prompt, e.weight) for e in load_examples(weigh_sources([human, machine, accepted], weights))]
    assert [(e.prompt, e.weight) for e in load_examples(path, {"human": 1.0, "rollout": 0.5})] == \
        [("P", 1.0), ("Q", 0.5), ("R", 1.0)]  # an accepted machine record weighs as a human one
    path.write_text(json.dumps(human) + "\n" + json.dumps({**human, "source": ["x"]}) + "\n")
    with pytest.raises(ValueError, match=r"mixed.jsonl:2: a TRL record, but `source` \['x'\] is not text"):
        load_examples(path, {"human": 1.0})


def test_trl_labels_may_be_ones_and_zeros():
    [example] = load_examples([{"prompt": "P", "completions": ["a", "b"], "labels": [1, 0]}])
    assert example.labels == [1, -1]


def test_solutions_from_prm800k_and_candidates():
    [solution] = load_solutions([_record([_step(("a", 1))])])
    assert solution.steps == ["a", "b", "c"] and solution.answer == "3" and solution.ground_truth_answer == "2"
    [candidate] = load_solutions([{"problem": "Q", "steps": ["s"], "answer": "4"}])
    assert candidate.prompt == "Q" and candidate.answer == "4"


def test_split_keeps_each_problem_on_one_side():
    records = [_record([_step((f"s{i}", 1))], finish="solution") for i in range(120)]
    for i, record in enumerate(records):
        record["question"] = {**record["question"], "problem": f"problem {i % 40}"}
    examples = load_examples(records)
    train, held_out = split_by_problem(examples, 0.3, seed=1)
    assert train and held_out
    assert not {e.problem_id for e in train} & {e.problem_id for e in held_out}
    assert split_by_problem(examples, 0.3, seed=1) == (train, held_out)


def test_tokenize_puts_labels_on_markers_only():
    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    out = tokenize_example(tokenizer, marker, "Q?", ["ab", "c"], [1, -1], max_length=64)
    ids, labels, markers = out["input_ids"], out["labels"], out["markers"]
    assert [ids[m] for m in markers] == [marker, marker]
    assert [labels[m] for m in markers] == [2, 0]
    assert sum(t != IGNORE_INDEX for t in labels) == 2
    assert tokenizer.decode(ids[:markers[0]]) == "Q?\n\nab"

    unlabeled = tokenize_example(tokenizer, marker, "Q?", ["ab", "c"], [None, 0], max_length=64)
    assert [unlabeled["labels"][m] for m in unlabeled["markers"]] == [IGNORE_INDEX, 1]


def test_tokenize_truncates_whole_steps():
    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    out = tokenize_example(tokenizer, marker, "x" * 100, ["a" * 5, "b" * 30], [1, 1], max_length=40)
    assert len(out["input_ids"]) <= 40
    assert out["markers"][1] == -1 and out["markers"][0] >= 0


def test_scoring_windows_read_every_step_with_up_to_half_a_window_of_context():
    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    steps = ["a" * 10, "b" * 10, "c" * 10, "d" * 10, "e" * 70]
    windows = scoring_windows(tokenizer, marker, "x" * 100, steps, max_length=64)
    # Steps 0-3 each read once; step 4 alone is longer than the limit and is read nowhere.
    assert [step for w in windows for step, _ in w["reads"]] == [0, 1, 2, 3]
    for window in windows:
        assert len(window["input_ids"]) <= 64
        assert all(window["input_ids"][position] == marker for _, position in window["reads"])
    # A later window carries half the limit: the question's tail and the step before the ones it reads.
    text = tokenizer.decode(windows[-1]["input_ids"])
    assert text == "x" * 14 + "\n\n" + "b" * 10 + STEP_MARKER + "c" * 10 + STEP_MARKER + "d" * 10 + STEP_MARKER
    assert [step for step, _ in windows[-1]["reads"]] == [2, 3]
    # Everything fits: the one window is the training layout.
    [whole] = scoring_windows(tokenizer, marker, "Q?", ["ab", "c"], max_length=64)
    assert whole["input_ids"] == tokenize_example(tokenizer, marker, "Q?", ["ab", "c"], None, 64)["input_ids"]


@pytest.mark.parametrize("text", ["", " \n\t", "\u0000", "\u200b", "\ufeff \u200d", " <|step|> "])
def test_text_that_shows_nothing_is_blank(text):
    assert is_blank(text)
    with pytest.raises(ValueError, match="step 1 of 1 is blank"):
        check_written_steps([text])


@pytest.mark.parametrize("text", ["x", "\u200bx", "é", "数", "🙂", "$0$", "\U0001fae8", "\ue000"])
def test_text_that_shows_something_is_not_blank(text):
    # Including a character newer than this Python's Unicode tables, and a private-use glyph.
    assert not is_blank(text)


def test_training_reads_a_stored_step_of_zero_width_characters():
    # Stored before imports refused such steps: a round over them trains rather than fails.
    [example] = load_examples([{"prompt": "P", "completions": ["\u200b", "x"], "labels": [True, False]}])
    assert example.steps == ["\u200b", "x"]


def test_a_long_solution_costs_windows_in_proportion_to_its_length():
    # 200 steps past a 64-token limit: a window a step would read 200 x 64 tokens.
    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    steps = [f"step {i} = {i}+0" for i in range(200)]
    windows = scoring_windows(tokenizer, marker, "x" * 100, steps, max_length=64)
    assert [step for w in windows for step, _ in w["reads"]] == list(range(200))
    solution_tokens = sum(len(step) + 1 for step in steps)
    assert sum(len(w["input_ids"]) for w in windows) <= 2 * solution_tokens + 64


@pytest.mark.parametrize("rating", [1, 0])
def test_a_rated_human_step_is_a_label(rating):
    # Stepwise's phase-1 mode: the labeler rates the step they write.
    human = {"text": "h", "rating": rating, "source": "human", "flagged": False, "corrected_rating": None}
    record = _record([_step(("a", 1), ("a2", -1)), _step(("b", -1), ("b2", -1), chosen=None, human=human),
                      _step(("c", 1))], finish="solution")
    examples = sorted((e.steps, e.labels) for e in load_examples([record]))
    assert examples == [(["a", "b"], [None, -1]), (["a", "b2"], [None, -1]), (["a", "h", "c"], [1, rating, 1]),
                        (["a2"], [-1])]


def test_trl_records_with_every_completion_load_as_they_are():
    # `stepwise export --format trl --completions all`: alternatives are records of their own.
    rows = [{"prompt": "P", "completions": ["x", "h"], "labels": [True, True], "human_written": [False, True]},
            {"prompt": "P", "completions": ["x", "y"], "labels": [True, False], "human_written": [False, False]}]
    assert [(e.steps, e.labels) for e in load_examples(rows)] == [(["x", "h"], [1, 1]), (["x", "y"], [1, -1])]


TEXTS = ["What is $\\frac{1}{2} + \\frac{1}{3}$?\n\n", "  two  spaces, then\ttab", "é ∑ 数学 🙂",
         "$x^2 - 4 = 0$, so $x = \\pm 2$.\n\n# Answer\n\n\\pm 2", ""]


def _bpe_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer that adds BOS itself, as Llama's and Mistral's do."""
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(TEXTS * 20, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", unk_token="<unk>")


@pytest.mark.parametrize("make", [build_byte_tokenizer, _bpe_tokenizer])
def test_text_encoder_gives_transformers_ids(make):
    tokenizer = make()
    assert text_encoder(tokenizer)(TEXTS) == [tokenizer.encode(text, add_special_tokens=False) for text in TEXTS]


def test_solutions_are_laid_out_from_their_encoded_texts():
    tokenizer = _bpe_tokenizer()
    marker = tokenizer.unk_token_id
    solutions = [("Q?", ["ab", "", "é ∑"]), (TEXTS[0], TEXTS[1:]), ("no steps", [])]
    encoded = list(encode_solutions(tokenizer, solutions))
    assert [len(steps) for _, steps in encoded] == [3, 4, 0]
    for (prompt, steps), ids in zip(solutions, encoded):
        assert ids == (tokenizer.encode(prompt + PROMPT_END, add_special_tokens=False),
                       [tokenizer.encode(step, add_special_tokens=False) for step in steps])
        alone = tokenize_example(tokenizer, marker, prompt, steps, None, 64)
        assert tokenize_example(tokenizer, marker, prompt, steps, None, 64, ids) == alone
        assert alone["input_ids"][0] == tokenizer.bos_token_id


def test_text_encoder_adds_no_special_tokens():
    tokenizer = _bpe_tokenizer()
    assert tokenizer.encode(TEXTS[0])[0] == tokenizer.bos_token_id  # the post-processor's BOS
    assert tokenizer.bos_token_id not in text_encoder(tokenizer)([TEXTS[0]])[0]


@pytest.mark.parametrize("setting", ["truncation", "padding"])
def test_text_encoder_leaves_a_truncating_or_padding_backend_to_transformers(setting):
    # A tokenizer.json saved with truncation or padding on: transformers turns both off before
    # encoding, so the backend called directly would cut the text short or pad it.
    tokenizer = _bpe_tokenizer()
    if setting == "truncation":
        tokenizer.backend_tokenizer.enable_truncation(max_length=3)
    else:
        tokenizer.backend_tokenizer.enable_padding(length=64, pad_id=0)
    ours = text_encoder(tokenizer)(TEXTS[:2])
    assert all(3 < len(ids) < 64 for ids in ours)
    assert ours == [tokenizer.encode(text, add_special_tokens=False) for text in TEXTS[:2]]


def test_text_encoder_leaves_a_tokenizer_that_encodes_in_python_to_transformers():
    class Infilling(PreTrainedTokenizerFast):
        def _encode_plus(self, text, *args, **kwargs):
            return super()._encode_plus(text.replace("<FILL>", "?"), *args, **kwargs)

    tokenizer = Infilling(tokenizer_object=_bpe_tokenizer().backend_tokenizer, bos_token="<s>", unk_token="<unk>")
    text = "What is <FILL>?"
    assert text_encoder(tokenizer)([text]) == [tokenizer.encode(text, add_special_tokens=False)]


def test_the_markers_text_in_the_input_is_dropped():
    tokenizer = build_byte_tokenizer()
    marker = tokenizer.convert_tokens_to_ids(STEP_MARKER)
    example = tokenize_example(tokenizer, marker, "Q <|step|>?", ["a<|st<|step|>ep|>b", "c"], [1, 0], 64)
    assert example["input_ids"].count(marker) == 2
    assert example == tokenize_example(tokenizer, marker, "Q ?", ["ab", "c"], [1, 0], 64)


def test_a_parquet_or_arrow_file_is_named_as_such_not_read_as_broken_json(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"prompt": ["P"], "completions": [["x"]], "labels": [[True]]})
    pq.write_table(table, tmp_path / "trl.parquet")
    # As the datasets library's save_to_disk writes its data files.
    with pa.OSFile(str(tmp_path / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
        out.write_table(table)
    for name, what in (("trl.parquet", "a Parquet file"), ("data-00000-of-00001.arrow", "an Arrow stream")):
        with pytest.raises(ValueError, match=f"{name}: {what}.*these commands read JSONL"):
            load_examples(tmp_path / name)
        with pytest.raises(ValueError, match=f"{name}: {what}"):
            load_solutions(tmp_path / name)
