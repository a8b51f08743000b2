"""Drawing [asy] figures to SVG with Asymptote, cached on disk by content hash.

A figure is drawn once: ahead of time by `stepwise figures` (which `stepwise demo` runs in the
background), or else on its first request, under a time limit and with at most one drawing at a time per server process, so that a slow
or hostile figure cannot hold more than one request thread. A figure that failed is remembered
too, so it is not retried on every page view.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.errors import NotFound
from app.figures.asy import asy_sources, figure_key
from app.figures.guard import refusal
from app.figures.svg import UnsafeSvg, sanitize_svg
from app.models import Problem
from app.projects.access import may_label

# Asymptote's default unit draws for print: 10pt labels. At 1.5 they match the page's text.
SCREEN_SCALE = 1.5
MAX_SVG_BYTES = 2_000_000
MAX_FILE_BYTES = 64 * 2**20
MAX_MEMORY_BYTES = 2 * 2**30
# Labels are TeX, and dvisvgm runs their PostScript specials in a Ghostscript it never puts in
# SAFER mode: `label("\special{ps: (/etc/passwd) (r) file …}")` drew any file the server may read.
# So dvisvgm runs with --no-specials=ps. Asymptote itself uses them only to turn and scale labels
# (\ASYalignT) and to colour them (`ps:… setrgbcolor`); LABEL_TEX says the same with dvisvgm's raw
# SVG and colour specials, which read no file, so that such labels are drawn as before. (\relax
# ends the number in Asymptote's `\catcode`\#=11` before the special's text is read, with # as
# a letter.)
LABEL_TEX = r"""\makeatletter
\AtBeginDocument{%
\long\def\ASYalignT(#1,#2)(#3,#4)#5#6{\ASYaligned(#1,#2)(#3,#4){\special{dvisvgm:raw <g transform='translate({?x} {?y}) matrix(#5 0 0) translate(-{?x} -{?y})'>}}{\special{dvisvgm:raw </g>}}{#6}}%
\let\ASY@special\special
\def\special{\relax\ASY@colour}%
\def\ASY@colour#1{\in@{setrgbcolor}{#1}\ifin@\ASY@rgb#1\ASY@end\else\in@{setgray}{#1}\ifin@\ASY@gray#1\ASY@end\else\in@{setcmykcolor}{#1}\ifin@\ASY@cmyk#1\ASY@end\else\ASY@special{#1}\fi\fi\fi}%
\def\ASY@rgb ps:#1 setrgbcolor\ASY@end{\ASY@special{color rgb #1}}%
\def\ASY@gray ps:#1 setgray\ASY@end{\ASY@special{color gray #1}}%
\def\ASY@cmyk ps:#1 setcmykcolor\ASY@end{\ASY@special{color cmyk #1}}%
}\makeatother"""
# MATH's figures come from AoPS, whose renderer imports modules before each figure: graph (Circle,
# Arc, axes) and math (extension, intersection helpers), which Asymptote ships, and AoPS's own
# olympiad, for which Stepwise ships a stand-in of the helpers MATH's figures call (modules/; with
# TrigMacros, which figures import themselves). Figures that need cse5 fail and show their source.
# A figure that sets no size would be drawn at one PostScript point a unit: MATH's triangles of
# sides 2 to 10 came out a few points across under full-size labels (18 of the demo's 42). A
# default width keeps them legible; a figure's own size() or unitsize() still wins.
PREAMBLE = f'import graph;\nimport math;\nimport olympiad;\nsize(180);\ntexpreamble("{LABEL_TEX}");\n'
# Copied beside each figure: -noglobalread lets a figure read nothing outside its own directory.
MODULES = Path(__file__).parent / "modules"
ASY_MESSAGE = re.compile(r"figure\.asy: (\d+)\.\d+: (.*)")
# Any absolute, home or parent path in what Asymptote, TeX or dvisvgm said: a labeler is told why
# the figure failed, not which files the server has.
SERVER_PATH = re.compile(r"""(?:^|(?<=[\s'"`(=:]))(?:~|\.\.)?/[^\s'"`):]*""")
_drawing = threading.BoundedSemaphore(1)


@dataclass(frozen=True)
class Figure:
    svg: str | None
    error: str | None


def asymptote_path(settings: Settings) -> str | None:
    """The asy executable to run, or None when figures are off or Asymptote is not installed."""
    if settings.asymptote.strip().lower() in ("", "off"):
        return None
    return shutil.which(settings.asymptote)


# Cache directories found to hold a drawing: drawings are never removed, so every page render
# after the first finding costs a set lookup instead of a directory scan.
_caches_with_drawings: set[Path] = set()


def figures_shown(settings: Settings) -> bool:
    """Whether a page may ask for drawings: Asymptote draws them here, or another process (a
    worker, `stepwise figures`) left some in the shared cache."""
    if settings.figures_dir in _caches_with_drawings or asymptote_path(settings) is not None:
        return True
    try:
        with os.scandir(settings.figures_dir) as entries:
            found = any(entry.name.endswith(".svg") for entry in entries)
    except OSError:
        return False
    if found:
        _caches_with_drawings.add(settings.figures_dir)
    return found


def cached(settings: Settings, key: str) -> Figure | None:
    base = settings.figures_dir / key
    try:
        return Figure(svg=base.with_suffix(".svg").read_text(), error=None)
    except FileNotFoundError:
        pass
    try:
        return Figure(svg=None, error=base.with_suffix(".failed").read_text())
    except FileNotFoundError:
        return None


def draw(settings: Settings, source: str) -> Figure:
    """The figure from the cache, or drawn now (bounded by the timeout) and cached."""
    refused = refusal(source)
    if refused is not None:
        return Figure(svg=None, error=refused)
    key = figure_key(source)
    known = cached(settings, key)
    if known is not None:
        return known
    asy = asymptote_path(settings)
    if asy is None:
        return Figure(svg=None, error="Asymptote is off or not installed on this server")
    if not _drawing.acquire(timeout=settings.asymptote_timeout_s):
        return Figure(svg=None, error="the server is busy drawing other figures")
    try:
        known = cached(settings, key)
        if known is not None:
            return known
        figure = _run_asymptote(asy, source, settings.asymptote_timeout_s)
    finally:
        _drawing.release()
    _store(settings, key, figure)
    return figure


def problem_figure(session: Session, settings: Settings, problem_id: int, index: int, user_id: int) -> str:
    """The sanitised SVG of the problem's figure number `index` (from 0), if `user_id` may
    label in its project."""
    statement = session.scalar(
        select(Problem.statement).where(Problem.id == problem_id, may_label(Problem.project_id)),
        {"user": user_id},
    )
    if statement is None:
        raise NotFound(f"problem {problem_id} not found")
    sources = asy_sources(statement)
    if index >= len(sources):
        raise NotFound(f"problem {problem_id} has {len(sources)} figure(s)")
    figure = draw(settings, sources[index])
    if figure.svg is None:
        raise NotFound(f"figure not drawn: {figure.error}")
    return figure.svg


def figure_sources(session: Session) -> list[str]:
    """The Asymptote code of every figure in every problem, each once."""
    statements = session.scalars(select(Problem.statement).where(Problem.statement.contains("[asy]")))
    return sorted({source for statement in statements for source in asy_sources(statement)})


def draw_all(settings: Settings, sources: list[str]) -> tuple[int, int]:
    """Draw figures into the cache; returns (drawn or cached, failed)."""
    figures = [draw(settings, source) for source in sources]
    failed = sum(figure.svg is None for figure in figures)
    return len(figures) - failed, failed


def _run_asymptote(asy: str, source: str, timeout_s: float) -> Figure:
    with tempfile.TemporaryDirectory(prefix="stepwise-asy-") as work:
        Path(work, "figure.asy").write_text(PREAMBLE + source)
        for module in MODULES.glob("*.asy"):
            shutil.copyfile(module, Path(work, module.name))
        # -safe forbids system(), writes outside the working directory are off by default
        # (-globalwrite), and -noglobalread turns reads outside it off too: a figure in a
        # manager's import could read any file the server may, and draw it for every labeler
        # (`input("/proc/self/environ")`). -render 0 draws 3D scenes as vectors instead of through
        # OpenGL. Its own session, so that a timeout kills the latex and dvisvgm it started too.
        # None of these flags stops `import "/etc/passwd"`: guard.refusal does, before this runs.
        command = [*_limits(), asy, "-safe", "-noglobalread", "-noV", "-render", "0",
                   "-dvisvgmOptions", "--no-specials=ps", "-f", "svg", "-o", "figure", "figure.asy"]
        log_path = Path(work, "asy.log")
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env=_figure_environment(work),
            )
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return Figure(svg=None, error=f"Asymptote took longer than {timeout_s:g} s")
        drawing = Path(work, "figure.svg")
        if process.returncode != 0 or not drawing.exists():
            with log_path.open("rb") as log:
                output = log.read(64_000).decode(errors="replace").replace(f"{work}/", "")
            return Figure(svg=None, error=f"Asymptote failed: {_first_error(output)}")
        if drawing.stat().st_size > MAX_SVG_BYTES:
            return Figure(svg=None, error="the drawing is too large")
        try:
            return Figure(svg=sanitize_svg(drawing.read_bytes(), scale=SCREEN_SCALE), error=None)
        except UnsafeSvg as error:
            return Figure(svg=None, error=str(error))


def _figure_environment(work: str) -> dict[str, str]:
    """What a figure's run is given of the server's environment: what finds Asymptote's, TeX's and
    the system's programs and files, and nothing that names a database or holds a secret."""
    kept = {name: value for name, value in os.environ.items()
            if name in ("PATH", "LANG", "LC_ALL") or name.startswith(("TEX", "ASYMPTOTE_"))}
    # TeX Live lets LaTeX read any file (openin_any = a): a label's \input{/etc/passwd} was
    # typeset into the drawing. Paranoid mode reads only below the figure's directory and TeX's
    # own trees, and no shell escape runs at all.
    return {**kept, "HOME": work, "openin_any": "p", "openout_any": "p", "shell_escape": "f"}


def _limits() -> list[str]:
    """util-linux's prlimit, where there is one, caps what a figure may write (its log included)
    and the memory it may take: a loop that writes or allocates stops there, not at the disk's
    or the machine's end."""
    prlimit = shutil.which("prlimit")
    return [prlimit, f"--fsize={MAX_FILE_BYTES}", f"--as={MAX_MEMORY_BYTES}", "--"] if prlimit else []


def _first_error(output: str) -> str:
    """The line that says why: Asymptote echoes the failing code first and ends with "could not
    load module". Paths in it are left out but for the figure's own file, named relative to its
    directory."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        located = ASY_MESSAGE.match(line)
        if located:
            line_in_figure = int(located.group(1)) - PREAMBLE.count("\n")
            return SERVER_PATH.sub("…", f"line {line_in_figure}: {located.group(2)}")[:300]
    reasons = [line for line in lines if "error" in line.lower()] or lines or ["no output"]
    return SERVER_PATH.sub("…", reasons[0])[:300]


def _store(settings: Settings, key: str, figure: Figure) -> None:
    """Write through a temporary file and rename, so another process never reads half a file.
    The temporary name is unique (not active_learning.files.written_aside's fixed one): two
    processes may draw the same figure at once."""
    settings.figures_dir.mkdir(parents=True, exist_ok=True)
    suffix = ".svg" if figure.svg is not None else ".failed"
    file = tempfile.NamedTemporaryFile("w", dir=settings.figures_dir, delete=False, suffix=".tmp")
    try:
        with file:
            file.write(figure.svg if figure.svg is not None else figure.error or "")
        os.replace(file.name, (settings.figures_dir / key).with_suffix(suffix))
    except BaseException:
        Path(file.name).unlink(missing_ok=True)
        raise
