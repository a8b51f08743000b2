"""The forms a generator spec takes, checked without opening anything (see rollouts.open_generator)."""

from __future__ import annotations

import os
import urllib.parse


def check_generator_spec(spec: str) -> str:
    """The spec, stripped, when it has one of the forms `http(s)://host/v1[#model]`, `vllm:MODEL`
    or a directory or hub id; ValueError otherwise. Whether the model is there is found out on
    opening it."""
    spec = spec.strip()
    if not spec:
        raise ValueError("generator: name a directory, hub id, vllm:MODEL or http(s):// endpoint")
    if urllib.parse.urlsplit(spec).scheme in ("http", "https"):
        return spec
    if spec.startswith("vllm:"):
        if not spec.removeprefix("vllm:"):
            raise ValueError("vllm:MODEL needs a model (a directory or hub id)")
        _check_model_name(spec.removeprefix("vllm:"))
        return spec
    if "://" in spec:
        raise ValueError(f"generator {spec!r}: only http(s):// endpoints are understood")
    _check_model_name(spec)
    return spec


def _check_model_name(model: str) -> None:
    # A path is judged where the model is opened (an API container may not mount the workers'
    # folders); anything else must be a hub id, or a round would skip its rollouts on a typo.
    if is_local_path(model):
        return
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        raise ValueError(f"generator {model!r} names no model: give a model directory, a hub id (owner/name), "
                         "vllm:MODEL or an http(s):// endpoint") from None


def is_local_path(spec: str) -> bool:
    """A spec that can only mean a directory here: a hub id is owner/name, and anything else that
    is not a directory is a path gone wrong, which must not turn into a download attempt."""
    path = os.path.expanduser(spec)
    return spec.startswith(("/", ".", "~")) or os.path.exists(path)


def local_model_path(spec: str) -> str:
    """The model a directory or hub id names, `~` expanded (a quoted or `--model=~/m` tilde
    reaches us unexpanded by the shell); ValueError for a path that is no directory."""
    path = os.path.expanduser(spec)
    if not os.path.isdir(path) and is_local_path(spec):
        raise ValueError(f"generator {spec!r}: no such model directory")
    return path
