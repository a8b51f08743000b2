"""What a base model's name names, a preset built from a config, a local directory or a hub id,
judged without torch or transformers: the web process refuses a name that no worker could load
when a researcher types it, instead of a round failing on it later."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import constants, model_info, try_to_load_from_cache
from huggingface_hub.utils import HFValidationError, RepositoryNotFoundError, validate_repo_id


@dataclass(frozen=True)
class Preset:
    """A backbone shape built from a config with the byte tokenizer: no download."""

    hidden: int
    layers: int
    heads: int
    # Pretraining's peak learning rate: the larger the model, the lower it must be. 3e-3, right
    # for tiny, sent the 100m preset's loss to NaN within 300 steps in bf16 on an H200.
    pretrain_learning_rate: float
    max_positions: int = 2048


# tiny (1M): CPU tests and the embedded demo; 100m: the GPU learning check; 500m: the GPU
# throughput benchmark (a byte vocabulary leaves nearly all parameters in the layers).
PRESETS = {
    "tiny": Preset(hidden=128, layers=4, heads=4, pretrain_learning_rate=3e-3),
    "100m": Preset(hidden=768, layers=12, heads=12, pretrain_learning_rate=6e-4),
    "500m": Preset(hidden=1152, layers=24, heads=18, pretrain_learning_rate=3e-4),
}

# Files one of which a tokenizer needs: the fast tokenizer's, or a slow one's vocabulary.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model")


class BaseUnusable(ValueError):
    """A base that no attempt can load as it is: a round retried on it would fail the same way."""


class BaseOutOfReach(ValueError):
    """A hub id the Hub cannot be asked about and this machine has not cached: another attempt
    may find the Hub answering."""


def is_preset(base: str) -> bool:
    """A preset name, built from a config; a local directory of the same name wins."""
    return base in PRESETS and not os.path.isdir(base)


def names_a_path(base: str) -> bool:
    """Whether the name can only be a directory: a hub id is `name` or `owner/name`."""
    return base.startswith(("/", ".", "~")) or base.count("/") > 1


def refuse_without_tokenizer_files(directory: str | Path) -> None:
    if not any(os.path.exists(os.path.join(directory, name)) for name in TOKENIZER_FILES):
        raise BaseUnusable(f"{directory} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); "
                           "save the tokenizer beside the model (tokenizer.save_pretrained)")


def check_base_directory(directory: str | Path) -> None:
    """What a local base directory lacks, for the one training from it (`prm train`, a worker):
    they see this disk. An API caller typing a name gets only not_a_model_directory."""
    if not os.path.isfile(os.path.join(directory, "config.json")):
        raise BaseUnusable(f"{directory} has no config.json: it is not a model saved with save_pretrained")
    refuse_without_tokenizer_files(directory)


def is_model_directory(directory: str | Path) -> bool:
    """A model saved with save_pretrained, with one of its tokenizer's files beside it."""
    return os.path.isfile(os.path.join(directory, "config.json")) and any(
        os.path.exists(os.path.join(directory, name)) for name in TOKENIZER_FILES)


def not_a_model_directory(base: str) -> BaseUnusable:
    """One answer for every path that names no model: a researcher who was told "there is no
    directory", "is a file" or "has no config.json" apart learnt which of the server's paths exist
    and what they hold, one request a path."""
    return BaseUnusable(f"{base} is not a model directory here: give the full path of a directory holding a "
                        "model saved with save_pretrained (config.json) and its tokenizer (tokenizer.save_pretrained)")


def check_base_name(base: str, *, directories_here: bool) -> None:
    """Raise BaseUnusable, saying why, when `base` cannot name a base to train from.

    `directories_here` says whether this machine's directories are the workers' (the embedded
    server, a worker itself): then a directory must exist and hold a model and its tokenizer.
    If not, as with an API container beside GPU workers, a path is judged by its form alone: it
    may be mounted there.
    """
    if is_preset(base):
        return
    if base.startswith("~"):
        raise BaseUnusable(f"{base}: give the directory's full path (~ is not expanded)")
    if directories_here and os.path.isdir(base):
        if not is_model_directory(base):
            raise not_a_model_directory(base)
        return
    if names_a_path(base):
        if directories_here:
            raise not_a_model_directory(base)
        # Looking here would tell a caller which of this machine's paths exist, and nothing of
        # what the workers will find.
        return
    # A hub id with no owner ("gpt2") is rare; one a letter away from a preset is a typo, which
    # would otherwise surface only when a worker failed to download it.
    near = difflib.get_close_matches(base.lower(), PRESETS, n=1, cutoff=0.8) if "/" not in base else []
    if near:
        raise BaseUnusable(f"{base!r} is not a preset: did you mean {near[0]!r}? (presets: {', '.join(PRESETS)})")
    try:
        validate_repo_id(base)
    except HFValidationError:
        raise BaseUnusable(
            f"{base!r} names no base: give a preset ({', '.join(PRESETS)}), a model directory, "
            "or a hub id such as Qwen/Qwen2.5-Math-1.5B"
        ) from None


# Seconds to wait for the Hub's answer about a name before reading it from the cache alone.
HUB_PROBE_S = 10.0


def files_only_here(name: str) -> bool:
    """Whether the model `name` must be read from this machine alone (transformers'
    `local_files_only`): a directory, HF_HUB_OFFLINE, or a hub id while the Hub cannot be
    reached. Left to find that out itself, transformers retries file after file: 49 s before its
    error, measured offline. One question to the Hub tells at once; a name it does not know is
    refused (BaseUnusable), and one it cannot be asked about must be in the cache (BaseOutOfReach:
    it may work once the Hub is back)."""
    if os.path.isdir(name):
        return True
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ValueError(f"there is no directory {name}, and it is not a hub id") from None
    if names_a_path(name):
        raise ValueError(f"there is no directory {name}")
    if constants.HF_HUB_OFFLINE:
        # Offline by the machine's own setting: another attempt finds the cache as it is.
        if not _cached(name):
            raise BaseUnusable(f"HF_HUB_OFFLINE is set and {name} is not in this machine's cache: download it "
                               f"(hf download {name}) or give its directory")
        return True
    try:
        model_info(name, timeout=HUB_PROBE_S)
    except RepositoryNotFoundError:
        raise BaseUnusable(f"the Hugging Face Hub has no model {name} that this machine may read: check "
                           "the name, log in (hf auth login) for a private one, or give a directory by "
                           "its full path") from None
    except Exception:  # noqa: BLE001 - no answer (no network, a timeout, the Hub down): the cache decides
        if not _cached(name):
            raise BaseOutOfReach(f"the Hugging Face Hub cannot be reached and {name} is not in this machine's "
                             f"cache: download it where the Hub answers (hf download {name}), or give "
                             "its directory") from None
        return True
    return False


def _cached(name: str) -> bool:
    return isinstance(try_to_load_from_cache(name, "config.json"), str)
