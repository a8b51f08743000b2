"""Fetch the browser assets Stepwise serves itself: `python -m labeler_ui.vendor_assets`.

The labeler page renders math with KaTeX and the API docs page runs Swagger UI, both from our
own /static, never from a CDN, so the platform works offline and its CSP can stay at 'self'. The files come from the npm registry
through `npm pack` (which checks each package's integrity hash) and land in the git-ignored
labeler_ui/static/vendor/. Running it again when the pinned versions are there does nothing.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from labeler_ui import STATIC_DIR

VENDOR_DIR = STATIC_DIR / "vendor"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    folder: str
    # Patterns of paths inside the package; each must match at least one file.
    patterns: tuple[str, ...]
    # Leading folder dropped from the copied paths.
    strip: str = ""

    @property
    def target(self) -> Path:
        return VENDOR_DIR / self.folder

    def present(self) -> bool:
        stamp = self.target / "VERSION"
        return stamp.is_file() and stamp.read_text().strip() == self.version


PACKAGES = (
    Package(
        name="katex",
        version="0.16.47",
        folder="katex",
        # woff2 is enough for every browser that runs the page.
        patterns=(
            "dist/katex.min.js",
            "dist/katex.min.css",
            "dist/contrib/auto-render.min.js",
            "dist/fonts/*.woff2",
            "LICENSE",
        ),
        strip="dist/",
    ),
    Package(
        name="@fontsource-variable/inter",
        version="5.3.0",
        folder="inter",
        patterns=(
            "files/inter-latin-wght-normal.woff2",
            "files/inter-latin-ext-wght-normal.woff2",
            "LICENSE",
        ),
        strip="files/",
    ),
    # The API docs page (/api/v1/docs): Swagger UI's self-contained bundle and its stylesheet.
    Package(
        name="swagger-ui-dist",
        version="5.35.0",
        folder="swagger-ui",
        patterns=("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"),
    ),
)


class VendorError(RuntimeError):
    pass


def fetch(package: Package) -> bool:
    """Install one package's files into static/vendor; False when they were already there."""
    if package.present():
        return False
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError(
            "npm is not installed: it is needed once to fetch KaTeX, the UI font and Swagger UI "
            "for the browser pages (Debian: apt-get install npm)"
        )
    spec = f"{package.name}@{package.version}"
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [npm, "pack", spec, "--json", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise VendorError(f"npm pack {spec} failed:\n{result.stderr.strip()}")
        tarball = Path(tmp) / json.loads(result.stdout)[0]["filename"]
        staging = Path(tmp) / "staging"
        _extract(package, tarball, staging)
        # Swap the whole folder at once so that a failed run never leaves a half-written copy.
        if package.target.exists():
            shutil.rmtree(package.target)
        VENDOR_DIR.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), package.target)
    return True


def _extract(package: Package, tarball: Path, target: Path) -> None:
    matched = {pattern: 0 for pattern in package.patterns}
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            # npm tarballs put everything under "package/".
            inner = PurePosixPath(member.name).relative_to("package").as_posix()
            hits = [p for p in package.patterns if fnmatch.fnmatchcase(inner, p)]
            if not hits:
                continue
            for pattern in hits:
                matched[pattern] += 1
            destination = target / inner.removeprefix(package.strip)
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            destination.write_bytes(source.read())
    missing = [pattern for pattern, count in matched.items() if count == 0]
    if missing:
        raise VendorError(f"{package.name}@{package.version} has no {', '.join(missing)}")
    (target / "VERSION").write_text(package.version + "\n")


def main() -> int:
    for package in PACKAGES:
        try:
            fetched = fetch(package)
        except VendorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        state = "fetched" if fetched else "already present"
        print(f"{package.name} {package.version} {state} in {package.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
