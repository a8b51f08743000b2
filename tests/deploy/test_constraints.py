"""constraints.txt pins what `make lock` resolved; the install and the image both use it, and it
must agree with what pyproject.toml asks for, or the README's install would fail."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.test_compose import ROOT, _stages, dockerfile  # noqa: F401 (a fixture)

PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;#]+)$")


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"not a plain pin: {line!r}"
        pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    return [Requirement(text) for text in wanted]


def test_every_dependency_is_pinned_within_what_pyproject_allows() -> None:
    pins = _pins()
    for requirement in _requirements():
        name = canonicalize_name(requirement.name)
        if name == "torch":
            # Pinned apart: its CPU or CUDA build comes from an index of its own.
            assert name not in pins
            continue
        assert name in pins, f"{requirement.name} is not pinned: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{requirement.name}=={pins[name]} is outside {requirement.specifier}: run `make lock`")


def test_the_install_and_the_image_use_the_pins(dockerfile: list[str]) -> None:  # noqa: F811
    makefile = (ROOT / "Makefile").read_text()
    assert "-m pip install --quiet -c constraints.txt -e '.[dev,hf,track]'" in makefile
    assert re.search(r"^\$\(VENV\)/\.installed: .*constraints\.txt", makefile, re.M), "a new pin reinstalls"
    runtime = _stages(dockerfile)[-1]
    assert any(line.startswith("RUN pip install -c /wheels/constraints.txt /wheels/") for line in runtime)
    torch_pins = set(re.findall(r"torch==([\d.]+)", makefile)) | {
        line.split("torch==")[1] for line in runtime if line.startswith("ARG TORCH_SPEC=")}
    assert len(torch_pins) == 1, f"one torch release for the install and the image: {torch_pins}"
