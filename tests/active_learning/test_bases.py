"""A base model's name judged before any round trains on it."""

from __future__ import annotations

import pytest

from active_learning.bases import BaseUnusable, check_base_name


def model_dir(tmp_path, *files: str):  # type: ignore[no-untyped-def]
    directory = tmp_path / "backbone"
    directory.mkdir()
    for name in files:
        (directory / name).write_text("{}")
    return directory


@pytest.mark.parametrize("base", ["tiny", "500m", "Qwen/Qwen2.5-Math-1.5B", "gpt2"])
def test_presets_and_hub_ids_are_names_of_bases(base: str) -> None:
    check_base_name(base, directories_here=True)


def test_a_directory_needs_a_model_and_its_tokenizer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    check_base_name(str(model_dir(tmp_path, "config.json", "tokenizer.json")), directories_here=True)
    (tmp_path / "backbone" / "tokenizer.json").unlink()
    with pytest.raises(BaseUnusable, match="has no tokenizer files"):
        check_base_name(str(tmp_path / "backbone"), directories_here=True)
    (tmp_path / "backbone" / "config.json").unlink()
    with pytest.raises(BaseUnusable, match="has no config.json: it is not a model saved with save_pretrained"):
        check_base_name(str(tmp_path / "backbone"), directories_here=True)
    # Where the workers' directories are elsewhere, this machine's are not looked at: an answer
    # would only tell a caller which of its paths exist.
    check_base_name(str(tmp_path / "backbone"), directories_here=False)


def test_a_missing_directory_is_refused_only_where_the_workers_directories_are(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = str(tmp_path / "models" / "gone")
    with pytest.raises(BaseUnusable, match=f"there is no directory {missing}"):
        check_base_name(missing, directories_here=True)
    # An API process beside GPU workers: the directory may be mounted on theirs.
    check_base_name(missing, directories_here=False)
    with pytest.raises(BaseUnusable, match="there is no directory ./checkpoints"):
        check_base_name("./checkpoints", directories_here=True)
    for here in (True, False):
        with pytest.raises(BaseUnusable, match="give the directory's full path"):
            check_base_name("~/models/qwen", directories_here=here)


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
