"""A base model's name judged before any round trains on it."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from huggingface_hub.utils import RepositoryNotFoundError

from active_learning.bases import BaseOutOfReach, BaseUnusable, check_base_name, files_only_here


def model_dir(tmp_path, *files: str):  # type: ignore[no-untyped-def]
    directory = tmp_path / "backbone"
    directory.mkdir()
    for name in files:
        (directory / name).write_text("{}")
    return directory


@pytest.mark.parametrize("base", ["tiny", "500m", "Qwen/Qwen2.5-Math-1.5B", "gpt2"])
def test_presets_and_hub_ids_are_names_of_bases(base: str) -> None:
    check_base_name(base, directories_here=True)


NOT_A_MODEL = ("is not a model directory here: give the full path of a directory holding a model saved with "
               "save_pretrained (config.json) and its tokenizer (tokenizer.save_pretrained)")


def test_a_directory_needs_a_model_and_its_tokenizer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    check_base_name(str(model_dir(tmp_path, "config.json", "tokenizer.json")), directories_here=True)
    (tmp_path / "backbone" / "tokenizer.json").unlink()
    with pytest.raises(BaseUnusable, match=re.escape(f"{tmp_path / 'backbone'} {NOT_A_MODEL}")):
        check_base_name(str(tmp_path / "backbone"), directories_here=True)
    # Where the workers' directories are elsewhere, this machine's are not looked at: an answer
    # would only tell a caller which of its paths exist.
    check_base_name(str(tmp_path / "backbone"), directories_here=False)


def test_a_missing_directory_is_refused_only_where_the_workers_directories_are(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = str(tmp_path / "models" / "gone")
    with pytest.raises(BaseUnusable, match=re.escape(f"{missing} {NOT_A_MODEL}")):
        check_base_name(missing, directories_here=True)
    # An API process beside GPU workers: the directory may be mounted on theirs.
    check_base_name(missing, directories_here=False)
    with pytest.raises(BaseUnusable, match=re.escape(f"./checkpoints {NOT_A_MODEL}")):
        check_base_name("./checkpoints", directories_here=True)
    for here in (True, False):
        with pytest.raises(BaseUnusable, match="give the directory's full path"):
            check_base_name("~/models/qwen", directories_here=here)


def test_every_path_that_names_no_model_gets_one_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Told apart ("there is no directory", "is a file", "has no config.json"), the answers showed a
    # researcher which of the server's paths exist and what they hold.
    data = tmp_path / "synth.jsonl"
    data.write_text("{}\n")
    weights_only = model_dir(tmp_path, "config.json")
    answers = set()
    for path in (tmp_path / "gone", data, tmp_path, weights_only, "/etc/passwd", "/etc"):
        with pytest.raises(BaseUnusable) as refused:
            check_base_name(str(path), directories_here=True)
        answers.add(str(refused.value).replace(str(path), "PATH", 1))
    assert answers == {f"PATH {NOT_A_MODEL}"}


@pytest.mark.parametrize("base", ["my model", "org/name!", "a--b", "-x", "Qwen/Qwen 2"])
def test_a_name_that_is_no_preset_directory_or_hub_id_says_what_would_be(base: str) -> None:
    with pytest.raises(BaseUnusable, match="names no base: give a preset \\(tiny, 100m, 500m\\)"):
        check_base_name(base, directories_here=False)


@pytest.mark.parametrize(("base", "meant"), [("Tiny", "tiny"), ("tinyy", "tiny"), ("500M", "500m"), ("100mm", "100m")])
def test_a_preset_mistyped_is_not_taken_for_a_hub_id(base: str, meant: str) -> None:
    with pytest.raises(BaseUnusable, match=f"'{base}' is not a preset: did you mean '{meant}'"):
        check_base_name(base, directories_here=False)


@pytest.mark.parametrize("base", ["tiny-gpt2", "distilgpt2", "org/tinyy"])
def test_hub_ids_near_a_preset_in_name_only_are_hub_ids(base: str) -> None:
    check_base_name(base, directories_here=False)


class HubAnswers:
    """What the Hub says when asked about a name, and what this machine's cache holds."""

    def __init__(self, monkeypatch, answer, cached=None) -> None:  # type: ignore[no-untyped-def]
        self.asked: list[str] = []
        self.answer = answer
        monkeypatch.setattr("active_learning.bases.model_info", self.model_info)
        monkeypatch.setattr("active_learning.bases.try_to_load_from_cache", lambda name, file: cached)

    def model_info(self, name: str, timeout: float) -> object:
        self.asked.append(name)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def test_a_hub_id_is_read_from_the_cache_alone_while_the_hub_cannot_be_reached(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # transformers, asked to look itself, retried file after file for 49 s before its error.
    HubAnswers(monkeypatch, OSError("Name or service not known"))
    with pytest.raises(BaseOutOfReach, match="the Hugging Face Hub cannot be reached and owner/model is not in this "
                                         r"machine's cache: download it where the Hub answers \(hf download owner/model\)"):
        files_only_here("owner/model")
    HubAnswers(monkeypatch, OSError("timed out"), cached=str(tmp_path / "config.json"))
    assert files_only_here("owner/model") is True


def test_a_name_the_hub_does_not_know_is_refused_and_one_it_knows_is_downloaded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    unknown = RepositoryNotFoundError("404", response=SimpleNamespace(headers={}, request=None))
    HubAnswers(monkeypatch, unknown)
    with pytest.raises(BaseUnusable, match="the Hugging Face Hub has no model owner/typo that this machine may read"):
        files_only_here("owner/typo")
    HubAnswers(monkeypatch, SimpleNamespace(id="owner/model"))
    assert files_only_here("owner/model") is False


def test_directories_and_offline_mode_never_ask_the_hub(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hub = HubAnswers(monkeypatch, SimpleNamespace(id="owner/model"), cached=str(tmp_path / "config.json"))
    assert files_only_here(str(tmp_path)) is True
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert files_only_here("owner/model") is True
    assert hub.asked == []


def test_offline_mode_refuses_a_hub_id_not_cached_for_good(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Offline by the machine's setting, no later attempt finds it: a round fails at once (BaseUnusable).
    hub = HubAnswers(monkeypatch, SimpleNamespace(id="owner/model"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(BaseUnusable, match=r"HF_HUB_OFFLINE is set and owner/model is not in this machine's cache: "
                                           r"download it \(hf download owner/model\)"):
        files_only_here("owner/model")
    assert hub.asked == []


@pytest.mark.parametrize(("name", "message"), [
    ("./models/nope", "there is no directory ./models/nope"),
    ("/srv/models/base", "there is no directory /srv/models/base"),
    ("models/a/b", "there is no directory models/a/b"),
])
def test_a_missing_directory_is_named_without_asking_the_hub(monkeypatch, name: str, message: str) -> None:  # type: ignore[no-untyped-def]
    hub = HubAnswers(monkeypatch, SimpleNamespace(id="owner/model"))
    with pytest.raises(ValueError, match=message):
        files_only_here(name)
    assert hub.asked == []
